#!/usr/bin/env bash
# bench/knn_forms.sh [SECONDS] [QUERIES]: the nearest-first forms of issue 32
# on the real Delaware network, the locations table against a heap copy
# with a btree on the id and GiST indexes on geom and geom::geography:
#   geog_line    ORDER BY geom::geography <-> a 1-5 km line LIMIT 3
#   geog_poly    ORDER BY geom::geography <-> a ~300 m polygon LIMIT 5
#                (roads of a few classes)
#   id_between   WHERE location_id BETWEEN a AND a + 500000
#                ORDER BY geom <-> p LIMIT 10
#   id_above_max WHERE location_id > max ORDER BY geom <-> p LIMIT 10 (no row)
# For each: queries per second, one client, pgbench for SECONDS (default 5)
# over QUERIES (default 500) seeded random query shapes given as literals
# (each transaction also reads its shape from a small table, on both
# sides), each beside the heap in the same run; and the mean Locations
# Examined and rows returned (EXPLAIN ANALYZE over the first 100 shapes);
# `_exec`: the mean Execution Time of EXPLAIN ANALYZE over those shapes
# given as literals (a statement's own work, as queries per second);
# then the first 200 shapes in one statement each side (a LATERAL join), the
# query's own work without a statement's costs around it.
# On the demo cluster, or BENCH_PORT/BENCH_DB; Delaware is the map meanwhile,
# then the demo's (table "roads") is loaded back.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

T=${1:-5}
NQ=${2:-500}
case $T$NQ in *[!0-9]*) die "bench/knn_forms.sh SECONDS QUERIES: expected whole numbers, got '$T' '$NQ'" ;; esac
bench_cluster
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "bench/knn_forms: loading Delaware and its heap copy" >&2
bench_load_delaware bench_knn_roads
"${PSQL[@]}" <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_knn_heap, bench_knn_q;
CREATE TABLE bench_knn_heap AS SELECT osm_id AS location_id, geom, highway AS road_class FROM bench_knn_roads;
ALTER TABLE bench_knn_heap ADD PRIMARY KEY (location_id);
CREATE INDEX ON bench_knn_heap USING gist (geom);
CREATE INDEX ON bench_knn_heap USING gist ((geom::geography));
VACUUM ANALYZE bench_knn_heap;
SELECT setseed(0.32) \g /dev/null
-- query shapes around random roads (where people ask), and random ids
CREATE TABLE bench_knn_q AS
SELECT n, p, ST_MakeLine(p, ST_Translate(p, (random() - 0.5) * 0.06, (random() - 0.5) * 0.04)) AS line,
       ST_Buffer(p, 0.002 + random() * 0.002, 3) AS poly,
       (SELECT location_id FROM bench_knn_heap ORDER BY location_id OFFSET (n * 104729) % 50000 LIMIT 1) AS lo
  FROM (SELECT n, ST_SetSRID(ST_Translate(ST_StartPoint(h.geom), (random() - 0.5) * 0.01, (random() - 0.5) * 0.01), 4326) AS p
          FROM generate_series(1, $NQ) n
          JOIN LATERAL (SELECT geom FROM bench_knn_heap ORDER BY location_id OFFSET (n * 7919) % 52000 LIMIT 1) h ON true) s;
ALTER TABLE bench_knn_q ADD PRIMARY KEY (n);
ANALYZE bench_knn_q;
EOF
max=$("${PSQL[@]}" -Atc "SELECT max(location_id) FROM bench_knn_heap")

# form_sql FORM TABLE: the query, :n choosing the shape (EXPLAIN); with
# literals instead (pgbench, simple protocol: the heap is planned for the
# very values, its best case), :p, :line, :poly and :lo from bench_knn_q
form_sql() {
	case $1 in
	geog_line) echo "SELECT location_id FROM $2 ORDER BY geom::geography <-> (SELECT line FROM bench_knn_q WHERE n = :n)::geography LIMIT 3" ;;
	geog_poly) echo "SELECT location_id FROM $2 WHERE road_class IN ('primary', 'secondary', 'tertiary', 'residential') ORDER BY geom::geography <-> (SELECT poly FROM bench_knn_q WHERE n = :n)::geography LIMIT 5" ;;
	id_between) echo "SELECT location_id FROM $2 WHERE location_id BETWEEN (SELECT lo FROM bench_knn_q WHERE n = :n) AND (SELECT lo FROM bench_knn_q WHERE n = :n) + 500000 ORDER BY geom <-> (SELECT p FROM bench_knn_q WHERE n = :n) LIMIT 10" ;;
	id_above_max) echo "SELECT location_id FROM $2 WHERE location_id > $max ORDER BY geom <-> (SELECT p FROM bench_knn_q WHERE n = :n) LIMIT 10" ;;
	*) die "form_sql: unknown form '$1'" ;;
	esac
}
literal_sql() {
	case $1 in
	geog_line) echo "SELECT location_id FROM $2 ORDER BY geom::geography <-> ':line'::geography LIMIT 3" ;;
	geog_poly) echo "SELECT location_id FROM $2 WHERE road_class IN ('primary', 'secondary', 'tertiary', 'residential') ORDER BY geom::geography <-> ':poly'::geography LIMIT 5" ;;
	id_between) echo "SELECT location_id FROM $2 WHERE location_id BETWEEN :lo AND :lo + 500000 ORDER BY geom <-> ':p'::geometry LIMIT 10" ;;
	id_above_max) echo "SELECT location_id FROM $2 WHERE location_id > $max ORDER BY geom <-> ':p'::geometry LIMIT 10" ;;
	*) die "literal_sql: unknown form '$1'" ;;
	esac
}
tps() {
	printf '\\set n random(1, %s)\nSELECT lo, p, line, poly FROM bench_knn_q WHERE n = :n \\gset\n%s;\n' \
		"$NQ" "$(literal_sql "$1" "$2")" >"$work/q.sql"
	"$PG_BIN/pgbench" -n -M simple -c 1 -j 1 -T "$T" -h 127.0.0.1 -p "$port" -U postgres \
		-f "$work/q.sql" "$DB" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
# all_sql FORM TABLE: the form for the first 200 shapes in one statement (a
# LATERAL join, as a map matcher or an analyst runs it): per-statement
# costs no longer hide the query's own work
all_sql() {
	local inner
	case $1 in
	geog_line) inner="SELECT location_id FROM $2 l ORDER BY l.geom::geography <-> q.line::geography LIMIT 3" ;;
	geog_poly) inner="SELECT location_id FROM $2 l WHERE road_class IN ('primary', 'secondary', 'tertiary', 'residential') ORDER BY l.geom::geography <-> q.poly::geography LIMIT 5" ;;
	id_between) inner="SELECT location_id FROM $2 l WHERE l.location_id BETWEEN q.lo AND q.lo + 500000 ORDER BY l.geom <-> q.p LIMIT 10" ;;
	id_above_max) inner="SELECT location_id FROM $2 l WHERE l.location_id > $max ORDER BY l.geom <-> q.p LIMIT 10" ;;
	*) die "all_sql: unknown form '$1'" ;;
	esac
	echo "SELECT count(*) FROM bench_knn_q q CROSS JOIN LATERAL ($inner) s WHERE q.n <= 200"
}
# seconds per statement of all_sql: one session runs it 4 times, the median
# of the last 3 (the first pays the session's first reads: PostGIS's
# caches, and on the locations table the map's id order, built once per
# backend and map)
secs_all() {
	{ echo '\timing on'; for _ in 1 2 3 4; do echo "$(all_sql "$1" "$2");"; done; } |
		"${PSQL[@]}" -At 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n 3 | sort -g |
		awk 'NR == 2 { printf "%.6f", $1 / 1000 } END { if (NR != 3) exit 1 }'
}
# examined FORM: mean Locations Examined and rows over the first 100 shapes
examined() {
	local sql
	sql=$(form_sql "$1" trafficdb.locations)
	"${PSQL[@]}" -At <<EOF
CREATE OR REPLACE FUNCTION pg_temp.ex(q text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE l text; ex bigint := 0; r bigint := 0; m text[];
BEGIN
  FOR i IN 1..least(100, $NQ) LOOP
    FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' || replace(q, ':n', i::text) LOOP
      m := regexp_match(l, 'Locations Examined: (\\d+)');
      IF m IS NOT NULL THEN ex := ex + m[1]::bigint; END IF;
      m := regexp_match(l, 'Foreign Scan on locations .*actual rows=(\\d+)');
      IF m IS NOT NULL THEN r := r + m[1]::bigint; END IF;
    END LOOP;
  END LOOP;
  RETURN (ex / least(100, $NQ)::float8)::numeric(12,1) || ' ' || (r / least(100, $NQ)::float8)::numeric(12,1);
END \$\$;
SELECT pg_temp.ex(\$q\$$sql\$q\$);
EOF
}

# exec_ms FORM TABLE: mean Execution Time (EXPLAIN ANALYZE, ms) of the
# literal query over the first 100 shapes, after 10 to warm the session:
# a statement's own work, without the parsing, planning and round trip
# both sides pay per statement
exec_ms() {
	local sql
	sql=$(literal_sql "$1" "$2")
	"${PSQL[@]}" -At <<EOF
CREATE OR REPLACE FUNCTION pg_temp.ex(q text) RETURNS numeric LANGUAGE plpgsql AS \$\$
DECLARE l text; t float8 := 0; m text[]; s text; k int := least(100, $NQ);
BEGIN
  FOR i IN 1..k + 10 LOOP
    SELECT replace(replace(replace(replace(q, ':line', line::text), ':poly', poly::text),
                   ':p', p::text), ':lo', lo::text) INTO s FROM bench_knn_q WHERE n = 1 + (i - 1) % k;
    FOR l IN EXECUTE 'EXPLAIN (ANALYZE, SUMMARY, COSTS OFF, TIMING OFF) ' || s LOOP
      m := regexp_match(l, 'Execution Time: ([0-9.]+) ms');
      IF m IS NOT NULL AND i > 10 THEN t := t + m[1]::float8; END IF;
    END LOOP;
  END LOOP;
  RETURN (t / k)::numeric(12,4);
END \$\$;
SELECT pg_temp.ex(\$q\$$sql\$q\$);
EOF
}

for f in geog_line geog_poly id_between id_above_max; do
	echo "bench/knn_forms: $f" >&2
	read -r ex rows <<<"$(examined "$f")"
	bench_emit knn_forms "${f}_examined" 1 "$ex" locations "" ""
	bench_emit knn_forms "${f}_rows" 1 "$rows" rows "" ""
	bench_emit knn_forms "$f" 1 "$(tps "$f" trafficdb.locations)" qps heap "$(tps "$f" bench_knn_heap)"
	# a statement's execution only (ms; the heap's baseline inverted, as below)
	fe=$(exec_ms "$f" trafficdb.locations)
	he=$(exec_ms "$f" bench_knn_heap)
	bench_emit knn_forms "${f}_exec" 1 "$(awk -v s="$fe" 'BEGIN { printf "%.1f", 1000 / s }')" qps heap \
		"$(awk -v s="$he" 'BEGIN { printf "%.1f", 1000 / s }')"
	# 200 queries in one statement: queries per second of it (the heap's baseline inverted, so that
	# the ratio reads as "times faster")
	fs=$(secs_all "$f" trafficdb.locations)
	hs=$(secs_all "$f" bench_knn_heap)
	bench_emit knn_forms "${f}_all" 200 "$(awk -v s="$fs" 'BEGIN { printf "%.1f", 200 / s }')" qps heap \
		"$(awk -v s="$hs" 'BEGIN { printf "%.1f", 200 / s }')"
done
bench_restore_map	# the demo's map again (its table "roads"), before the one loaded here goes
"${PSQL[@]}" -c "DROP TABLE bench_knn_heap, bench_knn_q, bench_knn_roads"
