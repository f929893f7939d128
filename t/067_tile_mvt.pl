# t/067_tile_mvt.pl: trafficdb.tile_mvt and tile_mvt_etag (issue 30,
# docs/tiles.md) as SQL callers meet them: the tile equals PostGIS's over the
# same rows, its ETag moves only when something in the tile changed, the
# permission model is trafficdb.locations', bad arguments are errors naming
# the value, and 100,000 random hostile calls end in a tile or one of those
# errors, never a crash.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 't';
use TdbTest;

my $node = tdb_node('tiles');
tdb_grid_map($node);

# traffic on every other road: speeds, congestion, an incident
$node->safe_psql('postgres', q{
	INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence, incident)
	SELECT id, (id % 70)::real, 50, (id % 5)::smallint, 80, CASE WHEN id % 13 = 0 THEN 'roadworks ' || id END
	  FROM roads WHERE id % 2 = 0;
	SELECT trafficdb.publish();
});

# ---- the bytes PostGIS makes of the same rows ----
# A plain scan of trafficdb.locations returns rows in map record order, the
# order tile_mvt emits features in (test/tiles_diff.py checks thousands of
# tiles on real maps; these are the same rule on the grid map).
my $z14 = '14, 9326, 4742';
sub reference
{
	my ($tile, $opts) = @_;
	my ($z, $x, $y) = split /,\s*/, $tile;
	my ($extent, $buffer) = @$opts;
	return qq{SELECT coalesce((SELECT ST_AsMVT(r, 'traffic', $extent, 'geom', 'location_id')
	           FROM (SELECT l.location_id, l.name, l.road_class, l.speed_kmh, l.free_flow_kmh, l.congestion,
	                        l.incident, l.changed_generation,
	                        ST_AsMVTGeom(ST_Transform(l.geom, 3857), ST_TileEnvelope($z, $x, $y), $extent, $buffer, true) AS geom
	                   FROM trafficdb.locations l) r
	          WHERE r.geom IS NOT NULL), ''::bytea)};
}
for my $case ([ '10, 582, 296', '{}', 4096, 64 ], [ $z14, '{}', 4096, 64 ], [ '16, 37306, 18969', '{}', 4096, 64 ],
	[ $z14, '{"extent": 256, "buffer": 0}', 256, 0 ], [ '16, 37306, 18969', '{"extent": 8192, "buffer": 256}', 8192, 256 ])
{
	my ($tile, $opts, $extent, $buffer) = @$case;
	my $r = $node->safe_psql('postgres', "SELECT length(t), t = (" . reference($tile, [ $extent, $buffer ]) . ")
		FROM (SELECT trafficdb.tile_mvt($tile, '$opts') AS t) s");
	like($r, qr/^[1-9]\d*\|t$/, "tile $tile $opts is byte for byte ST_AsMVT(ST_AsMVTGeom(...)) of the same rows ($r)");
}
is($node->safe_psql('postgres', "SELECT trafficdb.tile_mvt_web($z14) = trafficdb.tile_mvt($z14)"), 't',
	'tile_mvt_web (what Martin serves) is tile_mvt with the default options');
is($node->safe_psql('postgres', 'SELECT length(trafficdb.tile_mvt(18, 0, 0))'), '0',
	'an empty tile is an empty bytea, as ST_AsMVT over no rows');

# ---- ETag: names the last generation that changed the tile ----
my $etag = sub { $node->safe_psql('postgres', "SELECT etag FROM trafficdb.tile_mvt_etag($z14)") };
my $before = $etag->();
like($before, qr/^\d+-[0-9a-f]+-[0-9a-f]{8}$/, "ETag has the form G-map-crc ($before)");
# a road outside the tile changes: same bytes, same ETag
{
	# roads 1..2000 are all near the tile; pick one the z14 tile does not hold
	my $out = $node->safe_psql('postgres', qq{
		SELECT min(location_id) FROM trafficdb.locations
		 WHERE ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope($z14), 4096, 64, true) IS NULL});
	if ($out ne '')
	{
		$node->safe_psql('postgres', "INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($out, 3); SELECT trafficdb.publish()");
		is($etag->(), $before, 'a publication that changes no road of the tile keeps its ETag');
	}
	else
	{
		pass('every road is in the tile: no unrelated road to change');
	}
}
my $in_tile = $node->safe_psql('postgres', qq{
	SELECT min(location_id) FROM trafficdb.locations
	 WHERE ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope($z14), 4096, 64, true) IS NOT NULL});
my $gen = $node->safe_psql('postgres',
	"INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES ($in_tile, 1); SELECT trafficdb.publish()");
my $after = $etag->();
isnt($after, $before, 'a change to a road of the tile changes its ETag');
like($after, qr/^$gen-/, "and the ETag names that generation ($gen)");

# ---- NULLs and bad arguments: clear errors, before any shared memory is read ----
is($node->safe_psql('postgres', 'SELECT trafficdb.tile_mvt(NULL, 0, 0) IS NULL, trafficdb.tile_mvt(0, NULL, 0) IS NULL, '
		. 'length(trafficdb.tile_mvt(0, 0, 0, NULL)) >= 0, (trafficdb.tile_mvt_etag(1, NULL, 0)).etag IS NULL'),
	't|t|t|t', 'a NULL address is a NULL tile; NULL options are the defaults');
my @bad = (
	[ '31, 0, 0', qr/tile zoom 31 is out of range: expected 0 to 30/ ],
	[ '-1, 0, 0', qr/tile zoom -1 is out of range/ ],
	[ '3, 8, 0', qr/tile column x = 8 is outside the grid of zoom 3: expected 0 to 7/ ],
	[ '3, 0, -1', qr/tile row y = -1 is outside the grid of zoom 3/ ],
	[ q{3, 0, 0, '[1]'}, qr/tile options must be a JSON object, not an array/ ],
	[ q{3, 0, 0, '7'}, qr/tile options must be a JSON object, not a scalar/ ],
	[ q{3, 0, 0, '{"extent": "big"}'}, qr/tile option "extent" must be an integer, not "big"/ ],
	[ q{3, 0, 0, '{"extent": 1.5}'}, qr/tile option "extent" = 1.5 is out of range/ ],
	[ q{3, 0, 0, '{"extent": 0}'}, qr/tile option "extent" = 0 is out of range: expected an integer from 1 to 65536/ ],
	[ q{3, 0, 0, '{"budget": 10}'}, qr/tile option "budget" = 10 is out of range/ ],
	[ q{3, 0, 0, '{"buffer": 300, "extent": 256}'}, qr/tile option "buffer" = 300 is larger than the extent 256/ ],
	[ q{3, 0, 0, '{"extent": 1e400}'}, qr/tile option "extent" = .* is out of range/ ],
	[ q{3, 0, 0, '{"tilesize": 512}'}, qr/unknown tile option "tilesize"/ ],
	[ q{3, 0, 0, '{"extent": {"a": 1}}'}, qr/tile option "extent" must be an integer, not an array or object/ ],
);
for my $b (@bad)
{
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT trafficdb.tile_mvt($b->[0])");
	like($err, qr/22023/, "tile_mvt($b->[0]) is invalid_parameter_value");
	like($err, $b->[1], '... naming the value');
}
# a long non-ASCII key or value is cut for the message on a character
# boundary: half a character made the message invalid UTF-8, and a client
# in another encoding got "invalid byte sequence" (22021) instead
for my $o ([ q{jsonb_build_object('a' || repeat(U&'\00e9', 100), 1)}, qr/ERROR:  unknown tile option "a/ ],
	[ q{jsonb_build_object('extent', 'a' || repeat(U&'\00e9', 100))}, qr/ERROR:  tile option "extent" must be an integer, not "a/ ])
{
	my ($ret, $out, $err) = $node->psql('postgres', "SET client_encoding = 'LATIN1'; SELECT trafficdb.tile_mvt(0, 0, 0, $o->[0])");
	like($err, $o->[1], "a non-ASCII option cut for the message stays valid text ($err)");
}
is($node->safe_psql('postgres', qq{SELECT trafficdb.tile_mvt($z14, '{"_": 1, "_cachebuster": [1, {}]}') = trafficdb.tile_mvt($z14)}),
	't', 'keys starting with "_" are ignored (a tile server\'s cache buster)');

# ---- permissions: as trafficdb.locations (PUBLIC may read it by default) ----
$node->safe_psql('postgres', q{
	REVOKE SELECT ON trafficdb.locations FROM PUBLIC;
	CREATE ROLE reader LOGIN; CREATE ROLE nobody LOGIN;
	GRANT USAGE ON SCHEMA trafficdb TO reader, nobody;
	GRANT SELECT ON trafficdb.locations TO reader;});
my ($ret, $out, $err) = $node->psql('postgres', "SET ROLE nobody; SELECT trafficdb.tile_mvt($z14)");
like($err, qr/permission denied for table trafficdb.locations/, 'a role that may not read trafficdb.locations gets no tile');
is($node->safe_psql('postgres', "SET ROLE reader; SELECT length(trafficdb.tile_mvt($z14)) > 0"), 't',
	'a role that may read it gets the tile');
$node->safe_psql('postgres', 'REVOKE SELECT ON trafficdb.locations FROM reader');
($ret, $out, $err) = $node->psql('postgres', "SET ROLE reader; SELECT trafficdb.tile_mvt_etag($z14)");
like($err, qr/permission denied for table trafficdb.locations/, 'revoking SELECT on the table revokes the tiles');

# ---- 100,000 hostile calls: a tile or a named error, never a crash ----
my $hostile = $node->safe_psql('postgres', q{
	CREATE TEMP TABLE outcome (state text, n int);
	DO $$
	DECLARE
	  keys text[] := ARRAY['extent', 'buffer', 'budget', '_x', 'EXTENT', '', 'a"b', 'extent ', repeat('k', 200)];
	  vals text[] := ARRAY['0', '1', '-1', '4096', '65536', '65537', '2147483648', '-9223372036854775809',
	                       '1e308', '-0', '0.5', 'null', 'true', '"4096"', '[]', '{}', '[1,[2,[3]]]',
	                       '{"extent": 1}', repeat('[', 500) || repeat(']', 500), '16777216', '1024', '512'];
	  ints bigint[] := ARRAY[0, 1, -1, 30, 31, 2147483647, -2147483648, 1024, 65535, 16383];
	  z int; x int; y int; o jsonb; s text; st text; n int;
	  counts jsonb := '{}';
	BEGIN
	  PERFORM setseed(0.67);
	  FOR i IN 1 .. 100000 LOOP
	    z := CASE WHEN random() < 0.6 THEN floor(random() * 19)::int ELSE ints[1 + floor(random() * 10)::int]::int END;
	    x := CASE WHEN random() < 0.5 AND z BETWEEN 0 AND 30 THEN floor(random() * (2.0 ^ z))::int
	              ELSE ints[1 + floor(random() * 10)::int]::int END;
	    y := CASE WHEN random() < 0.5 AND z BETWEEN 0 AND 30 THEN floor(random() * (2.0 ^ z))::int
	              ELSE ints[1 + floor(random() * 10)::int]::int END;
	    IF random() < 0.1 THEN z := NULL; END IF;
	    s := '{';
	    FOR k IN 1 .. floor(random() * 4)::int LOOP
	      s := s || CASE WHEN k > 1 THEN ',' ELSE '' END || to_json(keys[1 + floor(random() * 9)::int])::text
	             || ':' || vals[1 + floor(random() * 22)::int];
	    END LOOP;
	    s := s || '}';
	    o := CASE WHEN random() < 0.05 THEN NULL WHEN random() < 0.05 THEN '[1]'::jsonb ELSE s::jsonb END;
	    BEGIN
	      IF random() < 0.5 THEN
	        PERFORM length(trafficdb.tile_mvt(z, x, y, o));
	      ELSE
	        PERFORM (trafficdb.tile_mvt_etag(z, x, y, o)).etag;
	      END IF;
	      st := 'ok';
	    EXCEPTION WHEN OTHERS THEN
	      st := SQLSTATE;
	    END;
	    counts := jsonb_set(counts, ARRAY[st], to_jsonb(coalesce((counts->>st)::int, 0) + 1));
	  END LOOP;
	  INSERT INTO outcome SELECT key, value::int FROM jsonb_each_text(counts);
	END $$;
	SELECT string_agg(state || '=' || n, ' ' ORDER BY state) FROM outcome;
});
note("hostile calls: $hostile");
my %seen = map { split /=/ } split / /, $hostile;
my $total = 0;
$total += $_ for values %seen;
is($total, 100000, 'all 100,000 hostile calls returned');
is_deeply([ grep { !/^(ok|22023|54001)$/ } sort keys %seen ], [],
	'each ended in a tile or invalid_parameter_value (54001: the 500-deep JSON is PostgreSQL\'s own limit)');
cmp_ok($seen{ok} // 0, '>', 1000, 'and many made tiles');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trafficdb.locations'), '2000', 'the server is up and serves');
unlike(slurp_file($node->logfile), qr/terminated by signal|server process .* was terminated/, 'no backend crashed');

done_testing();
