# scripts/autoctl.sh: pg_auto_failover formations on loopback, for trafficdb.
# Source it; do not run it.  Used by bench/failover.sh, t/032_failover.pl
# (through `bash -c '. scripts/autoctl.sh; afo_...'`) and make fleet.
#
# A node lives in one directory of its own (absolute path), laid out as
#   DIR/pgdata         its data directory
#   DIR/node.conf      its own settings (included last by postgresql.conf, so
#                      they win over pg_auto_failover's defaults); it lives
#                      outside PGDATA because a secondary's PGDATA is a copy of
#                      the primary's (pg_basebackup, pg_rewind) and the copied
#                      postgresql.conf must not carry the primary's shm name
#   DIR/xdg/           pg_autoctl's configuration, state and pid files
#                      (XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_RUNTIME_DIR): one
#                      node's keeper never reads another's
#   DIR/sock/          its Unix socket directory (unix_socket_directories; the
#                      system's /var/run/postgresql is the postgres account's
#                      only); pg_autoctl reaches its PostgreSQL there (PGHOST).
#                      Every server of a formation listens on 127.0.0.1 only.
#   DIR/autoctl.log    the output of `pg_autoctl run`
#   DIR/log/           PostgreSQL's server log (logging_collector; log_directory
#                      set in node.conf): outside PGDATA, because pg_rewind
#                      copies the source's PGDATA/log over a rejoining node's
#                      and its own log (its time as a frozen primary) was lost
#
# The functions (every one takes the node's DIR first):
#   afo_monitor_create DIR PORT [CONF_LINE...]   initdb + pg_autoctl create monitor, tuned (below)
#   afo_formation_create MONITOR_DIR FORMATION DBNAME   another formation on that monitor (one per region)
#   afo_node_create DIR PORT NAME MONITOR_DIR FORMATION DBNAME primary|secondary [CONF_LINE...]
#                       a data node: `primary` initdbs the first node of the formation; `secondary`
#                       is cloned from the formation's primary by pg_autoctl (pg_basebackup)
#   afo_run DIR         start `pg_autoctl run` (the keeper, which starts PostgreSQL) in the background
#   afo_stop DIR        an orderly stop of keeper and PostgreSQL
#   afo_kill DIR        kill -9 of the keeper's processes and the postmaster at once: a machine lost
#                       (AFO_KILL_TREE=1: every process of the node, the postmaster's children too)
#   afo_rejoin DIR      after afo_kill: start the keeper again; the monitor makes it a secondary
#                       of the new primary (pg_rewind, or a new base backup if that fails)
#   afo_wait_state DIR STATE [SECONDS]   until the monitor has reported and goal state STATE for it
#   afo_wait_healthy MONITOR_DIR FORMATION [SECONDS]   one primary, every other node secondary,
#                       and the primary replicating synchronously to them
#   afo_primary_port MONITOR_DIR FORMATION   the port of the node that takes writes (empty if none)
#   afo_state MONITOR_DIR [FORMATION]        `pg_autoctl show state`
#   afo_monitor_uri MONITOR_DIR              the monitor's connection string
#   afo_log_dir DIR                          the node's server log directory (DIR/log)
#   afo_psql PORT DBNAME [psql args...]      psql to 127.0.0.1:PORT
#   afo_wait_ready PORT [SECONDS]            until PostgreSQL there accepts connections
#
# Writers reach whichever node is the primary with a multi-host connection
# string (see the README, "Failover"):
#   host=127.0.0.1,127.0.0.1 port=A,B dbname=DB target_session_attrs=read-write connect_timeout=2

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# pg_autoctl: the one beside the PostgreSQL we use (a private copy of the
# install has it copied in), else Debian's pg-auto-failover-cli.
AFO_BIN=${AFO_BIN:-$PG_BIN}
if [ -z "${AFO_PG_AUTOCTL:-}" ]; then
	if [ -x "$AFO_BIN/pg_autoctl" ]; then AFO_PG_AUTOCTL=$AFO_BIN/pg_autoctl
	else AFO_PG_AUTOCTL=$(command -v pg_autoctl || echo /usr/bin/pg_autoctl); fi
fi

# The monitor's health checks and timeouts, in milliseconds.  Defaults of
# pg_auto_failover 2.0 in brackets; they add up to 30-60 s of failover, the
# issue's budget is 10 s.  On a lost primary the monitor acts when
#   (a) its health check has failed: the check runs every HEALTH_CHECK_PERIOD,
#       and a failed connection is retried HEALTH_CHECK_MAX_RETRIES times,
#       HEALTH_CHECK_RETRY_DELAY apart, each attempt given HEALTH_CHECK_TIMEOUT, and
#   (b) the keeper has not reported for NODE_CONSIDERED_UNHEALTHY_TIMEOUT;
# then it sends the secondary to prepare_promotion and stop_replication (the
# secondary's keeper promotes it, still read-only), waits PRIMARY_DEMOTE_TIMEOUT
# for the old primary to demote itself, and only then lets the new primary take
# writes (wait_primary).  Keepers report every second.
#
# HEALTH_CHECK_PERIOD 1000 [5000]: a lost primary is noticed within a second;
#   one connection a second per node costs nothing.
AFO_HEALTH_CHECK_PERIOD=${AFO_HEALTH_CHECK_PERIOD:-1000}
# HEALTH_CHECK_TIMEOUT 1000 [5000]: the connect timeout of a check.  A node on
#   the same LAN answers a connection in milliseconds; a second is ample, and
#   a check hung on a machine that vanished (no RST) gives up in a second.
AFO_HEALTH_CHECK_TIMEOUT=${AFO_HEALTH_CHECK_TIMEOUT:-1000}
# HEALTH_CHECK_MAX_RETRIES 1 [2] (its minimum): a single failed connection is
#   not enough, two are; the keeper's silence (b) is the second witness anyway.
AFO_HEALTH_CHECK_MAX_RETRIES=${AFO_HEALTH_CHECK_MAX_RETRIES:-1}
# HEALTH_CHECK_RETRY_DELAY 500 [2000]: the retry half a second later (a
#   PostgreSQL restarting takes longer than that, a lost packet does not).
AFO_HEALTH_CHECK_RETRY_DELAY=${AFO_HEALTH_CHECK_RETRY_DELAY:-500}
# NODE_CONSIDERED_UNHEALTHY_TIMEOUT 3000 [20000]: three missed reports of a
#   keeper that reports every second.  The floor of the failover time; below
#   it a keeper delayed by load (two busy cores here) would cause failovers
#   of a healthy primary.  Both (a) and (b) must hold, so a keeper that is
#   only slow, with its PostgreSQL up, never triggers one.
AFO_NODE_CONSIDERED_UNHEALTHY_TIMEOUT=${AFO_NODE_CONSIDERED_UNHEALTHY_TIMEOUT:-3000}
# PRIMARY_DEMOTE_TIMEOUT 1000 [30000]: how long the old primary is given to
#   demote itself before the promoted standby takes writes.  Its purpose is
#   split-brain protection for asynchronous setups; here the formation
#   replicates synchronously (replication quorum on, a sync standby), so an old
#   primary still alive and cut off cannot acknowledge a commit once its only
#   standby stopped replicating from it (the commit waits for a standby that
#   is gone): a long wait buys nothing but downtime.
AFO_PRIMARY_DEMOTE_TIMEOUT=${AFO_PRIMARY_DEMOTE_TIMEOUT:-1000}
# STARTUP_GRACE_PERIOD 10000 [10000]: no failover in the monitor's first 10 s
#   (its health checks need a round to know the nodes); left as is.
AFO_STARTUP_GRACE_PERIOD=${AFO_STARTUP_GRACE_PERIOD:-10000}
# The keeper's timeout.network_partition_timeout 3 [20] (seconds): a primary
#   that can reach neither the monitor nor its standby demotes itself after
#   this long.  Kept above PRIMARY_DEMOTE_TIMEOUT's second: with synchronous
#   replication the isolated primary acknowledges nothing meanwhile, and its
#   readers see at most 3 s of a generation that stopped moving.
AFO_NETWORK_PARTITION_TIMEOUT=${AFO_NETWORK_PARTITION_TIMEOUT:-3}

# Run pg_autoctl for the node in DIR, as the cluster account, with its own XDG dirs.
afo_ctl() {
	local dir=$1
	shift
	as_pg env XDG_CONFIG_HOME="$dir/xdg/config" XDG_DATA_HOME="$dir/xdg/data" XDG_RUNTIME_DIR="$dir/xdg/run" \
		PGHOST="$dir/sock" PGUSER=postgres \
		PG_CONFIG="$AFO_BIN/pg_config" PATH="$AFO_BIN:$PATH" setsid -w "$AFO_PG_AUTOCTL" "$@"
}

afo_psql() {
	local port=$1 db=$2
	shift 2
	"$AFO_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" "$@"
}

# afo_log_dir DIR: the node's server log directory (outside PGDATA).
afo_log_dir() { echo "$1/log"; }

# The monitor's port (from its directory).
afo_monitor_port() { cat "$1/port"; }

afo_monitor_uri() {
	echo "postgres://autoctl_node@127.0.0.1:$(afo_monitor_port "$1")/pg_auto_failover?sslmode=disable"
}

# SQL on the monitor's database, unaligned, tuples only.
afo_monitor_sql() {
	afo_psql "$(afo_monitor_port "$1")" pg_auto_failover -At -c "$2"
}

# A directory for a node, owned by the cluster account, and its initdb.
_afo_initdb() {
	local dir=$1
	make_pg_dir "$dir"
	make_pg_dir "$dir/xdg"
	as_pg mkdir -p "$dir/xdg/config" "$dir/xdg/data" "$dir/xdg/run" "$dir/sock"
	as_pg chmod 700 "$dir/xdg/run" "$dir/sock"
	as_pg "$AFO_BIN/initdb" -D "$dir/pgdata" -U postgres --auth trust -E UTF8 --locale C.UTF-8 >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; return 1; }
}

# DIR/node.conf from its lines, and the include of it at the end of postgresql.conf.
_afo_node_conf() {
	local dir=$1
	shift
	printf '%s\n' "# this node's own settings (scripts/autoctl.sh); PGDATA's postgresql.conf includes it last" "$@" |
		as_pg tee "$dir/node.conf" >/dev/null
	if [ -f "$dir/pgdata/postgresql.conf" ] && ! grep -q "^include_if_exists '../node.conf'" "$dir/pgdata/postgresql.conf"; then
		echo "include_if_exists '../node.conf'	# scripts/autoctl.sh: this node's own settings, outside PGDATA" |
			as_pg tee -a "$dir/pgdata/postgresql.conf" >/dev/null
	fi
}

# afo_monitor_create DIR PORT [CONF_LINE...]
afo_monitor_create() {
	local dir=$1 port=$2
	shift 2
	_afo_initdb "$dir" || return 1
	echo "$port" | as_pg tee "$dir/port" >/dev/null
	make_pg_dir "$dir/log"
	_afo_node_conf "$dir" "listen_addresses = '127.0.0.1'" "unix_socket_directories = '$dir/sock'" "log_directory = '$dir/log'" \
		"pgautofailover.health_check_period = $AFO_HEALTH_CHECK_PERIOD" \
		"pgautofailover.health_check_timeout = $AFO_HEALTH_CHECK_TIMEOUT" \
		"pgautofailover.health_check_max_retries = $AFO_HEALTH_CHECK_MAX_RETRIES" \
		"pgautofailover.health_check_retry_delay = $AFO_HEALTH_CHECK_RETRY_DELAY" \
		"pgautofailover.node_considered_unhealthy_timeout = $AFO_NODE_CONSIDERED_UNHEALTHY_TIMEOUT" \
		"pgautofailover.primary_demote_timeout = $AFO_PRIMARY_DEMOTE_TIMEOUT" \
		"pgautofailover.startup_grace_period = $AFO_STARTUP_GRACE_PERIOD" "$@"
	# --listen (pg_autoctl 2.0 takes it for a monitor too, though its --help
	# omits it): the monitor's PostgreSQL is started with -h from it, at the
	# create already (default '*')
	afo_ctl "$dir" create monitor --pgdata "$dir/pgdata" --pgport "$port" --pgctl "$AFO_BIN/pg_ctl" \
		--listen 127.0.0.1 --hostname 127.0.0.1 --auth trust --no-ssl >"$dir/create.log" 2>&1 ||
		{ tail -n 30 "$dir/create.log" >&2; return 1; }
	afo_run "$dir" || return 1
	for _ in $(seq 1 300); do
		afo_monitor_sql "$dir" "SELECT 1 FROM pgautofailover.formation LIMIT 1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "afo: the monitor in $dir did not come up (see $dir/autoctl.log)" >&2
	return 1
}

# afo_formation_create MONITOR_DIR FORMATION DBNAME: a pgsql formation of one
# group (the 'default' formation exists already).
afo_formation_create() {
	local mon=$1 formation=$2 db=$3
	[ "$formation" = default ] && return 0
	afo_ctl "$mon" create formation --pgdata "$mon/pgdata" --formation "$formation" --kind pgsql \
		--dbname "$db" >>"$mon/create.log" 2>&1 || { tail -n 20 "$mon/create.log" >&2; return 1; }
}

# afo_node_create DIR PORT NAME MONITOR_DIR FORMATION DBNAME primary|secondary [CONF_LINE...]
# The node is created and its keeper started; returns once the monitor has
# it as primary (single, with no secondary yet) or secondary.
afo_node_create() {
	local dir=$1 port=$2 name=$3 mon=$4 formation=$5 db=$6 role=$7
	shift 7
	if [ "$role" = primary ]; then
		_afo_initdb "$dir" || return 1
	else
		make_pg_dir "$dir"
		make_pg_dir "$dir/xdg"
		as_pg mkdir -p "$dir/xdg/config" "$dir/xdg/data" "$dir/xdg/run" "$dir/sock"
		as_pg chmod 700 "$dir/xdg/run" "$dir/sock"
	fi
	echo "$port" | as_pg tee "$dir/port" >/dev/null
	echo "$mon" | as_pg tee "$dir/monitor" >/dev/null
	# node.conf: written now, included by the primary's postgresql.conf (the
	# secondary's copy of that file includes its own ../node.conf)
	make_pg_dir "$dir/log"
	_afo_node_conf "$dir" "listen_addresses = '127.0.0.1'" "unix_socket_directories = '$dir/sock'" "log_directory = '$dir/log'" \
		"shared_preload_libraries = 'trafficdb'" "trafficdb.database = '$db'" "$@"
	# pg_autoctl's pg_basebackup of a secondary asks for a spread checkpoint
	# (minutes with the default checkpoint_timeout): an immediate CHECKPOINT
	# on the primary meanwhile makes it finish at once
	local ckpt=
	if [ "$role" = secondary ]; then
		local pport
		pport=$(afo_primary_port "$mon" "$formation")
		( for _ in $(seq 1 600); do afo_psql "$pport" postgres -c CHECKPOINT >/dev/null 2>&1; sleep 1; done ) &
		ckpt=$!
	fi
	afo_ctl "$dir" create postgres --pgdata "$dir/pgdata" --pgport "$port" --pgctl "$AFO_BIN/pg_ctl" \
		--listen 127.0.0.1 --hostname 127.0.0.1 --name "$name" --formation "$formation" --dbname "$db" \
		--monitor "$(afo_monitor_uri "$mon")" --auth trust --no-ssl >"$dir/create.log" 2>&1 ||
		{ [ -n "$ckpt" ] && kill "$ckpt"; tail -n 30 "$dir/create.log" >&2; return 1; }
	[ -n "$ckpt" ] && { kill "$ckpt"; wait "$ckpt" 2>/dev/null || true; }
	afo_ctl "$dir" config set --pgdata "$dir/pgdata" timeout.network_partition_timeout "$AFO_NETWORK_PARTITION_TIMEOUT" >/dev/null ||
		return 1
	afo_run "$dir" || return 1
	if [ "$role" = primary ]; then
		afo_wait_state "$dir" single 120 || return 1
	else
		afo_wait_state "$dir" secondary 300 || return 1
	fi
	# (the monitor knew the state from the create, before this start)
	afo_wait_ready "$port" 60
}

# afo_wait_ready PORT [SECONDS]: PostgreSQL on 127.0.0.1:PORT accepts connections.
afo_wait_ready() {
	for _ in $(seq 1 $((${2:-60} * 10))); do
		"$AFO_BIN/pg_isready" -q -h 127.0.0.1 -p "$1" && return 0
		sleep 0.1
	done
	echo "afo: nothing accepts connections on 127.0.0.1:$1" >&2
	return 1
}

# The pid of the node's supervisor (`pg_autoctl run`), from its pid file.
afo_keeper_pid() {
	local f
	f=$(find "$1/xdg/run" -name pg_autoctl.pid 2>/dev/null | head -n 1)
	if [ -n "$f" ]; then head -n 1 "$f"; fi
}

afo_run() {
	local dir=$1 pid
	# setsid: the keeper and its PostgreSQL outlive the shell that started them
	as_pg env XDG_CONFIG_HOME="$dir/xdg/config" XDG_DATA_HOME="$dir/xdg/data" XDG_RUNTIME_DIR="$dir/xdg/run" \
		PGHOST="$dir/sock" PGUSER=postgres PG_CONFIG="$AFO_BIN/pg_config" PATH="$AFO_BIN:$PATH" \
		setsid "$AFO_PG_AUTOCTL" run --pgdata "$dir/pgdata" >>"$dir/autoctl.log" 2>&1 </dev/null &
	for _ in $(seq 1 100); do
		pid=$(afo_keeper_pid "$dir")
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "afo: pg_autoctl run did not start in $dir (see $dir/autoctl.log)" >&2
	return 1
}

afo_stop() {
	local dir=$1 pid
	pid=$(afo_keeper_pid "$dir")
	[ -n "$pid" ] || return 0
	afo_ctl "$dir" stop --pgdata "$dir/pgdata" >/dev/null 2>&1 || true
	for _ in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "afo: the keeper of $dir did not stop in 30 s" >&2
	return 1
}

# The pids of a process and all its descendants.
_afo_tree() {
	local p
	echo "$1"
	for p in $(pgrep -P "$1"); do _afo_tree "$p"; done
}

# afo_kill DIR: what a machine loss leaves: the keeper (its supervisor and
# every pg_autoctl subprocess) and the postmaster die at the same instant
# (stopped with SIGSTOP first, so that none of them reacts to another's
# death, then SIGKILL).  The postmaster's children find it gone and exit on
# their own (AFO_KILL_TREE=1 kills them in the same instant too).  The
# node's shared memory objects stay in /dev/shm, as after a crash.
#
# Started as root, the keeper's parent is `runuser` (as_pg), which stops
# itself when its child is stopped (util-linux: it waits with WUNTRACED and
# answers a stopped child with SIGSTOP to itself, to pass job control on) and
# then never reaps the killed keeper: `runuser` stayed in state T with a
# zombie child, past `make fleet-stop`.  On a lost machine it dies too: it is
# stopped and killed with the keeper (the shell that started it reaps it).
afo_kill() {
	local dir=$1 keeper pm pids=() p parent
	keeper=$(afo_keeper_pid "$dir")
	pm=$(head -n 1 "$dir/pgdata/postmaster.pid" 2>/dev/null || true)
	if [ -n "$keeper" ]; then
		parent=$(ps -o ppid= -p "$keeper" 2>/dev/null | tr -d ' ' || true)
		if [ -n "$parent" ] && [ "$(cat /proc/"$parent"/comm 2>/dev/null)" = runuser ]; then pids+=("$parent"); fi
		for p in $(_afo_tree "$keeper"); do
			if [ "${AFO_KILL_TREE:-0}" = 1 ] || [ "$(cat /proc/"$p"/comm 2>/dev/null)" = pg_autoctl ]; then pids+=("$p"); fi
		done
	fi
	if [ -n "$pm" ] && kill -0 "$pm" 2>/dev/null; then
		pids+=("$pm")
		[ "${AFO_KILL_TREE:-0}" = 1 ] && pids+=($(_afo_tree "$pm"))
	fi
	[ ${#pids[@]} -gt 0 ] || { echo "afo: nothing to kill in $dir" >&2; return 1; }
	kill -STOP "${pids[@]}" 2>/dev/null || true
	# (AFO_KILL_PAUSE: seconds between the two, as on a loaded machine; test/autoctl_check.sh)
	[ -n "${AFO_KILL_PAUSE:-}" ] && sleep "$AFO_KILL_PAUSE"
	kill -KILL "${pids[@]}" 2>/dev/null || true
	# dead once gone or a zombie (an orphan waits for whoever reaps it)
	for _ in $(seq 1 200); do
		local alive=0
		for p in "${pids[@]}"; do
			[ -e "/proc/$p" ] && [ "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)" != Z ] && alive=1
		done
		[ $alive = 0 ] && return 0
		sleep 0.05
	done
	echo "afo: processes of $dir survived kill -9: ${pids[*]}" >&2
	return 1
}

# afo_rejoin DIR: start a killed node's keeper again.  It finds its
# PostgreSQL not running and asks the monitor, which has made the other node
# primary: this one is demoted, rewound (pg_rewind) and follows it.
afo_rejoin() {
	local dir=$1
	# the dead keeper's pid file names a pid that may be reused: remove it
	find "$dir/xdg/run" -name pg_autoctl.pid -delete 2>/dev/null || true
	afo_run "$dir"
}

# afo_wait_state DIR STATE [SECONDS]: the monitor has STATE as both the
# reported and the goal state of the node whose port DIR/port names.
afo_wait_state() {
	local dir=$1 state=$2 secs=${3:-60} port mon s
	port=$(cat "$dir/port")
	mon=$(_afo_monitor_dir "$dir")
	for _ in $(seq 1 $((secs * 5))); do
		s=$(afo_monitor_sql "$mon" "SELECT reportedstate || ' ' || goalstate FROM pgautofailover.node
			WHERE nodehost = '127.0.0.1' AND nodeport = $port" 2>/dev/null || true)
		[ "$s" = "$state $state" ] && return 0
		sleep 0.2
	done
	echo "afo: node of $dir (port $port) not in state $state within $secs s (last: ${s:-?})" >&2
	return 1
}

# The monitor directory a node was created with (DIR/monitor).
_afo_monitor_dir() { cat "$1/monitor"; }

afo_primary_port() {
	afo_monitor_sql "$1" "SELECT nodeport FROM pgautofailover.node WHERE formationid = '$2'
		AND reportedstate IN ('single', 'wait_primary', 'primary') AND goalstate = reportedstate ORDER BY nodeid LIMIT 1"
}

# afo_wait_healthy MONITOR_DIR FORMATION [SECONDS]: every node of the
# formation settled (reported = goal), one primary, the others secondaries,
# and the primary streaming to each of them synchronously.
afo_wait_healthy() {
	local mon=$1 formation=$2 secs=${3:-120} bad port db nsec sync
	db=$(afo_monitor_sql "$mon" "SELECT dbname FROM pgautofailover.formation WHERE formationid = '$formation'")
	for _ in $(seq 1 $((secs * 5))); do
		bad=$(afo_monitor_sql "$mon" "SELECT count(*) FROM pgautofailover.node WHERE formationid = '$formation'
			AND (reportedstate <> goalstate OR reportedstate NOT IN ('primary', 'secondary'))" 2>/dev/null || echo 1)
		if [ "$bad" = 0 ]; then
			port=$(afo_primary_port "$mon" "$formation")
			nsec=$(afo_monitor_sql "$mon" "SELECT count(*) FROM pgautofailover.node WHERE formationid = '$formation'
				AND reportedstate = 'secondary'")
			sync=$(afo_psql "$port" "$db" -At -c "SELECT count(*) FROM pg_stat_replication
				WHERE sync_state IN ('sync', 'quorum') AND state = 'streaming'" 2>/dev/null || echo -1)
			[ -n "$port" ] && [ "$sync" = "$nsec" ] && return 0
		fi
		sleep 0.2
	done
	echo "afo: formation $formation not healthy within $secs s" >&2
	afo_state "$mon" "$formation" >&2
	return 1
}

afo_state() {
	local mon=$1
	afo_ctl "$mon" show state --pgdata "$mon/pgdata" ${2:+--formation "$2"} 2>/dev/null
}
