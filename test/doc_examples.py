#!/usr/bin/env python3
"""test/doc_examples.py: run every snippet of README.md and docs/ (issue 29).

Every fenced block whose language is sql, sh, bash, python or c is executed,
file by file, in order, against a running demo cluster (scripts/demo.sh), the
way a reader following the page would:

  sql     psql -X -v ON_ERROR_STOP=1 on the demo database
  sh      bash -e -o pipefail in the repository root
  python  python3 with python/ on PYTHONPATH (the package as shipped)
  c       compiled with -Wall -Werror against include/ and lib/libtrafficdb.so,
          then run when it has a main(), else only compiled (a fragment)

The environment says where the demo is: PGHOST, PGPORT, PGUSER, PGDATABASE,
TRAFFICDB_SHM (the map's shared-memory name), and MinIO's MINIO_ENDPOINT,
MINIO_ROOT_USER, MINIO_ROOT_PASSWORD when it runs.  Each snippet has
SNIPPET_TIMEOUT seconds (60).

An HTML comment on the line before a fence (invisible on the page) changes
what happens to that block:

  <!-- example: not run: REASON -->   not executed; REASON is reported
  <!-- example: fails -->             must exit non-zero (an error shown on
                                       purpose); its output is still shown
  <!-- example: timeout=N -->         N seconds instead of the default

Blocks in any other language (text, conf, output) are not snippets.  A
block with no language fails the run: label it (`text` for output or
pictures), so that no snippet escapes by having no label.  The
summary line is "doc examples: N passed, N failed, N not run".  Exit status 1
when any failed.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_LANGS = {"sql", "sh", "bash", "python", "c"}
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([A-Za-z0-9_+-]*)\s*(.*)$")
DIRECTIVE = re.compile(r"<!--\s*example:\s*(.*?)\s*-->")


class Snippet:
    def __init__(self, path, line, lang, code, directive):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.directive = directive or ""

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"

    def not_run_reason(self):
        m = re.match(r"not run\s*:?\s*(.*)", self.directive)
        if m:
            return m.group(1) or "(no reason given)"
        return None

    def must_fail(self):
        return re.search(r"\bfails\b", self.directive) is not None

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
        if j >= 0:
            d = DIRECTIVE.search(lines[j])
            if d:
                directive = d.group(1)
        if lang == "":
            out.append(Snippet(path, start + 1, "", "\n".join(body) + "\n", directive))
        elif lang in RUN_LANGS:
            out.append(Snippet(path, start + 1, lang, "\n".join(body) + "\n", directive))
    return out


def command_for(snip, work, env):
    """(argv, cwd) that runs the snippet, after writing it under work."""
    if snip.lang == "sql":
        f = os.path.join(work, "snippet.sql")
        open(f, "w").write(snip.code)
        return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", f], ROOT
    if snip.lang in ("sh", "bash"):
        f = os.path.join(work, "snippet.sh")
        open(f, "w").write(snip.code)
        return ["bash", "-e", "-o", "pipefail", f], ROOT
    if snip.lang == "python":
        f = os.path.join(work, "snippet.py")
        open(f, "w").write(snip.code)
        return [sys.executable, f], work
    if snip.lang == "c":
        f = os.path.join(work, "snippet.c")
        open(f, "w").write(snip.code)
        exe = os.path.join(work, "snippet")
        cc = ["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include")]
        if re.search(r"\bint\s+main\s*\(", snip.code):
            build = cc + ["-o", exe, f, "-L", os.path.join(ROOT, "lib"), "-ltrafficdb",
                          "-Wl,-rpath," + os.path.join(ROOT, "lib"), "-lm", "-lpthread"]
            script = os.path.join(work, "run.sh")
            open(script, "w").write(
                "set -e\n" + " ".join(map(sh_quote, build)) + "\n" + sh_quote(exe) + "\n")
            return ["bash", script], work
        return cc + ["-fsyntax-only", f], work
    raise ValueError(snip.lang)


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def run(snip, env, default_timeout, verbose):
    with tempfile.TemporaryDirectory(prefix="tdb-doc-") as work:
        os.chmod(work, 0o755)
        argv, cwd = command_for(snip, work, env)
        try:
            p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, errors="replace",
                               timeout=snip.timeout(default_timeout), start_new_session=True)
            rc, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            rc = "timeout"
            out = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")) + \
                  ((e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""))
    ok = (rc != 0) if snip.must_fail() else (rc == 0)
    return ok, rc, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/**/*.md)")
    ap.add_argument("--list", action="store_true", help="list the snippets and directives, run nothing")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("SNIPPET_TIMEOUT", "60")))
    ap.add_argument("-v", "--verbose", action="store_true", help="show every snippet's output")
    args = ap.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))

    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TDB_ROOT", ROOT)

    passed = failed = skipped = 0
    failures, reasons = [], {}
    for path in files:
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
                print(f"{snip.where:40} {snip.lang:7} {('not run: ' + reason) if reason is not None else snip.directive}")
                continue
            if reason is not None:
                skipped += 1
                reasons.setdefault(reason, []).append(snip.where)
                continue
            ok, rc, out = run(snip, env, args.timeout, args.verbose)
            if ok:
                passed += 1
                print(f"ok   {snip.where} ({snip.lang})")
            else:
                failed += 1
                failures.append(snip.where)
                print(f"FAIL {snip.where} ({snip.lang}): exit {rc}" +
                      (" (it should have failed)" if snip.must_fail() else ""))
            if verbose_or_fail(args.verbose, ok):
                tail = out.strip().split("\n")[-25:]
                for line in tail:
                    print("     | " + line)
    if args.list:
        return 0
    for reason, where in sorted(reasons.items()):
        print(f"not run ({len(where)}): {reason}: {', '.join(where)}")
    print(f"doc examples: {passed} passed, {failed} failed, {skipped} not run")
    if failures:
        print("failed: " + ", ".join(failures))
    return 1 if failed else 0


def verbose_or_fail(verbose, ok):
    return verbose or not ok


if __name__ == "__main__":
    sys.exit(main())
