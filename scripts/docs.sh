#!/usr/bin/env bash
# scripts/docs.sh: build the documentation site (`make docs`): MkDocs with the
# Material theme, in a venv of their pinned versions under the cache, then
# `mkdocs build --strict` of mkdocs.yml into site/.  Any warning (a broken link,
# a missing anchor, a page missing from the nav) fails the build.
#
# Pages link to files beside docs/ as GitHub shows them (../bench/results/x.md),
# which MkDocs cannot follow out of its docs_dir; so the site is built from
# .docs-build/, a mirror of the repository's layout holding docs/, README.md and
# every file their links reach (followed through the copied Markdown files too).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb
VENV=${TDB_DOCS_VENV:-$CACHE/docs-venv}
# mkdocs, the theme and everything they pull in, pinned (pip freeze of a
# working venv); change them together
PINS="mkdocs==1.6.1 mkdocs-material==9.8.2 mkdocs-material-extensions==1.3.1
mkdocs-get-deps==0.2.2 babel==2.19.0 backrefs==8.3.1 certifi==2026.10.19.post1
charset-normalizer==3.5.3 click==8.5.1 colorama==0.4.6 ghp-import==2.1.0 idna==3.20
Jinja2==3.1.6 Markdown==3.11.3 MarkupSafe==3.0.4 mergedeep==1.3.4 packaging==26.4
paginate==0.5.7 pathspec==1.1.1 platformdirs==4.14.8 Pygments==2.21.0
pymdown-extensions==12.3 python-dateutil==4.0.0 PyYAML==6.0.4 pyyaml_env_tag==1.1
requests==2.34.2 tzdata==2026.6 urllib3==2.8.0 watchdog==7.1.0"

# Debian's python3 with venv (scripts/deps.sh installs it; a fresh machine may
# run `make docs` first)
if ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
	echo "docs: installing python3-venv"
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-venv
fi
stamp="$VENV/.installed-$(printf '%s' "$PINS" | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
	echo "docs: MkDocs and Material into $VENV"
	rm -rf "$VENV"
	mkdir -p "$(dirname "$VENV")"
	/usr/bin/python3 -m venv "$VENV"
	# shellcheck disable=SC2086
	"$VENV/bin/pip" install -q --disable-pip-version-check $PINS
	touch "$stamp"
fi

# the mirror: docs/, README.md, and what their relative links reach
rm -rf .docs-build
mkdir -p .docs-build
"$VENV/bin/python" - <<'PY'
import os, re, shutil
link = re.compile(r'\]\(([^)\s]+)\)')
todo, seen = ['README.md'] + ['docs/' + f for f in sorted(os.listdir('docs'))], set()
while todo:
    path = os.path.normpath(todo.pop())
    if path in seen or path.startswith('..') or path.startswith('.docs-build') or not os.path.isfile(path):
        continue
    seen.add(path)
    os.makedirs(os.path.join('.docs-build', os.path.dirname(path)), exist_ok=True)
    shutil.copy(path, os.path.join('.docs-build', path))
    if path.endswith('.md'):
        fence = False
        for line in open(path, encoding='utf-8'):
            if line.startswith('```'):
                fence = not fence
            elif not fence:
                for m in link.finditer(line):
                    t = m.group(1).split('#')[0]
                    if t and not re.match(r'[a-z]+:', t):
                        todo.append(os.path.join(os.path.dirname(path), t))
print(f"docs: {len(seen)} files in .docs-build/")
PY

NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --clean -f mkdocs.yml
echo "docs: site/index.html (open it in a browser; docs/index.md is docs/index.html)"
