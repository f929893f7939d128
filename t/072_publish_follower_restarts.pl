# t/072_publish_follower_restarts.pl: in-place publication (docs/object-format.md)
# seen from a follower and across restarts, and trafficdb.checkpoint_min_changed:
#  - a hot standby's daemon publishes the primary's generations in place too:
#    with incidents added, grown, cleared, on the first and last records, it
#    reads what the primary reads, byte-identically (replay_mismatches 0);
#  - checkpoint_min_changed refuses NaN, negative and out-of-range values;
#    with it, many one-change generations make no checkpoint until
#    checkpoint_timeout; a restart and a daemon killed -9 replay them all
#    byte-identically; a reload of the same map keeps every value.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use lib 't';
use TdbTest;

my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => '1', 'trafficdb.checkpoint_timeout' => "'3s'",
	'trafficdb.log_retention' => "'1h'", 'trafficdb.log_retention_generations' => '100000',
	'restart_after_crash' => 'on');
tdb_model_create($primary);

sub put { tdb_model_put($primary, @_) == 0 or die 'publish() failed'; }

sub same_as_model { tdb_model_check(@_); }

sub status { my ($node, $col) = @_; return $node->safe_psql('postgres', "SELECT $col FROM trafficdb.status"); }

# ---- the follower ----
put([ 1, 1, 'first' ], [ 2000, 2, 'last' ], [ 500, 3, 'middle' ]);
put([ 7, 4, undef ]) for 1 .. 3;
put([ 1, 5, 'first, and it grew a lot longer than it was' ]);
put([ 2000, 6, undef ], [ 499, 7, 'x' ]);
put([ 500, 8, undef ]);
put([ 1, 9, undef ], [ 2000, 10, 'back' ]);
tdb_caught_up($primary, $standby);
same_as_model($primary, 'primary');
same_as_model($standby, 'follower');
is(status($standby, 'replay_mismatches'), '0', 'the follower rebuilt every generation byte-identically');

# ---- checkpoint_min_changed ----
for my $v ('nan', '-1', '1001', 'inf', '-inf', '1e308')
{
	my ($ret) = $primary->psql('postgres', "ALTER SYSTEM SET trafficdb.checkpoint_min_changed = '$v'");
	isnt($ret, 0, "checkpoint_min_changed = $v is refused");
}
sleep(3.2);
put([ 3, 2, undef ]);
my $ckpt = status($primary, 'log_checkpoint_generation');
is($ckpt, status($primary, 'generation'), 'checkpoint_timeout made a checkpoint');
my $t0 = time;
put([ 100 + $_, $_, $_ % 3 ? undef : "i$_" ]) for 1 .. 10;
cmp_ok(status($primary, 'log_checkpoint_generation'), '==', $ckpt,
	'ten one-change generations make no checkpoint (checkpoint_interval 1, checkpoint_min_changed 1)')
  if time - $t0 < 2;
sleep(3.2);
put([ 3, 3, undef ]);
cmp_ok(status($primary, 'log_checkpoint_generation'), '>', $ckpt, 'checkpoint_timeout makes one');
put([ 200 + $_, $_, $_ % 4 ? undef : "j$_" ]) for 1 .. 10;

my $gen = status($primary, 'generation');
$primary->restart;
$primary->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL FROM trafficdb.status")
  or die 'no daemon after the restart';
is(status($primary, 'replay_mismatches'), '0', 'a restart replays every generation byte-identically');
same_as_model($primary, 'after the restart');

put([ 300 + $_, $_, $_ % 2 ? undef : "k$_" ]) for 1 .. 5;
$gen = status($primary, 'generation');
my $pid = status($primary, 'daemon_pid');
kill 'KILL', $pid;
$primary->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL AND daemon_pid <> $pid FROM trafficdb.status")
  or die 'no daemon after kill -9';
is(status($primary, 'replay_mismatches'), '0', 'after kill -9 of the daemon: replayed byte-identically');
same_as_model($primary, 'after kill -9');

$primary->safe_psql('postgres', 'SELECT trafficdb.load_map(\'roads\')');
same_as_model($primary, 'after a reload of the same map');
put([ 1, 11, 'again' ], [ 2000, 12, undef ]);
same_as_model($primary, 'a publication after the reload');
tdb_caught_up($primary, $standby);
same_as_model($standby, 'the follower, after all that');
is(status($standby, 'replay_mismatches'), '0', 'and byte-identically');

$standby->stop;
$primary->stop;
done_testing();
