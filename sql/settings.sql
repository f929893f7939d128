--
-- Settings: every trafficdb.* setting is visible with its default, the
-- prefix is reserved, and each one keeps the context it is documented with.
--
\set VERBOSITY default

SELECT name, setting, unit, boot_val, min_val, max_val, context, vartype
  FROM pg_settings WHERE name LIKE 'trafficdb.%' ORDER BY name;

SHOW trafficdb.database;
SHOW trafficdb.publish_interval;
SHOW trafficdb.reader_pin_timeout;
SHOW trafficdb.shm_group;

-- the prefix is reserved: a misspelt setting is an error, not a placeholder
SET trafficdb.publish_intervall = '5s';
SELECT count(*) AS placeholders FROM pg_settings WHERE name = 'trafficdb.publish_intervall';

-- sighup and postmaster settings cannot be changed in a session
SET trafficdb.publish_interval = '5s';
SET trafficdb.database = 'other';

-- units are checked
ALTER SYSTEM SET trafficdb.publish_interval = '5 parsecs';
ALTER SYSTEM SET trafficdb.publish_interval = 1;

SELECT current_setting('shared_preload_libraries') AS preload;
