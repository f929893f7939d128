-- scripts/roads.lua: osm2pgsql flex style that turns OpenStreetMap ways
-- tagged highway=* into one table of road segments in EPSG:4326, the shape
-- trafficdb.load_map() reads: a 64-bit id, a LineString and attributes.
--
--   osm2pgsql --output=flex --style=scripts/roads.lua -d DB file.osm.pbf

local roads = osm2pgsql.define_table({
    name = os.getenv('TDB_ROADS_TABLE') or 'roads',   -- bench/run.sh imports Delaware beside the demo map
    ids = { type = 'way', id_column = 'osm_id' },
    columns = {
        { column = 'highway',  type = 'text', not_null = true },
        { column = 'name',     type = 'text' },
        { column = 'ref',      type = 'text' },
        { column = 'maxspeed', type = 'int' },   -- km/h
        { column = 'lanes',    type = 'int' },
        { column = 'oneway',   type = 'bool' },
        { column = 'geom',     type = 'linestring', projection = 4326, not_null = true },
    },
})

-- Ways that carry no road traffic of any kind, or are areas.
local skip = {
    proposed = true, construction = true, abandoned = true, platform = true,
    raceway = true, bus_stop = true, elevator = true, rest_area = true,
    services = true,
}

-- "50" -> 50, "30 mph" -> 48, anything else -> nil
local function parse_speed(v)
    if v == nil then return nil end
    local n = tonumber(v)
    if n then return math.floor(n + 0.5) end
    local mph = v:match('^(%d+)%s*mph$')
    if mph then return math.floor(tonumber(mph) * 1.609344 + 0.5) end
    return nil
end

local function parse_int(v)
    local n = tonumber(v)
    if n and n == math.floor(n) and n >= 0 and n < 100 then return n end
    return nil
end

function osm2pgsql.process_way(object)
    local t = object.tags
    if not t.highway or skip[t.highway] or t.area == 'yes' then
        return
    end
    local oneway = nil
    if t.oneway == 'yes' or t.oneway == '1' or t.oneway == '-1' then
        oneway = true
    elseif t.oneway == 'no' then
        oneway = false
    end
    roads:insert({
        highway = t.highway,
        name = t.name,
        ref = t.ref,
        maxspeed = parse_speed(t.maxspeed),
        lanes = parse_int(t.lanes),
        oneway = oneway,
        geom = object:as_linestring(),
    })
end
