# t/TdbTest.pm: what the TAP tests share: a cluster that preloads trafficdb.
package TdbTest;
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Exporter 'import';
use JSON::PP;
use IPC::Run;
use Fcntl qw(:flock);
use Time::HiRes;
use Digest::MD5;
use File::Path;
our @EXPORT = qw(tdb_fault_proxy tdb_node tdb_trail_disk tdb_where_digest tdb_superuser tdb_initdb_utf8 tdb_make_bucket tdb_scan_node tdb_grid_map tdb_sync_pair tdb_standby_pair tdb_caught_up tdb_tdbsub tdb_wait_output tdb_wait_session tdb_model_create tdb_model_put tdb_model_round tdb_model_check tdb_line_grid tdb_restart_replayed tdb_python tdb_random_roads tdb_wait_accepting tdb_feed_round);

# initdb once per data directory option set and per run: PostgreSQL 15's
# PostgreSQL::Test::Cluster runs initdb for every node (about a second each,
# for 112 nodes under make tap on 2026-12-02); a copy of the first one's
# result, kept in the shared tmp_check, takes about a third of that here.  Only the call of
# Cluster::init is copied ('initdb -D DIR -A trust -N ...'); any other
# command, and every call when TDB_INITDB_EACH=1, runs as asked.  The copies
# share pg_control's system identifier, as a base backup's do: no test here
# tells unrelated clusters apart by it.
{
	no warnings 'redefine';
	my $system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;
	*PostgreSQL::Test::Utils::system_or_bail = sub {
		my @cmd = @_;
		return $system_or_bail->(@cmd)
		  unless @cmd >= 6 && $cmd[0] eq 'initdb' && $cmd[1] eq '-D' && "@cmd[3 .. 5]" eq '-A trust -N' && !$ENV{TDB_INITDB_EACH};
		my ($pgdata, @options) = ($cmd[2], @cmd[6 .. $#cmd]);
		my $template = "$PostgreSQL::Test::Utils::tmp_check/initdb-template-" . Digest::MD5::md5_hex(join("\0", @options));
		open(my $lock, '>>', "$template.lock") or die "could not open $template.lock: $!";
		flock($lock, LOCK_EX) or die "could not lock $template.lock: $!";
		if (!-d $template)
		{
			File::Path::rmtree("$template.new");
			$system_or_bail->('initdb', '-D', "$template.new", '-A', 'trust', '-N', @options);
			rename("$template.new", $template) or die "could not rename $template.new: $!";
		}
		close($lock);
		$system_or_bail->('cp', '-RPp', $template, $pgdata);
		return;
	};
}

# The endpoint of a fault proxy of this test's own in front of MinIO
# (TRAIL_FAULT_PROXY names src/trail/tests/fault_proxy.py, MINIO_ENDPOINT the
# MinIO of scripts/tap.sh), started at the first call and stopped when the
# test exits.  A proxy has one fault plan for all its clients: one shared by
# the tests that prove -j runs side by side made one test's GET take
# another's stall (t/094's retry met t/102's plan and failed with "short
# body"), and making them take turns on it serialised 200 s of the suite.
my $fault_proxy;
sub tdb_fault_proxy
{
	return $fault_proxy->{endpoint} if $fault_proxy;
	my $script = $ENV{TRAIL_FAULT_PROXY} // die 'TRAIL_FAULT_PROXY must name src/trail/tests/fault_proxy.py (scripts/tap.sh sets it)';
	my $minio = $ENV{MINIO_ENDPOINT} // die 'MINIO_ENDPOINT must name the MinIO of scripts/tap.sh';
	my ($upstream) = $minio =~ /:(\d+)$/ or die "no port in MINIO_ENDPOINT '$minio'";
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $handle = IPC::Run::start([ 'python3', $script, $upstream, "$dir/port", '1200' ], '<', '/dev/null', '>', "$dir/log", '2>&1');
	for (1 .. 100)
	{
		last if -s "$dir/port";
		Time::HiRes::usleep(100_000);
	}
	die 'the fault proxy did not start: ' . PostgreSQL::Test::Utils::slurp_file("$dir/log") unless -s "$dir/port";
	chomp(my $port = PostgreSQL::Test::Utils::slurp_file("$dir/port"));
	$fault_proxy = { handle => $handle, endpoint => "http://127.0.0.1:$port" };
	return $fault_proxy->{endpoint};
}
END
{
	local $?;
	$fault_proxy->{handle}->kill_kill if $fault_proxy;
}

# The extension, a trail server for local files ("disk") and a case-insensitive
# ICU collation ("ci"), as the pushdown tests against heaps start.
sub tdb_trail_disk
{
	my ($node) = @_;
	$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
CREATE SERVER disk FOREIGN DATA WRAPPER trafficdb_trails;
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
});
}

# The rows of $table under WHERE $where as "count:md5 of their n column in
# order" (a heap and a foreign table of the same rows compare equal), or
# "ERROR: message" when the query fails.
sub tdb_where_digest
{
	my ($node, $table, $where) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT count(*) || ':' || coalesce(md5(string_agg(n::text, ',' ORDER BY n)), '-') FROM $table WHERE $where");
	return $rc == 0 ? $out : 'ERROR: ' . ($err =~ /ERROR:\s*(.*)/ ? $1 : $err);
}

# The Foreign Scan node of EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) sql, run
# in a session of its own after $pre (SQL, optional), as a hash.
sub tdb_scan_node
{
	my ($node, $sql, $pre) = @_;
	my $json = $node->safe_psql('postgres', ($pre // '') . "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) $sql");
	my @todo = (decode_json($json)->[0]{Plan});
	while (my $p = shift @todo)
	{
		return $p if $p->{'Node Type'} eq 'Foreign Scan';
		push @todo, @{ $p->{Plans} // [] };
	}
	die "no Foreign Scan in the plan of $sql";
}

# What every cluster of the tests is created with: UTF-8 (the extension
# refuses other encodings) and a locale that exists on any glibc, whatever
# the environment's LANG (none in a container or a clean chroot).
sub tdb_initdb_utf8 { return (extra => [ '-E', 'UTF8', '--locale=C.UTF-8' ]); }

# The name of the cluster's bootstrap superuser: initdb names it after the OS
# user running the test (postgres as root, alice as alice).  A test names it
# through this, never as 'postgres'.
sub tdb_superuser
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT current_user');
}

# A started cluster preloading trafficdb, its daemon in database postgres,
# plus any settings given as name => value (quoted as they should appear).
# With '-start' => 0 it is made but not started: the caller starts it (after
# preparing what must exist before the server does, e.g. names in /dev/shm).
sub tdb_node
{
	my ($name, %settings) = @_;
	my $start = delete $settings{'-start'} // 1;
	my %conf = ('shared_preload_libraries' => "'trafficdb'", 'trafficdb.database' => "'postgres'", 'jit' => 'off', %settings);
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(tdb_initdb_utf8());
	$node->append_conf('postgresql.conf', join('', map { "$_ = $conf{$_}\n" } sort keys %conf));
	$node->start if $start;
	return $node;
}

# A sub that runs Python code with libtrafficdb's module (TRAFFICDB_LIB,
# TRAFFICDB_PYTHON: make tap's) after "import trafficdb, os, sys, time" and
# PREAMBLE (e.g. "w = trafficdb.Writer('/trafficdb.PORT')"), and returns
# what it printed (its standard error becomes a note).
sub tdb_python
{
	my ($preamble) = @_;
	die 'TRAFFICDB_LIB must name lib/libtrafficdb.so' unless $ENV{TRAFFICDB_LIB};
	my $pydir = $ENV{TRAFFICDB_PYTHON} // die 'TRAFFICDB_PYTHON must name the python/ folder';
	return sub {
		my ($code) = @_;
		local $ENV{PYTHONPATH} = $pydir;
		my ($out, $err) = PostgreSQL::Test::Utils::run_command(
			[ '/usr/bin/python3', '-c', "import trafficdb, os, sys, time\n$preamble\n$code" ]);
		Test::More::note($err) if $err;
		chomp $out;
		return $out;
	};
}

# The extension, and table roads of 20,000 short random segments near
# Helsinki (seeded: the same every run) of four road classes, EXTRA_SQL run
# on it, then GiST indexes on geom and geom::geography (the heap the
# nearest-first tests compare with), loaded as the map.
sub tdb_random_roads
{
	my ($node, $extra_sql) = @_;
	$node->safe_psql('postgres', q{
SET client_min_messages = warning;
CREATE EXTENSION trafficdb CASCADE;
SELECT setseed(0.5);
CREATE TABLE roads AS SELECT i::bigint AS id,
  ST_SetSRID(ST_MakeLine(ST_MakePoint(x, y), ST_MakePoint(x + dx, y + dy)), 4326) AS geom,
  (ARRAY['primary', 'footway', 'residential', 'service'])[1 + i % 4] AS road_class
  FROM (SELECT i, 24.8 + random() * 0.3 AS x, 60.1 + random() * 0.15 AS y,
               (random() - 0.5) * 0.004 AS dx, (random() - 0.5) * 0.002 AS dy
          FROM generate_series(1, 20000) i) s;
} . ($extra_sql // '') . q{
CREATE INDEX ON roads USING gist (geom);
CREATE INDEX ON roads USING gist ((geom::geography));
ANALYZE roads;
SELECT trafficdb.load_map('roads', 'id', 'geom', 'road_class');
});
}

# The extension, and a map of 2,000 short named segments on a grid in
# Helsinki (table roads, ids 1..2000) loaded in database postgres.
sub tdb_grid_map
{
	my ($node) = @_;
	$node->safe_psql('postgres', PostgreSQL::Test::Utils::slurp_file('test/grid_map.sql'));
}

# A primary (with the settings given) with the grid map and a hot standby
# streaming from it, both started.
sub tdb_standby_pair
{
	my (%settings) = @_;
	my $primary = tdb_node('primary', 'wal_level' => 'replica', 'max_wal_senders' => '4', 'hot_standby' => 'on',
		%settings);
	tdb_grid_map($primary);
	$primary->backup('b');
	my $standby = PostgreSQL::Test::Cluster->new('standby');
	$standby->init_from_backup($primary, 'b', has_streaming => 1);
	$standby->start;
	return ($primary, $standby);
}

# Round $r of 40 feed rows over the grid map's 2,000 locations (speeds,
# incidents on every seventh), then publish(); returns the generation.
sub tdb_feed_round
{
	my ($node, $r) = @_;
	return $node->safe_psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at)
SELECT (($r * 37 + i * 11) % 2000) + 1, ($r + i) % 120, CASE WHEN i % 7 = 0 THEN 'r$r' END,
       now() - interval '1 ms' * i
  FROM generate_series(1, 40) i;
SELECT trafficdb.publish();});
}

# Start tools/tdbsub (TDBSUB) on $node's shared memory with @args and wait
# (at most 4 s) for its "ready" line; returns { h, out, err (refs), pid }.
sub tdb_tdbsub
{
	my ($node, @args) = @_;
	my $tdbsub = $ENV{TDBSUB} // die 'TDBSUB must name tools/tdbsub';
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start([ $tdbsub, '/trafficdb.' . $node->port, @args ], '>', \$o, '2>', \$e);
	for (1 .. 200) { $h->pump_nb; last if $o =~ /ready/ || !$h->pumpable; select(undef, undef, undef, 0.02); }
	return { h => $h, out => \$o, err => \$e, pid => $h->{KIDS}[0]{PID} };
}

# Wait (at most $secs) until a tdb_tdbsub process's output matches $re.
sub tdb_wait_output
{
	my ($p, $re, $secs) = @_;
	for (1 .. $secs * 50)
	{
		$p->{h}->pump_nb if $p->{h}->pumpable;
		return 1 if ${ $p->{out} } =~ $re;
		select(undef, undef, undef, 0.02);
	}
	return 0;
}

# Wait (at most $secs) until the psql session's stdout or stderr matches $re
# ($h an IPC::Run harness, $out and $err references to its output).
sub tdb_wait_session
{
	my ($h, $out, $err, $re, $secs) = @_;
	for (1 .. $secs * 50)
	{
		$h->pump_nb;
		return 1 if $$out =~ $re || $$err =~ $re;
		select(undef, undef, undef, 0.02);
	}
	return 0;
}

# Wait until the standby's daemon has published the primary's generation; returns it.
sub tdb_caught_up
{
	my ($primary, $standby) = @_;
	my $g = $primary->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	$primary->wait_for_catchup($standby, 'replay');
	$standby->poll_query_until('postgres', "SELECT generation = $g FROM trafficdb.status")
	  or die "the follower did not reach generation $g";
	return $g;
}

# The same, publishing every 200 ms, replicating synchronously
# (synchronous_standby_names '*').
sub tdb_sync_pair
{
	my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'200ms'");
	$primary->wait_for_catchup($standby, 'replay');
	$primary->safe_psql('postgres', q{ALTER SYSTEM SET synchronous_standby_names = '*'; SELECT pg_reload_conf()});
	$primary->poll_query_until('postgres', q{SELECT sync_state = 'sync' FROM pg_stat_replication})
	  or die 'no synchronous standby';
	return ($primary, $standby);
}

# A bucket on the MinIO of scripts/test.sh (MINIO_ENDPOINT, MINIO_ROOT_USER,
# MINIO_ROOT_PASSWORD), made with the trail CLI (TRAFFICDB_TRAIL).
sub tdb_make_bucket
{
	my ($bucket) = @_;
	my $cli = $ENV{TRAFFICDB_TRAIL} // die 'TRAFFICDB_TRAIL must name tools/trafficdb-trail';
	local $ENV{AWS_ACCESS_KEY_ID} = $ENV{MINIO_ROOT_USER} // die 'MINIO_ROOT_USER unset';
	local $ENV{AWS_SECRET_ACCESS_KEY} = $ENV{MINIO_ROOT_PASSWORD} // die 'MINIO_ROOT_PASSWORD unset';
	local $ENV{AWS_ENDPOINT_URL} = $ENV{MINIO_ENDPOINT} // die 'MINIO_ENDPOINT unset';
	system($cli, 'mb', "s3://$bucket") == 0 or die "trafficdb-trail mb s3://$bucket failed";
}


# A model of the published traffic (table model in database postgres, one
# row per road of table roads), for tests that compare every location read
# through trafficdb.locations with what was written.
sub tdb_model_create
{
	my ($node) = @_;
	$node->safe_psql('postgres', q{
CREATE TABLE model (id bigint PRIMARY KEY, speed real, incident text);
INSERT INTO model SELECT id, NULL, NULL FROM roads;
});
}

# rows: [id, speed, incident or undef]; into the feed and the model, then
# publish; returns psql's exit code (publish may fail on purpose).
sub tdb_model_put
{
	my ($node, @rows) = @_;
	my $sql = '';
	for my $r (@rows)
	{
		my ($id, $speed, $inc) = @$r;
		my $i = defined $inc ? "'$inc'" : 'NULL';
		$sql .= "INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at) VALUES ($id, $speed, $i, clock_timestamp());\n";
		$sql .= "UPDATE model SET speed = $speed, incident = $i WHERE id = $id;\n";
	}
	$node->safe_psql('postgres', $sql);
	return $node->psql('postgres', 'SELECT trafficdb.publish()');
}

# n updates of random locations 1 .. ids (seeded), a share incidents of up to
# maxlen + 7 characters (incidents: 0 to 1), into the feed and the model;
# publish.
sub tdb_model_round
{
	my ($node, $seed, $n, $incidents, $ids, $maxlen) = @_;
	my $top = $ids - 1;
	$node->safe_psql('postgres', qq{
SELECT setseed($seed / 1000.0);
CREATE TEMP TABLE u AS
SELECT DISTINCT ON (id) id, speed, incident FROM (
  SELECT (random() * $top)::int + 1 AS id, round((random() * 120)::numeric, 1)::real AS speed,
         CASE WHEN random() < $incidents THEN repeat('x', (random() * $maxlen)::int) || ' closed' END AS incident,
         g FROM generate_series(1, $n) g) s ORDER BY id, g DESC;
INSERT INTO trafficdb.feed (location_id, speed_kmh, incident, observed_at)
SELECT id, speed, incident, clock_timestamp() FROM u;
UPDATE model m SET speed = u.speed, incident = u.incident FROM u WHERE m.id = u.id;
SELECT trafficdb.publish();
});
}

# The extension and a map of n short east-west lines on a 1,000-wide grid
# (table roads, ids 1 .. n), loaded: a map as large as a test needs.
sub tdb_line_grid
{
	my ($node, $n) = @_;
	$node->safe_psql('postgres', qq{
CREATE EXTENSION trafficdb CASCADE;
CREATE TABLE roads AS
SELECT i::bigint AS id, ST_SetSRID(ST_MakeLine(ST_MakePoint(24 + (i % 1000) * 0.001, 60 + (i / 1000) * 0.001),
                                               ST_MakePoint(24.0005 + (i % 1000) * 0.001, 60 + (i / 1000) * 0.001)), 4326) AS geom
  FROM generate_series(1, $n) i;
SELECT trafficdb.load_map('roads', 'id', 'geom');
});
}

# Wait (at most 180 s) until the node accepts connections again after a
# crash-restart: pg_isready, which sends no query, since a psql started
# while the server still refuses can exit before reading the query
# poll_query_until writes to it, and IPC::Run then dies of the broken pipe.
sub tdb_wait_accepting
{
	my ($node) = @_;
	for (1 .. 1800)
	{
		return 1 if system($node->installed_command('pg_isready'), '-q', '-h', $node->host,
			'-p', $node->port, '-d', 'postgres') == 0;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# Restart the node, wait for its daemon to serve at least the generation it
# served before, and check that every generation it replayed is
# byte-identical to its publication.
sub tdb_restart_replayed
{
	my ($node) = @_;
	my $gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	$node->restart;
	$node->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL FROM trafficdb.status")
	  or die 'no daemon after the restart';
	Test::More::is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0',
		'every replayed generation is byte-identical to its in-place publication');
}

# Every location reads as the model says.
sub tdb_model_check
{
	my ($node, $what) = @_;
	Test::More::is($node->safe_psql('postgres', q{
SELECT count(*) FROM model m FULL JOIN trafficdb.locations l ON l.location_id = m.id
 WHERE l.location_id IS NULL OR m.id IS NULL OR l.speed_kmh IS DISTINCT FROM m.speed
    OR l.incident IS DISTINCT FROM m.incident}), '0', "$what: every location reads as written");
}

1;
