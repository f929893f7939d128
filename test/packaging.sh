#!/usr/bin/env bash
# test/packaging.sh: libtrafficdb and its Python bindings installed the way a
# user installs them: from a copy of the sources, by an ordinary OS user
# (tdbpkg, created if missing), with `make install-client PREFIX=~/.local`.
#
#   - one version: the installed soname file, trafficdb.pc and the Python
#     package all carry include/trafficdb.h's TRAFFICDB_VERSION_STRING;
#   - the install needs no root and no PostgreSQL directory; trafficdb.pc
#     names the PREFIX of that install (not of an earlier build) and a
#     DESTDIR install leaves no trace of DESTDIR in what it writes;
#   - a C program built with `pkg-config --cflags --libs trafficdb` runs
#     against the installed shared library, and links statically too;
#   - the static library defines only the trafficdb_* names of the header
#     (as the shared one exports): a program with its own tdb_reader_open and
#     tdb_shm_map links against it, and both its functions and the library's
#     work;
#   - `import trafficdb` works outside the checkout and finds the installed
#     library by itself; `pip install ./python` into a venv works offline,
#     also into a bare venv (no setuptools, no wheel package);
#   - in the built checkout's root, `import trafficdb` imports the package:
#     no build product there is importable as trafficdb;
#   - the bindings' ctypes structures have the C header's field offsets.
#
# It creates an OS user, so it needs root; it says it skipped otherwise.
# PYTHON (default /usr/bin/python3, Debian's) is the interpreter used.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
user=tdbpkg
pass=0 fail=0
check() {	# check DESCRIPTION COMMAND...: a TAP line
	if "${@:2}"; then pass=$((pass + 1)); echo "ok $((pass + fail)) - $1"
	else fail=$((fail + 1)); echo "not ok $((pass + fail)) - $1"; fi
}
logged() {	# logged COMMAND...: quiet, but show its output when it fails
	"$@" >"$log" 2>&1 && return 0
	sed 's/^/  | /' "$log" >&2
	return 1
}
same() {	# same ACTUAL EXPECTED: equal strings, or show both
	[ "$1" = "$2" ] && return 0
	printf '  got:      %s\n  expected: %s\n' "$1" "$2" >&2
	return 1
}

if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP packaging test needs root to create the OS user $user"
	exit 0
fi
id "$user" >/dev/null 2>&1 || useradd --system -M -s /usr/sbin/nologin "$user"

hdr=$root/include/trafficdb.h
macro() { sed -n "s/^#define $1[[:space:]]*\"\{0,1\}\([0-9.]*\)\"\{0,1\}[[:space:]]*\$/\1/p" "$hdr"; }
version=$(macro TRAFFICDB_VERSION_STRING)
major=$(macro TRAFFICDB_VERSION_MAJOR)
number=$((major * 10000 + $(macro TRAFFICDB_VERSION_MINOR) * 100 + $(macro TRAFFICDB_VERSION_PATCH)))
[ -n "$version" ] && [ "$version" = "$major.$(macro TRAFFICDB_VERSION_MINOR).$(macro TRAFFICDB_VERSION_PATCH)" ] ||
	{ echo "include/trafficdb.h: TRAFFICDB_VERSION_STRING '$version' does not match its MAJOR/MINOR/PATCH" >&2; exit 1; }

tmp=$(mktemp -d /tmp/trafficdb-pkg.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/src home=$tmp/home prefix=$tmp/home/.local
mkdir -p "$src" "$home"
# The sources a user would have (no build products), owned by that user.
tar -C "$root" --exclude='*.o' --exclude='*.bc' --exclude=__pycache__ --exclude=build --exclude='*.egg-info' \
	-cf - Makefile include src python $(cd "$root" && ls tools/*.c tools/*.h) | tar -C "$src" -xf -
chown -R "$user": "$tmp"
chmod 755 "$tmp"

# As the user, in a clean environment (no LD_LIBRARY_PATH, no root's PATH),
# in its home: outside the checkout.
as_user() { runuser -u "$user" -- env -i -C "$home" HOME="$home" PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"; }
log=$tmp/make.log

echo "# version $version; building and installing as $user from $src"

# A packager's install first: DESTDIR, another PREFIX.  Then the user's.
stage=$tmp/stage
check "make install-client DESTDIR=... PREFIX=/opt/trafficdb as $user" \
	logged as_user make -C "$src" -s -j2 install-client DESTDIR="$stage" PREFIX=/opt/trafficdb PYTHON="$PYTHON"
check "DESTDIR: trafficdb.pc names PREFIX" \
	same "$(sed -n 's/^prefix=//p' "$stage/opt/trafficdb/lib/pkgconfig/trafficdb.pc" 2>/dev/null)" /opt/trafficdb
check "DESTDIR: nothing installed names the staging directory" \
	same "$(grep -rlF "$stage" "$stage" 2>/dev/null || true)" ""

check "make install-client PREFIX=~/.local as $user (no root, no PostgreSQL directory)" \
	logged as_user make -C "$src" -s -j2 install-client PREFIX="$prefix" PYTHON="$PYTHON"

lib=$prefix/lib
check "libtrafficdb.so.$version installed, soname libtrafficdb.so.$major" \
	same "$(readelf -d "$lib/libtrafficdb.so.$version" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" "libtrafficdb.so.$major"
check "libtrafficdb.so -> .so.$major -> .so.$version" \
	same "$(readlink "$lib/libtrafficdb.so") $(readlink "$lib/libtrafficdb.so.$major")" "libtrafficdb.so.$major libtrafficdb.so.$version"
check "header and tools installed" \
	test -f "$prefix/include/trafficdb.h" -a -x "$prefix/bin/tdbread" -a -x "$prefix/bin/trafficdb-stream" -a -x "$prefix/bin/trafficdb-trail"
export_pc="PKG_CONFIG_PATH=$lib/pkgconfig"
check "trafficdb.pc: version $version, prefix of this install" \
	same "$(as_user env "$export_pc" pkg-config --modversion trafficdb) $(as_user env "$export_pc" pkg-config --variable=prefix trafficdb)" "$version $prefix"

# The exported names: the header's functions, no more, in both libraries.
header_names=$(grep -E '^[a-z].*\btrafficdb_[a-z_]+\(' "$hdr" | grep -oE 'trafficdb_[a-z_]+\(' | tr -d '(' | sort)
check "libtrafficdb.so exports exactly the header's functions" \
	same "$(nm -D --defined-only "$lib/libtrafficdb.so.$version" | awk 'NF == 3 { print $3 }' | sort | tr '\n' ' ')" "$(echo $header_names) "
check "libtrafficdb.a defines exactly the header's functions (nm -g --defined-only)" \
	same "$(nm -g --defined-only "$lib/libtrafficdb.a" | awk 'NF == 3 { print $3 }' | sort | tr '\n' ' ')" "$(echo $header_names) "

cat >"$home/prog.c" <<'EOF'
#include <stdio.h>
#include <trafficdb.h>

int
main(void)
{
	trafficdb_handle *h = NULL;
	int			rc = trafficdb_open("/trafficdb-packaging-test-none", &h);

	printf("%d %s\n%d %s\n", trafficdb_version(), TRAFFICDB_VERSION_STRING, rc, trafficdb_strerror(rc));
	return 0;
}
EOF
# Its own functions under the library's internal names: a static link must
# not clash with them, and the library must still call its own.
cat >"$home/clash.c" <<'EOF'
#include <stdio.h>
#include <trafficdb.h>

int			tdb_reader_open(int x);
const char *tdb_shm_map(void);

int
tdb_reader_open(int x)
{
	return x + 1;
}

const char *
tdb_shm_map(void)
{
	return "mine";
}

int
main(void)
{
	trafficdb_handle *h = NULL;

	printf("%d %s %d\n", tdb_reader_open(41), tdb_shm_map(), trafficdb_open("/trafficdb-packaging-test-none", &h));
	return 0;
}
EOF
chown "$user": "$home"/*.c
notrunning="-30701 no trafficdb shared memory under that name (server down, or trafficdb not preloaded)"
expected=$(printf '%s %s\n%s' "$number" "$version" "$notrunning")
cflags="-std=c11 -Wall -Wextra -Werror"

check "cc \$(pkg-config --cflags --libs trafficdb): builds" \
	logged as_user env "$export_pc" sh -c "cc $cflags -o prog prog.c \$(pkg-config --cflags --libs trafficdb)"
check "it runs against the installed libtrafficdb.so.$major (LD_LIBRARY_PATH=PREFIX/lib)" \
	same "$(as_user env LD_LIBRARY_PATH="$lib" ldd ./prog | awk '$1 == "libtrafficdb.so.'"$major"'" { print $3 }')" "$lib/libtrafficdb.so.$major"
check "it prints the version and the error text" \
	same "$(as_user env LD_LIBRARY_PATH="$lib" ./prog)" "$expected"
check "cc -static \$(pkg-config --static --cflags --libs trafficdb): builds" \
	logged as_user env "$export_pc" sh -c "cc $cflags -static -o prog-static prog.c \$(pkg-config --static --cflags --libs trafficdb)"
check "the static program needs no shared library and prints the same" \
	same "$(readelf -d "$home/prog-static" | grep -c NEEDED || true) $(as_user ./prog-static)" "0 $expected"
check "a program defining tdb_reader_open and tdb_shm_map links the static library" \
	logged as_user env "$export_pc" sh -c "cc $cflags -static -o clash clash.c \$(pkg-config --static --cflags --libs trafficdb)"
check "both its functions and the library's work" \
	same "$(as_user ./clash 2>&1)" "42 mine -30701"

# Python: the package make install-client put in the user's site directory.
pycheck='
import os, sys, trafficdb
print(trafficdb.__version__)
print(os.path.dirname(trafficdb.__file__))
print(trafficdb._lib._name)
try:
    trafficdb.Reader("/trafficdb-packaging-test-none")
except trafficdb.NotRunning as e:
    print(e.code)
'
check "python3 -c 'import trafficdb' outside the checkout finds the installed package and library" \
	same "$(as_user "$PYTHON" -c "$pycheck" 2>&1)" \
	"$(printf '%s\n%s\n%s\n%s' "$version" "$("$PYTHON" -c 'import sys, sysconfig; print(sysconfig.get_path("purelib", "posix_prefix", vars={"base": sys.argv[1]}))' "$prefix")/trafficdb" "$lib/libtrafficdb.so.$major" -30701)"

# The bindings' ctypes structures against the header's layout.
cat >"$home/layout.c" <<'EOF'
#include <stddef.h>
#include <stdio.h>
#include <trafficdb.h>

#define F(s, f) printf("%s.%s %zu %zu\n", #s, #f, offsetof(s, f), sizeof(((s *) 0)->f))

int
main(void)
{
	F(trafficdb_traffic, updated_at_us); F(trafficdb_traffic, changed_generation);
	F(trafficdb_traffic, speed_kmh); F(trafficdb_traffic, free_flow_kmh);
	F(trafficdb_traffic, incident_offset); F(trafficdb_traffic, congestion);
	F(trafficdb_traffic, confidence); F(trafficdb_traffic, flags);
	printf("trafficdb_traffic %zu\n", sizeof(trafficdb_traffic));
	F(trafficdb_location, id); F(trafficdb_location, index); F(trafficdb_location, name);
	F(trafficdb_location, road_class); F(trafficdb_location, length_m);
	F(trafficdb_location, speed_limit_kmh); F(trafficdb_location, oneway);
	F(trafficdb_location, npoints); F(trafficdb_location, traffic);
	F(trafficdb_location, incident); F(trafficdb_location, incident_len);
	printf("trafficdb_location %zu\n", sizeof(trafficdb_location));
	return 0;
}
EOF
chown "$user": "$home/layout.c"
pylayout='
import ctypes, trafficdb
for cname, s in (("trafficdb_traffic", trafficdb._Traffic), ("trafficdb_location", trafficdb._Location)):
    for f, _ in s._fields_:
        print(f"{cname}.{f} {getattr(s, f).offset} {getattr(s, f).size}")
    print(cname, ctypes.sizeof(s))
'
check "the ctypes structures have the header's offsets and sizes" \
	same "$(as_user "$PYTHON" -c "$pylayout" 2>&1)" \
	"$(as_user env "$export_pc" sh -c "cc $cflags -o layout layout.c \$(pkg-config --cflags trafficdb) && ./layout")"

# venv_install WHAT VENV VENV_FLAGS PIP_FLAGS: pip install ./python, offline,
# into a new venv made with VENV_FLAGS, then its package must import, finding
# the library through LD_LIBRARY_PATH
venv_install() {
	local what=$1 venv=$2 venv_flags=$3 pip_flags=$4
	check "pip install --no-index $pip_flags./python into $what" \
		logged as_user sh -c "$PYTHON -m venv $venv_flags$venv && cd $src && $venv/bin/python -m pip install -q --no-index $pip_flags./python"
	check "$what: the package imports, finding the library through LD_LIBRARY_PATH" \
		same "$(as_user env PYTHONNOUSERSITE=1 LD_LIBRARY_PATH="$lib" "$venv/bin/python" -c "$pycheck" 2>&1)" \
		"$(printf '%s\n%s\n%s\n%s' "$version" "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/trafficdb" "libtrafficdb.so.$major" -30701)"
}

# a venv that sees Debian's setuptools
venv=$home/venv	# also read by the checks below
venv_install "a venv" "$venv" "--system-site-packages " "--no-build-isolation "

# A bare venv (no --system-site-packages: no Debian setuptools, and no wheel
# package, as with pyenv's or python.org's Python): pip install ./python,
# offline, with build isolation as pip does by default.
venv_install "a bare venv (no setuptools or wheel needed)" "$home/venv-bare" "" ""

# pip install -e ./python into another bare venv: the package is the
# source's, and the source's other folders (tests/, examples/,
# build_backend/) are not importable (python/ itself was put on sys.path);
# pip uninstall leaves nothing of it.  The library is the user's install
# (LD_LIBRARY_PATH): an editable install has no _install.py naming LIBDIR,
# and on a fresh machine none is in the linker's path yet (make test's
# install stage comes after this test).
editable=$home/venv-editable
check "pip install --no-index -e ./python into a bare venv" \
	logged as_user sh -c "$PYTHON -m venv $editable && cd $src && $editable/bin/python -m pip install -q --no-index -e ./python"
check "the editable install imports the source's package, and nothing else of python/" \
	same "$(cd "$home" && as_user env PYTHONNOUSERSITE=1 LD_LIBRARY_PATH="$lib" "$editable/bin/python" -c '
import importlib, trafficdb
print(trafficdb.__file__)
for m in ("tests", "examples", "build_backend"):
    try:
        importlib.import_module(m)
        print(m, "importable")
    except ImportError:
        pass' 2>&1)" "$src/python/trafficdb/__init__.py"
editable_site=$("$editable/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
check "pip uninstall of the editable install leaves nothing" \
	same "$(as_user "$editable/bin/python" -m pip uninstall -q -y trafficdb >/dev/null 2>&1; cd "$editable_site" && ls | grep -i -e trafficdb -e __pycache__)" ""

# The checkout itself, built by make (scripts/test.sh builds before this
# runs): python -c puts the working directory first on sys.path, so a file
# there named trafficdb.so (or trafficdb.py, trafficdb.*.so) is imported as
# "trafficdb" instead of the package.  None may exist outside python/, and
# `import trafficdb` in the repository root imports the installed package.
check "no file of the checkout but python/trafficdb is what Python imports as trafficdb" \
	same "$(cd "$root" && find . -path ./python -prune -o -path ./.git -prune -o \
		\( -name trafficdb.so -o -name 'trafficdb.*.so' -o -name trafficdb.py -o -name trafficdb.pyc \) -print)" ""
check "in the repository root (after make), the venv's python imports the package, not the server module" \
	same "$(cd "$root" && env PYTHONNOUSERSITE=1 LD_LIBRARY_PATH="$lib" "$venv/bin/python" -c "$pycheck" 2>&1)" \
	"$(printf '%s\n%s\n%s\n%s' "$version" "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/trafficdb" "libtrafficdb.so.$major" -30701)"

echo "1..$((pass + fail))"
[ "$fail" = 0 ]
