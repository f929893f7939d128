# bench/lib.sh: what the benchmark scripts share.  Source it; do not run it.
#
# Every figure goes to one CSV per run, bench/results/<date>-<host>.csv
# (BENCH_CSV overrides), one row per measurement:
#   section,measure,x,value,unit,baseline,baseline_value,ratio
# where x is the client count, thread count or size the figure is for, and
# baseline/baseline_value/ratio name the figure it is compared with in the
# same run (empty when there is none).  bench/report.py turns it into the
# report and the plots.
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$TDB_ROOT"

BENCH_CSV=${BENCH_CSV:-bench/results/$(date -u +%Y-%m-%d)-$(hostname -s).csv}
export BENCH_CSV
mkdir -p "$(dirname "$BENCH_CSV")"
[ -s "$BENCH_CSV" ] || echo "section,measure,x,value,unit,baseline,baseline_value,ratio" >"$BENCH_CSV"

# bench_emit SECTION MEASURE X VALUE UNIT [BASELINE BASELINE_VALUE]
bench_emit() {
	local ratio=""
	if [ -n "${7:-}" ]; then
		ratio=$(awk -v a="$4" -v b="$7" 'BEGIN { if (b > 0) printf "%.3g", a / b }')
	fi
	echo "$1,$2,$3,$4,$5,${6:-},${7:-},$ratio" >>"$BENCH_CSV"
	printf '  %-14s %-28s %6s %14s %-8s %s\n' "$1" "$2" "$3" "$4" "$5" "${6:+vs $6 $7: ${ratio}x}"
}

# The demo cluster (started by `make demo` when it is not running), or the
# one on 127.0.0.1:$BENCH_PORT (database $BENCH_DB) when that is set: sets
# port, DB and PSQL.
bench_cluster() {
	port=${BENCH_PORT:-$(cat .demo/port 2>/dev/null || true)}
	if [ -z "$port" ] || ! "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port"; then
		echo "bench: starting the demo cluster (make demo)" >&2
		make -s demo >/dev/null
		port=$(cat .demo/port)
	fi
	DB=${BENCH_DB:-trafficdb_demo}
	PSQL=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$DB")
}

# Load the demo's Helsinki map back (benchmarks replace it).
bench_restore_map() {
	"${PSQL[@]}" -c "SELECT trafficdb.load_map('roads', 'osm_id', 'geom', 'highway', 'name', 'maxspeed', 'oneway')" >/dev/null
}

# Packages only the benchmarks need (Redis as a baseline, gnuplot for plots).
bench_deps() {
	local missing=()
	for p in redis-server redis-tools gnuplot-nox; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "bench: installing ${missing[*]}" >&2
		$SUDO apt-get update -q >/dev/null
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
	fi
	# Debian starts a Redis service on install; the benchmark runs its own
	if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true; fi
}

# Crash the demo cluster (immediate stop) and start it again, waiting for
# the daemon's first publication: what a restart costs (the generation log's
# replay).  For another cluster (BENCH_PORT) set BENCH_PGDATA and BENCH_PG_BIN.
bench_restart_cluster() {
	local data dir gen bin
	dir=$(readlink -f .demo)
	data=${BENCH_PGDATA:-$dir/pgdata}	# BENCH_PGDATA, BENCH_PG_BIN: the cluster of BENCH_PORT
	bin=${BENCH_PG_BIN:-$PG_BIN}
	gen=$("${PSQL[@]}" -Atc 'SELECT generation FROM trafficdb.status')
	as_pg "$bin/pg_ctl" -D "$data" stop -m immediate -w >/dev/null
	as_pg "$bin/pg_ctl" -D "$data" -l "$data/restart.log" -w start >/dev/null
	for _ in $(seq 1 600); do
		[ "$("${PSQL[@]}" -Atc 'SELECT generation FROM trafficdb.status' 2>/dev/null || echo 0)" -gt "$gen" ] && return 0
		sleep 0.5
	done
	echo "bench: no publication within 300 s of the restart" >&2
	return 1
}
