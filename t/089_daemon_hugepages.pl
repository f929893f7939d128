# t/089_daemon_hugepages.pl: the daemon's working traffic (updates land at
# random) asks for transparent huge pages (src/hugepage.h) whether the map
# was just loaded or the daemon replayed it from the generation log after a
# restart.  Before, the replayed arrays (bgworker/genlog_store.c) were
# allocated and zeroed without the advice: a restarted daemon worked on 4 kB
# pages, every random update of a large map also a TLB miss.
#
# What is checked: the anonymous mappings of the daemon marked "hg"
# (MADV_HUGEPAGE, VmFlags in /proc/PID/smaps) cover the traffic array's
# whole 2 MB pages, after the load and after a restart.  Skipped where the
# kernel has transparent huge pages off ("never"): the advice is then moot.
#
# And its shared-memory objects (trafficdb.huge_pages, on by default): on a
# kernel with MADV_COLLAPSE (6.1 or later) the map and traffic objects are
# made of huge pages before they are written, status.shm_huge_bytes says
# how many bytes, and the daemon maps them 2 MB at a time; with the setting
# off, a new map's objects are not.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 't';
use TdbTest;

my $thp = -r '/sys/kernel/mm/transparent_hugepage/enabled'
  ? slurp_file('/sys/kernel/mm/transparent_hugepage/enabled') : '[never]';
plan skip_all => "transparent huge pages are off here ($thp)" if $thp =~ /\[never\]/;

my $n = 300_000;	# 32 bytes each: 9.6 MB of working traffic, 4 whole huge pages at least
my $node = tdb_node('hugepages');
tdb_line_grid($node, $n);
$node->safe_psql('postgres', qq{
INSERT INTO trafficdb.feed (location_id, speed_kmh, observed_at)
SELECT i, 50, clock_timestamp() FROM generate_series(1, 1000) i;
SELECT trafficdb.publish();
});

# Bytes of the daemon's anonymous mappings advised MADV_HUGEPAGE.
sub advised_bytes
{
	my ($pid) = @_;
	my ($total, $anon, $size) = (0, 0, 0);
	for my $line (split /\n/, slurp_file("/proc/$pid/smaps"))
	{
		if ($line =~ /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(\S*)/)
		{
			$anon = $1 eq '' || $1 eq '[heap]';
		}
		elsif ($line =~ /^Size:\s+(\d+) kB/)
		{
			$size = $1 * 1024;
		}
		elsif ($line =~ /^VmFlags:.*\bhg\b/)
		{
			$total += $size if $anon;
		}
	}
	return $total;
}

# the whole 2 MB pages inside the traffic array, at least
my $want = $n * 32 - 4 * 1024 * 1024;

my $pid = $node->safe_psql('postgres', 'SELECT daemon_pid FROM trafficdb.status');
cmp_ok(advised_bytes($pid), '>=', $want, 'after a load, the working traffic is advised huge pages');

$node->restart;
my ($locations, $newpid) = ('', '');
for (1 .. 300)
{
	($locations, $newpid) = split /\|/,
	  $node->safe_psql('postgres', 'SELECT locations, daemon_pid FROM trafficdb.status');
	last if $locations eq $n && $newpid ne '' && $newpid ne $pid;
	usleep(100_000);
}
is($locations, $n, 'the restarted daemon replayed the map');
cmp_ok(advised_bytes($newpid), '>=', $want,
	'after a restart (replay from the generation log), the working traffic is advised huge pages too');
is($node->safe_psql('postgres', 'SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 500'), '50',
	'and it holds the traffic published before the restart');

# The daemon's mappings of its map and traffic objects (/dev/shm/<prefix>.<seq>): name => [size, PMD-mapped bytes].
sub shm_objects
{
	my ($pid) = @_;
	my (%obj, $name);
	for my $line (split /\n/, slurp_file("/proc/$pid/smaps"))
	{
		if ($line =~ /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(\S*)/)
		{
			my $path = $1;
			$name = $path =~ m{^/dev/shm/trafficdb\.[^/]*\.\d+$} ? $path : undef;
			$obj{$name} //= [0, 0] if defined $name;
		}
		elsif (defined $name && $line =~ /^Size:\s+(\d+) kB/)
		{
			$obj{$name}[0] += $1 * 1024;
		}
		elsif (defined $name && $line =~ /^ShmemPmdMapped:\s+(\d+) kB/)
		{
			$obj{$name}[1] += $1 * 1024;
		}
	}
	return \%obj;
}

my ($kmaj, $kmin) = (`uname -r` =~ /^(\d+)\.(\d+)/);
my $shmem = -r '/sys/kernel/mm/transparent_hugepage/shmem_enabled'
  ? slurp_file('/sys/kernel/mm/transparent_hugepage/shmem_enabled') : '';
SKIP:
{
	skip "no MADV_COLLAPSE for shared memory here (kernel $kmaj.$kmin, shmem_enabled $shmem)", 6
	  if $kmaj < 6 || ($kmaj == 6 && $kmin < 1) || $shmem =~ /\[deny\]/;

	$node->safe_psql('postgres', 'SELECT trafficdb.load_map(\'roads\', \'id\', \'geom\')');
	my ($huge, $pid2) = split /\|/, $node->safe_psql('postgres', 'SELECT shm_huge_bytes, daemon_pid FROM trafficdb.status');
	my $objs = shm_objects($pid2);
	my ($size, $pmd) = (0, 0);
	for (values %$objs) { $size += $_->[0]; $pmd += $_->[1]; }
	note("shm_huge_bytes $huge; the daemon maps $size bytes of map and traffic objects, $pmd by PMD");
	# the map (about 75 bytes a location) and two traffic buffers: their whole 2 MB pages
	cmp_ok($huge, '>=', int(($n * 32) / (2 << 20)) * (2 << 20), 'status.shm_huge_bytes counts the objects made of huge pages');
	is($huge % (2 << 20), 0, 'in whole 2 MB pages');
	cmp_ok($pmd, '>=', int(($n * 32) / (2 << 20)) * (2 << 20), 'the daemon maps them 2 MB at a time');

	$node->append_conf('postgresql.conf', "trafficdb.huge_pages = off\n");
	$node->reload;
	$node->safe_psql('postgres', 'SELECT trafficdb.load_map(\'roads\', \'id\', \'geom\')');
	# the old map goes once no one pins it; the reused traffic buffers keep their pages
	my $after = $huge;
	for (1 .. 50)
	{
		$node->safe_psql('postgres', 'SELECT trafficdb.publish()');
		$after = $node->safe_psql('postgres', 'SELECT shm_huge_bytes FROM trafficdb.status');
		last if $after < $huge;
		usleep(100_000);
	}
	cmp_ok($after, '<', $huge, 'with trafficdb.huge_pages off, the new map is not made huge (shm_huge_bytes counts the objects there are)');
	# the objects made since (traffic buffers of the same size are reused: they keep their pages)
	my $later = shm_objects($pid2);
	my @new = grep { !exists $objs->{$_} } sort keys %$later;
	note("made since: @new");
	cmp_ok(scalar(@new), '>=', 1, 'the new map is a new object');
	$pmd = 0;
	$pmd += $later->{$_}[1] for @new;
	is($pmd, 0, 'and the daemon maps the new objects 4 kB at a time');
}

$node->stop;
done_testing();
