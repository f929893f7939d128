/* extension/trafficdb--0.1.0.sql: install script of trafficdb 0.1.0 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION trafficdb" to load this file. \quit

-- The schema is a member of the extension, so DROP EXTENSION removes it;
-- an existing schema of that name makes CREATE EXTENSION fail instead of
-- mixing our objects with somebody else's.
CREATE SCHEMA trafficdb;

-- Refuse to install on a server that did not preload the library: without
-- the daemon and its shared memory the extension would be half-working.
CREATE FUNCTION trafficdb._assert_preloaded() RETURNS void
    AS 'MODULE_PATHNAME', 'trafficdb_assert_preloaded'
    LANGUAGE C STRICT;
SELECT trafficdb._assert_preloaded();
-- Internal functions (named _...), trigger functions and the wrappers'
-- handlers and validators are not for users: each is revoked from PUBLIC
-- where it is created.  Kept executable by PUBLIC, because PostgreSQL checks
-- EXECUTE as the user where they are used: _feed_part (the feed's DEFAULT),
-- _feed_owned (its CHECK), _status and _readers (the status and readers
-- views), _check_changes_since (changes_since), _region_fit (load_map
-- reads the source as its caller), _asmvt (tile()); none writes anything.
REVOKE ALL ON FUNCTION trafficdb._assert_preloaded() FROM PUBLIC;

-- Text in shared memory (names, incidents) is UTF-8, for every reader inside
-- and outside the server: a database in another encoding would hand
-- external readers its own bytes, and read theirs as its own.
DO $$
BEGIN
  IF pg_catalog.current_setting('server_encoding') OPERATOR(pg_catalog.<>) 'UTF8' THEN
    RAISE EXCEPTION 'trafficdb needs a UTF8 database; database "%" is %',
      pg_catalog.current_database(), pg_catalog.current_setting('server_encoding')
      USING ERRCODE = 'feature_not_supported',
            HINT = 'Create the database with ENCODING ''UTF8'' (and a matching locale or TEMPLATE template0).';
  END IF;
END $$;

CREATE FUNCTION trafficdb.version() RETURNS text
    AS 'MODULE_PATHNAME', 'trafficdb_version'
    LANGUAGE C STRICT STABLE PARALLEL SAFE;
COMMENT ON FUNCTION trafficdb.version() IS
    'version of the loaded trafficdb library';

-- ---------------------------------------------------------------------------
-- The daemon's tables: the persistent truth behind what it publishes.
-- ---------------------------------------------------------------------------

-- Where the map comes from (one row; written by the daemon after a load).
CREATE TABLE trafficdb.map_source (
    singleton           boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    source              regclass NOT NULL,
    id_column           name NOT NULL,
    geom_column         name NOT NULL,
    class_column        name,
    name_column         name,
    speed_limit_column  name,
    oneway_column       name,
    region              text,             -- the region whose locations were loaded (NULL: all)
    loaded_by           oid NOT NULL,     -- the role whose privileges read the source
    locations           bigint NOT NULL,
    loaded_at           timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE trafficdb.map_source IS
    'the table and columns the map was loaded from; the daemon reloads it on start';

-- Traffic updates: applications INSERT or COPY here (naming the columns);
-- the daemon consumes committed rows, publishes them and logs each
-- generation in trafficdb.generations.  The feed is four partitions: new
-- rows go to the one trafficdb._feed_part() names; each cycle the daemon
-- points new rows at another one, takes the others (each only if the writers
-- in it have finished: one holding its transaction open delays only the rows
-- of its partition, which new rows then avoid), reads them whole and
-- truncates them in the transaction that logs the generation.  No row is
-- deleted one by one, and there is no index to maintain: a feed row costs
-- what a row of a plain heap costs.
CREATE FUNCTION trafficdb._feed_part() RETURNS smallint
AS 'MODULE_PATHNAME', 'trafficdb_feed_part'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION trafficdb._feed_part IS
    'the feed partition new rows go to (the daemon flips it each cycle); the same for every row of one transaction, so that a transaction is published in one generation';

CREATE TABLE trafficdb.feed (
    seq            bigserial,
    location_id    bigint NOT NULL,
    speed_kmh      real,
    free_flow_kmh  real,
    congestion     smallint,
    confidence     smallint,
    incident       text,
    observed_at    timestamptz NOT NULL DEFAULT now(),
    part           smallint NOT NULL DEFAULT trafficdb._feed_part()
) PARTITION BY LIST (part);
CREATE TABLE trafficdb.feed_0 PARTITION OF trafficdb.feed FOR VALUES IN (0);
CREATE TABLE trafficdb.feed_1 PARTITION OF trafficdb.feed FOR VALUES IN (1);
CREATE TABLE trafficdb.feed_2 PARTITION OF trafficdb.feed FOR VALUES IN (2);
CREATE TABLE trafficdb.feed_3 PARTITION OF trafficdb.feed FOR VALUES IN (3);
-- seq only orders rows of one cycle (ties on observed_at) and names rejects
ALTER SEQUENCE trafficdb.feed_seq_seq CACHE 1000;
COMMENT ON TABLE trafficdb.feed IS
    'traffic updates to publish: speed and free-flow speed in km/h [0, 400], congestion 0 (free) to 4 (standstill), confidence 0-100';

-- Only the database the daemon serves (trafficdb.database) has a consumer:
-- feed rows anywhere else would be accepted and never published.  There the
-- feed gets a statement trigger that refuses rows (an empty COPY, as in a
-- restore, passes); the served database gets none, so its feed pays nothing.
CREATE FUNCTION trafficdb._feed_database_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
  IF pg_catalog.current_database() OPERATOR(pg_catalog.<>)
     pg_catalog.current_setting('trafficdb.database', true)
     AND EXISTS (SELECT 1 FROM new_rows) THEN
    RAISE EXCEPTION 'feed rows in database "%" would never be published: trafficdb''s daemon serves database "%"',
      pg_catalog.current_database(), pg_catalog.current_setting('trafficdb.database', true)
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'Write the feed in that database, or set trafficdb.database and restart the server.';
  END IF;
  RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION trafficdb._feed_database_guard() FROM PUBLIC;

DO $$
BEGIN
  IF pg_catalog.current_database() OPERATOR(pg_catalog.<>)
     pg_catalog.current_setting('trafficdb.database', true) THEN
    RAISE WARNING 'trafficdb installed in database "%", but its daemon serves database "%"',
      pg_catalog.current_database(), pg_catalog.current_setting('trafficdb.database', true)
      USING DETAIL = 'Maps, feed rows and publications work only in the database the daemon serves; here trafficdb.feed refuses rows.',
            HINT = 'Create the extension in that database, or set trafficdb.database and restart the server.';
    CREATE TRIGGER feed_database_guard AFTER INSERT ON trafficdb.feed
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
      EXECUTE FUNCTION trafficdb._feed_database_guard();
  END IF;
END $$;

-- The generation log: the durable truth behind every publication (see
-- docs/write-path.md).  Each published generation appends one D record (the
-- changed entries, in the codec of src/genlog/genlog.h); now and then the
-- daemon writes a checkpoint (C parts + a K marker: the whole state of one
-- generation, with location ids).  After a crash or restart the daemon
-- replays the newest checkpoint and the D records after it, and checks that
-- every replayed generation's traffic object has the checksum recorded at
-- its publication (object_crc).  Written by the daemon only.
--
-- The log is eight segments (partitions trafficdb_log.generations_0 .. _7,
-- by the segment column: a schema PUBLIC cannot use, so that no role without
-- privileges can lock a segment by naming it).  The daemon appends to one segment at a time and,
-- before a checkpoint, moves to the next one (if empty) once the current one
-- spans a seventh of what the retention settings keep.  A trim empties
-- (trafficdb.log_trim: TRUNCATE, or DELETE) every other segment whose newest
-- record is older than what they keep, oldest first (docs/write-path.md).
-- The primary key is per segment: the daemon never writes a generation's
-- record twice, in one segment or in two.
CREATE TABLE trafficdb.generations (
    generation   bigint      NOT NULL,
    kind         "char"      NOT NULL CHECK (kind IN ('D', 'C', 'K')),
    part         integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,      -- the traffic object's created_at (exactly)
    map_id       bigint      NOT NULL,      -- the map whose record order the body uses
    entries      bigint      NOT NULL,      -- D, C: entries in body; K: locations of the map
    object_crc   bigint,                    -- D, K: the published traffic object's checksum
    body_crc     bigint      NOT NULL,      -- CRC-32C of body
    body         bytea       NOT NULL,
    segment      smallint    NOT NULL DEFAULT 0 CHECK (segment BETWEEN 0 AND 7)
) PARTITION BY LIST (segment);
CREATE SCHEMA trafficdb_log;
COMMENT ON SCHEMA trafficdb_log IS 'the segments of the generation log trafficdb.generations';
DO $$
BEGIN
  FOR s IN 0 .. 7 LOOP
    EXECUTE format('CREATE TABLE trafficdb_log.%I PARTITION OF trafficdb.generations FOR VALUES IN (%s)',
                   'generations_' || s, s);
    EXECUTE format('ALTER TABLE trafficdb_log.%I ADD PRIMARY KEY (generation, kind, part)', 'generations_' || s);
    -- a segment emptied by DELETE is written again: VACUUM need not shorten
    -- its file (an AccessExclusiveLock hot standbys would replay)
    EXECUTE format('ALTER TABLE trafficdb_log.%I SET (vacuum_truncate = false, toast.vacuum_truncate = false)', 'generations_' || s);
    EXECUTE format('COMMENT ON TABLE trafficdb_log.%I IS %L', 'generations_' || s,
                   'segment ' || s || ' of the generation log trafficdb.generations');
    PERFORM pg_catalog.pg_extension_config_dump(format('trafficdb_log.%I', 'generations_' || s), '');
  END LOOP;
END $$;
COMMENT ON TABLE trafficdb.generations IS
    'the generation log: one record of changed traffic per publication, and checkpoints of the whole state; written by the daemon';
-- PostgreSQL compresses the bodies (lz4 where the server was built with it:
-- pglz costs the daemon several times more), in every segment
DO $$
BEGIN
  ALTER TABLE trafficdb.generations ALTER COLUMN body SET COMPRESSION lz4;
  FOR s IN 0 .. 7 LOOP
    EXECUTE format('ALTER TABLE trafficdb_log.%I ALTER COLUMN body SET COMPRESSION lz4', 'generations_' || s);
  END LOOP;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
  NULL;
END $$;

-- Feed rows the daemon refused, with the reason.  Never silently dropped.
CREATE TABLE trafficdb.feed_rejects (
    seq            bigint NOT NULL,
    location_id    bigint,
    reason         text NOT NULL,
    rejected_at    timestamptz NOT NULL DEFAULT now()
);

-- The last generation published, so generations keep counting up across
-- restarts.  Its one row is written by the daemon at its first publication
-- (no row = generation 0), so that pg_dump can carry it: a restore must not
-- start the generations again from 0.
CREATE TABLE trafficdb.daemon_state (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation     bigint NOT NULL DEFAULT 0,
    published_at   timestamptz,
    -- the newest generation the generation log must rebuild (written with
    -- it); NULL after repair_log.  A log that ends before it lost records.
    log_end        bigint
);

SELECT pg_catalog.pg_extension_config_dump('trafficdb.map_source', '');
SELECT pg_catalog.pg_extension_config_dump('trafficdb.feed_0', '');
SELECT pg_catalog.pg_extension_config_dump('trafficdb.feed_1', '');
SELECT pg_catalog.pg_extension_config_dump('trafficdb.feed_2', '');
SELECT pg_catalog.pg_extension_config_dump('trafficdb.feed_3', '');
SELECT pg_catalog.pg_extension_config_dump('trafficdb.feed_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('trafficdb.feed_rejects', '');
SELECT pg_catalog.pg_extension_config_dump('trafficdb.daemon_state', '');

-- ---------------------------------------------------------------------------
-- Functions
-- ---------------------------------------------------------------------------

CREATE FUNCTION trafficdb.load_map(
    source              regclass,
    id_column           name DEFAULT 'id',
    geom_column         name DEFAULT 'geom',
    class_column        name DEFAULT NULL,
    name_column         name DEFAULT NULL,
    speed_limit_column  name DEFAULT NULL,
    oneway_column       name DEFAULT NULL,
    region              text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'trafficdb_load_map'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION trafficdb.load_map IS
    'load road segments (LineStrings) from a PostGIS table into shared memory and publish them (with region: only the segments trafficdb.region_of() gives to that region); returns the number of locations';

CREATE FUNCTION trafficdb.publish(wait boolean DEFAULT true) RETURNS bigint
AS 'MODULE_PATHNAME', 'trafficdb_publish'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION trafficdb.publish IS
    'consume the feed and publish now; with wait, returns the generation published';

-- Loading maps and forcing publication are for administrators.
REVOKE ALL ON FUNCTION trafficdb.load_map FROM PUBLIC;
REVOKE ALL ON FUNCTION trafficdb.publish FROM PUBLIC;

-- After the daemon found the generation log damaged (trafficdb.status.log_damaged_at
-- is not NULL; nothing is published until then): drop the records from the
-- damaged generation on, so that the state before it is published as a new
-- generation.  Values published from the dropped generations are lost.
CREATE FUNCTION trafficdb.repair_log(accept_loss boolean) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
  at bigint := (SELECT s.log_damaged_at FROM trafficdb._status() s);
  dropped bigint;
BEGIN
  IF accept_loss IS NOT TRUE THEN
    RAISE EXCEPTION 'repair_log drops generations from the log: call it with accept_loss => true'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- the status is the served database's: its log is the one to repair
  IF pg_catalog.current_database() OPERATOR(pg_catalog.<>)
     pg_catalog.current_setting('trafficdb.database', true) THEN
    RAISE EXCEPTION 'repair_log repairs the generation log of database "%", which trafficdb''s daemon serves',
      pg_catalog.current_setting('trafficdb.database', true)
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  IF at IS NULL THEN
    RAISE EXCEPTION 'the generation log is not damaged: nothing to repair'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  DELETE FROM trafficdb.generations WHERE generation OPERATOR(pg_catalog.>=) at;
  GET DIAGNOSTICS dropped = ROW_COUNT;
  -- the generations after the log's new end are given up: the next start must not miss them
  UPDATE trafficdb.daemon_state SET log_end = NULL;
  RAISE WARNING 'trafficdb: dropped % record(s) of the generation log from generation % on', dropped, at;
  RETURN at;
END $$;
COMMENT ON FUNCTION trafficdb.repair_log IS
    'drop the damaged end of the generation log (from status.log_damaged_at on); the daemon then publishes the state before it';
REVOKE ALL ON FUNCTION trafficdb.repair_log FROM PUBLIC;

CREATE FUNCTION trafficdb._status(
    OUT daemon_pid integer, OUT generation bigint, OUT map_id bigint, OUT locations bigint,
    OUT map_bytes bigint, OUT traffic_bytes bigint, OUT bytes_per_location double precision,
    OUT shm_bytes bigint, OUT last_map_build_ms double precision,
    OUT last_publish_ms double precision, OUT last_publish_at timestamptz,
    OUT publishes bigint, OUT publishes_refused bigint,
    OUT feed_rows_consumed bigint, OUT feed_rows_rejected bigint,
    OUT last_feed_rows_per_sec double precision, OUT last_error text,
    OUT versions_revoked bigint,
    OUT log_first_generation bigint, OUT log_checkpoint_generation bigint,
    OUT map_generation bigint, OUT changes_from_generation bigint,
    OUT log_damaged_at bigint, OUT last_log_bytes bigint,
    OUT replayed_generations bigint, OUT replay_mismatches bigint,
    OUT last_replay_ms double precision, OUT feed_parts_skipped bigint,
    OUT role text, OUT replay_lag_generations bigint, OUT replay_lag_ms double precision,
    OUT region text, OUT subscriptions bigint, OUT last_events bigint, OUT last_match_ms double precision,
    OUT subscribers bigint, OUT events_delivered bigint, OUT events_dropped bigint,
    OUT match_overruns bigint, OUT match_records_skipped bigint, OUT subscriptions_unindexed bigint,
    OUT notify_sent bigint, OUT notify_dropped bigint,
    OUT last_error_at timestamptz, OUT last_publish_entries bigint,
    OUT shm_huge_bytes bigint)
AS 'MODULE_PATHNAME', 'trafficdb_status'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW trafficdb.status AS
SELECT s.*,
       (SELECT count(*) FROM trafficdb.feed) AS feed_backlog,
       (SELECT now() - min(observed_at) FROM trafficdb.feed) AS feed_lag
  FROM trafficdb._status() s;
COMMENT ON VIEW trafficdb.status IS
    'the daemon: active generation (never going back, also while a restarted daemon rebuilds), object sizes, publish and map build times, feed throughput and backlog, the last error and when it happened (kept after it is resolved)';

CREATE FUNCTION trafficdb._readers(
    OUT slot integer, OUT kind text, OUT pid integer, OUT generation bigint,
    OUT pinned_since timestamptz, OUT pinned_seconds double precision, OUT late boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'trafficdb_readers'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW trafficdb.readers AS SELECT * FROM trafficdb._readers();
COMMENT ON VIEW trafficdb.readers IS
    'readers (backends and external processes) pinning a published version; late = held past trafficdb.reader_pin_timeout';

-- Reading is for everyone; writing the feed, loading maps and publishing
-- are granted by an administrator (GRANT INSERT ON trafficdb.feed TO app;
-- GRANT USAGE ON SEQUENCE trafficdb.feed_seq_seq TO app: seq is its default).
GRANT USAGE ON SCHEMA trafficdb TO PUBLIC;
GRANT SELECT ON trafficdb.status, trafficdb.readers TO PUBLIC;

-- ---------------------------------------------------------------------------
-- The locations foreign table: the published map and traffic, read from
-- shared memory, with key and box pushdown (see fdw/locations.c).
-- ---------------------------------------------------------------------------

CREATE FUNCTION trafficdb.locations_fdw_handler() RETURNS fdw_handler
AS 'MODULE_PATHNAME', 'trafficdb_locations_handler'
LANGUAGE C STRICT;

CREATE FUNCTION trafficdb.locations_fdw_validator(text[], oid) RETURNS void
AS 'MODULE_PATHNAME', 'trafficdb_locations_validator'
LANGUAGE C STRICT;

REVOKE ALL ON FUNCTION trafficdb.locations_fdw_handler() FROM PUBLIC;
REVOKE ALL ON FUNCTION trafficdb.locations_fdw_validator(text[], oid) FROM PUBLIC;

CREATE FOREIGN DATA WRAPPER trafficdb_locations
    HANDLER trafficdb.locations_fdw_handler
    VALIDATOR trafficdb.locations_fdw_validator;

CREATE SERVER trafficdb FOREIGN DATA WRAPPER trafficdb_locations;

CREATE FOREIGN TABLE trafficdb.locations (
    location_id      bigint,
    geom             geometry(LineString, 4326),
    road_class       text,
    name             text,
    length_m         double precision,
    speed_limit_kmh  smallint,
    oneway           boolean,
    speed_kmh        real,
    free_flow_kmh    real,
    congestion       smallint,
    confidence       smallint,
    incident         text,
    updated_at       timestamptz,
    generation       bigint,
    changed_generation bigint
) SERVER trafficdb;
COMMENT ON FOREIGN TABLE trafficdb.locations IS
    'the published road map with its live traffic, read from shared memory; location_id and geom && box are pushed down';
GRANT SELECT ON trafficdb.locations TO PUBLIC;

-- Current traffic per location: what the daemon published (the generation
-- log is what it is rebuilt from).
CREATE VIEW trafficdb.traffic_state AS
SELECT location_id, speed_kmh, free_flow_kmh, congestion, confidence, incident,
       updated_at AS observed_at, changed_generation AS generation
  FROM trafficdb.locations WHERE updated_at IS NOT NULL;
COMMENT ON VIEW trafficdb.traffic_state IS
    'the published traffic of every location that has any (a view over trafficdb.locations)';

GRANT SELECT ON trafficdb.traffic_state TO PUBLIC;

-- The plain way to read the published map, and what changed: both over the
-- foreign table, so one statement reads one generation.  current_traffic()
-- has no SET search_path, so that PostgreSQL can inline it (a caller's WHERE
-- then reaches the foreign scan): its only operator is qualified.
CREATE FUNCTION trafficdb.current_traffic(
    location_ids bigint[] DEFAULT NULL,
    OUT location_id bigint, OUT geom geometry, OUT road_class text, OUT name text,
    OUT length_m double precision, OUT speed_limit_kmh smallint, OUT oneway boolean,
    OUT speed_kmh real, OUT free_flow_kmh real, OUT congestion smallint,
    OUT confidence smallint, OUT incident text, OUT updated_at timestamptz,
    OUT generation bigint)
RETURNS SETOF record
LANGUAGE sql STABLE AS $$
  SELECT l.location_id, l.geom, l.road_class, l.name, l.length_m, l.speed_limit_kmh, l.oneway,
         l.speed_kmh, l.free_flow_kmh, l.congestion, l.confidence, l.incident, l.updated_at, l.generation
    FROM trafficdb.locations l WHERE $1 IS NULL
  UNION ALL
  SELECT l.location_id, l.geom, l.road_class, l.name, l.length_m, l.speed_limit_kmh, l.oneway,
         l.speed_kmh, l.free_flow_kmh, l.congestion, l.confidence, l.incident, l.updated_at, l.generation
    FROM trafficdb.locations l WHERE l.location_id OPERATOR(pg_catalog.=) ANY ($1)
$$;
COMMENT ON FUNCTION trafficdb.current_traffic IS
    'the published map with its current traffic (all locations, or those listed)';

CREATE FUNCTION trafficdb._check_changes_since(generation bigint) RETURNS void
AS 'MODULE_PATHNAME', 'trafficdb_check_changes_since'
LANGUAGE C STRICT STABLE;

CREATE FUNCTION trafficdb.changes_since(
    generation bigint,
    OUT location_id bigint, OUT changed_generation bigint,
    OUT speed_kmh real, OUT free_flow_kmh real, OUT congestion smallint,
    OUT confidence smallint, OUT incident text, OUT updated_at timestamptz,
    OUT snapshot_generation bigint)
RETURNS SETOF record
LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
BEGIN
  IF $1 < 0 THEN
    RAISE EXCEPTION 'generation % is negative; generations count up from 1', $1
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- changes after $1 are known only back to what the generation log keeps
  PERFORM trafficdb._check_changes_since($1);
  RETURN QUERY
    SELECT l.location_id, l.changed_generation, l.speed_kmh, l.free_flow_kmh, l.congestion,
           l.confidence, l.incident, l.updated_at, l.generation
      FROM trafficdb.locations l WHERE l.changed_generation > $1;
END $$;
COMMENT ON FUNCTION trafficdb.changes_since IS
    'locations whose traffic changed after the given generation, as of the current snapshot';

-- ---------------------------------------------------------------------------
-- For map clients: vector tiles and GeoJSON of the live traffic.
-- ---------------------------------------------------------------------------

-- PostGIS may live in any schema, and that schema may be one other roles
-- can write (public, before PostgreSQL 15 for everyone).  Through a
-- search_path holding it, a role's public.st_asmvtgeom(geometry, geometry,
-- ...) or st_asmvt(record, ...) matches a call better than PostGIS's own
-- and runs as whoever calls tile() -- a superuser, the web app.  So these
-- functions run with search_path = pg_catalog and are created here with
-- PostGIS's schema (found at install time, @pg@ below) written into every
-- call, with arguments of exactly PostGIS's declared types and every
-- defaulted argument given: PostGIS's function is then an exact match no
-- other function can beat (one planted with extra defaulted arguments can
-- only make the call ambiguous, an error).  ST_AsMVT takes anyelement, which
-- a record argument would beat: tile() aggregates with trafficdb._asmvt,
-- PostGIS's own transition and final functions over a row type that no
-- other role may use (so none can define a function taking it).  tile()
-- runs with its caller's rights, so _asmvt stays executable by PUBLIC.
DO $do$
DECLARE
  pg text := (SELECT pg_catalog.quote_ident(n.nspname)
                FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
               WHERE e.extname OPERATOR(pg_catalog.=) 'postgis');
BEGIN
  EXECUTE pg_catalog.replace($sql$
CREATE TYPE trafficdb._tile_row AS (
    location_id bigint, name text, road_class text, speed_kmh real, free_flow_kmh real,
    congestion smallint, incident text, generation bigint, geom @pg@.geometry);
REVOKE USAGE ON TYPE trafficdb._tile_row FROM PUBLIC;
-- (its transition function refuses a NULL row, then calls PostGIS's)
CREATE FUNCTION trafficdb._asmvt_transfn(internal, trafficdb._tile_row, text, integer, text) RETURNS internal
    AS 'MODULE_PATHNAME', 'trafficdb_asmvt_transfn' LANGUAGE C PARALLEL SAFE;
REVOKE ALL ON FUNCTION trafficdb._asmvt_transfn(internal, trafficdb._tile_row, text, integer, text) FROM PUBLIC;
CREATE AGGREGATE trafficdb._asmvt(trafficdb._tile_row, text, integer, text) (
    SFUNC = trafficdb._asmvt_transfn, STYPE = internal, FINALFUNC = @pg@.pgis_asmvt_finalfn,
    COMBINEFUNC = @pg@.pgis_asmvt_combinefn, SERIALFUNC = @pg@.pgis_asmvt_serialfn,
    DESERIALFUNC = @pg@.pgis_asmvt_deserialfn, PARALLEL = SAFE);

-- A Mapbox vector tile (layer "traffic") of tile z/x/y in Web Mercator.
CREATE FUNCTION trafficdb.tile(z integer, x integer, y integer) RETURNS bytea
LANGUAGE sql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog AS $f$
  SELECT trafficdb._asmvt(ROW(t.location_id, t.name, t.road_class, t.speed_kmh, t.free_flow_kmh, t.congestion,
                              t.incident, t.generation, t.geom)::trafficdb._tile_row,
                          'traffic'::text, 4096::integer, 'geom'::text)
    FROM (SELECT l.location_id, l.name, l.road_class, l.speed_kmh, l.free_flow_kmh, l.congestion, l.incident,
                 l.generation,
                 @pg@.st_asmvtgeom(@pg@.st_transform(l.geom, 3857::integer),
                                   @pg@.st_tileenvelope(z, x, y, '0102000020110F00000200000093107C45F81B73C193107C45F81B73C193107C45F81B734193107C45F81B7341'::@pg@.geometry,
                                                        0.0::double precision)::@pg@.box2d,
                                   4096::integer, 64::integer, true) AS geom
            FROM trafficdb.locations l
           WHERE l.geom OPERATOR(@pg@.&&)
                 @pg@.st_transform(@pg@.st_tileenvelope(z, x, y, '0102000020110F00000200000093107C45F81B73C193107C45F81B73C193107C45F81B734193107C45F81B7341'::@pg@.geometry,
                                                        0.015625::double precision),
                                   4326::integer)) t
   WHERE t.geom IS NOT NULL
$f$;

-- The rows of tile z/x/y, for tile servers that make the tile themselves:
-- tipg serves a set-returning function with parameters z, x and y as a
-- "function layer" (it fills them from the tile's path, then clips, encodes
-- and aggregates the rows with ST_AsMVTGeom and ST_AsMVT).  The box of the
-- tile (with a margin of 64/4096) goes to the R-tree in shared memory as
-- geom && box; a NULL argument gives no rows; a zoom outside [0, 30] or a
-- column or row outside the zoom's grid is an error naming it.
CREATE FUNCTION trafficdb.tile_features(z integer, x integer, y integer,
    OUT location_id bigint, OUT name text, OUT road_class text,
    OUT speed_kmh real, OUT free_flow_kmh real, OUT congestion smallint,
    OUT incident text, OUT generation bigint, OUT geom @pg@.geometry)
RETURNS SETOF record
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog AS $f$
DECLARE
  side bigint;
BEGIN
  IF z IS NULL OR x IS NULL OR y IS NULL THEN
    RETURN;
  END IF;
  IF z < 0 OR z > 30 THEN
    RAISE EXCEPTION 'tile zoom % is out of range: expected 0 to 30', z
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  side := 1::bigint << z;
  IF x < 0 OR x >= side THEN
    RAISE EXCEPTION 'tile column x = % is outside the grid of zoom %: expected 0 to %', x, z, side - 1
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF y < 0 OR y >= side THEN
    RAISE EXCEPTION 'tile row y = % is outside the grid of zoom %: expected 0 to %', y, z, side - 1
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
    SELECT l.location_id, l.name, l.road_class, l.speed_kmh, l.free_flow_kmh, l.congestion,
           l.incident, l.generation, l.geom
      FROM trafficdb.locations l
     WHERE l.geom OPERATOR(@pg@.&&)
           @pg@.st_transform(@pg@.st_tileenvelope(z, x, y, '0102000020110F00000200000093107C45F81B73C193107C45F81B73C193107C45F81B734193107C45F81B7341'::@pg@.geometry,
                                                  0.015625::double precision),
                             4326::integer);
END $f$;

-- A GeoJSON FeatureCollection of the locations in a lon/lat box.
CREATE FUNCTION trafficdb.geojson(min_lon float8, min_lat float8, max_lon float8, max_lat float8) RETURNS json
LANGUAGE sql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog AS $f$
  SELECT json_build_object('type', 'FeatureCollection', 'features', coalesce(json_agg(
           json_build_object('type', 'Feature', 'id', l.location_id,
                             'geometry', @pg@.st_asgeojson(l.geom, 9::integer, 8::integer)::json,
                             'properties', json_build_object('name', l.name, 'road_class', l.road_class,
                                 'speed_kmh', l.speed_kmh, 'free_flow_kmh', l.free_flow_kmh,
                                 'congestion', l.congestion, 'incident', l.incident,
                                 'updated_at', l.updated_at, 'generation', l.generation))
           ORDER BY l.location_id), '[]'::json))
    FROM trafficdb.locations l
   WHERE l.geom OPERATOR(@pg@.&&) @pg@.st_makeenvelope(min_lon, min_lat, max_lon, max_lat, 4326::integer)
$f$;
$sql$, '@pg@', pg);
END $do$;
-- The remaining risk is named at install: a role that may create objects in
-- PostGIS's schema can still define a function that makes one of these
-- calls ambiguous (an error, no escalation).
DO $do$
DECLARE
  nsp oid := (SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'postgis');
  who text := (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname)
                 FROM pg_catalog.pg_roles r
                WHERE NOT r.rolsuper AND r.rolname NOT LIKE 'pg\_%'
                  AND pg_catalog.has_schema_privilege(r.oid, nsp, 'CREATE'));
BEGIN
  IF who IS NOT NULL THEN
    RAISE WARNING 'PostGIS''s schema % is writable by roles that are not superusers: %', nsp::regnamespace, who
      USING DETAIL = 'trafficdb calls PostGIS by that schema with exact argument types, so their functions never run in its place, but a function of theirs can make tile() and region_of() fail as ambiguous.',
            HINT = pg_catalog.format('REVOKE CREATE ON SCHEMA %s FROM PUBLIC (and from those roles).', nsp::regnamespace);
  END IF;
END $do$;
COMMENT ON FUNCTION trafficdb.tile IS
    'vector tile z/x/y (layer "traffic": location_id, name, road_class, speeds, congestion, incident) of the live traffic';
COMMENT ON FUNCTION trafficdb.tile_features IS
    'the live traffic of tile z/x/y (Web Mercator) as rows, for a tile server''s function layer (tipg); the tile''s box is queried in the in-memory R-tree';
COMMENT ON FUNCTION trafficdb.geojson IS
    'the live traffic in a lon/lat box as a GeoJSON FeatureCollection';

-- The vector tile z/x/y of the live traffic encoded in C from the pinned
-- version in shared memory (module/tile.c, src/tile/; docs/tiles.md): the
-- bytes PostGIS's ST_AsMVT(ST_AsMVTGeom(...)) makes of the same rows, with
-- no geometry built per row.  Layer "traffic", feature id location_id.
-- Options (jsonb object of integers): extent (4096), buffer (64), budget
-- (512000 bytes: a low-zoom tile keeps the roads that matter most).  Martin
-- serves it as a function source; its comment is the TileJSON it merges.
-- The caller needs SELECT on trafficdb.locations.
CREATE FUNCTION trafficdb.tile_mvt(z integer, x integer, y integer, options jsonb DEFAULT '{}'::jsonb)
RETURNS bytea AS 'MODULE_PATHNAME', 'trafficdb_tile_mvt'
LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE FUNCTION trafficdb.tile_mvt_etag(z integer, x integer, y integer, options jsonb DEFAULT '{}'::jsonb,
                                        OUT mvt bytea, OUT etag text)
RETURNS record AS 'MODULE_PATHNAME', 'trafficdb_tile_mvt_etag'
LANGUAGE C STABLE PARALLEL RESTRICTED;
-- The same with the default options only, for tile servers: Martin passes
-- its URL's whole query string as a function's fourth argument, so through
-- tile_mvt anyone reaching the server could ask for 16 MB tiles of 65536
-- units with as wide a buffer (seconds of work each, a pool held).  A
-- three-argument function takes no query string: the web serves this one.
CREATE FUNCTION trafficdb.tile_mvt_web(z integer, x integer, y integer)
RETURNS bytea AS 'MODULE_PATHNAME', 'trafficdb_tile_mvt'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION trafficdb.tile_mvt IS
    '{"description": "live road traffic (trafficdb): vector tile z/x/y encoded in C from shared memory", "attribution": "© OpenStreetMap contributors", "vector_layers": [{"id": "traffic", "description": "road segments; feature id = location_id", "fields": {"name": "String", "road_class": "String", "speed_kmh": "Number", "free_flow_kmh": "Number", "congestion": "Number", "incident": "String", "changed_generation": "Number"}}]}';
COMMENT ON FUNCTION trafficdb.tile_mvt_web IS
    '{"description": "live road traffic (trafficdb): vector tile z/x/y encoded in C from shared memory", "attribution": "© OpenStreetMap contributors", "vector_layers": [{"id": "traffic", "description": "road segments; feature id = location_id", "fields": {"name": "String", "road_class": "String", "speed_kmh": "Number", "free_flow_kmh": "Number", "congestion": "Number", "incident": "String", "changed_generation": "Number"}}]}';
COMMENT ON FUNCTION trafficdb.tile_mvt_etag IS
    'tile_mvt(z, x, y, options) with its ETag: "<last generation that changed a feature of the tile>-<map id, hex>-<CRC-32C of the bytes, hex>"';

-- ---------------------------------------------------------------------------
-- Regions: a fleet of nodes, each owning the map and the writes of an area
-- (docs/fleet.md).  Every node holds the same rows.
-- ---------------------------------------------------------------------------

CREATE TABLE trafficdb.regions (
    name    text PRIMARY KEY
            CHECK (name ~ '^[a-z][a-z0-9_]{0,62}$'),
    -- the area the region owns: a location belongs to the region whose
    -- area holds its ST_PointOnSurface (the first region by name on a
    -- shared border); see trafficdb.region_of()
    area    geometry(MultiPolygon, 4326) NOT NULL
            CHECK (ST_IsValid(area) AND NOT ST_IsEmpty(area)),
    -- a box every location of the region lies in (roads cross the area's
    -- border).  load_map(region => ...) refuses a map that reaches out of
    -- it; trafficdb_global.locations contacts a region only for queries
    -- that can touch its bounds.  NULL: unknown (such a region is always
    -- contacted).
    bounds  geometry(Polygon, 4326)
            CHECK (bounds IS NULL OR (ST_IsValid(bounds) AND NOT ST_IsEmpty(bounds))),
    -- the postgres_fdw server that reaches the region's nodes (its host and
    -- port options may list the primary and its standby, with
    -- target_session_attrs 'read-write'); passwords belong in user mappings
    server  name NOT NULL
);
COMMENT ON TABLE trafficdb.regions IS
    'the regions of a fleet: the area each owns, the box its locations lie in, and the postgres_fdw server of its nodes';
SELECT pg_catalog.pg_extension_config_dump('trafficdb.regions', '');
GRANT SELECT ON trafficdb.regions TO PUBLIC;

-- region_of() and _region_fit() call PostGIS as tile() does (see there):
-- its schema written in, exact argument types, search_path = pg_catalog.
DO $do$
DECLARE
  pg text := (SELECT pg_catalog.quote_ident(n.nspname)
                FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
               WHERE e.extname OPERATOR(pg_catalog.=) 'postgis');
BEGIN
  EXECUTE pg_catalog.replace($sql$
-- The region that owns a geometry (NULL: outside every region's area).
CREATE FUNCTION trafficdb.region_of(geom @pg@.geometry) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog AS $f$
  SELECT r.name
    FROM (SELECT @pg@.st_pointonsurface(CASE WHEN @pg@.st_srid(geom) = 4326 THEN geom
                                             WHEN @pg@.st_srid(geom) = 0 THEN NULL::@pg@.geometry
                                             ELSE @pg@.st_transform(geom, 4326::integer) END) AS p) s
    JOIN trafficdb.regions r ON @pg@.st_intersects(r.area, s.p)
   ORDER BY r.name
   LIMIT 1
$f$;

-- Used by the daemon while it loads a region's map: 0 = not the region's,
-- 1 = the region's, 2 = the region's but out of the region's bounds.
CREATE FUNCTION trafficdb._region_fit(geom @pg@.geometry, region text) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog AS $f$
  SELECT CASE WHEN trafficdb.region_of(geom) IS DISTINCT FROM region THEN 0
              WHEN r.bounds IS NULL OR @pg@.st_transform(geom, 4326::integer) OPERATOR(@pg@.@) r.bounds THEN 1
              ELSE 2 END
    FROM trafficdb.regions r WHERE r.name = region
$f$;
-- (executable by PUBLIC: the daemon calls it while it reads the map source
-- with the rights of the role that called load_map)
$sql$, '@pg@', pg);
END $do$;
COMMENT ON FUNCTION trafficdb.region_of IS
    'the region owning a location of this geometry: the first by name whose area holds its ST_PointOnSurface (NULL: none)';

-- A feed row for a location of another region is refused at once, naming
-- the region and the server that owns it (trafficdb_feed_owned; nothing is
-- checked when the loaded map is not a region's).
CREATE FUNCTION trafficdb._feed_owned(location_id bigint) RETURNS boolean
AS 'MODULE_PATHNAME', 'trafficdb_feed_owned'
LANGUAGE C STABLE PARALLEL SAFE;
ALTER TABLE trafficdb.feed ADD CONSTRAINT feed_location_in_region CHECK (trafficdb._feed_owned(location_id));

-- The global view of a fleet: schema trafficdb_global, one postgres_fdw
-- foreign table per region (the region's trafficdb.locations, with a CHECK
-- of its bounds that the planner uses to leave out regions a query cannot
-- touch), and trafficdb_global.locations, their union with a region column.
DO $do$
DECLARE
  pg text := (SELECT pg_catalog.quote_ident(n.nspname)
                FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
               WHERE e.extname OPERATOR(pg_catalog.=) 'postgis');
BEGIN
  EXECUTE pg_catalog.replace($sql$
CREATE FUNCTION trafficdb.create_global_locations() RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
DECLARE
  r record;
  cols text;
  body text := '';
  n integer := 0;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'postgres_fdw') THEN
    RAISE EXCEPTION 'trafficdb.create_global_locations() needs postgres_fdw in this database'
      USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'CREATE EXTENSION postgres_fdw;';
  END IF;
  FOR r IN SELECT g.name, g.server, s.oid AS srv, w.fdwname, s.srvoptions
             FROM trafficdb.regions g
             LEFT JOIN pg_catalog.pg_foreign_server s ON s.srvname = g.server
             LEFT JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw
            ORDER BY g.name LOOP
    IF r.srv IS NULL THEN
      RAISE EXCEPTION 'region "%" names server "%", which does not exist', r.name, r.server
        USING ERRCODE = 'undefined_object',
              HINT = 'CREATE SERVER ... FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host ..., port ..., dbname ..., extensions ''postgis''), and a user mapping.';
    END IF;
    IF r.fdwname IS DISTINCT FROM 'postgres_fdw' THEN
      RAISE EXCEPTION 'region "%" names server "%", a server of %; expected a postgres_fdw server', r.name, r.server, r.fdwname
        USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM unnest(r.srvoptions) o
                    WHERE o LIKE 'extensions=%' AND 'postgis' = ANY (string_to_array(replace(substr(o, 12), ' ', ''), ','))) THEN
      RAISE EXCEPTION 'server "%" of region "%" does not list postgis in its extensions option', r.server, r.name
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'postgres_fdw would then filter spatial clauses here instead of shipping them to the region.',
              HINT = format('ALTER SERVER %I OPTIONS (ADD extensions ''postgis'');', r.server);
    END IF;
  END LOOP;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'trafficdb.regions is empty' USING ERRCODE = 'no_data_found',
      HINT = 'INSERT INTO trafficdb.regions (name, area, bounds, server) the regions of the fleet first.';
  END IF;
  SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
    INTO cols FROM pg_catalog.pg_attribute a
   WHERE a.attrelid = 'trafficdb.locations'::regclass AND a.attnum > 0 AND NOT a.attisdropped;
  DROP SCHEMA IF EXISTS trafficdb_global CASCADE;
  CREATE SCHEMA trafficdb_global;
  COMMENT ON SCHEMA trafficdb_global IS 'made by trafficdb.create_global_locations(): every region''s locations through postgres_fdw';
  FOR r IN SELECT g.name, g.server, g.bounds FROM trafficdb.regions g ORDER BY g.name LOOP
    EXECUTE format('CREATE FOREIGN TABLE trafficdb_global.%I (%s) SERVER %I OPTIONS (schema_name ''trafficdb'', table_name ''locations'')',
                   r.name, cols, r.server);
    IF r.bounds IS NOT NULL THEN
      -- 0.0001 degrees (about 10 m) wider than the bounds, its edges cut
      -- into pieces of 0.01 degrees, so that geography distances to it
      -- (along great circles, which leave a parallel by under a millimetre
      -- over 0.01 degrees) never exceed the distance to a location inside
      EXECUTE format('ALTER FOREIGN TABLE trafficdb_global.%I ADD CONSTRAINT %I CHECK (geom OPERATOR(@pg@.@) %L::@pg@.geometry)',
                     r.name, r.name || '_bounds',
                     @pg@.st_asewkt(@pg@.st_segmentize(@pg@.st_expand(@pg@.st_envelope(r.bounds), 0.0001::double precision),
                                                       0.01::double precision)));
    END IF;
    body := body || CASE WHEN n > 0 THEN E'\nUNION ALL ' ELSE '' END ||
            format('SELECT %L::text AS region, * FROM trafficdb_global.%I', r.name, r.name);
    n := n + 1;
  END LOOP;
  EXECUTE 'CREATE VIEW trafficdb_global.locations AS ' || body;
  COMMENT ON VIEW trafficdb_global.locations IS 'the locations of every region of trafficdb.regions, through postgres_fdw';
  GRANT USAGE ON SCHEMA trafficdb_global TO PUBLIC;
  GRANT SELECT ON ALL TABLES IN SCHEMA trafficdb_global TO PUBLIC;
  RETURN n;
END $f$;
$sql$, '@pg@', pg);
END $do$;
COMMENT ON FUNCTION trafficdb.create_global_locations IS
    'make (again) schema trafficdb_global: a postgres_fdw foreign table per region of trafficdb.regions and the view trafficdb_global.locations over all; returns the regions';
REVOKE ALL ON FUNCTION trafficdb.create_global_locations FROM PUBLIC;


-- ---------------------------------------------------------------------------
-- Subscriptions (docs/subscriptions.md): filters the daemon matches against
-- the locations each publication changed.
-- ---------------------------------------------------------------------------

CREATE TABLE trafficdb.subscriptions (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text,
    -- where: exactly one of location ids, an area (a Polygon, SRID 4326),
    -- or a centre (a Point, SRID 4326) with a radius in metres
    location_ids  bigint[],
    area          geometry,
    center        geometry,
    radius_m      double precision,
    -- what: a condition on the traffic (value: congestion 0-4, km/h, or % of free flow)
    condition     text NOT NULL DEFAULT 'any'
                  CHECK (condition IN ('any', 'congestion_at_least', 'speed_below', 'speed_below_pct', 'incident')),
    value         double precision,
    -- which events: every change where the condition holds, or entering and leaving it
    events        text NOT NULL DEFAULT 'change' CHECK (events IN ('change', 'enter_exit')),
    -- NOTIFY trafficdb_subscription_<id>_<notify_key> (payload: generation and event count)
    -- at the commit of each generation with events for it
    notify        boolean NOT NULL DEFAULT false,
    -- the NOTIFY channel is trafficdb_subscription_<id>_<notify_key>: LISTEN
    -- needs no privilege, so the channel is known only to those who may read
    -- the row (row-level security); 92 random bits
    notify_key    text NOT NULL DEFAULT pg_catalog.substr(pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', ''), 1, 24)
                  CHECK (notify_key ~ '^[0-9a-f]{24}$'),
    owner         name NOT NULL DEFAULT current_user,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT subscriptions_one_place CHECK (num_nonnulls(location_ids, area, center) = 1),
    CONSTRAINT subscriptions_radius_with_center CHECK ((center IS NULL) = (radius_m IS NULL))
);
COMMENT ON TABLE trafficdb.subscriptions IS
    'subscriptions: location ids, an area or a radius; a condition; change or enter/exit events, matched by the daemon at each publication';
SELECT pg_catalog.pg_extension_config_dump('trafficdb.subscriptions', '');
-- a role's rows: counted at each INSERT (trafficdb.max_subscriptions_per_role)
CREATE INDEX subscriptions_owner ON trafficdb.subscriptions (owner);

-- Each role sees, changes and deletes only its own subscriptions (owner is
-- the role: the row trigger refuses another owner with a clear error, and a
-- role cannot read another's events through subscription_events()).
-- Superusers, the table's owner and the daemon (which connects as the
-- bootstrap superuser) see every row.
ALTER TABLE trafficdb.subscriptions ENABLE ROW LEVEL SECURITY;
CREATE POLICY subscriptions_own ON trafficdb.subscriptions
    USING (owner OPERATOR(pg_catalog.=) CURRENT_USER)
    WITH CHECK (owner OPERATOR(pg_catalog.=) CURRENT_USER);

-- Every row is checked as the daemon will read it (a NaN, a negative
-- radius, an empty polygon, an unknown id are refused naming the value),
-- and as it makes sense on Earth (a radius up to 20,037,508 m, an area of
-- lon/lat inside [-180, 180] x [-90, 90] that ST_IsValid accepts, at most
-- 10,000 location ids, stored sorted and once each); owner must be the
-- current role (superusers excepted), and a role owns at most
-- trafficdb.max_subscriptions_per_role rows (a superuser setting, default
-- 1000; checked under a per-role advisory lock).  The trigger functions run
-- on trafficdb.subscriptions only.  The daemon reloads the subscriptions
-- after each committed change.
CREATE FUNCTION trafficdb._subscription_check() RETURNS trigger
AS 'MODULE_PATHNAME', 'trafficdb_subscription_check' LANGUAGE C;
REVOKE ALL ON FUNCTION trafficdb._subscription_check() FROM PUBLIC;
CREATE TRIGGER subscriptions_check BEFORE INSERT OR UPDATE ON trafficdb.subscriptions
    FOR EACH ROW EXECUTE FUNCTION trafficdb._subscription_check();
CREATE FUNCTION trafficdb._subscriptions_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'trafficdb_subscriptions_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION trafficdb._subscriptions_changed() FROM PUBLIC;
CREATE TRIGGER subscriptions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON trafficdb.subscriptions
    FOR EACH STATEMENT EXECUTE FUNCTION trafficdb._subscriptions_changed();
-- The pending events of a subscription in this session: the first call
-- starts delivering its events to this session (a slot of the subscribers'
-- rings, given back when the session ends); sessions reading one
-- subscription share its events, each to one of them.  Waits up to
-- timeout_ms when there are none (cancel and statement_timeout apply).
CREATE FUNCTION trafficdb.subscription_events(subscription integer, max_events integer DEFAULT 1000,
    timeout_ms integer DEFAULT 0,
    OUT kind text, OUT generation bigint, OUT location_id bigint,
    OUT old_speed_kmh real, OUT new_speed_kmh real, OUT old_congestion smallint, OUT new_congestion smallint,
    OUT old_incident boolean, OUT new_incident boolean, OUT published_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'trafficdb_subscription_events'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION trafficdb.subscription_events IS
    'events of a subscription delivered to this session since its first call (shared with other sessions reading it), waiting up to timeout_ms for the first';

-- Subscribing is granted by an administrator (GRANT SELECT, INSERT, DELETE
-- ON trafficdb.subscriptions TO app; GRANT USAGE ON SEQUENCE
-- trafficdb.subscriptions_id_seq TO app): a subscription's area says where
-- someone is interested, which is not everyone's business.  With these
-- grants a role sees, deletes and receives the events of its own
-- subscriptions only (row-level security above; subscription_events() of
-- another role's id is "permission denied for subscription <id>").

-- Stream files (src/stream/, fdw/streams.c): a server per file, a foreign
-- table per stream (IMPORT FOREIGN SCHEMA), time-range pushdown, INSERT in
-- time order, and aggregates over a time window with the codecs'
-- reconstruction.
CREATE FUNCTION trafficdb.streams_fdw_handler() RETURNS fdw_handler
    AS 'MODULE_PATHNAME', 'trafficdb_streams_handler' LANGUAGE C STRICT;
CREATE FUNCTION trafficdb.streams_fdw_validator(text[], oid) RETURNS void
    AS 'MODULE_PATHNAME', 'trafficdb_streams_validator' LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION trafficdb.streams_fdw_handler() FROM PUBLIC;
REVOKE ALL ON FUNCTION trafficdb.streams_fdw_validator(text[], oid) FROM PUBLIC;
CREATE FOREIGN DATA WRAPPER trafficdb_streams
    HANDLER trafficdb.streams_fdw_handler
    VALIDATOR trafficdb.streams_fdw_validator;

CREATE FUNCTION trafficdb.stream_aggregate(tbl regclass, field text, t_from timestamptz, t_to timestamptz,
    hold text DEFAULT 'stream',
    OUT avg double precision, OUT min double precision, OUT max double precision,
    OUT integral double precision, OUT samples bigint, OUT records bigint, OUT covered double precision)
    AS 'MODULE_PATHNAME', 'trafficdb_stream_aggregate' LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION trafficdb.stream_aggregate(regclass, text, timestamptz, timestamptz, text) IS
    'a stream field over [t_from, t_to] as reconstructed: time-weighted average, min, max, integral (value x seconds), samples (non-NULL values that held), records (stored records in the window), covered (seconds with a value); hold ''stream'' (default): the last value holds until the stream''s last timestamp, ''window'': to t_to';
CREATE FUNCTION trafficdb.stream_resample(tbl regclass, field text, times timestamptz[], hold text DEFAULT 'stream')
    RETURNS TABLE (t timestamptz, value double precision)
    AS 'MODULE_PATHNAME', 'trafficdb_stream_resample' LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION trafficdb.stream_resample(regclass, text, timestamptz[], text) IS
    'a stream field''s reconstructed value at each of the given times; hold ''stream'' (default): NULL after the stream''s last timestamp, ''window'': the last value holds on';


-- Trail files (src/trail/, fdw/trails.c): a server per place (local disk,
-- HTTP, or an S3 endpoint and region), credentials in user mappings, a
-- foreign table per file (IMPORT FOREIGN SCHEMA "s3://bucket/key"), pages
-- pruned by trail id, time and area; trail_write() writes a query's rows.
CREATE FUNCTION trafficdb.trails_fdw_handler() RETURNS fdw_handler
    AS 'MODULE_PATHNAME', 'trafficdb_trails_handler' LANGUAGE C STRICT;
CREATE FUNCTION trafficdb.trails_fdw_validator(text[], oid) RETURNS void
    AS 'MODULE_PATHNAME', 'trafficdb_trails_validator' LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION trafficdb.trails_fdw_handler() FROM PUBLIC;
REVOKE ALL ON FUNCTION trafficdb.trails_fdw_validator(text[], oid) FROM PUBLIC;
CREATE FOREIGN DATA WRAPPER trafficdb_trails
    HANDLER trafficdb.trails_fdw_handler
    VALIDATOR trafficdb.trails_fdw_validator;

CREATE FUNCTION trafficdb.trail_write(query text, destination text, server text DEFAULT NULL,
    id_column text DEFAULT 'id', time_column text DEFAULT 'time', geom_column text DEFAULT 'geom',
    page_size integer DEFAULT NULL, page_seconds integer DEFAULT 3600,
    page_order text DEFAULT 'auto', bucket_seconds integer DEFAULT NULL,
    format_version integer DEFAULT 6) RETURNS bigint
    AS 'MODULE_PATHNAME', 'trafficdb_trail_write' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION trafficdb.trail_write(text, text, text, text, text, text, integer, integer, text, integer, integer) IS
    'Write the rows of a query (trail id, time, geometry(Point, 4326) and any other columns) as a trail file at an absolute path (pg_write_server_files) or s3://bucket/key (server => a trafficdb_trails server; credentials from your user mapping); page_size in bytes (default 65536 by trail, 16384 space-time), page_order ''auto'' (default: ''time'' when the trails are short beside the file''s time span, else ''trail''), ''trail'' (pages of one trail), ''time'' (pages of one trail and one time bucket, laid out by bucket then trail id, bucket_seconds, default 3600) or ''space-time'' (pages of one time bucket and place, bucket_seconds, default 600), format_version 6 (default: as 5, with the pages of a file whose pages total at most 64 kB laid out column by column; a larger file is written as 5), 5 (as 4, with the per-trail column summaries read apart), 4 (small trails share pages), 3 (encoded page columns, a footer read in pieces), 2 or 1; returns the events written.';
