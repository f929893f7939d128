# t/035_sync_standby_publish.pl: with synchronous replication, the daemon
# publishes a generation (and tells TRAFFICDB_SYNC writers it committed)
# only once the synchronous standby has it.  PostgreSQL ends a commit's wait
# for the standby early when the postmaster dies: the transaction is then
# committed here but maybe not on the standby, which a failover promotes
# (pg_auto_failover, bench/failover.sh).  Publishing it would show readers of
# this server a generation the new primary never had, and acknowledge
# writes that a failover loses.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $tdbread = $ENV{TDBREAD} // die 'TDBREAD must name tools/tdbread';
my $primary = tdb_node('primary', 'trafficdb.publish_interval' => "'100ms'", 'wal_level' => 'replica',
	'max_wal_senders' => '4', 'hot_standby' => 'on');
tdb_grid_map($primary);
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "cluster_name = 'standby'\n");
$standby->start;
$primary->safe_psql('postgres', q{ALTER SYSTEM SET synchronous_standby_names = 'standby'; SELECT pg_reload_conf();});
$primary->poll_query_until('postgres', q{SELECT sync_state = 'sync' FROM pg_stat_replication})
  or die 'the standby is not synchronous';

my $prefix = '/trafficdb.' . $primary->port;
sub shm_generation
{
	my $out = `$tdbread $prefix`;
	return $out =~ /generation=(\d+)/ ? $1 : "none ($out)";
}

# The race (which commit of the daemon the postmaster's death interrupts)
# is run several times.
for my $round (1 .. ($ENV{SYNC_PUBLISH_ROUNDS} // 4))
{
	$primary->poll_query_until('postgres', q{SELECT sync_state = 'sync' FROM pg_stat_replication})
	  or die 'the standby is not synchronous';
	$primary->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($round, 10)});
	my $g = $primary->safe_psql('postgres', 'SELECT trafficdb.publish()');
	is(shm_generation(), $g, "round $round: with the synchronous standby up, generation $g is published");

	# the standby goes; a feed row committed locally; the daemon's next cycle
	# commits its generation and waits for the standby
	$standby->stop('immediate');
	$primary->safe_psql('postgres', qq{SET synchronous_commit = local; INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($round + 100, 20)});
	$primary->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'trafficdb daemon' AND wait_event = 'SyncRep'})
	  or die 'the daemon does not wait for the standby';
	my $daemon = $primary->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'trafficdb daemon'});
	is(shm_generation(), $g, "round $round: while the commit waits for the standby, nothing new is published");

	# the machine's postmaster is killed: the daemon's wait ends, unconfirmed
	$primary->kill9;
	for (1 .. 100)
	{
		last unless kill 0, $daemon;
		select(undef, undef, undef, 0.1);
	}
	ok(!kill(0, $daemon), "round $round: the daemon is gone after the postmaster");
	is(shm_generation(), $g, "round $round: the generation the standby never confirmed was not published");
	$primary->start;
	$standby->start;
}

done_testing();
