// The live map's style (web/static/app.js builds the map with it).
//
// Sources: the base map, two PMTiles archives the app serves (scripts/basemap.sh
// builds them at `make demo` time): "world" (Natural Earth land, borders and
// country names, z0-z9) and "osm" (the OpenStreetMap extract the demo imports:
// earth, water, waterways, land use, buildings, roads, rails, places);
// "traffic" (Martin: trafficdb.tile_mvt, the live traffic, added by app.js);
// "vessels" (GeoJSON).  Labels use glyphs the app serves (Open Sans, from a
// Debian font).  Two themes, light and dark: the same layers with other
// paint values (apply() switches them in place).  The traffic colours are
// chosen to stay apart under protanopia, deuteranopia and tritanopia and in
// lightness (web/test/livemap.test.mjs checks them with Chromium's vision
// deficiency emulation).
(function () {
  'use strict';

  // congestion 0 free flow .. 4 standstill
  const TRAFFIC = ['#1b9e77', '#ffd23f', '#f4812a', '#c3262a', '#3b0a28'];

  const THEMES = {
    light: {
      water: '#a8cde4', land: '#f3f0ea', landuse_park: '#d4e8c4', landuse_forest: '#bfdcae', landuse_urban: '#ece7e0',
      landuse_industrial: '#e7e0ea', building: '#ddd5cc', boundary: '#9a8aa8',
      road_casing: '#b9b2a8', road_major: '#ffffff', road_minor: '#ffffff', road_path: '#c9c2b8', rail: '#a8a39c',
      traffic_casing: '#ffffff', label: '#2b2b2b', label_halo: 'rgba(255,255,255,0.9)', place: '#1f1f1f',
      water_label: '#3c6e96', country: '#6b5a7a', vessel: '#1b3f8b', vessel_stroke: '#ffffff', vessel_tail: '#5b7fb5',
    },
    dark: {
      water: '#16222e', land: '#262a2f', landuse_park: '#24332a', landuse_forest: '#22302a', landuse_urban: '#2b2f35',
      landuse_industrial: '#2e2b34', building: '#353a41', boundary: '#7f7190',
      road_casing: '#1b1d20', road_major: '#4a4f57', road_minor: '#3d4148', road_path: '#383c42', rail: '#50545a',
      traffic_casing: '#d9d9d9', label: '#e4e4e4', label_halo: 'rgba(10,12,14,0.9)', place: '#f0f0f0',
      water_label: '#8fb3d1', country: '#b9a9c9', vessel: '#8ec5ff', vessel_stroke: '#0b1b33', vessel_tail: '#7aa6db',
    },
  };

  const MAJOR = ['motorway', 'trunk', 'primary', 'secondary', 'tertiary',
    'motorway_link', 'trunk_link', 'primary_link', 'secondary_link', 'tertiary_link'];
  const MINOR_CAR = ['residential', 'unclassified', 'living_street', 'service', 'road'];
  const cls = (key) => ['get', key];

  // line width in pixels by zoom and class (an exponential ramp, as road maps draw them)
  // (plus `add` pixels, at least `min`: MapLibre allows zoom only in a top-level interpolate)
  function roadWidth(key, scale, add = 0, min = 0) {
    const w = (a, b, c, d) => ['max', min, ['+', add, ['match', cls(key),
      ['motorway', 'trunk'], a * scale,
      ['primary', 'secondary', 'motorway_link', 'trunk_link'], b * scale,
      ['tertiary', 'primary_link', 'secondary_link', 'tertiary_link'], c * scale,
      ['residential', 'unclassified', 'living_street', 'road'], d * scale,
      d * 0.55 * scale]]];
    return ['interpolate', ['exponential', 1.6], ['zoom'],
      5, w(0.8, 0.4, 0.3, 0.2), 10, w(2.2, 1.4, 1, 0.5), 13, w(4, 3, 2.4, 1.4),
      16, w(10, 8, 6.5, 4.5), 19, w(26, 22, 18, 13)];
  }

  // which roads carry colour: the major ones at every zoom, the rest from z14
  // (at city scale a web of coloured residential streets hides the arterials)
  // (footways and paths carry no car traffic: never coloured)
  const TRAFFIC_FILTER = ['all', ['has', 'congestion'],
    ['any', ['in', cls('road_class'), ['literal', MAJOR]],
      ['all', ['>=', ['zoom'], 14], ['in', cls('road_class'), ['literal', MINOR_CAR]]]]];
  const TRAFFIC_COLOR = ['match', ['get', 'congestion'],
    0, TRAFFIC[0], 1, TRAFFIC[1], 2, TRAFFIC[2], 3, TRAFFIC[3], 4, TRAFFIC[4], '#999999'];

  const FONT = ['Open Sans Regular'];
  const FONT_BOLD = ['Open Sans Semibold'];
  const FONT_ITALIC = ['Open Sans Italic'];

  // the layers, each with its theme-dependent paint as a function of the theme
  function layers(have) {
    const L = [];
    const add = (layer, paint) => { L.push({ layer, paint }); };
    add({ id: 'background', type: 'background' }, (t) => ({ 'background-color': t.water }));
    if (have.world) {
      add({ id: 'world-earth', type: 'fill', source: 'world', 'source-layer': 'earth' },
        (t) => ({ 'fill-color': t.land }));
    }
    if (have.osm) {
      add({ id: 'earth', type: 'fill', source: 'osm', 'source-layer': 'earth' }, (t) => ({ 'fill-color': t.land }));
      add({ id: 'landuse-urban', type: 'fill', source: 'osm', 'source-layer': 'landuse', minzoom: 10,
        filter: ['in', cls('kind'), ['literal', ['residential', 'commercial', 'retail', 'railway', 'hospital', 'school', 'university', 'military']]] },
        (t) => ({ 'fill-color': t.landuse_urban }));
      add({ id: 'landuse-industrial', type: 'fill', source: 'osm', 'source-layer': 'landuse', minzoom: 10,
        filter: ['==', cls('kind'), 'industrial'] }, (t) => ({ 'fill-color': t.landuse_industrial }));
      add({ id: 'landuse-park', type: 'fill', source: 'osm', 'source-layer': 'landuse',
        filter: ['in', cls('kind'), ['literal', ['park', 'grass', 'meadow', 'garden', 'cemetery', 'pitch', 'playground', 'scrub', 'wetland']]] },
        (t) => ({ 'fill-color': t.landuse_park }));
      add({ id: 'landuse-forest', type: 'fill', source: 'osm', 'source-layer': 'landuse',
        filter: ['in', cls('kind'), ['literal', ['forest', 'wood']]] }, (t) => ({ 'fill-color': t.landuse_forest }));
      add({ id: 'water', type: 'fill', source: 'osm', 'source-layer': 'water' }, (t) => ({ 'fill-color': t.water }));
      add({ id: 'waterway', type: 'line', source: 'osm', 'source-layer': 'waterway', layout: { 'line-cap': 'round' } },
        (t) => ({ 'line-color': t.water, 'line-width': ['interpolate', ['linear'], ['zoom'], 10, 0.5, 16, 4] }));
      add({ id: 'building', type: 'fill', source: 'osm', 'source-layer': 'building', minzoom: 13 },
        (t) => ({ 'fill-color': t.building }));   // no outline: one shader program less to compile
      add({ id: 'rail', type: 'line', source: 'osm', 'source-layer': 'rail', minzoom: 12 },
        (t) => ({ 'line-color': t.rail, 'line-width': ['interpolate', ['linear'], ['zoom'], 12, 0.5, 17, 2], 'line-dasharray': [3, 2] }));
      add({ id: 'road-casing', type: 'line', source: 'osm', 'source-layer': 'road', minzoom: 12,
        filter: ['!', ['in', cls('kind'), ['literal', ['footway', 'path', 'cycleway', 'steps', 'pedestrian', 'track', 'bridleway', 'corridor']]]],
        layout: { 'line-cap': 'round', 'line-join': 'round' } },
      (t) => ({ 'line-color': t.road_casing, 'line-width': roadWidth('kind', 1, 1.5) }));
      add({ id: 'road-path', type: 'line', source: 'osm', 'source-layer': 'road', minzoom: 14,
        filter: ['in', cls('kind'), ['literal', ['footway', 'path', 'cycleway', 'steps', 'pedestrian', 'track', 'bridleway', 'corridor']]] },
      (t) => ({ 'line-color': t.road_path, 'line-width': ['interpolate', ['linear'], ['zoom'], 14, 0.6, 18, 2], 'line-dasharray': [2, 1] }));
      add({ id: 'road', type: 'line', source: 'osm', 'source-layer': 'road',
        filter: ['!', ['in', cls('kind'), ['literal', ['footway', 'path', 'cycleway', 'steps', 'pedestrian', 'track', 'bridleway', 'corridor']]]],
        layout: { 'line-cap': 'round', 'line-join': 'round' } },
      (t) => ({ 'line-color': ['case', ['in', cls('kind'), ['literal', MAJOR]], t.road_major, t.road_minor], 'line-width': roadWidth('kind', 1) }));
    }
    if (have.world) {
      add({ id: 'boundary', type: 'line', source: 'world', 'source-layer': 'boundary', maxzoom: 10 },
        (t) => ({ 'line-color': t.boundary, 'line-width': 0.8, 'line-dasharray': [3, 2] }));
    }
    return L;
  }

  // traffic (Martin's tiles): a casing, then the colour; roads without
  // traffic data are drawn by the base map (or in grey when there is none)
  function trafficLayers(sourceLayer, haveBase) {
    const L = [];
    if (!haveBase) {
      L.push({ layer: { id: 'roads-base', type: 'line', source: 'traffic', 'source-layer': sourceLayer,
        layout: { 'line-cap': 'round', 'line-join': 'round' } },
      paint: (t) => ({ 'line-color': t.road_casing, 'line-width': roadWidth('road_class', 0.8) }) });
    }
    L.push({ layer: { id: 'traffic-casing', type: 'line', source: 'traffic', 'source-layer': sourceLayer,
      filter: TRAFFIC_FILTER, minzoom: 11, layout: { 'line-cap': 'round', 'line-join': 'round' } },
    paint: (t) => ({ 'line-color': t.traffic_casing, 'line-opacity': 0.85, 'line-width': roadWidth('road_class', 0.7, 2) }) });
    L.push({ layer: { id: 'roads-traffic', type: 'line', source: 'traffic', 'source-layer': sourceLayer,
      filter: TRAFFIC_FILTER,
      layout: { 'line-cap': 'round', 'line-join': 'round', 'line-sort-key': ['get', 'congestion'] } },
    paint: () => ({ 'line-color': TRAFFIC_COLOR, 'line-width': roadWidth('road_class', 0.7, 0, 1.2) }) });
    return L;
  }

  // labels, above the traffic
  function labelLayers(have) {
    const L = [];
    const halo = (t, c) => ({ 'text-color': c || t.label, 'text-halo-color': t.label_halo, 'text-halo-width': 1.4 });
    if (have.world) {
      L.push({ layer: { id: 'country-label', type: 'symbol', source: 'world', 'source-layer': 'country', maxzoom: 7,
        layout: { 'text-field': ['get', 'name'], 'text-font': FONT, 'text-size': 12, 'text-transform': 'uppercase', 'text-letter-spacing': 0.08 } },
      paint: (t) => halo(t, t.country) });
    }
    if (have.osm) {
      L.push({ layer: { id: 'water-label', type: 'symbol', source: 'osm', 'source-layer': 'water', minzoom: 12,
        filter: ['has', 'name'],
        layout: { 'text-field': ['get', 'name'], 'text-font': FONT_ITALIC, 'text-size': 12, 'symbol-placement': 'point' } },
      paint: (t) => halo(t, t.water_label) });
      L.push({ layer: { id: 'road-label', type: 'symbol', source: 'osm', 'source-layer': 'road', minzoom: 12,
        filter: ['all', ['has', 'name'], ['any', ['in', cls('kind'), ['literal', MAJOR]], ['>=', ['zoom'], 14]]],
        layout: { 'text-field': ['get', 'name'], 'text-font': FONT, 'symbol-placement': 'line', 'text-max-angle': 30,
          'text-size': ['interpolate', ['linear'], ['zoom'], 12, 10, 16, 13, 19, 15], 'symbol-spacing': 300 } },
      paint: (t) => halo(t) });
      L.push({ layer: { id: 'place-label', type: 'symbol', source: 'osm', 'source-layer': 'place',
        filter: ['has', 'name'],
        layout: { 'text-field': ['get', 'name'], 'text-font': FONT_BOLD,
          'text-size': ['match', cls('kind'), ['city'], 18, ['town'], 15, ['suburb', 'island'], 13, 12],
          'text-transform': ['match', cls('kind'), ['suburb', 'quarter', 'neighbourhood'], 'uppercase', 'none'],
          'text-letter-spacing': ['match', cls('kind'), ['suburb', 'quarter', 'neighbourhood'], 0.06, 0],
          'text-padding': 8 } },
      paint: (t) => halo(t, t.place) });
    }
    return L;
  }

  function vesselLayers() {
    return [
      { layer: { id: 'vessel-tails', type: 'line', source: 'vessels', filter: ['==', ['get', 'kind'], 'tail'],
        layout: { visibility: 'none', 'line-cap': 'round' } },
      paint: (t) => ({ 'line-color': t.vessel_tail, 'line-width': 1.8 }) },
      { layer: { id: 'vessels', type: 'circle', source: 'vessels', filter: ['==', ['get', 'kind'], 'position'],
        layout: { visibility: 'none' } },
      paint: (t) => ({ 'circle-color': t.vessel, 'circle-radius': 4.5, 'circle-stroke-color': t.vessel_stroke, 'circle-stroke-width': 1.2 }) },
    ];
  }

  const abs = (u) => new URL(u, location.href).href;

  // the style for a theme: sources and layers of what the app has
  // (cfg.basemap), the traffic tiles (traffic: { tiles, sourceLayer, minzoom, maxzoom })
  // among them from the start, so that they load beside the base map
  function build(cfg, theme, traffic) {
    const t = THEMES[theme];
    const bm = (cfg && cfg.basemap) || {};
    const have = { world: !!bm.world, osm: !!bm.map };
    const sources = { vessels: { type: 'geojson', data: { type: 'FeatureCollection', features: [] } } };
    if (have.world) sources.world = { type: 'vector', url: 'pmtiles://' + abs(bm.world), attribution: 'Natural Earth' };
    if (have.osm) sources.osm = { type: 'vector', url: 'pmtiles://' + abs(bm.map), attribution: '© OpenStreetMap contributors' };
    sources.traffic = { type: 'vector', tiles: [traffic.tiles], minzoom: traffic.minzoom, maxzoom: traffic.maxzoom };
    const all = layers(have).concat(trafficLayers(traffic.sourceLayer, have.osm), labelLayers(have), vesselLayers());
    const style = {
      version: 8,
      sources,
      layers: all.map(({ layer, paint }) => Object.assign({}, layer, { paint: paint(t) })),
    };
    if (bm.glyphs) style.glyphs = abs(bm.glyphs).replace('%7Bfontstack%7D', '{fontstack}').replace('%7Brange%7D', '{range}');
    return { style, have };
  }

  // switch the paint of every layer to a theme, in place
  function apply(map, theme, sourceLayer, haveBase) {
    const t = THEMES[theme];
    const have = { world: !!map.getSource('world'), osm: !!map.getSource('osm') };
    const all = layers(have).concat(labelLayers(have), vesselLayers(), trafficLayers(sourceLayer, haveBase));
    for (const { layer, paint } of all) {
      if (!map.getLayer(layer.id)) continue;
      for (const [k, v] of Object.entries(paint(t))) map.setPaintProperty(layer.id, k, v);
    }
  }

  window.tdbStyle = { TRAFFIC, THEMES, build, apply };
}());
