#!/usr/bin/env bash
# scripts/sumo.sh: the live map's simulated traffic, built with Eclipse SUMO
# (Debian's sumo and sumo-tools 1.15, scripts/deps.sh) from the same
# OpenStreetMap extract the map is loaded from.
#
#   scripts/sumo.sh build MAP PBF   build (or find up to date) the simulation of MAP
#                                   in ${TDB_CACHE:-~/.cache/trafficdb}/sumo/MAP/ and
#                                   print that directory
#   scripts/sumo.sh path MAP        print the directory (whether built or not)
#
# The directory holds:
#   net.net.xml.gz  the road network: netconvert of the extract's car roads with
#                   edge ids that keep the OSM way id ("123#2" along way 123,
#                   "-123#0" against it), junctions joined, traffic lights and
#                   motorway ramps guessed
#   edges.tsv       edge id, way id, length (m), speed limit (km/h) (scripts/sumo_edges.py)
#   routes.rou.xml.gz  a simulated day of car trips (randomTrips.py, seeded: the same
#                   every build) routed by duarouter
#   sim.sumocfg     what `sumo -c` runs; sim.json: the day's shape, for web/sumo_feeder.py
#
# The simulated day is compressed: DAY_SECONDS (14400) SUMO seconds are one
# day of clock time (24 h), so one clock hour is 10 SUMO minutes.  Demand per
# half hour of clock time follows PROFILE below (night, a morning peak 07:30-09:00,
# mid-day, an evening peak 16:00-18:00) times a peak insertion density in cars per
# hour per km of road: enough at the peak to queue cars at Helsinki's junctions,
# little enough off-peak that the queues clear.
#
# Which roads: every road cars may use (netconvert's passenger class) for
# small extracts; motorway .. tertiary and their links only for large ones
# (delaware), to keep the simulation faster than real time on 2 cores.
# TDB_SUMO_ROADS=all|major chooses; TDB_SUMO_PEAK=N sets the peak density.
#
# Cached by the hash of the extract, this script, sumo_edges.py, the SUMO
# version and the settings: a changed input rebuilds, nothing else does.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

export SUMO_HOME=${SUMO_HOME:-/usr/share/sumo}
SUMO_TOOLS=$SUMO_HOME/tools
CACHE=${TDB_CACHE:-$HOME/.cache/trafficdb}
DAY_SECONDS=14400
SEED=31
# demand of each half hour of clock time, relative to the peak (48 values, 00:00 .. 23:30)
PROFILE=(0.10 0.08 0.06 0.05 0.05 0.05 0.05 0.05 0.06 0.08 0.15 0.25
	0.40 0.60 0.85 1.00 1.00 1.00 0.80 0.60 0.50 0.45 0.45 0.50
	0.55 0.50 0.45 0.45 0.50 0.55 0.65 0.80 0.90 0.90 0.90 0.85
	0.65 0.50 0.40 0.35 0.30 0.30 0.25 0.22 0.20 0.16 0.14 0.12)
MAJOR=motorway,motorway_link,trunk,trunk_link,primary,primary_link,secondary,secondary_link,tertiary,tertiary_link

usage() { die "usage: scripts/sumo.sh build MAP PBF | path MAP (MAP: a name like helsinki or delaware)"; }

check_map() {
	[[ ${1:-} =~ ^[a-z0-9_-]{1,40}$ ]] || die "sumo: map name '${1:-}': expected 1-40 characters of a-z, 0-9, _ and -"
}

build() {
	local map=$1 pbf=$2 dir roads peak key t0 t1 net_s routes_s density spread p i
	[ -s "$pbf" ] || die "sumo: $pbf: expected an OpenStreetMap .osm.pbf file (missing or empty)"
	for c in netconvert duarouter sumo osmium; do
		command -v "$c" >/dev/null || die "sumo: $c is missing: scripts/deps.sh installs sumo, sumo-tools and osmium-tool"
	done
	[ -f "$SUMO_TOOLS/randomTrips.py" ] || die "sumo: $SUMO_TOOLS/randomTrips.py is missing: scripts/deps.sh installs sumo-tools"
	dir=$CACHE/sumo/$map
	if [ "$map" = delaware ]; then roads=${TDB_SUMO_ROADS:-major}; else roads=${TDB_SUMO_ROADS:-all}; fi
	[[ $roads =~ ^(all|major)$ ]] || die "sumo: TDB_SUMO_ROADS='$roads': expected all or major"
	# cars per hour per km of road at the peak (SUMO hours: the compressed day)
	if [ "$roads" = major ]; then peak=${TDB_SUMO_PEAK:-1.5}; else peak=${TDB_SUMO_PEAK:-95}; fi
	[[ $peak =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "sumo: TDB_SUMO_PEAK='$peak': expected a number of cars per hour per km"
	key=$( { sha256sum <"$pbf"; sha256sum <"$0"; sha256sum <"$TDB_ROOT/scripts/sumo_edges.py";
		netconvert --version 2>/dev/null | head -1; echo "$roads $peak"; } | sha256sum | cut -c1-16)
	if [ -f "$dir/key" ] && [ "$(cat "$dir/key")" = "$key" ]; then
		echo "sumo: $map up to date ($dir)" >&2
		echo "$dir"
		return 0
	fi
	echo "sumo: building $map from $pbf (roads: $roads, peak $peak cars/h/km) in $dir" >&2
	mkdir -p "$CACHE/sumo"
	tmp=$(mktemp -d "$CACHE/sumo/.$map.XXXXXX")	# global: the trap removes it
	trap 'rm -rf "$tmp"' EXIT

	# OSM XML of the roads only (netconvert reads XML, not .pbf); the nodes the
	# ways use come with their tags (traffic signals)
	if [ "$roads" = major ]; then
		osmium tags-filter --overwrite -o "$tmp/roads.osm" "$pbf" "w/highway=$MAJOR" >&2
	else
		osmium tags-filter --overwrite -o "$tmp/roads.osm" "$pbf" w/highway >&2
	fi

	t0=$(date +%s.%N)
	local keep=(--keep-edges.by-vclass passenger)
	[ "$roads" = major ] && keep+=(--keep-edges.by-type "highway.${MAJOR//,/,highway.}")
	# no --geometry.remove: it joins consecutive ways into one edge, and an edge must be one way
	nice netconvert --osm-files "$tmp/roads.osm" -o "$tmp/net.net.xml.gz" \
		"${keep[@]}" --remove-edges.isolated --output.original-names \
		--junctions.join --tls.guess-signals --tls.discard-simple --tls.join --tls.default-type actuated \
		--ramps.guess --roundabouts.guess --osm.turn-lanes \
		--no-warnings >"$tmp/netconvert.log" 2>&1 ||
		{ tail -n 20 "$tmp/netconvert.log" >&2; die "sumo: netconvert failed on $pbf"; }
	t1=$(date +%s.%N)
	net_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	echo "sumo: netconvert ${net_s}s" >&2
	python3 "$TDB_ROOT/scripts/sumo_edges.py" "$tmp/net.net.xml.gz" "$tmp/edges.tsv" >&2

	# demand: 48 half-hour intervals of clock time, each 1/48 of the SUMO day
	density=()
	# (awk, not bc: a minimal Debian has no bc; the products have at most 3 decimals)
	for p in "${PROFILE[@]}"; do density+=("$(awk -v p="$p" -v k="$peak" 'BEGIN { printf "%.4f", p * k }')"); done
	# a small extract: much of its traffic passes through (from and to its edge);
	# a state: trips of at most 15 km (as the crow flies), so that a trip stays
	# within an hour or two of the compressed day
	if [ "$roads" = major ]; then spread=(--min-distance 1000 --max-distance 15000)
	else spread=(--fringe-factor 5 --min-distance 300); fi
	t0=$(date +%s.%N)
	nice python3 "$SUMO_TOOLS/randomTrips.py" -n "$tmp/net.net.xml.gz" -o "$tmp/trips.xml" -s "$SEED" \
		-b 0 -e "$DAY_SECONDS" --insertion-density "${density[@]}" "${spread[@]}" \
		--trip-attributes 'departLane="best" departSpeed="max"' --prefix t >"$tmp/randomTrips.log" 2>&1 ||
		{ tail -n 20 "$tmp/randomTrips.log" >&2; die "sumo: randomTrips.py failed"; }
	nice duarouter -n "$tmp/net.net.xml.gz" --route-files "$tmp/trips.xml" -o "$tmp/routes.rou.xml.gz" \
		--routing-algorithm CH \
		--seed "$SEED" --ignore-errors --repair --no-warnings --no-step-log \
		--begin 0 --end "$DAY_SECONDS" >"$tmp/duarouter.log" 2>&1 ||
		{ tail -n 20 "$tmp/duarouter.log" >&2; die "sumo: duarouter failed"; }
	t1=$(date +%s.%N)
	routes_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	echo "sumo: $(grep -c '<trip ' "$tmp/trips.xml") trips, routes ${routes_s}s" >&2
	rm -f "$tmp/trips.xml" "$tmp/roads.osm" "$tmp"/routes.rou.alt.xml.gz "$tmp"/routes.rou.xml.alt.gz

	cat >"$tmp/sim.sumocfg" <<EOF
<configuration>
  <input>
    <net-file value="net.net.xml.gz"/>
    <route-files value="routes.rou.xml.gz"/>
  </input>
  <time>
    <begin value="0"/>
    <end value="$DAY_SECONDS"/>
    <step-length value="1"/>
  </time>
  <processing>
    <time-to-teleport value="90"/>
    <ignore-junction-blocker value="20"/>
    <max-depart-delay value="300"/>
    <ignore-route-errors value="true"/>
  </processing>
  <random_number>
    <seed value="$SEED"/>
  </random_number>
  <report>
    <no-warnings value="true"/>
    <no-step-log value="true"/>
  </report>
</configuration>
EOF
	i=$(wc -l <"$tmp/edges.tsv")
	printf '{"map": "%s", "roads": "%s", "day_seconds": %d, "clock_seconds": 86400, "seed": %d, "peak_cars_per_h_km": %s, "edges": %d, "netconvert_s": %s, "routes_s": %s}\n' \
		"$map" "$roads" "$DAY_SECONDS" "$SEED" "$peak" "$i" "$net_s" "$routes_s" >"$tmp/sim.json"
	echo "$key" >"$tmp/key"
	chmod 755 "$tmp"	# mktemp's 0700: the feeder may run as another user (the server's)
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT
	echo "sumo: $map built: $dir" >&2
	echo "$dir"
}

case "${1:-}" in
build)
	[ $# = 3 ] || usage
	check_map "$2"
	build "$2" "$3"
	;;
path)
	[ $# = 2 ] || usage
	check_map "$2"
	echo "$CACHE/sumo/$2"
	;;
*) usage ;;
esac
