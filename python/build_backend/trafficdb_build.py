"""The build backend of the Python bindings (PEP 517, in-tree: pyproject.toml's backend-path).

It writes the wheel of a pure-Python package, trafficdb/, with nothing but the standard library, so that
`pip install ./python` works offline with any Python >= 3.9 that has pip: no setuptools, no wheel package,
no index.  (With setuptools as the backend, an offline install needs setuptools and, before setuptools 70.1,
the wheel package in the interpreter itself: pyenv's or python.org's Python has neither by default, and
pip then fails with "invalid command 'bdist_wheel'".)

Hooks: build_wheel, build_editable (a .pth loading a finder of trafficdb/ in this directory), build_sdist, and their get_requires_*
(none).  The wheel holds every file of trafficdb/ but caches (make install-client adds _install.py).
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "trafficdb"
SUMMARY = "Read trafficdb's live road traffic from shared memory, without SQL (ctypes over libtrafficdb)"
REQUIRES_PYTHON = ">=3.9"
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # python/
_TAG = "py3-none-any"


def _version():
    """__version__ of trafficdb/__init__.py (include/trafficdb.h's version; make install-client checks it)."""
    with open(os.path.join(_HERE, NAME, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if not m:
        raise RuntimeError("python/trafficdb/__init__.py: no __version__ = \"...\" line")
    return m.group(1)


def _metadata(version):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
            % (NAME, version, SUMMARY, REQUIRES_PYTHON))


def _package_files():
    """(path in the archive, path on disk) of the package's files, sorted."""
    out = []
    for d, dirs, files in os.walk(os.path.join(_HERE, NAME)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                p = os.path.join(d, f)
                out.append((os.path.relpath(p, _HERE).replace(os.sep, "/"), p))
    return out


def _write_wheel(directory, entries):
    """entries: (archive name, bytes).  Adds the dist-info files and RECORD; returns the wheel's file name."""
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    entries = list(entries) + [
        (dist_info + "/METADATA", _metadata(version).encode()),
        (dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: trafficdb_build\nRoot-Is-Purelib: true\nTag: %s\n"
                                % _TAG).encode()),
    ]
    record = []
    for name, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d\n" % (name, digest, len(data)))
    record.append(dist_info + "/RECORD,,\n")
    entries.append((dist_info + "/RECORD", "".join(record).encode()))
    wheel = "%s-%s-%s.whl" % (NAME, version, _TAG)
    with zipfile.ZipFile(os.path.join(directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(name, _read(p)) for name, p in _package_files()])


_EDITABLE_FINDER = '''"""pip install -e ./python (trafficdb_build): imports trafficdb from the source tree, and nothing else of it."""
import importlib.util
import os
import sys

SRC = %r


class _Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "trafficdb":
            return None
        pkg = os.path.join(SRC, "trafficdb")
        return importlib.util.spec_from_file_location(name, os.path.join(pkg, "__init__.py"),
                                                      submodule_search_locations=[pkg])


def install():
    if _Finder not in sys.meta_path:
        sys.meta_path.append(_Finder)
'''


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """pip install -e ./python: a finder that imports trafficdb from python/trafficdb, loaded by a .pth.
    Not python/ itself on sys.path: its tests/, examples/ and build_backend/ would be importable as
    top-level (namespace) packages in every program of that Python."""
    return _write_wheel(wheel_directory, [
        ("_trafficdb_editable.py", (_EDITABLE_FINDER % _HERE).encode()),
        ("_trafficdb_editable.pth", b"import _trafficdb_editable; _trafficdb_editable.install()\n"),
    ])


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (NAME, version)
    sdist = base + ".tar.gz"
    files = [("pyproject.toml", os.path.join(_HERE, "pyproject.toml"))]
    for d in ("build_backend",):
        files += [(d + "/" + f, os.path.join(_HERE, d, f)) for f in sorted(os.listdir(os.path.join(_HERE, d)))
                  if f.endswith(".py")]
    files += _package_files()
    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for name, p in files:
            t.add(p, arcname=base + "/" + name, recursive=False)
        pkg_info = _metadata(version).encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        t.addfile(info, io.BytesIO(pkg_info))
    return sdist
