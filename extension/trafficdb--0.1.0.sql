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

CREATE FUNCTION trafficdb.version() RETURNS text
    AS 'MODULE_PATHNAME', 'trafficdb_version'
    LANGUAGE C STRICT STABLE PARALLEL SAFE;
COMMENT ON FUNCTION trafficdb.version() IS
    'version of the loaded trafficdb library';
