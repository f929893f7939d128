#!/usr/bin/env bash
# scripts/web-setup.sh: what the live map (web/) needs beside Debian's
# packages (scripts/deps.sh brings nodejs, npm and chromium):
#   - .venv-web: a Python venv with tipg, uvicorn and asyncpg (web/requirements.txt,
#     pinned), made with Debian's python3 (-m venv: the system Python refuses pip)
#   - web/node_modules: MapLibre GL JS, pmtiles, world-atlas (Natural Earth
#     for the base map) and puppeteer-core (npm ci from
#     web/package-lock.json; no browser download: tests drive Debian's chromium)
# Each is (re)made only when missing or older than its list.  Prints nothing else.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

VENV=${TDB_WEB_VENV:-$TDB_ROOT/.venv-web}
if [ ! -x "$VENV/bin/python" ] || [ web/requirements.txt -nt "$VENV/.installed" ]; then
	echo "web-setup: Python venv $VENV (tipg, uvicorn: web/requirements.txt)"
	/usr/bin/python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check -r web/requirements.txt
	touch "$VENV/.installed"
fi

if [ ! -d web/node_modules/maplibre-gl ] || [ ! -d web/node_modules/puppeteer-core ] ||
	[ ! -d web/node_modules/pmtiles ] || [ ! -d web/node_modules/world-atlas ] ||
	[ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
	echo "web-setup: npm ci in web/ (maplibre-gl, puppeteer-core)"
	(cd web && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
