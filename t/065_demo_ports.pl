# t/065_demo_ports.pl: the demo keeps to the port ranges it is given
# (parallel demos on one machine): TDB_DEMO_PG_PORTS for PostgreSQL,
# TDB_MINIO_PORTS for MinIO's two ports (scripts/minio.sh), TDB_WEB_PORTS
# for the live map, TDB_MARTIN_PORTS for its tile server; busy ports are skipped, a range too small or malformed is
# an error naming it.  Through `scripts/demo.sh --ports` (the ports a start
# would take now; it starts nothing), which uses the start's own choice.
use strict;
use warnings;
use IO::Socket::INET;
use File::Temp;
use PostgreSQL::Test::Utils;
use Test::More;

-x 'scripts/demo.sh' && -x 'scripts/minio.sh' or plan skip_all => 'scripts/demo.sh and scripts/minio.sh are not here';

# a block of 8 ports whose first two are taken (by us)
my ($base, @held);
for my $try (1 .. 50)
{
	$base = 20000 + int(rand(20000));
	@held = map { IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $base + $_, Listen => 128, ReuseAddr => 1) } 0 .. 1;	# a backlog for the probes: nothing accepts
	my @probe = map { IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $base + $_, Listen => 1, ReuseAddr => 1) } 2 .. 7;
	last if 2 == grep { defined } @held and 6 == grep { defined } @probe;	# the probes close here
	@held = ();
}
is(scalar(@held), 2, "ports $base and " . ($base + 1) . ' taken');

sub ports
{
	my (%env) = @_;
	local @ENV{ keys %env } = values %env;
	delete local $ENV{TDB_MINIO_PORTS} unless exists $env{TDB_MINIO_PORTS};
	delete local $ENV{TDB_MARTIN_PORTS} unless exists $env{TDB_MARTIN_PORTS};
	my ($out, $err) = run_command([ 'scripts/demo.sh', '--ports' ]);
	return ($out, $err);
}

my $range = "$base " . ($base + 7);
my ($out, $err) = ports(TDB_DEMO_PG_PORTS => $range, TDB_MINIO_PORTS => $range, TDB_WEB_PORTS => $range,
	TDB_MARTIN_PORTS => $range);
is($out, sprintf("postgresql %d\nminio %d %d\nweb %d\nmartin %d", $base + 2, $base + 2, $base + 3, $base + 2, $base + 3),
	'each service takes the first free ports of its range, skipping the busy ones (Martin not the live map\'s)')
  or diag($err);

($out, $err) = ports(TDB_DEMO_PG_PORTS => $range, TDB_WEB_PORTS => $range);
like($out, qr/^minio (\d+) (\d+)$/m, 'without TDB_MINIO_PORTS, MinIO takes two ports the system picks');
my ($s3, $console) = $out =~ /^minio (\d+) (\d+)$/m;
isnt($s3 // 0, $console // 0, 'two different ones');

($out, $err) = ports(TDB_DEMO_PG_PORTS => $range, TDB_WEB_PORTS => $range, TDB_MINIO_PORTS => "$base " . ($base + 2));
like($err, qr/fewer than two free TCP ports on 127\.0\.0\.1 between $base and @{[$base + 2]} \(TDB_MINIO_PORTS/,
	'MinIO in a range with one free port: an error naming the range');

($out, $err) = ports(TDB_DEMO_PG_PORTS => "$base " . ($base + 1), TDB_WEB_PORTS => $range);
like($err, qr/no free TCP port on 127\.0\.0\.1 between $base and @{[$base + 1]}/,
	'PostgreSQL in a range with no free port: an error naming the range');

($out, $err) = ports(TDB_DEMO_PG_PORTS => '5433', TDB_WEB_PORTS => $range);
like($err, qr/TDB_DEMO_PG_PORTS="5433": expected "FIRST LAST"/, 'a malformed range is refused, named');

($out, $err) = ports(TDB_DEMO_PG_PORTS => $range, TDB_WEB_PORTS => $range, TDB_MINIO_PORTS => "$base x");
like($err, qr/TDB_MINIO_PORTS="$base x": expected "FIRST LAST"/, 'also for MinIO');

# a start whose MinIO or live map range is full stops before anything starts
# (it stopped when it came to them, its cluster up).  The map name is not
# one: a start that went past the check stops at it, having started nothing
# either way.
for my $case ([ 'TDB_MINIO_PORTS', qr/fewer than two free TCP ports on 127\.0\.0\.1 between $base and @{[$base + 1]}/ ],
	[ 'TDB_WEB_PORTS', qr/no free TCP port on 127\.0\.0\.1 between $base and @{[$base + 1]}/ ],
	[ 'TDB_MARTIN_PORTS', qr/no free TCP port on 127\.0\.0\.1 between $base and @{[$base + 1]}/ ])
{
	my ($var, $re) = @$case;
	my $scratch = File::Temp::tempdir(CLEANUP => 1);
	local $ENV{TDB_DEMO_DIR} = "$scratch/demo";
	local @ENV{qw(TDB_DEMO_PG_PORTS TDB_WEB_PORTS)} = ($range, $range);
	local $ENV{$var} = "$base " . ($base + 1);
	($out, $err) = run_command([ 'scripts/demo.sh', 'no-such-map' ]);
	like($err, $re, "$var full: the start stops, naming the range");
	unlike($err, qr/unknown MAP/, "$var full: before anything else");
	ok(!-e "$scratch/demo", "$var full: no demo directory made");
}

# numbers too long for the shell's test: the same error, without the shell's
# "integer expression expected" before it
for my $var (qw(TDB_DEMO_PG_PORTS TDB_WEB_PORTS TDB_MINIO_PORTS TDB_MARTIN_PORTS))
{
	($out, $err) = ports(TDB_DEMO_PG_PORTS => $range, TDB_WEB_PORTS => $range, $var => '99999999999999999999 99999999999999999999');
	like($err, qr/$var="99999999999999999999 99999999999999999999": expected "FIRST LAST"/, "$var: a 20-digit port is refused, named");
	unlike($err, qr/integer expression expected/, "$var: without a shell error before it");
}
($out, $err) = run_command([ 'env', "TDB_MINIO_PORTS=99999999999999999999 99999999999999999999", 'scripts/minio.sh', 'ports' ]);
unlike($err, qr/integer expression expected/, 'scripts/minio.sh ports: a 20-digit port without a shell error');
like($err, qr/TDB_MINIO_PORTS="99999999999999999999 99999999999999999999": expected "FIRST LAST"/, 'but its own');

done_testing();
