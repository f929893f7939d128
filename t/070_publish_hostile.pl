# t/070_publish_hostile.pl: in-place publication (docs/object-format.md)
# under hostile conditions; readers must always see what a whole write of the
# daemon's working state would give (compared with a model table after every
# step), and a restart must replay every generation byte-identically.
#  - a publication that fails after the incidents were laid out (no buffer:
#    two readers pin the other versions and a local user took every name the
#    daemon would create next) must not lose the offsets it moved: the next
#    publication reuses a buffer in place;
#  - a publication that fails after the object was written (a trigger on
#    trafficdb.generations raises), then succeeds.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('pubhostile', 'trafficdb.publish_interval' => "'1h'",
	'trafficdb.checkpoint_interval' => '1000', 'trafficdb.log_retention' => "'1h'",
	'trafficdb.log_retention_generations' => '1000', 'trafficdb.reader_pin_timeout' => "'10min'");
tdb_grid_map($node);
tdb_model_create($node);
my $prefix = '/dev/shm/trafficdb.' . $node->port;

# rows: [id, speed, incident or undef]; into the feed and the model; publish (returns psql's result)
sub put { return tdb_model_put($node, @_); }

sub same_as_model { tdb_model_check($node, @_); }

# incidents on records 10 and 20 (20's offset follows 10's text)
put([ 10, 10, 'a' ], [ 20, 20, 'b' ], [ 30, 30, undef ]);
put([ 30, 31, undef ]) for 1 .. 4;
same_as_model('incidents on 10 and 20');

# ---- a publication that fails for want of a buffer, after laying incidents out ----
my @s;
for my $v (1 .. 2)
{
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	$s->query_safe('SELECT speed_kmh FROM trafficdb.locations WHERE location_id = 30');
	push @s, $s;
	put([ 30, 40 + $v, undef ]);
}
# a local user takes every name the daemon would try next (tdb_writer_new_segment's sequence, from any start near the newest)
my $max = 0;
for my $f (glob("$prefix.*"))
{
	$max = $1 if $f =~ /\.(\d+)$/ && $1 > $max;
}
my %taken;
for my $b ($max + 1 .. $max + 64)
{
	my $seq = $b;
	for my $attempt (0 .. 64)
	{
		$taken{$seq} = 1;
		$seq++;
		$seq += 1 << ($attempt < 40 ? $attempt - 8 : 32) if $attempt >= 8;
	}
}
for my $seq (keys %taken)
{
	# a directory: the daemon's shm_unlink of a dead instance's name cannot remove it
	mkdir("$prefix.$seq") or die "cannot create $prefix.$seq: $!";
}
my ($ret, $o, $e) = put([ 10, 11, 'a grown incident text' ]);
isnt($ret, 0, 'no buffer: the publication fails');
like($e, qr/traffic buffer/, 'and says why') or diag $e;
rmdir("$prefix.$_") for keys %taken;
$_->query_safe('COMMIT') for @s;
$_->quit for @s;
($ret, $o, $e) = put([ 30, 50, undef ]);
is($ret, 0, 'the next publication goes through') or diag $e;
same_as_model('after a publication failed with incidents laid out');

# ---- a publication that fails after the object is written: the log's INSERT raises ----
$node->safe_psql('postgres', q{
CREATE TABLE fail_log (on_ boolean);
INSERT INTO fail_log VALUES (true);
CREATE FUNCTION fail_gen() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN IF (SELECT on_ FROM public.fail_log) THEN RAISE EXCEPTION 'hostile trigger'; END IF; RETURN NEW; END$$;
CREATE TRIGGER fail_gen BEFORE INSERT ON trafficdb.generations FOR EACH ROW EXECUTE FUNCTION fail_gen();
});
($ret, $o, $e) = put([ 10, 12, 'aa' ], [ 1, 1, undef ]);
isnt($ret, 0, 'the trigger fails the publication');
($ret, $o, $e) = put([ 20, 21, 'bbbbbbbbbbbbb' ]);
isnt($ret, 0, 'and the next');
$node->safe_psql('postgres', 'UPDATE fail_log SET on_ = false');
($ret, $o, $e) = put([ 2000, 5, 'last' ]);
is($ret, 0, 'then it goes through') or diag $e;
same_as_model('after failed transactions');
put([ 10, 13, undef ], [ 1, 2, 'first' ]);
put([ 20, 22, undef ]);
same_as_model('incidents cleared, first and last records');

my $gen = $node->safe_psql('postgres', 'SELECT generation FROM trafficdb.status');
$node->restart;
$node->poll_query_until('postgres', "SELECT generation >= $gen AND daemon_pid IS NOT NULL FROM trafficdb.status")
  or die 'no daemon after the restart';
is($node->safe_psql('postgres', 'SELECT replay_mismatches FROM trafficdb.status'), '0',
	'every replayed generation is byte-identical to its publication');
same_as_model('after the restart');

$node->stop;
done_testing();
