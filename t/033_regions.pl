# t/033_regions.pl: a fleet of three region nodes and the global table.
# Each region node loads the map of its area (load_map(region => ...)) and
# refuses feed rows of locations another region owns, naming that region and
# its server.  trafficdb_global.locations on a fourth node (which also holds
# the whole map) gives, through postgres_fdw, the same rows as the whole map
# for REGION_QUERIES (default 1,000) random box, radius, polygon and key
# queries; a box inside one region contacts only that region's node.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use lib 't';
use TdbTest;

my %conf = ('trafficdb.publish_interval' => "'1h'");
my $whole = tdb_node('whole', %conf);
my @names = qw(a b c);
my %node = map { $_ => tdb_node("region_$_", %conf, 'log_statement' => "'all'", 'listen_addresses' => "'127.0.0.1'") } @names;

# 3,000 short segments on a 60 x 50 grid over Helsinki; regions a, b, c are
# three strips west to east; some segments cross a border
my $roads = q{
CREATE EXTENSION trafficdb CASCADE;
CREATE EXTENSION postgres_fdw;
CREATE TABLE roads AS
SELECT i::bigint AS id, 'Street ' || (i % 17) AS name,
       CASE WHEN i % 5 = 0 THEN 'primary' ELSE 'residential' END AS class,
       (30 + (i % 5) * 10)::int AS maxspeed,
       ST_SetSRID(ST_MakeLine(ST_MakePoint(24.80 + (i % 60) * 0.005, 60.10 + (i / 60) * 0.002),
                              ST_MakePoint(24.80 + (i % 60) * 0.005 + 0.004 + (i % 3) * 0.002,
                                           60.10 + (i / 60) * 0.002 + 0.001)), 4326) AS geom
  FROM generate_series(0, 2999) i;
};
my $servers = '';
for my $r (@names)
{
	my $port = $node{$r}->port;
	$servers .= qq{
CREATE SERVER region_$r FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres', extensions 'postgis', fetch_size '1000');
CREATE USER MAPPING FOR CURRENT_USER SERVER region_$r;};
}
my $regions = q{
INSERT INTO trafficdb.regions (name, area, server) VALUES
  ('a', ST_Multi(ST_MakeEnvelope(24.70, 60.00, 24.90, 60.30, 4326)), 'region_a'),
  ('b', ST_Multi(ST_MakeEnvelope(24.90, 60.00, 25.00, 60.30, 4326)), 'region_b'),
  ('c', ST_Multi(ST_MakeEnvelope(25.00, 60.00, 25.20, 60.30, 4326)), 'region_c');
UPDATE trafficdb.regions r
   SET bounds = (SELECT ST_Envelope(ST_Collect(geom)) FROM roads WHERE trafficdb.region_of(geom) = r.name);
};
for my $n ($whole, values %node)
{
	$n->safe_psql('postgres', $roads . $servers . $regions);
}

# the feed: the same rows everywhere, each node keeps those of its region
my $feed = q{
INSERT INTO trafficdb.feed (location_id, speed_kmh, congestion, incident, observed_at)
SELECT id, (id * 7) % 90, (id % 5)::smallint, CASE WHEN id % 11 = 0 THEN 'works ' || id END,
       '2026-11-01 08:00+00'::timestamptz + id * interval '1 ms'
  FROM roads WHERE %s;
SELECT trafficdb.publish();
};
$whole->safe_psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', 'class', 'name', 'maxspeed')});
$whole->safe_psql('postgres', sprintf($feed, 'true'));
for my $r (@names)
{
	is($node{$r}->safe_psql('postgres',
		qq{SELECT trafficdb.load_map('roads', 'id', 'geom', 'class', 'name', 'maxspeed', region => '$r')}),
		$whole->safe_psql('postgres', qq{SELECT count(*) FROM roads WHERE trafficdb.region_of(geom) = '$r'}),
		"region $r loads the locations region_of() gives it");
	$node{$r}->safe_psql('postgres', sprintf($feed, "trafficdb.region_of(geom) = '$r'"));
	is($node{$r}->safe_psql('postgres', 'SELECT region, feed_rows_rejected FROM trafficdb.status'), "$r|0",
		"region $r: status names the region; its feed rows all published");
}
is($whole->safe_psql('postgres', q{SELECT count(*) FROM roads WHERE trafficdb.region_of(geom) IS NULL}), '0',
	'the regions cover the map');

# ---- a feed row of another region's location ------------------------------------
my $b_loc = $whole->safe_psql('postgres', q{SELECT min(id) FROM roads WHERE trafficdb.region_of(geom) = 'b'});
my $a_loc = $whole->safe_psql('postgres', q{SELECT min(id) FROM roads WHERE trafficdb.region_of(geom) = 'a'});
my $bport = $node{b}->port;
my ($ret, $out, $err) = $node{a}->psql('postgres',
	qq{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($a_loc, 10), ($b_loc, 20)});
like($err, qr/location $b_loc belongs to region "b", not to region "a" that this node serves/,
	'a feed row of region b on region a\'s node: refused, naming the region');
like($err, qr/server "region_b" \(host=127\.0\.0\.1 port=$bport dbname=postgres\)/, '... and its server');
is($node{a}->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.feed'), '0', '... and the statement wrote nothing');
($ret, $out, $err) = $node{a}->psql('postgres', qq{COPY trafficdb.feed (location_id, speed_kmh) FROM STDIN;\n$a_loc\t10\n$b_loc\t20\n\\.\n});
like($err, qr/belongs to region "b"/, 'COPY refuses it too');
# an id no region knows: accepted, and rejected at publication as on any node
$node{a}->safe_psql('postgres', q{INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (987654321, 5); SELECT trafficdb.publish()});
is($node{a}->safe_psql('postgres', q{SELECT location_id, reason FROM trafficdb.feed_rejects}),
	'987654321|unknown location_id: not in the loaded map', 'an unknown location: rejected at publication, as without regions');
# on the whole map's node nothing is checked
is($whole->safe_psql('postgres', qq{BEGIN; INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($b_loc, 1) RETURNING location_id; ROLLBACK}),
	$b_loc, 'a node serving the whole map takes any location');

# ---- loading a region: errors ----------------------------------------------------
($ret, $out, $err) = $node{a}->psql('postgres', q{SELECT trafficdb.load_map('roads', 'id', 'geom', region => 'nowhere')});
like($err, qr/region "nowhere" is not in trafficdb.regions/, 'an unknown region: a clear error');
my $bounds = $node{a}->safe_psql('postgres', q{SELECT bounds FROM trafficdb.regions WHERE name = 'a'});
($ret, $out, $err) = $node{a}->psql('postgres', q{UPDATE trafficdb.regions SET bounds = ST_MakeEnvelope(24.7, 60.0, 24.85, 60.3, 4326) WHERE name = 'a';
  SELECT trafficdb.load_map('roads', 'id', 'geom', region => 'a')});
like($err, qr/location \d+ of region "a" reaches out of the region's bounds/, 'a map beyond the region\'s bounds: refused, naming a location');
is($node{a}->safe_psql('postgres', 'SELECT locations, region FROM trafficdb.status'),
	$whole->safe_psql('postgres', q{SELECT count(*) || '|a' FROM roads WHERE trafficdb.region_of(geom) = 'a'}),
	'... and the region\'s map stays');
$node{a}->safe_psql('postgres', qq{UPDATE trafficdb.regions SET bounds = '$bounds' WHERE name = 'a'});

# ---- the global table --------------------------------------------------------------
is($whole->safe_psql('postgres', 'SELECT trafficdb.create_global_locations()'), '3', 'create_global_locations: three regions');
is($whole->safe_psql('postgres', 'SELECT count(*), count(DISTINCT location_id) FROM trafficdb_global.locations'), '3000|3000',
	'the global table holds every location once');

sub plan_scans
{
	my ($where) = @_;
	my $json = $whole->safe_psql('postgres',
		"EXPLAIN (VERBOSE, FORMAT JSON) SELECT location_id FROM trafficdb_global.locations WHERE $where");
	my (@todo, @scans) = (decode_json($json)->[0]{Plan});
	while (my $p = shift @todo)
	{
		push @scans, $p if $p->{'Node Type'} eq 'Foreign Scan';
		push @todo, @{ $p->{Plans} // [] };
	}
	return \@scans;
}
my $scans = plan_scans(q{geom && ST_MakeEnvelope(24.82, 60.15, 24.84, 60.16, 4326)});
is(join(',', map { $_->{'Relation Name'} } @$scans), 'a', 'a box inside region a: only region a is scanned');
like($scans->[0]{'Remote SQL'}, qr/&&/, '... with the box shipped to it');
$scans = plan_scans(q{ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(25.1, 60.15), 4326)::geography, 300)});
is(join(',', map { $_->{'Relation Name'} } @$scans), 'c', 'a radius in region c: only region c');
like($scans->[0]{'Remote SQL'}, qr/st_dwithin/, '... with ST_DWithin shipped');
$scans = plan_scans(q{ST_Intersects(geom, ST_MakeEnvelope(24.89, 60.15, 24.95, 60.16, 4326))});
is(join(',', sort map { $_->{'Relation Name'} } @$scans), 'a,b', 'a box across the a/b border: regions a and b');
$scans = plan_scans(q{location_id = 42});
is(scalar(@$scans), 3, 'a key lookup: every region');
like($scans->[0]{'Remote SQL'}, qr/location_id = 42/, '... shipped as a key lookup');
$scans = plan_scans(q{geom && ST_MakeEnvelope(30, 10, 31, 11, 4326)});
is(scalar(@$scans), 0, 'a box outside every region: no region contacted');

# the runtime side: a box in region a runs a query on a's node only
my %off = map { $_ => -s $node{$_}->logfile } @names;
$whole->safe_psql('postgres', q{SELECT count(*) FROM trafficdb_global.locations WHERE geom && ST_MakeEnvelope(24.82, 60.15, 24.84, 60.16, 4326)});
my %ran = map { $_ => scalar(() = slurp_file($node{$_}->logfile, $off{$_}) =~ /FROM trafficdb\.locations/g) } @names;
is("$ran{a},$ran{b},$ran{c}", '1,0,0', 'the remote logs: region a ran the query, b and c ran nothing');

# ---- differential: the global table against the whole map -----------------------------
my $nq = $ENV{REGION_QUERIES} // 1000;
srand(33);
my @where;
for my $q (1 .. $nq)
{
	my $kind = $q % 5;
	my $x = 24.78 + rand(0.34);
	my $y = 60.09 + rand(0.12);
	if ($kind <= 1)
	{
		my ($w, $h) = (rand() < 0.5 ? rand(0.01) : rand(0.2), rand() < 0.5 ? rand(0.005) : rand(0.1));
		push @where, sprintf('geom && ST_MakeEnvelope(%.6f, %.6f, %.6f, %.6f, 4326)', $x, $y, $x + $w, $y + $h);
	}
	elsif ($kind == 2)
	{
		push @where, sprintf('ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(%.6f, %.6f), 4326)::geography, %d)',
			$x, $y, 10 + int(rand(3000)));
	}
	elsif ($kind == 3)
	{
		push @where, sprintf('ST_Intersects(geom, ST_Buffer(ST_SetSRID(ST_MakePoint(%.6f, %.6f), 4326), %.5f))',
			$x, $y, 0.0005 + rand(0.02));
	}
	else
	{
		my @ids = map { int(rand(3100)) } 1 .. 1 + int(rand(4));
		push @where, @ids == 1 ? "location_id = $ids[0]" : 'location_id IN (' . join(', ', @ids) . ')';
	}
}
sub answers
{
	my ($table) = @_;
	my $sql = join('', map {
		"SELECT count(*) || ' ' || coalesce(md5(string_agg(concat_ws('|', location_id, name, road_class, speed_kmh, "
		  . "free_flow_kmh, congestion, confidence, incident, ST_AsEWKB(geom)), ',' ORDER BY location_id)), '-') "
		  . "FROM $table WHERE $_;\n" } @where);
	return [ split /\n/, $whole->safe_psql('postgres', $sql) ];
}
my $local = answers('trafficdb.locations');
my $global = answers('trafficdb_global.locations');
my @diff = grep { $local->[$_] ne $global->[$_] } 0 .. $#where;
is(scalar(@$global), $nq, "$nq queries answered by the global table");
is(scalar(@diff), 0, "the global table answers all $nq random queries as the whole map does")
  or diag(join("\n", map { "$where[$_]: whole $local->[$_], global $global->[$_]" } @diff[0 .. ($#diff < 4 ? $#diff : 4)]));
cmp_ok(scalar(grep { !/^0 / } @$local), '>', $nq / 2, 'most queries find rows');

done_testing();
