#!/usr/bin/env python3
"""scripts/figures.py: the figures in README.md and docs/ come from the
committed bench results, not from a hand.

A figure in Markdown is wrapped in two HTML comments (invisible on the page)
that say where it comes from:

  <!--fig bench/results/2026-11-22-vm.csv accessor,get_batched64,2 div=1e6 fmt={:.1f}-->34.3<!--/fig--> M/s
  <!--fig bench/results/2026-11-22-vm.csv accessor,get,2,redis_get field=ratio fmt={:.0f}x-->276x<!--/fig-->
  <!--fig bench/results/2026-11-26-write-path.md row="`trafficdb_put` ASYNC, 1 producer" col=2-->330 ns / 561 ns<!--/fig-->

  A .csv source (bench/run.sh's: section,measure,x,value,unit,baseline,
  baseline_value,ratio) is selected by section,measure,x[,baseline]; field=
  value (default), baseline_value or ratio; div=N divides it; fmt= is a
  Python format for one number ({:,.0f}, {:.2f}x ...; default {:g}).
  A .md source (a report's table) is selected by the first cell's beginning
  (row="...") and a column (col=N, 1 = the first cell); the cell's text is
  used as it is, bold marks removed.

  scripts/figures.py           check: every figure equals its source (make test)
  scripts/figures.py --write   rewrite every figure from its source
  scripts/figures.py --list    list them
Exit status 1 when a figure differs from its source or its source is missing.
"""
import argparse
import csv
import glob
import os
import re
import shlex
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = re.compile(r"<!--fig\s+(.*?)-->(.*?)<!--/fig-->", re.S)


class FigureError(Exception):
    pass


def parse_spec(spec):
    parts = shlex.split(spec)
    if len(parts) < 2 and not (parts and parts[0].endswith(".md")):
        raise FigureError(f"expected '<source> <selector> [options]', got '{spec}'")
    source = parts[0]
    opts, selector = {}, None
    for p in parts[1:]:
        if "=" in p and re.match(r"^(field|div|fmt|row|col)=", p):
            k, v = p.split("=", 1)
            opts[k] = v
        elif selector is None:
            selector = p
        else:
            raise FigureError(f"unexpected '{p}' in '{spec}'")
    return source, selector, opts


_csv_cache = {}


def csv_rows(path):
    if path not in _csv_cache:
        with open(path, newline="") as fh:
            _csv_cache[path] = list(csv.DictReader(fh))
    return _csv_cache[path]


def from_csv(path, selector, opts):
    if not selector:
        raise FigureError("a .csv source needs section,measure,x[,baseline]")
    key = selector.split(",")
    if len(key) not in (3, 4):
        raise FigureError(f"selector '{selector}': expected section,measure,x[,baseline]")
    hits = [r for r in csv_rows(path)
            if [r["section"], r["measure"], r["x"]] == key[:3]
            and (len(key) == 3 or r["baseline"] == key[3])]
    if not hits:
        raise FigureError(f"no row {selector} in {os.path.relpath(path, ROOT)}")
    field = opts.get("field", "value")
    if field not in ("value", "baseline_value", "ratio"):
        raise FigureError(f"field={field}: expected value, baseline_value or ratio")
    values = {h[field] for h in hits}
    if len(values) > 1:
        raise FigureError(f"{selector} is ambiguous in {os.path.relpath(path, ROOT)} (name the baseline)")
    raw = values.pop()
    if raw == "":
        raise FigureError(f"{selector} has no {field}")
    v = float(raw) / float(opts.get("div", "1"))
    return opts.get("fmt", "{:g}").format(v)


def from_md(path, opts):
    row, col = opts.get("row"), opts.get("col")
    if row is None or col is None:
        raise FigureError('a .md source needs row="first cell begins" and col=N')
    col = int(col)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.lstrip().startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells and cells[0].replace("**", "").startswith(row):
                if col < 1 or col > len(cells):
                    raise FigureError(f"row '{row}' has {len(cells)} cells, not {col}")
                return cells[col - 1].replace("**", "")
    raise FigureError(f"no table row beginning '{row}' in {os.path.relpath(path, ROOT)}")


def value_of(spec):
    source, selector, opts = parse_spec(spec)
    path = os.path.join(ROOT, source)
    if not os.path.exists(path):
        raise FigureError(f"source {source} does not exist")
    if source.endswith(".csv"):
        return from_csv(path, selector, opts)
    if source.endswith(".md"):
        return from_md(path, opts)
    raise FigureError(f"source {source}: expected a .csv or .md bench result")


def markdown_files():
    return [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite every figure from its source")
    ap.add_argument("--list", action="store_true", help="list every figure and its source")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    bad = count = 0
    for path in args.files or markdown_files():
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, ROOT)
        out, last = [], 0
        for m in MARK.finditer(text):
            if m.start() > 0 and text[m.start() - 1] == "`":
                continue            # the syntax quoted in inline code (docs/testing.md), not a figure
            count += 1
            line = text.count("\n", 0, m.start()) + 1
            spec, shown = m.group(1).strip(), m.group(2)
            try:
                want = value_of(spec)
            except (FigureError, ValueError, KeyError) as e:
                bad += 1
                print(f"{rel}:{line}: {e}")
                continue
            if args.list:
                print(f"{rel}:{line}: {want!r} from {spec}")
            elif shown != want:
                if args.write:
                    out.append(text[last:m.start(2)] + want)
                    last = m.end(2)
                    print(f"{rel}:{line}: {shown!r} -> {want!r}")
                else:
                    bad += 1
                    print(f"{rel}:{line}: shows {shown!r}, its source says {want!r} ({spec})")
        if args.write and out:
            out.append(text[last:])
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("".join(out))
    if bad:
        print(f"figures: {bad} of {count} differ from their source or have none")
        return 1
    print(f"figures: {count} figures, each equal to its bench result")
    return 0


if __name__ == "__main__":
    sys.exit(main())
