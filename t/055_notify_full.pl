# t/055_notify_full.pl: a full NOTIFY queue never stops publication (issue
# 28, item 11).  A session LISTENs and then stays in an open transaction, so
# the queue cannot shrink; another fills it.  The daemon sends its
# notifications (trafficdb_publish, one per notify subscription with events,
# payload '<generation> <events>') after the publication in a transaction of
# its own, and not at all while pg_notification_queue_usage() is over
# trafficdb.notify_queue_max_usage: generations go on, the notifications
# dropped are counted (status.notify_dropped) and logged, and once the queue
# drains each subscription's next notification says ' overrun <g>'.
#
# PostgreSQL 15's queue holds 8 GB (half its SLRU address space), too much
# to fill in a test: the threshold is set to 0.000002 of it (about two 8 kB
# pages) and a session fills more than that with 10 distinct notifications of 7,900
# bytes.  A queue that refuses a NOTIFY (ERROR "too many notifications")
# only fails the daemon's notification transaction, counted the same way.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use lib 't';
use TdbTest;

my $node = tdb_node('notify', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.notify_queue_max_usage' => '0.000002');
tdb_grid_map($node);

# 200 notify subscriptions, one location each
$node->safe_psql('postgres', q{
INSERT INTO trafficdb.subscriptions (name, location_ids, notify)
SELECT 'n' || i, ARRAY[i]::bigint[], true FROM generate_series(1, 200) i});
my $first = $node->safe_psql('postgres', 'SELECT min(id) FROM trafficdb.subscriptions');
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
my $round = 0;
sub publish_all
{
	$round++;
	return $node->safe_psql('postgres',
		"INSERT INTO trafficdb.feed (location_id, speed_kmh) SELECT i, 20 + (i + $round) % 50 FROM generate_series(1, 200) i;
		 SELECT trafficdb.publish();");
}

# the holder: LISTEN, then an open transaction (it reads nothing until it ends)
my %h = (in => '', out => '', err => '');
$h{h} = start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ], '<', \$h{in}, '>', \$h{out}, '2>', \$h{err});
sub run_in
{
	my ($sql) = @_;
	$h{in} .= "$sql\n\\echo DONE\n";
	for (1 .. 400) { $h{h}->pump_nb; last if $h{out} =~ /^DONE$/m; select(undef, undef, undef, 0.025); }
	my $out = $h{out};
	$h{out} = '';
	return $out;
}
my $first_ch = "trafficdb_subscription_${first}_" . $node->safe_psql('postgres', "SELECT notify_key FROM trafficdb.subscriptions WHERE id = $first");
run_in("LISTEN $first_ch; LISTEN trafficdb_publish;");
run_in('BEGIN; SELECT 1;');

# another session fills the queue past the threshold
$node->safe_psql('postgres', q{SELECT pg_notify('filler', i || repeat('x', 7900)) FROM generate_series(1, 10) i});
cmp_ok($node->safe_psql('postgres', 'SELECT pg_notification_queue_usage()'), '>', 0.000002,
	'the queue is over trafficdb.notify_queue_max_usage');

# publication goes on; the notifications are dropped and counted
my $g0 = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
my @gens = map { publish_all() } 1 .. 3;
is($gens[2], $g0 + 3, 'three generations published while the queue is over the threshold');
is($node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status'), $gens[2], 'and served');
my ($dropped, $sent) = split /\|/, $node->safe_psql('postgres', 'SELECT notify_dropped, notify_sent FROM trafficdb.status');
cmp_ok($dropped, '>=', 3 * 201, "each generation's 201 notifications dropped and counted ($dropped)");
like(slurp_file($node->logfile), qr/generation \d+ published without its 201 notification\(s\): the NOTIFY queue is [0-9.]+ full, over trafficdb\.notify_queue_max_usage/,
	'the log says why, naming the setting');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.feed'), '0', 'the feed was consumed');

# the holder ends its transaction: the queue drains; the next notification says overrun
run_in('COMMIT;');
$node->poll_query_until('postgres', 'SELECT pg_notification_queue_usage() <= 0.000002')
  or die 'the queue did not drain';
my $g = publish_all();
my $out = run_in('SELECT pg_sleep(0.2);');
$out .= run_in('SELECT 1;');
like($out . $h{err}, qr/notification "$first_ch" with payload "$g 1 overrun $gens[0]"/,
	'after the drain: the subscription\'s notification names the first generation it missed')
	or diag($out . $h{err});
like($out . $h{err}, qr/notification "trafficdb_publish" with payload "$g"/, 'and trafficdb_publish is sent again');
cmp_ok($node->safe_psql('postgres', 'SELECT notify_sent FROM trafficdb.status'), '>', $sent, 'status counts the notifications sent');

$h{in} .= "\\q\n";
finish($h{h});
done_testing();
