# t/058_last_error.pl: trafficdb.status says when its last_error was current
# (last_error_at; the error is kept after it is resolved, so monitoring
# compares it with last_publish_at), and a corrupt subscriber slot's error
# says what happened (a process with write access overwrote it) instead of
# "The daemon restarted".
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use lib 't';
use TdbTest;

my $node = tdb_node('lasterr', 'trafficdb.publish_interval' => "'1h'", 'trafficdb.subscriber_ring_events' => '64');
tdb_grid_map($node);

# --- last_error_at: a damaged generation log (its newest record deleted)
for my $v (10, 20, 30)
{
	$node->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (7, $v); SELECT trafficdb.publish();});
}
is($node->safe_psql('postgres', q{SELECT last_error IS NULL AND last_error_at IS NULL FROM trafficdb.status}), 't',
	'no error yet: last_error and last_error_at are NULL');
my $g = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->safe_psql('postgres', "DELETE FROM trafficdb.generations WHERE generation = $g");
$node->stop('immediate');
$node->start;
$node->poll_query_until('postgres', 'SELECT log_damaged_at IS NOT NULL FROM trafficdb.status') or die 'damage not reported';
is($node->safe_psql('postgres', q{SELECT last_error LIKE 'generation log damaged%' AND last_error_at IS NOT NULL
  AND last_error_at <= now() FROM trafficdb.status}), 't', 'a damaged log: last_error says so and last_error_at when');
$node->safe_psql('postgres', 'SELECT trafficdb.repair_log(accept_loss => true)');
ok($node->poll_query_until('postgres', 'SELECT trafficdb.publish() > 0'), 'publication resumes after repair_log');
is($node->safe_psql('postgres', q{SELECT last_error_at < last_publish_at FROM trafficdb.status}), 't',
	'the error is kept after it is resolved, and last_error_at says it is older than the last publication');

# --- a subscriber slot overwritten by another process
my $id = $node->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (name, location_ids) VALUES ('s', '{5}') RETURNING id;
  CREATE TABLE go (x int);});
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
# one session: open the slot, wait for the test to corrupt it, receive again
my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c',
	qq{SELECT count(*) FROM trafficdb.subscription_events($id, 10, 0)}, '-c',
	q{DO $$ BEGIN FOR i IN 1 .. 1200 LOOP EXIT WHEN EXISTS (SELECT FROM go); PERFORM pg_sleep(0.05); END LOOP; END $$},
	'-c', qq{SELECT count(*) FROM trafficdb.subscription_events($id, 10, 0)} ],
	'<', \$in, '>', \$out, '2>', \$err);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'DO %go%' AND pid <> pg_backend_pid()}),
	'the subscriber session holds its slot');
my $pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'DO %go%' AND pid <> pg_backend_pid()});

# the slot whose owner is that backend: header page, then per slot a control
# page, a filter page and 64 events of 64 bytes; head at +64, pid at +12
my $subs = '/dev/shm/trafficdb.' . $node->port . '.subs';
open(my $fh, '+<', $subs) or die "open $subs: $!";
binmode $fh;
my $slot_size = 4096 + 4096 + 64 * 64;
my $found;
for my $i (0 .. 63)
{
	my $off = 4096 + $i * $slot_size;
	seek($fh, $off + 12, 0) or last;
	read($fh, my $buf, 4) == 4 or last;
	if (unpack('l<', $buf) == $pid) { $found = $off; last; }
}
ok(defined $found, 'the session\'s slot is found by its pid');
if (defined $found)
{
	seek($fh, $found + 64, 0);
	print $fh pack('Q<', 1 << 40);		# head far beyond the ring: the slot is corrupt
}
close($fh);
$node->safe_psql('postgres', 'INSERT INTO go VALUES (1)');
$h->finish;
like($err, qr/the events of subscription $id stopped: its slot in \S+\.subs is corrupt/, 'the corrupt slot is named');
like($err, qr/HINT:  Call again to receive its events from now on in a new slot/, 'the hint says what to do');
unlike($err, qr/daemon restarted/i, 'and does not say the daemon restarted (it did not)');
like($err, qr/DETAIL:  The daemon never writes such values: a process with write access/, 'the detail says who could have done it');
is($node->safe_psql('postgres', qq{SELECT count(*) >= 0 FROM trafficdb.subscription_events($id, 10, 0)}), 't',
	'a new call subscribes again');

done_testing();
