# t/032_failover.pl: failover of a region under pg_auto_failover, under load:
# bench/failover.sh with two kill -9 of the primary (keeper and postmaster),
# on ports 5820-5822 (a monitor, two nodes, all listening on 127.0.0.1 only,
# their Unix sockets in the test's directory; shm names /tdbfo5820_*).  Each
# kill: the secondary is promoted and its daemon goes on as the writer
# without a rebuild, the SQL feed writers (multi-host, target_session_attrs=
# read-write) and the TRAFFICDB_SYNC put writer reconnect, the killed node
# rejoins as the secondary.  Asserted: no acknowledged write lost, no
# generation backwards for any reader, no daemon rebuild.  About a minute.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename;
use Cwd 'abs_path';

my $root = abs_path(dirname(__FILE__) . '/..');
my $pg_config = `pg_config --bindir`;
chomp $pg_config;
my $autoctl = -x "$pg_config/pg_autoctl" ? "$pg_config/pg_autoctl" : (grep { -x } '/usr/bin/pg_autoctl')[0];
plan skip_all => 'pg_autoctl is not installed (scripts/deps.sh installs postgresql-15-auto-failover)' unless $autoctl;
plan skip_all => "bench/failover.sh is not in $root (scripts/test.sh copies it)" unless -x "$root/bench/failover.sh";

my $dir = PostgreSQL::Test::Utils::tempdir('failover');
my $kills = $ENV{FAILOVER_TAP_KILLS} // 2;
local $ENV{TDB_PG_CONFIG} = "$pg_config/pg_config";
local $ENV{AFO_PG_AUTOCTL} = $autoctl;
local $ENV{FAILOVER_KILLS} = $kills;
local $ENV{FAILOVER_PORT} = 5820;
local $ENV{FAILOVER_DIR} = "$dir/f";
local $ENV{FAILOVER_LOAD_SECONDS} = 2;
local $ENV{FAILOVER_WRITERS} = 3;
local $ENV{BENCH_CSV} = "$dir/bench.csv";
my $out = `cd '$root' && bench/failover.sh 2>&1`;
my $rc = $? >> 8;
note($out);
is($rc, 0, 'bench/failover.sh succeeded') or diag($out);
my %v = $out =~ /^(kills|measured|writes_acked|lost|regressions|rebuilds|t1_max_s|t2_max_s)=(\S+)$/mg;
is($v{kills}, $kills, "$kills kills of the primary");
is($v{measured}, $kills, 'each failover measured (a write and a new generation on the new primary)');
cmp_ok($v{writes_acked} // 0, '>', 1000, 'writes were acknowledged throughout');
is($v{lost}, 0, 'no acknowledged write lost');
is($v{regressions}, 0, 'no reader saw a generation go backwards');
is($v{rebuilds}, 0, 'the promoted daemon went on as the writer without a rebuild, and the rejoined one follows');
cmp_ok($v{t1_max_s} // 99, '<', 20, "failover (last write -> first write on the new primary) within 20 s: $v{t1_max_s} s");
done_testing();
