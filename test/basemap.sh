#!/usr/bin/env bash
# test/basemap.sh: the base map (scripts/basemap.sh) of Helsinki's extract,
# the world map and the glyphs, checked by decoding them
# (test/basemap_check.py): the layers at their zooms, Mannerheimintie in
# road at z14, land and sea where they are, glyph 'A' with sane metrics.
# Builds into the cache (${TDB_CACHE:-~/.cache/trafficdb}) like the demo, so
# a second run finds them up to date, which it checks too.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

say "basemap: build (scripts/basemap.sh all helsinki data/helsinki.osm.pbf)"
scripts/basemap.sh all helsinki data/helsinki.osm.pbf >/dev/null
mapfile -t paths < <(scripts/basemap.sh path helsinki)
for p in "${paths[@]}"; do
	[ -e "$p" ] || die "scripts/basemap.sh path helsinki names $p, which is missing"
done
log=$(scripts/basemap.sh all helsinki data/helsinki.osm.pbf 2>&1 >/dev/null)
for what in "helsinki.pmtiles up to date" "world.pmtiles up to date" "glyphs up to date"; do
	grep -qF "basemap: $what" <<<"$log" || die "a second build did not find its work done: expected '$what' in: $log"
done
echo "ok   a second build finds the three up to date"
say "basemap: decode and check (test/basemap_check.py)"
"$(scripts/basemap.sh venv)/bin/python" test/basemap_check.py "${paths[@]}"

# an extract osmium cannot read (in a path with a space): a one-line error naming it, no archive
bad=$(mktemp -d "/tmp/trafficdb-basemap bad.XXXXXX")
trap 'rm -rf "$bad"' EXIT
head -c 5000 /dev/zero | tr '\0' 'x' >"$bad/not an extract.osm.pbf"
if out=$(scripts/basemap.sh build badextract "$bad/not an extract.osm.pbf" 2>&1); then
	die "a build of a file that is no extract succeeded: $out"
fi
grep -qF "$bad/not an extract.osm.pbf: osmium cannot read it" <<<"$out" && ! grep -q Traceback <<<"$out" ||
	die "a build of a file that is no extract: expected one error naming it, got: $out"
[ ! -e "$(scripts/basemap.sh path badextract | head -n 1)" ] || die "a failed build left badextract's archive"
echo "ok   an unreadable extract: $(tail -n 1 <<<"$out")"
