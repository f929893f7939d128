#!/usr/bin/env python3
"""test/doc_examples.py: run every snippet of README.md and docs/ (issue 29).

Every fenced block whose language is sql, sh, bash, python or c is executed,
file by file, in order, against a running demo cluster (scripts/demo.sh), the
way a reader following the page would:

  sql     psql -X -v ON_ERROR_STOP=1 on the demo database
  sh      bash -e -o pipefail in the repository root; files it leaves there
          that git does not know (and does not ignore) are removed after it.
          The sh blocks of a page are one reader's shell session: what a
          block exports (. .demo/minio/env, export X=...) is set for the
          page's later blocks of every language
  python  python3 with python/ on PYTHONPATH (the package as shipped), in a
          scratch directory (only python blocks get that PYTHONPATH: an sh
          block installs the package itself, as a reader would)
  c       compiled with -Wall -Wextra -Werror against include/ and
          lib/libtrafficdb.so, then run.  A block without main() is a
          fragment: if it compiles as it is (declarations), that is all;
          else it becomes the body of main() after the usual headers
          (stdio, stdlib, string, unistd, stdint, trafficdb.h), with unused
          variables allowed (a fragment's results are the reader's to use),
          and runs

Where the demo is: --demo DIR (default $TDB_DEMO_DIR, else the checkout's
.demo when PGPORT is not set) reads DIR/port and DIR/minio/env and sets
PGHOST, PGPORT, PGUSER, PGDATABASE, TRAFFICDB_SHM (the map's shared-memory
name), MINIO_ENDPOINT, MINIO_ROOT_USER, MINIO_ROOT_PASSWORD, TDB_DEMO_DIR and
TDB_WEB_URL (the live map) for the snippets.  Without a demo directory the
environment must say all that itself.

Snippets name the server the way a reader's would be named: port 5432
(PostgreSQL's default) or 5433 (the demo's first choice), as in
/trafficdb.5432, -p 5433, port=5433 or 127.0.0.1:5433, and the demo's
directory as .demo (make demo's, in the checkout).  The runner puts the
demo's port, and its directory when that is elsewhere (make test's scratch
demo), in their place, as a reader of that demo would.

The snippets' HOME is a scratch directory, removed at the end (what they
install under ~ goes with it; XDG_CACHE_HOME stays the real ~/.cache).

Each snippet has SNIPPET_TIMEOUT seconds (60); at the timeout its whole
process group is killed.  A snippet may leave a server running for the
next ones: docs/fleet.md's standby in .demo/standby (port 5701).  make
test's docs stage stops every server in its scratch demo's directory; after
a run against make demo's .demo, make demo-stop does not stop that standby
(pg_ctl -D .demo/standby stop does).

An HTML comment on the line before a fence (invisible on the page) changes
what happens to that block:

  <!-- example: not run: REASON -->   not executed; REASON is reported
  <!-- example: fails -->             must exit non-zero (an error shown on
                                       purpose); its output is still shown
  <!-- example: timeout=N -->         N seconds instead of the default
  <!-- example: save=FILE -->         the block is also kept as FILE (run or
                                       not), for a later block of the page
  <!-- example: with=FILE[,FILE] -->  an sh block runs in a scratch directory
                                       holding those files (saved earlier on
                                       the page), as a reader who saved them
  <!-- example: setup: SQL -->        SQL run first (psql), unseen: what the
                                       page assumes exists (a role, say);
                                       other directives go before it

Directives combine in one comment (`<!-- example: save=x.c timeout=20 -->`).

Blocks in any other language (text, ini, conf, output) are not snippets.  A
block with no language fails the run: label it (`text` for output or
pictures), so that no snippet escapes by having no label.  The
summary line is "doc examples: N passed, N failed, N not run", after the
reasons of the blocks not run and the run's time.  Exit status 1 when any
failed.
"""
import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_LANGS = {"sql", "sh", "bash", "python", "c"}
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([A-Za-z0-9_+-]*)\s*(.*)$")
DIRECTIVE = re.compile(r"<!--\s*example:\s*(.*?)\s*-->", re.S)
# how snippets name the server: the default port, or the demo's first one
PORT_FORMS = re.compile(r"(/trafficdb\.|\bport=|(?<![\w-])-p |127\.0\.0\.1:)(5432|5433)\b")
# how snippets name the demo's directory: .demo in the checkout (a path's start)
DEMO_DIR_FORM = re.compile(r"(?<![\w/.-])\.demo(?![\w.-])")
# variables of bash itself, not of the reader's session
SHELL_OWN = ("PWD", "OLDPWD", "SHLVL", "_")
C_HEADERS = "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n" \
            "#include <unistd.h>\n#include <trafficdb.h>\n"


class Snippet:
    def __init__(self, path, line, lang, code, directive):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        directive = directive or ""
        # "setup: SQL" takes the rest of the comment; the other directives come before it
        m = re.search(r"\bsetup\s*:", directive)
        self.setup = directive[m.end():].strip() if m else None
        self.directive = directive[:m.start()] if m else directive

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"

    def not_run_reason(self):
        m = re.match(r"not run\s*:?\s*(.*)", self.directive, re.S)
        if m:
            return " ".join(m.group(1).split()) or "(no reason given)"
        return None

    def must_fail(self):
        return re.search(r"\bfails\b", self.directive) is not None

    def save_as(self):
        m = re.search(r"\bsave=(\S+)", self.directive)
        return m.group(1) if m else None

    def with_files(self):
        m = re.search(r"\bwith=(\S+)", self.directive)
        return m.group(1).split(",") if m else []

    def timeout(self, default):
        m = re.search(r"\btimeout=(\d+)", self.directive)
        return int(m.group(1)) if m else default


def snippets_of(path):
    """The fenced blocks of one Markdown file, in order."""
    out = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(fence[0] * len(fence)) and close.strip(fence[0]) == "":
                break
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        directive = None
        j = start - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        if j >= 0 and lines[j].rstrip().endswith("-->"):
            # the comment may span lines: from its "<!--" to the line before the fence
            k = j
            while k >= 0 and "<!--" not in lines[k]:
                k -= 1
            d = DIRECTIVE.search("\n".join(lines[max(k, 0):j + 1]))
            if d:
                directive = d.group(1)
        if lang == "":
            out.append(Snippet(path, start + 1, "", "\n".join(body) + "\n", directive))
        elif lang in RUN_LANGS:
            out.append(Snippet(path, start + 1, lang, "\n".join(body) + "\n", directive))
    return out


def demo_env(env, demo):
    """The demo's whereabouts (its directory, as scripts/demo.sh leaves it) in env."""
    demo = os.path.realpath(demo)
    try:
        port = open(os.path.join(demo, "port")).read().strip()
    except OSError:
        sys.exit(f"doc_examples: {demo} holds no demo (no port file): start one with make demo")
    env.update(PGHOST="127.0.0.1", PGPORT=port, PGUSER="postgres", PGDATABASE="trafficdb_demo",
               TRAFFICDB_SHM=f"/trafficdb.{port}", TDB_DEMO_DIR=demo)
    try:
        for line in open(os.path.join(demo, "minio", "env")):
            m = re.match(r"\s*(?:export\s+)?(MINIO_\w+)=(.*)$", line.strip())
            if m:
                env[m.group(1)] = m.group(2).strip("'\"")
    except OSError:
        pass
    try:
        env["TDB_WEB_URL"] = "http://127.0.0.1:" + open(os.path.join(demo, "web", "web.port")).read().strip()
    except OSError:
        pass


def for_this_demo(code, env):
    """The snippet as a reader of this demo would type it: its port, its directory."""
    port = env.get("PGPORT")
    if port:
        code = PORT_FORMS.sub(lambda m: m.group(1) + port, code)
    demo = env.get("TDB_DEMO_DIR")
    if demo and os.path.realpath(demo) != os.path.realpath(os.path.join(ROOT, ".demo")):
        code = DEMO_DIR_FORM.sub(lambda m: demo, code)
    return code


def is_fragment(code):
    return not re.search(r"\bint\s+main\s*\(", code)


def command_for(snip, code, work, saved):
    """(argv, cwd) that runs the snippet, after writing it under work."""
    if snip.lang in ("sh", "bash"):
        cwd = ROOT
        if snip.with_files():
            cwd = os.path.join(work, "reader")
            os.mkdir(cwd)
            for name in snip.with_files():
                if name not in saved:
                    raise KeyError(f"with={name}: no block before it on the page has save={name}")
                open(os.path.join(cwd, name), "w").write(saved[name])
        f = os.path.join(work, "snippet.sh")
        open(f, "w").write(code)
        # sourced, so that what it exports can be kept for the page's later blocks
        return ["bash", "-e", "-o", "pipefail", "-c", '. "$1"; env -0 >"$2"', "bash", f,
                os.path.join(work, "env.out")], cwd
    if snip.lang == "sql":
        f = os.path.join(work, "snippet.sql")
        open(f, "w").write(code)
        return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", f], ROOT
    if snip.lang == "python":
        f = os.path.join(work, "snippet.py")
        open(f, "w").write(code)
        return [sys.executable, f], work
    if snip.lang == "c":
        cc = ["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include")]
        link = ["-L", os.path.join(ROOT, "lib"), "-ltrafficdb", "-Wl,-rpath," + os.path.join(ROOT, "lib"),
                "-lm", "-lpthread"]
        f = os.path.join(work, "snippet.c")
        exe = os.path.join(work, "snippet")
        script = ["set -e"]
        if is_fragment(code):
            # declarations (types, prototypes) compile as they are; statements become the
            # body of main(), whose #line keeps the compiler's line numbers the block's own
            decl = os.path.join(work, "decl.c")
            open(decl, "w").write(code)
            script.append(" ".join(map(sh_quote, cc + ["-fsyntax-only", decl])) + " 2>/dev/null && exit 0")
            code = C_HEADERS + "\nint main(void)\n{\n#line 1 \"snippet.c\"\n" + code + "\nreturn 0;\n}\n"
            cc += ["-Wno-unused-variable", "-Wno-unused-but-set-variable"]
        open(f, "w").write(code)
        script += [" ".join(map(sh_quote, cc + ["-o", exe, f] + link)), sh_quote(exe)]
        open(os.path.join(work, "run.sh"), "w").write("\n".join(script) + "\n")
        return ["bash", os.path.join(work, "run.sh")], work
    raise ValueError(snip.lang)


# seconds to read what a snippet wrote after its process group was killed at its timeout
KILL_GRACE = 5


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def leftovers():
    """Paths in the checkout that git neither tracks nor ignores."""
    p = subprocess.run(["git", "-C", ROOT, "ls-files", "--others", "--exclude-standard", "--directory", "-z"],
                       capture_output=True)
    return set(p.stdout.decode(errors="replace").split("\0")) - {""} if p.returncode == 0 else set()


def tracked_changes():
    """{path: its status} of the checkout's tracked files that differ from the index or HEAD."""
    p = subprocess.run(["git", "-C", ROOT, "status", "--porcelain=v1", "-z", "--untracked-files=no"],
                       capture_output=True)
    if p.returncode != 0:
        return {}
    return {e[3:]: e[:2] for e in p.stdout.decode(errors="replace").split("\0") if len(e) > 3}


def remove_new(before):
    for rel in sorted(leftovers() - before):
        path = os.path.join(ROOT, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            subprocess.run(["rm", "-rf", "--", path])
        elif os.path.lexists(path):
            os.unlink(path)


def execute(argv, cwd, env, timeout):
    """(exit code or "timeout", output); the snippet's whole process group dies at the timeout.  The wait
    is bounded: a process the snippet started outside its group (setsid; pg_ctl's server, started without
    -l) that keeps the output open is no longer read from after the timeout and a grace of KILL_GRACE s
    (the run waited for it to end: forever, for a server)."""
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(p.pid, signal.SIGKILL)            # what it started, too
    except (ProcessLookupError, PermissionError):
        pass
    try:
        out, _ = p.communicate(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"") + (b"\n[doc_examples: a process the snippet started outside its process group "
                                   b"still holds its output; not waited for]\n")
        p.stdout.close()
        p.wait()
    return "timeout", out.decode(errors="replace")


def run(snip, page_env, default_timeout, saved):
    """(ok, exit code, output).  page_env: the page's environment, which an sh block's exports change."""
    env = page_env
    code = for_this_demo(snip.code, env)
    if snip.save_as():
        saved[snip.save_as()] = code
    if snip.lang == "python":
        env = dict(env, PYTHONPATH=os.path.join(ROOT, "python") +
                   (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""))
    before = leftovers() if snip.lang in ("sh", "bash") and not snip.with_files() else None
    tracked = tracked_changes()
    with tempfile.TemporaryDirectory(prefix="tdb-doc-") as work:
        os.chmod(work, 0o755)
        out = ""
        if snip.setup:
            f = os.path.join(work, "setup.sql")
            open(f, "w").write(snip.setup + "\n")
            rc, out = execute(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", f], work, env, default_timeout)
            if rc != 0:
                return False, rc, "setup failed:\n" + out
        try:
            argv, cwd = command_for(snip, code, work, saved)
        except KeyError as e:
            return False, "not started", str(e)
        try:
            rc, out = execute(argv, cwd, env, snip.timeout(default_timeout))
        finally:
            if before is not None:
                remove_new(before)
        exported = os.path.join(work, "env.out")
        if rc == 0 and os.path.exists(exported):
            new = dict(kv.split("=", 1) for kv in open(exported, errors="replace").read().split("\0") if "=" in kv)
            for k in SHELL_OWN:
                new.pop(k, None)
            page_env.clear()
            page_env.update(new)
    ok = (rc != 0) if snip.must_fail() else (rc == 0)
    # a snippet that changes a file of the checkout fails, whatever its exit (new untracked files are
    # removed above; a changed tracked file is the reader's own work, or the docs': not put back here)
    changed = sorted(f for f, st in tracked_changes().items() if tracked.get(f) != st)
    if changed:
        ok = False
        out += "\n[doc_examples: the snippet changed files of the checkout: " + ", ".join(changed) + "]\n"
    return ok, rc, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/**/*.md)")
    ap.add_argument("--demo", metavar="DIR", help="the demo's directory (default $TDB_DEMO_DIR, else .demo "
                    "when PGPORT is not set)")
    ap.add_argument("--list", action="store_true", help="list the snippets and directives, run nothing")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("SNIPPET_TIMEOUT", "60")))
    ap.add_argument("-v", "--verbose", action="store_true", help="show every snippet's output")
    args = ap.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))

    env = dict(os.environ)
    demo = args.demo or env.get("TDB_DEMO_DIR") or \
        (os.path.join(ROOT, ".demo") if not env.get("PGPORT") and os.path.exists(os.path.join(ROOT, ".demo")) else None)
    if demo and not args.list:
        demo_env(env, demo)
    env.setdefault("TDB_ROOT", ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"      # no __pycache__ left in python/
    # a home of their own: what snippets install under ~ (make install-client
    # PREFIX=$HOME/.local) goes with it; caches (MinIO's build, pip's) stay shared
    env.setdefault("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
    home = tempfile.mkdtemp(prefix="tdb-doc-home-")
    os.chmod(home, 0o755)
    env["HOME"] = home
    try:
        return run_files(args, files, env)
    finally:
        subprocess.run(["rm", "-rf", "--", home])


def run_files(args, files, env):

    passed = failed = skipped = 0
    failures, reasons = [], {}
    started = time.monotonic()
    for path in files:
        saved = {}
        page_env = dict(env)          # one shell session per page
        for snip in snippets_of(path):
            reason = snip.not_run_reason()
            if snip.lang == "":
                if args.list:
                    print(f"{snip.where:40} (no language: label it)")
                    continue
                failed += 1
                failures.append(snip.where)
                print(f"FAIL {snip.where}: a fenced block with no language (label it: sql, sh, python, c, or text)")
                continue
            if args.list:
                what = ("not run: " + reason) if reason is not None else snip.directive
                print(f"{snip.where:40} {snip.lang:7} {what}" + (" (setup)" if snip.setup else ""))
                continue
            if reason is not None:
                if snip.save_as():
                    saved[snip.save_as()] = for_this_demo(snip.code, env)
                skipped += 1
                reasons.setdefault(reason, []).append(snip.where)
                continue
            t0 = time.monotonic()
            ok, rc, out = run(snip, page_env, args.timeout, saved)
            took = f"{time.monotonic() - t0:.1f} s"
            if ok:
                passed += 1
                print(f"ok   {snip.where} ({snip.lang}, {took})")
            else:
                failed += 1
                failures.append(snip.where)
                print(f"FAIL {snip.where} ({snip.lang}, {took}): exit {rc}" +
                      (" (it should have failed)" if snip.must_fail() else ""))
            if args.verbose or not ok:
                for line in out.strip().split("\n")[-25:]:
                    print("     | " + line)
            sys.stdout.flush()
    if args.list:
        return 0
    for reason, where in sorted(reasons.items()):
        print(f"not run ({len(where)}): {reason}: {', '.join(where)}")
    print(f"time: {time.monotonic() - started:.0f} s")
    print(f"doc examples: {passed} passed, {failed} failed, {skipped} not run")
    if failures:
        print("failed: " + ", ".join(failures))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
