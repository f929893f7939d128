#!/usr/bin/env bash
# scripts/deps.sh: install the Debian 12 packages trafficdb needs to build,
# test and demo, skipping those already installed, then the live map's tile
# server (Martin, scripts/martin.sh install: cached).  Safe to run repeatedly.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

packages=(
	# build
	build-essential pkg-config
	"postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR"
	"postgresql-$PG_MAJOR-postgis-3" "postgresql-$PG_MAJOR-postgis-3-scripts"
	libcurl4-openssl-dev
	# OpenSSL's libcrypto: SHA-256 of the trail code (libcurl's -dev package does not bring its headers)
	libssl-dev
	# Python bindings: pip installs them offline with Debian's setuptools and
	# wheel (make install-client); a venv in test/packaging.sh
	python3-pip python3-setuptools python3-wheel python3-venv
	# scripts: MinIO's readiness probe, downloads (libcurl's -dev package does not bring the command);
	# HTTPS for them and for Go's module downloads (a minbase system has no CA certificates)
	curl ca-certificates
	# tests: pgrep (test/group_mode.sh), ps; ss (test/sumo_feeder_hostile.sh: what SUMO listens on)
	procps iproute2
	# tests: TAP harness of PostgreSQL::Test::Cluster, a real GIS client
	libipc-run-perl gdal-bin python3-pytest
	# demo: OpenStreetMap import
	osm2pgsql osmium-tool "postgresql-$PG_MAJOR-pgrouting"
	# stream files: libFuzzer; the AIS demo data
	clang libclang-rt-14-dev unzip
	# random SQL against the extension (test/sqlsmith.sh, make fuzz-sql)
	sqlsmith
	# failover of a region (scripts/autoctl.sh, bench/failover.sh, t/032_failover.pl):
	# pg_auto_failover 2.0 (pg_autoctl and the monitor's extension pgautofailover),
	# and libpq from Python for the bench's feed writers and readers
	"postgresql-$PG_MAJOR-auto-failover" python3-psycopg2
	# the live map (web/): a browser for its tests and screenshots, and fonts
	# for its text (Open Sans: the base map's glyphs, scripts/basemap.sh);
	# Python's venv (above) takes tipg
	chromium fonts-dejavu-core fonts-open-sans
	# the map's browser tests read a street name off a screenshot (web/test/mapview.test.mjs)
	tesseract-ocr tesseract-ocr-eng
	# the live map's simulated traffic (scripts/sumo.sh, web/sumo_feeder.py): Eclipse SUMO 1.15
	# (netconvert, duarouter, sumo) and its tools (randomTrips.py, TraCI); osmium-tool (above)
	# turns the .pbf into the OSM XML netconvert reads
	sumo sumo-tools
)
# Node.js and npm build the page (MapLibre GL JS from npm) and run its
# browser tests: Debian's nodejs and npm, unless a Node.js with npm is
# already installed another way (Debian's npm would conflict with it).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#packages[@]} packages present"
else
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -q
	$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The live map's tile server: Martin, pinned, built once with cargo into
# ~/.cache/trafficdb (not a Debian package; 20-45 min on 2 cores the first
# time, nothing when the cached binary is that version).  Like MinIO's, its
# start installs it too.
"$TDB_ROOT/scripts/martin.sh" install
