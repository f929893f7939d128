# t/042_group_kills.pl: a group of three subscribers (tools/tdbsub --ack:
# events peeked, printed, then acknowledged) while GROUP_KILLS (default 50)
# times one member is killed with kill -9 and a new one joins, between
# publications.  Every event of every publication must be taken by exactly
# one member: acknowledged once, or (a member killed between its ack and the
# line saying so) printed by the dead member and by nobody else.  Events a
# dead member never acknowledged go to the others, flagged handed_over.
# Where the random kills land is left to chance (any landing must keep those
# rules); the handover itself is made to happen, not hoped for: a member that
# acknowledges only after 10 minutes is stopped (SIGSTOP) once it printed
# events, checked to hold them unacknowledged, and killed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start);
use Time::HiRes qw(usleep);
use lib 't';
use TdbTest;

my $tdbsub = $ENV{TDBSUB} // die 'TDBSUB must name tools/tdbsub';
my $kills = $ENV{GROUP_KILLS} // 50;
my $node = tdb_node('group', 'trafficdb.publish_interval' => "'1h'");
tdb_grid_map($node);
my $shm = '/trafficdb.' . $node->port;

my @members;	# { h, out, killed }
# member([ack delay in ms, default 40]): a new member of the group
sub member
{
	my ($ack_delay_ms) = @_;
	my $o = '';
	my $e = '';
	my $h = start([ $tdbsub, $shm, '--box', '24', '60', '26', '61', '--group', 'workers', '--ack-delay-ms', $ack_delay_ms // 40,
		'--timeout-ms', '3000' ], '>', \$o, '2>', \$e);
	my $m = { h => $h, out => \$o, err => \$e, killed => 0 };
	for (1 .. 200) { $h->pump_nb; last if $o =~ /ready/; usleep(10_000); }
	push @members, $m;
	return $m;
}
member() for 1 .. 3;
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');	# attaches them

my %expected;
my $round = 0;
sub publish_round
{
	$round++;
	my $base = ($round * 37) % 1900;
	$node->safe_psql('postgres', qq{INSERT INTO trafficdb.feed (location_id, speed_kmh)
SELECT $base + i, $round % 100 + i FROM generate_series(1, 20) i;
SELECT trafficdb.publish();});
	my $g = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
	$expected{"$g " . ($base + $_)} = 1 for 1 .. 20;
}

for my $k (1 .. $kills)
{
	publish_round();
	usleep(15_000);	# often while the members wait 40 ms to acknowledge; wherever it lands is judged below
	my @alive = grep { !$_->{killed} } @members;
	my $victim = $alive[ $k % scalar(@alive) ];
	kill 'KILL', $victim->{h}->{KIDS}[0]{PID};
	$victim->{killed} = 1;
	eval { $victim->{h}->finish };
	publish_round();	# the dead member's slot is reclaimed at this cycle: its events handed over
	member();
}

# The handover, made to happen: a member that acknowledges only after 10
# minutes takes events (publications until it has printed some, at most 20:
# it is attached at the first and given its share round robin), is stopped,
# is checked to have printed no "ack" (it holds them), and is killed.
my $holder = member(600_000);
my $holder_pid = $holder->{h}->{KIDS}[0]{PID};
END { kill 'KILL', $holder_pid if $holder_pid; }	# never left behind, stopped or asleep
my $holder_rounds = 0;
my @held;
for (1 .. 20)
{
	publish_round();
	$holder_rounds++;
	for (1 .. 200)	# up to 2 s for its lines
	{
		$holder->{h}->pump_nb;
		last if ${ $holder->{out} } =~ /^change /m;
		usleep(10_000);
	}
	last if ${ $holder->{out} } =~ /^change /m;
}
kill 'STOP', $holder_pid;
$holder->{h}->pump_nb for 1 .. 3;	# what it wrote before it stopped
while (${ $holder->{out} } =~ /^change (\d+) (\d+) .* seq=\d+(?: handed_over)?$/mg)
{
	push @held, "$1 $2";
}
ok(@held > 0, 'the holding member printed events (' . scalar(@held) . ") after $holder_rounds publications");
unlike(${ $holder->{out} }, qr/^ack /m, '... and acknowledged none of them when it was stopped');
kill 'KILL', $holder_pid;
$holder->{killed} = 1;
eval { $holder->{h}->finish };
$holder_pid = undef;
publish_round();	# its slot reclaimed: what it held goes to the others
$holder_rounds++;
publish_round();
$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
for my $m (grep { !$_->{killed} } @members)
{
	$m->{h}->finish;
}

# every member's output: events (generation location), acknowledged or not
my (%acked, %trailing, %handed, @dead_batches);
for my $m (@members)
{
	my @pending;
	for my $line (split /\n/, ${ $m->{out} })
	{
		if ($line =~ /^change (\d+) (\d+) .* seq=\d+( handed_over)?$/)
		{
			push @pending, "$1 $2";
			$handed{"$1 $2"}++ if $3;
		}
		elsif ($line =~ /^ack (\d+)$/)
		{
			$acked{$_}++ for splice(@pending, 0, $1);
		}
	}
	# a killed member's events after its last ack line: taken by it only if nobody else has them
	if ($m->{killed})
	{
		$trailing{$_}++ for @pending;
		push @dead_batches, [@pending] if @pending;
	}
	elsif (@pending)
	{
		fail('a live member ended with events it did not acknowledge');
	}
}
my ($missing, $twice, $dead_only) = (0, 0, 0);
for my $ev (keys %expected)
{
	my $n = ($acked{$ev} // 0);
	if ($n == 0 && $trailing{$ev})
	{
		$n = 1;
		$dead_only++;
	}
	$missing++ if $n == 0;
	$twice++ if $n > 1;
}
# A dead member's last batch (printed after its last "ack" line) was either
# never acknowledged, and then all of it went to the others, or acknowledged
# (the death fell between its ack and the line saying so), and then none did:
# whichever way each kill landed.
my $split = 0;
for my $b (@dead_batches)
{
	my $taken = grep { $acked{$_} } @$b;
	$split++ if $taken != 0 && $taken != scalar(@$b);
}
is($split, 0, 'each dead member\'s last batch went to the others whole or not at all (' . scalar(@dead_batches)
	. " batches, $dead_only events taken by the dead member alone)");
my $unexpected = grep { !$expected{$_} } keys %acked;
is($round, 2 * $kills + 1 + $holder_rounds, "$round publications");
is(scalar(keys %expected), 20 * $round, 'each with 20 events');
is($missing, 0, 'after ' . ($kills + 1) . ' kill -9 of group members: no event lost');
is($twice, 0, 'no event taken twice within the group');
is($unexpected, 0, 'no event that was not published');
my @handed_held = grep { $handed{$_} && ($acked{$_} // 0) == 1 } @held;
is(scalar(@handed_held), scalar(@held),
	'the events the killed member held were handed over to the others, flagged, and acknowledged once (' . scalar(@held) . ')');
note('events handed over in all: ' . scalar(keys %handed));

done_testing();
