#!/usr/bin/env bash
# bench/trails_size.sh: file sizes only — each data set as a trail file
# written with the CLI's defaults (`tools/trafficdb-trail write FILE --id ID
# --time ts $TRAIL_WRITE_ARGS`) against DuckDB's Parquet of the same CSV
# sorted by (id, ts) with DuckDB's defaults, as bench/trails_parquet.sh
# writes it (no MinIO, no server).  Data sets (TRAIL_SETS, default all):
# the four of bench/trails_parquet.sh (ais_us, ais_nyh_week, ais_nyh_1h,
# flights) and adsb, `bench/trails_parquet.py gen-adsb-held` (the hard case:
# per-flight constant strings and 0/1 columns, floats with full precision
# or 6-9 decimals held while the aircraft flies straight).  Prints one line
# per set, ours / Parquet (goal: at most 0.6); about 30 s on 2 cores the
# first time (data generation and the DuckDB venv of trails_parquet.sh).
#
#   bench/trails_size.sh
#   TRAIL_SETS="flights adsb" TRAIL_WRITE_ARGS="--format-version 2" bench/trails_size.sh
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

DUCKDB_VERSION=1.5.5
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/bench-venv-duckdb-$DUCKDB_VERSION
# shellcheck disable=SC2206 # extra writer arguments, split on spaces
WRITE_ARGS=(${TRAIL_WRITE_ARGS:-})
if ! "$VENV/bin/python" -c 'import duckdb' 2>/dev/null; then
	python3 -m venv "$VENV" || { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-venv >/dev/null && python3 -m venv "$VENV"; }
	timeout 600 "$VENV/bin/pip" install -q "duckdb==$DUCKDB_VERSION"
fi
PY=$VENV/bin/python
make -s tools/trafficdb-trail
scripts/fetch-ais.sh >/dev/null
gen=${TRAIL_SIZE_CACHE:-data/cache/trail-size}
mkdir -p "$gen"
[ -s "$gen/flights.csv" ] || "$PY" bench/trails_parquet.py gen-flights "$gen/flights.csv" 20261126
[ -s "$gen/adsb.csv" ] || "$PY" bench/trails_parquet.py gen-adsb-held "$gen/adsb.csv" 20261127
work=$(mktemp -d /var/tmp/trafficdb-size.XXXXXX)
trap 'rm -rf "$work"' EXIT

ais='[["mmsi","BIGINT"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["segment","VARCHAR"]]'
declare -A csv=([ais_us]=data/cache/ais/us_coastal_2020_06_30.csv
	[ais_nyh_week]=data/cache/ais/nyharbor_2020_12_first_week.csv
	[ais_nyh_1h]=data/cache/ais/nyharbor_2020_06_30_first_hour.csv
	[flights]=$gen/flights.csv [adsb]=$gen/adsb.csv)
declare -A idc=([ais_us]=mmsi [ais_nyh_week]=mmsi [ais_nyh_1h]=mmsi [flights]=callsign [adsb]=callsign)
declare -A cols=([ais_us]=$ais [ais_nyh_week]=$ais
	[ais_nyh_1h]='[["mmsi","BIGINT"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["sog","DOUBLE"],["cog","DOUBLE"],["heading","DOUBLE"],["vessel_name","VARCHAR"],["vessel_type","DOUBLE"],["status","DOUBLE"],["length","DOUBLE"],["width","DOUBLE"],["draft","DOUBLE"]]'
	[flights]='[["callsign","VARCHAR"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["altitude","INTEGER"],["ground_speed","DOUBLE"],["track","DOUBLE"],["vertical_rate","INTEGER"],["squawk","VARCHAR"],["on_ground","BOOLEAN"]]'
	[adsb]='[["callsign","VARCHAR"],["ts","TIMESTAMP"],["lon","DOUBLE"],["lat","DOUBLE"],["icao24","VARCHAR"],["squawk","VARCHAR"],["onground","INTEGER"],["track","DOUBLE"],["velocity","DOUBLE"],["vertrate","DOUBLE"],["baroaltitude","DOUBLE"],["alert","INTEGER"]]')
declare -A tsf=([flights]=%Y-%m-%dT%H:%M:%S.%gZ [adsb]=%Y-%m-%dT%H:%M:%S.%gZ)
printf '%-14s %10s %12s %12s %7s\n' set events trail_bytes parquet_bytes ratio
for f in ${TRAIL_SETS:-ais_us ais_nyh_week ais_nyh_1h flights adsb}; do
	[ -n "${idc[$f]:-}" ] || die "TRAIL_SETS: unknown data set $f (ais_us, ais_nyh_week, ais_nyh_1h, flights, adsb)"
	timeout 600 tools/trafficdb-trail write "$work/$f.trail" --id "${idc[$f]}" --time ts "${WRITE_ARGS[@]}" <"${csv[$f]}" 2>/dev/null
	p=$(timeout 600 "$PY" bench/trails_parquet.py parquet-size "${csv[$f]}" "${idc[$f]}" "${cols[$f]}" \
		"${tsf[$f]:-%Y-%m-%dT%H:%M:%S}" "$work/$f.parquet")
	t=$(stat -c %s "$work/$f.trail")
	n=$(tools/trafficdb-trail info "$work/$f.trail" | sed -n 's/^events: *//p')
	printf '%-14s %10s %12s %12s %7s\n' "$f" "$n" "$t" "$p" "$(awk -v a="$t" -v b="$p" 'BEGIN { printf "%.3f", a / b }')"
done
