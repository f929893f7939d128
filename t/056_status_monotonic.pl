# t/056_status_monotonic.pl: trafficdb.status.generation, which monitoring
# polls, never goes back while trafficdb.locations serves a generation.
#
# After a restart of the daemon (kill -9: the postmaster restarts the whole
# server) or a crash-restart caused by a backend, the published objects stay
# in shared memory and trafficdb.locations serves them at once, but the
# status (PostgreSQL's own shared memory, reset by the crash-restart) read
# generation 0 until the new daemon published again: 802 -> 0 -> 803.
# The new daemon's rebuild (replay the log, build the map: seconds for a
# city's map) is held up here by a prepared transaction locking the map's
# source table across the crash (prepared transactions and their locks
# survive it), so the status is read many times inside that window; the
# lock is released after the polls.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $node = tdb_node('mono', 'trafficdb.publish_interval' => "'1h'", 'restart_after_crash' => 'on',
	'max_prepared_transactions' => '2');
tdb_grid_map($node);
for my $r (1 .. 3)
{
	$node->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($r, 40 + $r); SELECT trafficdb.publish();});
}

my $poll = q{SELECT coalesce(s.generation, -1), coalesce((SELECT l.generation FROM trafficdb.locations l WHERE l.location_id = 1), -1),
  s.publishes FROM trafficdb.status s};

# Poll status.generation next to the generation locations serves: $reads
# successful reads (connections fail while the server restarts: bounded).
# Returns (reads that saw locations serve a generation, of those the reads
# before the new daemon published anything, a list of the status
# generations that went back).
my $highest = 0;
sub poll_status
{
	my ($reads) = @_;
	my ($served, $window, @back) = (0, 0);
	for (my $i = 0, my $ok = 0; $i < 3000 && $ok < $reads; $i++)
	{
		my ($ret, $out, $err) = $node->psql('postgres', $poll);
		if ($ret != 0 || $out eq '')
		{
			select(undef, undef, undef, 0.05);
			next;
		}
		$ok++;
		my ($status, $loc, $publishes) = split /\|/, $out;
		next if $loc < 0;				# locations serves nothing (yet)
		$served++;
		$window++ if $publishes == 0;
		push @back, "$highest -> $status (locations at $loc)" if $status < $highest;
		$highest = $status if $status > $highest;
	}
	return ($served, $window, @back);
}

sub crash_and_poll
{
	my ($what, $kill) = @_;
	my ($before) = poll_status(3);
	cmp_ok($highest, '>', 0, "$what: status.generation $highest before");
	my $off = -s $node->logfile;
	$node->safe_psql('postgres', q{BEGIN; LOCK TABLE roads IN ACCESS EXCLUSIVE MODE; PREPARE TRANSACTION 'hold_map'});
	$kill->();
	# until the server has restarted (reads succeed again), then some more
	my ($served, $window, @back) = poll_status(40);
	cmp_ok($window, '>', 0, "$what: locations served a generation before the new daemon published ($window of $served reads)");
	is(join('; ', grep { defined } @back[0 .. 2]), '', "$what: status.generation never went back while locations served a generation");
	ok(slurp_file($node->logfile, $off) =~ /terminating any other active server processes|was terminated by signal 9/,
		"$what: the server crash-restarted");
	# the rebuild goes on, then the next publication, and its status
	$node->safe_psql('postgres', q{COMMIT PREPARED 'hold_map'});
	ok($node->poll_query_until('postgres', 'SELECT trafficdb.publish() > 0'), "$what: the daemon publishes again");
	($served, $window, @back) = poll_status(5);
	is(join('; ', @back), '', "$what: ... and status.generation still never went back");
}

crash_and_poll('kill -9 of the daemon', sub {
	my $pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'trafficdb daemon'});
	kill 'KILL', $pid;
});

crash_and_poll('kill -9 of a backend', sub {
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-d', $node->connstr('postgres'), '-c', 'SELECT pg_sleep(60)' ],
		'<', \$in, '>', \$out, '2>', \$err);
	$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'})
	  or die 'the sleeping backend did not start';
	my $pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'});
	kill 'KILL', $pid;
	$h->finish;
});

done_testing();
