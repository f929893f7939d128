#!/usr/bin/env python3
"""scripts/c_reference.py: the C API reference page, generated from include/trafficdb.h.

Usage: scripts/c_reference.py [HEADER] OUT.md   (HEADER defaults to include/trafficdb.h)

`make docs` (scripts/docs.sh) writes the page into .docs-build/docs/c-reference.md, listed in
mkdocs.yml's nav as "C API reference".  The header is the reference: every public function, type
and constant appears in the header's order with the comment written beside it.  A comment belongs
to the declarations that follow it without a blank line (trafficdb_peek and trafficdb_ack share
one); a comment after a #define is that constant's.  A large comment before constants or an opaque
type opens a section ("Writers: ...").  Exits 1, naming them, when a public function has no comment.
"""
import re
import sys
import textwrap

IDENT = re.compile(r'\b(?:trafficdb|TRAFFICDB)_\w+\b|\btrafficdb\.[a-z_]+\b')


def strip_comment(lines):
    """The text lines of a /* ... */ comment, without the markers and the ' * ' of each line."""
    text = "\n".join(lines).strip()
    text = text[2:] if text.startswith("/*") else text
    text = text[:-2] if text.endswith("*/") else text
    out = []
    for ln in text.split("\n"):
        ln = re.sub(r'^\s*\*(?!/)', '', ln.rstrip())
        out.append(ln[1:] if ln.startswith(" ") else ln)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def inline(text, anchors):
    """Markdown of one prose text: identifiers as code (linked when they have an entry), the rest escaped."""
    parts, pos = [], 0
    for m in IDENT.finditer(text):
        parts.append(escape(text[pos:m.start()]))
        name = m.group(0)
        parts.append(f"[`{name}`](#{anchors[name]})" if name in anchors else f"`{name}`")
        pos = m.end()
    parts.append(escape(text[pos:]))
    return "".join(parts)


def escape(s):
    return re.sub(r'([\\`*_<>\[\]|#])', r'\\\1', s)


def prose(lines, anchors, first_is_prose=False):
    """Comment lines as Markdown: paragraphs, and the tab-indented lines as C code blocks."""
    out, para, code = [], [], []

    def flush_para():
        if para:
            out.append(inline(" ".join(p.strip() for p in para), anchors))
            out.append("")
            para.clear()

    def flush_code():
        if code:
            out.append("```c")
            out.extend(textwrap.dedent("\n".join(c.expandtabs(4).rstrip() for c in code)).split("\n"))
            out.append("```")
            out.append("")
            code.clear()

    for i, ln in enumerate(lines):
        if ln.startswith("\t") and not (first_is_prose and not out):
            flush_para()
            code.append(ln.lstrip("\t"))
        elif not ln.strip():
            flush_para()
            flush_code()
        else:
            flush_code()
            para.append(ln)
    flush_para()
    flush_code()
    return out


def parse(path):
    """The header as a list of groups: {'comment': [...], 'items': [...]}, in order."""
    src = open(path, encoding="utf-8").read().split("\n")
    groups, comment, group, i = [], None, None, 0
    depth_cpp = 0

    def item(kind, **kw):
        nonlocal group, comment
        if group is None:
            group = {"comment": comment, "items": []}
            groups.append(group)
            comment = None
        group["items"].append(dict(kind=kind, **kw))

    while i < len(src):
        ln = src[i]
        s = ln.strip()
        if not s:
            group = None
            if comment is not None:
                # a comment followed by a blank line stands alone (a section's prose)
                groups.append({"comment": comment, "items": []})
                comment = None
            i += 1
            continue
        if s.startswith("/*"):
            block = [ln]
            while "*/" not in src[i]:
                i += 1
                block.append(src[i])
            i += 1
            comment = strip_comment(block)
            group = None
            continue
        if s.startswith("#ifdef __cplusplus"):
            depth_cpp = 1
        if depth_cpp:
            if s.startswith("#endif"):
                depth_cpp = 0
            i += 1
            continue
        if s.startswith(("#ifndef", "#endif", "#include", "}")) or s == "#define TRAFFICDB_H":
            i += 1
            continue
        m = re.match(r'#define\s+(\w+)\s*(.*)$', s)
        if m:
            name, rest = m.groups()
            text = rest
            while "/*" in text and "*/" not in text:
                i += 1
                text += "\n" + src[i]
            value, _, note = text.partition("/*")
            note = " ".join(x.strip() for x in strip_comment(["/*" + note])) if note else ""
            item("define", name=name, value=" ".join(value.split()), note=note)
            i += 1
            continue
        if s.startswith("typedef struct") and not s.endswith(";"):
            name = s.split()[2]
            body = [ln]
            while not re.match(r'\}\s*\w+;', src[i].strip()):
                i += 1
                body.append(src[i])
            item("struct", name=name, body=body)
            i += 1
            continue
        decl = [ln]
        while ";" not in src[i]:
            i += 1
            decl.append(src[i])
        i += 1
        text = " ".join(" ".join(decl).split())
        text = re.sub(r'\(\s+', '(', text).replace(" )", ")")
        if text.startswith("typedef"):
            m = re.search(r'\(\*\s*(\w+)\)', text) or re.search(r'(\w+);$', text)
            item("typedef", name=m.group(1), decl=text)
        else:
            m = re.search(r'(\w+)\s*\(', text)
            item("function", name=m.group(1), decl=re.sub(r'\s*\(', '(', text, count=1))
    return groups


def section_title(lines):
    """A section's title from its comment's first words ("Writers: local writes ..." -> Writers)."""
    first = lines[0]
    title = re.split(r'[:(.]', first, maxsplit=1)[0].strip()
    return title if 0 < len(title) <= 60 else None


def render(groups, header_name):
    anchors = {}
    for g in groups:
        for it in g["items"]:
            if it["kind"] in ("function", "struct", "typedef"):
                anchors[it["name"]] = it["name"].lower()
    out = [
        "# C API reference",
        "",
        f"Generated by `scripts/c_reference.py` from `{header_name}` when the site is built: every public",
        "function, type and constant of libtrafficdb, in the header's order, with the header's comments.",
        "How to build against the library, and worked examples: [libtrafficdb](libtrafficdb.md).",
        "",
    ]
    missing = []
    first = True
    section_open = False
    for g in groups:
        items = g["items"]
        c = g["comment"]
        if first:
            # the file's header comment: the overview
            first = False
            if c:
                body = c[1:] if c and c[0].strip().endswith(".h") else c
                out += ["## Overview", ""] + prose(body, anchors, first_is_prose=True)
                out += ["## Reading", ""]
                section_open = True
            if not items:
                continue
            c = None
        kinds = {it["kind"] for it in items}
        if c and len(c) >= 6 and (not items or kinds <= {"define", "typedef"}) and section_title(c):
            out += [f"## {section_title(c)}", ""] + prose(c, anchors)
            c = None
        if not items:
            if c:
                out += prose(c, anchors)
            continue
        if kinds == {"define"}:
            if c:
                out += prose(c, anchors)
            if any(it["note"] for it in items):
                out += ["| constant | value | meaning |", "|---|---|---|"]
                out += [f"| `{it['name']}` | `{it['value']}` | {inline(it['note'], anchors)} |" for it in items]
            else:
                out += ["| constant | value |", "|---|---|"]
                out += [f"| `{it['name']}` | `{it['value']}` |" for it in items]
            out.append("")
            continue
        for it in items:
            if it["kind"] == "function" and not c:
                missing.append(it["name"])
        names = [it["name"] for it in items if it["kind"] != "define"]
        # one heading per group, its id the first name's; the others get anchors of their own
        out += [f'<a id="{anchors[n]}"></a>' for n in names[1:]]
        out += [f"### {' · '.join(names)} {{#{anchors[names[0]]}}}", "", "```c"]
        for it in items:
            if it["kind"] == "struct":
                out += [b.expandtabs(4).rstrip() for b in it["body"]]
            elif it["kind"] == "define":
                out.append(f"#define {it['name']} {it['value']}")
            else:
                out.append(it["decl"])
        out += ["```", ""]
        if c:
            out += prose(c, anchors)
    return out, missing


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[1])
    header = argv[1] if len(argv) == 3 else "include/trafficdb.h"
    dest = argv[-1]
    groups = parse(header)
    out, missing = render(groups, header)
    if missing:
        print(f"c_reference.py: {header}: public functions without a comment: {', '.join(missing)}",
              file=sys.stderr)
        sys.exit(1)
    with open(dest, "w", encoding="utf-8") as f:
        f.write("\n".join(out).rstrip() + "\n")
    nfun = sum(it["kind"] == "function" for g in groups for it in g["items"])
    ntype = sum(it["kind"] in ("struct", "typedef") for g in groups for it in g["items"])
    ncon = sum(it["kind"] == "define" for g in groups for it in g["items"])
    print(f"c_reference.py: {dest}: {nfun} functions, {ntype} types, {ncon} constants")


if __name__ == "__main__":
    main(sys.argv)
