// trafficdb's live map (web/app.py serves it at /map/).
//
// Tiles: Martin's source "traffic", trafficdb.tile_mvt (the roads of the
// loaded map with their live traffic, read from shared memory and encoded in
// C), at the URL the app's /config.json names (Martin listens on a port of
// its own; it grants this page's origin by CORS).  Layer "traffic"; a
// feature's id is its location_id.  A grey line layer of every road is the
// base map; the same roads are coloured by congestion on top.  /live sends
// an event per publication with the boxes of the changed locations: the
// visible tiles those boxes touch are fetched again (map.refreshTiles), no
// others.  Vessels: positions at a minute of the
// demo's AIS day, from S3 through the trail FDW (/trails/positions).
//
// window.__tdb holds what the page knows, for the browser tests (web/test/).
(function () {
  'use strict';

  // A harness may name another tile source before the page runs (the
  // benchmark, web/bench/repaint.mjs, measures several servers with one page):
  // window.__tdbTiles = { traffic: URL template, source_layer: layer name },
  // the shape of /config.json's tiles; the page then does not ask the app.
  const PICK = window.__tdbTiles || null;
  const SOURCE_LAYER = (PICK && PICK.source_layer) || 'traffic';
  const MIN_ZOOM = 0;       // low zooms too: tile_mvt keeps a tile within its byte budget (the major roads)
  const MAX_ZOOM = 16;      // deeper zooms reuse z16 tiles (overzoom)
  const COLORS = ['#1a9850', '#a6d96a', '#fdae61', '#f46d43', '#d7191c'];
  const BASE = '#b4b4b4';
  const MAJOR = ['motorway', 'trunk', 'primary', 'secondary', 'tertiary',
    'motorway_link', 'trunk_link', 'primary_link', 'secondary_link', 'tertiary_link'];
  const MINOR_CAR = ['residential', 'unclassified', 'living_street', 'service', 'road'];

  const tdb = window.__tdb = {
    generation: null, publishedAt: null, events: 0, refreshes: [], received: {}, repaints: {},
    errors: [], trail: null, trailMinute: null, trailRendered: null, ready: false, tiles: null,
  };

  function fail(msg) {
    tdb.errors.push(String(msg));
    console.error(msg);
  }
  window.addEventListener('error', (e) => fail(e.message));

  // width in pixels by zoom, wider for major roads, thinner for paths
  function width(scale) {
    const cls = ['get', 'road_class'];
    const w = (z) => ['case',
      ['in', cls, ['literal', MAJOR]], z * 1.6 * scale,
      ['in', cls, ['literal', MINOR_CAR]], z * scale,
      z * 0.5 * scale];
    return ['interpolate', ['linear'], ['zoom'], 12, w(1), 15, w(3), 18, w(10)];
  }

  const hash = location.hash.length > 1;
  const map = new maplibregl.Map({
    container: 'map',
    hash: true,
    center: [24.944, 60.1716],
    zoom: 15,
    minZoom: 2,
    maxZoom: 19,
    fadeDuration: 0,    // no symbols to fade; a repainted tile shows at once
    attributionControl: { customAttribution: 'Roads © OpenStreetMap contributors · AIS vessel reports: tracktable-data (PyPI)' },
    style: {
      version: 8,
      sources: {
        // the traffic source and its two layers are added once /config.json has named Martin
        vessels: { type: 'geojson', data: { type: 'FeatureCollection', features: [] } },
      },
      layers: [
        { id: 'background', type: 'background', paint: { 'background-color': '#f4f3ef' } },
        {
          id: 'vessel-tails', type: 'line', source: 'vessels', filter: ['==', ['get', 'kind'], 'tail'],
          layout: { visibility: 'none', 'line-cap': 'round' },
          paint: { 'line-color': '#6a8fbf', 'line-width': 1.5 },
        },
        {
          id: 'vessels', type: 'circle', source: 'vessels', filter: ['==', ['get', 'kind'], 'position'],
          layout: { visibility: 'none' },
          paint: {
            'circle-color': '#1b3f8b', 'circle-radius': 4,
            'circle-stroke-color': '#ffffff', 'circle-stroke-width': 1,
          },
        },
      ],
    },
  });
  map.addControl(new maplibregl.NavigationControl(), 'top-right');
  map.addControl(new maplibregl.ScaleControl(), 'bottom-right');
  map.on('error', (e) => fail(e.error && e.error.message ? e.error.message : e));
  tdb.map = map;

  // ---- the traffic layer, from Martin -----------------------------------
  const ROADS = [
    {
      id: 'roads-base', type: 'line', source: 'traffic', 'source-layer': SOURCE_LAYER,
      layout: { 'line-cap': 'round', 'line-join': 'round' },
      paint: { 'line-color': BASE, 'line-width': width(1) },
    },
    {
      id: 'roads-traffic', type: 'line', source: 'traffic', 'source-layer': SOURCE_LAYER,
      filter: ['has', 'congestion'],
      layout: { 'line-cap': 'round', 'line-join': 'round', 'line-sort-key': ['get', 'congestion'] },
      paint: {
        'line-color': ['match', ['get', 'congestion'],
          0, COLORS[0], 1, COLORS[1], 2, COLORS[2], 3, COLORS[3], 4, COLORS[4], BASE],
        'line-width': width(1),
      },
    },
  ];
  let styleLoaded = false;
  function addTraffic() {
    if (!styleLoaded || !tdb.tiles || map.getSource('traffic')) return;
    map.addSource('traffic', { type: 'vector', tiles: [tdb.tiles], minzoom: MIN_ZOOM, maxzoom: MAX_ZOOM });
    for (const layer of ROADS) map.addLayer(layer, 'vessel-tails');   // under the vessels
    tdb.ready = true;
  }
  map.on('load', () => { styleLoaded = true; addTraffic(); });
  if (PICK) {
    tdb.tiles = PICK.traffic;
  } else {
    fetch('/config.json', { cache: 'no-store' })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`/config.json: HTTP ${r.status}`))))
      .then((c) => {
        if (!c.tiles || !c.tiles.traffic) throw new Error('/config.json names no tile server (the app has no TRAFFICDB_WEB_TILES)');
        tdb.tiles = c.tiles.traffic;
        addTraffic();
      })
      .catch(fail);
  }
  // everything asked for has arrived and been drawn
  tdb.settled = () => map.loaded() && map.areTilesLoaded() && !map.isMoving();

  // ---- the popup ---------------------------------------------------------
  function fmt(v, unit) {
    if (v === undefined || v === null) return '–';
    if (typeof v === 'number') return v.toFixed(1) + (unit ? ' ' + unit : '');
    return String(v);
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
  }
  function row(key, label, value) {
    return `<tr><th>${label}</th><td data-k="${key}">${esc(value)}</td></tr>`;
  }
  let popup = null;
  map.on('click', (e) => {
    const p = e.point;
    const hits = map.queryRenderedFeatures([[p.x - 3, p.y - 3], [p.x + 3, p.y + 3]],
      { layers: ['roads-traffic', 'roads-base'] });
    if (popup) popup.remove();
    if (!hits.length) return;
    const f = hits[0].properties;
    const id = hits[0].id;   // tile_mvt's feature id is the location_id
    const html = '<div class="popup"><table>' +
      row('name', 'name', f.name === undefined ? '(unnamed)' : f.name) +
      row('road_class', 'class', f.road_class) +
      row('speed_kmh', 'speed', fmt(f.speed_kmh, 'km/h')) +
      row('free_flow_kmh', 'free flow', fmt(f.free_flow_kmh, 'km/h')) +
      row('congestion', 'congestion', f.congestion === undefined ? '–' : String(f.congestion)) +
      row('incident', 'incident', f.incident === undefined ? '–' : f.incident) +
      row('changed_generation', 'changed in', f.changed_generation === undefined ? '–' : f.changed_generation) +
      row('location_id', 'location', id === undefined ? '–' : id) +
      '</table></div>';
    popup = new maplibregl.Popup({ maxWidth: '320px' }).setLngLat(e.lngLat).setHTML(html).addTo(map);
  });
  map.on('mousemove', 'roads-base', () => { map.getCanvas().style.cursor = 'pointer'; });
  map.on('mouseleave', 'roads-base', () => { map.getCanvas().style.cursor = ''; });

  // ---- the generation and its age ----------------------------------------
  const genValue = document.getElementById('gen-value');
  const genAge = document.getElementById('gen-age');
  const liveStatus = document.getElementById('live-status');
  function showAge() {
    if (!tdb.publishedAt) { genAge.textContent = '–'; return; }
    const s = Math.max(0, Math.round((Date.now() - Date.parse(tdb.publishedAt)) / 1000));
    genAge.textContent = s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
  }
  setInterval(showAge, 1000);
  function setState(s) {
    if (s.generation !== undefined && s.generation !== null) tdb.generation = s.generation;
    if (s.published_at) tdb.publishedAt = s.published_at;
    genValue.textContent = tdb.generation === null ? '–' : String(tdb.generation);
    showAge();
  }

  // ---- live updates: refresh the visible tiles the changes touch ---------
  const MAX_TILES = 256;
  function lon2x(lon, n) { return ((lon + 180) / 360) * n; }
  function lat2y(lat, n) {
    const l = Math.max(-85.0511, Math.min(85.0511, lat)) * Math.PI / 180;
    return ((1 - Math.log(Math.tan(l) + 1 / Math.cos(l)) / Math.PI) / 2) * n;
  }
  // tiles of zoom z that a lon/lat box touches (grown by a twentieth of a
  // tile: a line is drawn a few pixels wide), clipped to the view
  function tilesOf(box, view, z, out) {
    const w = Math.max(box[0], view[0]), s = Math.max(box[1], view[1]);
    const e = Math.min(box[2], view[2]), n = Math.min(box[3], view[3]);
    const m = 0.05;
    const nt = 2 ** z;
    const grow = (360 / nt) * m;
    if (w > e + grow || s > n + grow) return true;
    const x0 = Math.max(0, Math.floor(lon2x(w, nt) - m)), x1 = Math.min(nt - 1, Math.floor(lon2x(e, nt) + m));
    const y0 = Math.max(0, Math.floor(lat2y(n, nt) - m)), y1 = Math.min(nt - 1, Math.floor(lat2y(s, nt) + m));
    for (let x = x0; x <= x1; x++) {
      for (let y = y0; y <= y1; y++) {
        out.set(`${z}/${x}/${y}`, { z, x, y });
        if (out.size > MAX_TILES) return false;
      }
    }
    return true;
  }
  // MapLibre keeps the tiles that leave the view in a cache and shows them
  // again when the map comes back to them; refreshTiles reloads only tiles
  // in view.  The cached tiles a change touches (any zoom) must go.  This is
  // MapLibre GL JS 5's internal tile cache (the version is pinned in
  // package.json); without it, every tile is fetched again.
  function lat(y, n) { return Math.atan(Math.sinh(Math.PI * (1 - 2 * y / n))) * 180 / Math.PI; }
  function dropCached(boxes) {
    const tm = map.style && map.style.tileManagers && map.style.tileManagers.traffic;
    const cache = tm && tm._outOfViewCache;
    if (!cache || typeof cache.filter !== 'function') {
      fail('MapLibre has no tile cache to clean: fetching every tile again');
      map.refreshTiles('traffic');
      return;
    }
    cache.filter((tile) => {
      const { z, x, y } = tile.tileID.canonical;
      const n = 2 ** z, m = 0.05;
      const w = (x - m) / n * 360 - 180, e = (x + 1 + m) / n * 360 - 180;
      const north = lat(y - m, n), south = lat(y + 1 + m, n);
      return !boxes.some((b) => b[0] <= e && b[2] >= w && b[1] <= north && b[3] >= south);
    });
  }
  let pendingRepaint = null;
  function refresh(ev) {
    if (!map.getSource('traffic')) return;
    dropCached(ev.boxes || []);
    if (map.getZoom() < MIN_ZOOM) return;
    const z = Math.min(MAX_ZOOM, Math.floor(map.getZoom()));
    const b = map.getBounds();
    const view = [b.getWest(), b.getSouth(), b.getEast(), b.getNorth()];
    const tiles = new Map();
    let all = false;
    for (const box of ev.boxes || []) {
      if (!tilesOf(box, view, z, tiles)) { all = true; break; }
    }
    tdb.refreshes.push({ generation: ev.generation, all, tiles: all ? null : [...tiles.keys()] });
    if (!all && tiles.size === 0) return;
    pendingRepaint = ev.generation;
    // refreshTiles passes over a tile still loading, whose answer may have
    // been made before this publication: fetch these tiles once more when
    // everything in flight has arrived
    if (!all && !map.areTilesLoaded()) {
      again = again || new Map();
      for (const [k, t] of tiles) again.set(k, t);
    }
    map.refreshTiles('traffic', all ? undefined : [...tiles.values()]);
  }
  let again = null;
  map.on('idle', () => {
    if (again) {
      const t = [...again.values()];
      again = null;
      map.refreshTiles('traffic', t);
    }
  });
  map.on('idle', () => {
    if (pendingRepaint !== null) {
      tdb.repaints[pendingRepaint] = Date.now();
      pendingRepaint = null;
    }
  });

  let firstState = true;
  function connect() {
    const es = new EventSource('/live');
    es.addEventListener('hello', (m) => {
      const s = JSON.parse(m.data);
      // a reconnection: publications may have been missed; fetch every tile again
      if (!firstState && s.generation !== tdb.generation && map.getSource('traffic')) {
        tdb.refreshes.push({ generation: s.generation, all: true, tiles: null });
        map.refreshTiles('traffic');
      }
      setState(s);
      liveStatus.textContent = 'live';
      if (firstState && !hash && s.extent) map.fitBounds(s.extent, { animate: false, padding: 20 });
      firstState = false;
    });
    es.addEventListener('publish', (m) => {
      const s = JSON.parse(m.data);
      tdb.received[s.generation] = Date.now();
      tdb.events++;
      setState(s);
      refresh(s);
    });
    es.onerror = () => { liveStatus.textContent = 'reconnecting…'; };
  }
  connect();

  // ---- vessels on a time slider ------------------------------------------
  const toggle = document.getElementById('trail-toggle');
  const controls = document.getElementById('trail-controls');
  const slider = document.getElementById('trail-slider');
  const timeLabel = document.getElementById('trail-time');
  const countLabel = document.getElementById('trail-count');
  let trailSeq = 0, trailTimer = null, pendingTrail = null;
  function hhmm(m) { return String(Math.floor(m / 60)).padStart(2, '0') + ':' + String(m % 60).padStart(2, '0'); }
  async function loadTrail(minute) {
    const seq = ++trailSeq;
    timeLabel.textContent = hhmm(minute);
    const r = await fetch(`/trails/positions?minute=${minute}`);
    if (!r.ok) { fail(`/trails/positions: HTTP ${r.status}`); return; }
    const fc = await r.json();
    if (seq !== trailSeq) return;   // a newer minute was asked for
    map.getSource('vessels').setData(fc);
    tdb.trail = fc;
    tdb.trailMinute = minute;
    countLabel.textContent = String(fc.features.filter((f) => f.properties.kind === 'position').length);
    pendingTrail = minute;
  }
  map.on('idle', () => {
    if (pendingTrail !== null) { tdb.trailRendered = pendingTrail; pendingTrail = null; }
  });
  slider.addEventListener('input', () => {
    clearTimeout(trailTimer);
    const m = Number(slider.value);
    timeLabel.textContent = hhmm(m);
    trailTimer = setTimeout(() => loadTrail(m).catch(fail), 60);
  });
  async function fitVessels() {
    const r = await fetch('/trails/extent');
    const e = r.ok ? await r.json() : null;
    if (e) map.fitBounds([[e[0], e[1]], [e[2], e[3]]], { padding: 30, animate: false });
  }
  document.getElementById('trail-fit').addEventListener('click', (e) => { e.preventDefault(); fitVessels().catch(fail); });
  toggle.addEventListener('change', () => {
    const on = toggle.checked;
    controls.hidden = !on;
    for (const id of ['vessels', 'vessel-tails']) map.setLayoutProperty(id, 'visibility', on ? 'visible' : 'none');
    if (on) {
      loadTrail(Number(slider.value)).catch(fail);
      if (!tdb.trailShown) fitVessels().catch(fail);
      tdb.trailShown = true;
    }
  });
}());
