# t/044_follower_subscriptions.pl: subscriptions on a hot standby.  Its
# daemon follows the primary's generation log (t/031) and matches and
# delivers subscriptions at each generation it publishes, from the records
# that generation changed: a subscriber on the standby gets the same events
# as one on the primary for the same filter; a row inserted into
# trafficdb.subscriptions on the primary is served on the standby once
# replicated; request-response works there too.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use lib 't';
use TdbTest;

my $tdbsub = $ENV{TDBSUB} // die 'TDBSUB must name tools/tdbsub';
my ($primary, $standby) = tdb_standby_pair('trafficdb.publish_interval' => "'1h'");

sub caught_up { return tdb_caught_up($primary, $standby); }

sub subscriber { my ($node, @args) = @_; return tdb_tdbsub($node, @args, '--timeout-ms', '4000'); }

sub rounds
{
	my ($from, $to) = @_;
	for my $r ($from .. $to)
	{
		$primary->safe_psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion)
SELECT (($r * 37 + i * 11) % 2000) + 1, ($r * 13 + i) % 90, (($r + i) % 5)::smallint FROM generate_series(1, 60) i;
SELECT trafficdb.publish();});
	}
}

caught_up();
my $box = [ '--box', '24.8', '60.1', '25.0', '60.2' ];
my $on_primary = subscriber($primary, @$box, '--congestion', '3', '--enter-exit');
my $on_standby = subscriber($standby, @$box, '--congestion', '3', '--enter-exit');
# both daemons attach their subscriber at their next cycle (the standby's: within 50 ms)
$primary->safe_psql('postgres', 'SELECT trafficdb.publish()');
caught_up();
sleep 1;
rounds(1, 30);
caught_up();
finish($on_primary->{h});
finish($on_standby->{h});
my @p = grep { /^(enter|exit|change)/ } split /\n/, ${ $on_primary->{out} };
my @s = grep { /^(enter|exit|change)/ } split /\n/, ${ $on_standby->{out} };
cmp_ok(scalar(@p), '>', 5, 'the primary\'s subscriber got events (' . scalar(@p) . ')');
is(join("\n", @s), join("\n", @p), 'the standby\'s subscriber got the same events, in the same order')
  or diag(${ $on_standby->{err} });

# a row of trafficdb.subscriptions written on the primary is served on the standby
my $sid = $primary->safe_psql('postgres', q{INSERT INTO trafficdb.subscriptions (name, location_ids, events)
  VALUES ('replicated', '{5, 6, 7}', 'change') RETURNING id});
caught_up();
my $tap = subscriber($standby, '--all-subscriptions');
sleep 2;	# the standby looks at the rows at most once a second, and attaches the tap
$primary->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (5, 11), (6, 12), (9, 13);
SELECT trafficdb.publish();});
my $g = caught_up();
finish($tap->{h});
is(join('|', map { join(' ', (split / /)[0 .. 2]) . ' ' . (/(sub=\d+)/)[0] } grep { /^change/ } split /\n/, ${ $tap->{out} }),
	"change $g 5 sub=$sid|change $g 6 sub=$sid", 'a subscription inserted on the primary gets its events on the standby')
  or diag(${ $tap->{err} });

# request-response on the standby
my $member = subscriber($standby, '--group', 'r', '--serve', '--label', 'standby');
my ($o, $e) = ('', '');
IPC::Run::run([ $tdbsub, '/trafficdb.' . $standby->port, '--request', 'r', '--count', '2' ], '>', \$o, '2>', \$e);
like($o, qr/^answer 1 standby req 1 \d+\nanswer 2 standby req 2 \d+$/m, 'request-response on the standby') or diag($e);
$member->{h}->kill_kill;
is($standby->safe_psql('postgres', 'SELECT role, replay_mismatches FROM trafficdb.status'), 'follower|0',
	'the standby still follows, byte-identical');
done_testing();
