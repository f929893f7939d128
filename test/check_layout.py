#!/usr/bin/env python3
"""test/check_layout.py: the house rules anyone can check (issue 29).

1. No include cycle between the project's C files.  A file is its stem: foo.c
   and foo.h are one node (the header is the .c file's interface).  foo -> bar
   when foo.c or foo.h includes bar.h.  Every strongly connected set of more
   than one node is a cycle and is reported.
2. With --symbols (after a build): no cycle through the symbols the objects
   use either.  a -> b when a.o uses a function or variable b.o defines; this
   finds the cycles a header named after one file but declaring another's
   functions would hide.
3. README.md no longer than 300 lines.
4. No source file over the line limit (default 1,000), except the files
   listed in ALLOWED below with the reason they are exempt.

Exit status 1 when a rule is broken, with every breach listed.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the build looks for "..." includes besides the including file's own
# directory (the Makefile's -I flags).
INCLUDE_DIRS = [".", "src", "include", "tools", "src/tests"]
SOURCE_DIRS = ["bgworker", "module", "fdw", "src", "tools", "include", "t", "scripts",
               "python", "web", "extension", "sql",
               "examples", "bench", "test", "lib"]
CHECKED_EXT = (".c", ".h", ".py", ".pl", ".pm", ".sh", ".js", ".sql",
               ".lua", ".html", ".css")
# Files allowed over the limit: generated files and tables, each with why.
ALLOWED = {
}
README_LIMIT = 300
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def tracked_files():
    """The repository's files: git's list, or (a tarball, no git) the
    source folders walked, build output and caches left out."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        return [f for f in out.split("\n") if f and os.path.exists(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d not in ("node_modules", "cache", "__pycache__", "results")]
            for name in filenames:
                found.append(os.path.relpath(os.path.join(dirpath, name), ROOT))
    return found + ["README.md"]


def stem(path):
    return os.path.splitext(path)[0]


def resolve(including, name, known):
    for base in [os.path.dirname(including)] + INCLUDE_DIRS:
        cand = os.path.normpath(os.path.join(base, name))
        if cand in known:
            return cand
    return None


def sccs(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def a_cycle(graph, comp):
    """One concrete cycle inside a component, for the message."""
    members = set(comp)
    start = comp[0]
    path, seen = [start], {start}
    node = start
    while True:
        nxt = sorted(n for n in graph[node] if n in members)
        back = [n for n in nxt if n == start]
        if back and len(path) > 1:
            return path + [start]
        fresh = [n for n in nxt if n not in seen]
        if not fresh:
            # fall back to the first member seen again
            for n in nxt:
                if n in path:
                    return path[path.index(n):] + [n]
            return path
        node = fresh[0]
        path.append(node)
        seen.add(node)


def include_graph(files):
    known = set(f for f in files if f.endswith((".c", ".h")))
    graph = {}
    for f in sorted(known):
        node = stem(f)
        graph.setdefault(node, set())
        with open(os.path.join(ROOT, f), errors="replace") as fh:
            for name in INCLUDE_RE.findall(fh.read()):
                target = resolve(f, name, known)
                if target and stem(target) != node:
                    graph[node].add(stem(target))
    return graph


def symbol_graph(files):
    """Edges from the objects built next to the module's sources."""
    defined, used = {}, {}
    for f in files:
        if not f.endswith(".c"):
            continue
        obj = os.path.join(ROOT, stem(f) + ".o")
        if not os.path.exists(obj):
            continue
        out = subprocess.run(["nm", "--defined-only", "-g", obj],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:
                defined.setdefault(parts[2], set()).add(stem(f))
        out = subprocess.run(["nm", "-u", obj],
                             capture_output=True, text=True).stdout
        used[stem(f)] = {l.split()[-1] for l in out.splitlines() if l.strip()}
    graph = {n: set() for n in used}
    for node, syms in used.items():
        for s in syms:
            for owner in defined.get(s, ()):
                if owner != node:
                    graph[node].add(owner)
    return graph


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--symbols", action="store_true",
                    help="also check cycles through the built objects' symbols")
    args = ap.parse_args()
    files = tracked_files()
    bad = 0

    graph = include_graph(files)
    for comp in sccs(graph):
        bad += 1
        print("include cycle: " + " -> ".join(a_cycle(graph, comp)))
    if args.symbols:
        sgraph = symbol_graph(files)
        for comp in sccs(sgraph):
            bad += 1
            print("symbol cycle: " + " -> ".join(a_cycle(sgraph, comp)))

    for f in files:
        top = f.split("/")[0]
        if top not in SOURCE_DIRS and "/" in f:
            continue
        if not f.endswith(CHECKED_EXT) or f in ALLOWED:
            continue
        with open(os.path.join(ROOT, f), "rb") as fh:
            n = fh.read().count(b"\n")
        if n > args.limit:
            bad += 1
            print(f"too long: {f} has {n} lines (limit {args.limit})")

    with open(os.path.join(ROOT, "README.md"), "rb") as fh:
        n = fh.read().count(b"\n")
    if n > README_LIMIT:
        bad += 1
        print(f"too long: README.md has {n} lines (limit {README_LIMIT}: a front door; the manual is docs/)")

    checked = sum(1 for f in files if f.endswith(CHECKED_EXT))
    if bad:
        print(f"check_layout: {bad} breach(es) in {checked} files")
        return 1
    print(f"check_layout: {checked} files, no include cycle, none over {args.limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
