// trafficdb's live map (web/app.py serves it at /map/).
//
// Base map: two PMTiles archives the app serves (web/static/style.js: world
// land and borders for low zooms, the OpenStreetMap extract's earth, water,
// land use, buildings, roads and labels), read with the pmtiles package.
// Traffic: Martin's source "traffic", trafficdb.tile_mvt (the roads of the
// loaded map with their live traffic, read from shared memory and encoded in
// C), at the URL the app's /config.json names (Martin listens on a port of
// its own; it grants this page's origin by CORS).  Layer "traffic"; a
// feature's id is its location_id.  Major roads are coloured at every zoom
// (tile_mvt keeps a low-zoom tile within its byte budget, major roads
// first), the others from z14.  /live sends an event per publication with
// the boxes of the changed locations: the visible tiles those boxes touch
// are fetched again (map.refreshTiles), no others.  A click asks the app for
// the road (/roads/ID) and says what it means for a driver.  /sim.json says
// when the traffic is simulated (web/sumo_feeder.py).  Vessels: positions at
// a minute of the demo's AIS day, from S3 through the trail FDW
// (/trails/positions); turning them on never moves the map.
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
  const S = window.tdbStyle;
  const LEVELS = ['free flow', 'light', 'moderate', 'heavy', 'standstill'];

  const tdb = window.__tdb = {
    generation: null, publishedAt: null, events: 0, refreshes: [], received: {}, repaints: {},
    errors: [], trail: null, trailMinute: null, trailRendered: null, ready: false, tiles: null,
    theme: null, basemap: null, sim: null, map: null,
    marks: {},   // when (performance.now(), ms) the page reached each step of its first view
  };
  const mark = (k) => { if (tdb.marks[k] === undefined) tdb.marks[k] = Math.round(performance.now()); };
  mark('script');
  if (window.maplibregl && maplibregl.prewarm) maplibregl.prewarm();   // the worker starts while /config.json comes
  if (window.pmtiles && window.maplibregl && maplibregl.importScriptInWorkers) {
    maplibregl.importScriptInWorkers(new URL('pmtiles-worker.js', location.href).href);
  }

  function fail(msg) {
    tdb.errors.push(String(msg));
    console.error(msg);
  }
  window.addEventListener('error', (e) => fail(e.message));
  if (window.pmtiles && window.maplibregl) {
    maplibregl.addProtocol('pmtiles', new pmtiles.Protocol().tile);
  }

  // the theme: the one chosen last on this browser, else the system's
  const THEME_KEY = 'trafficdb.theme';
  function initialTheme() {
    const q = new URLSearchParams(location.search).get('theme');
    if (q === 'light' || q === 'dark') return q;
    try {
      const v = localStorage.getItem(THEME_KEY);
      if (v === 'light' || v === 'dark') return v;
    } catch (e) { /* storage refused: the system's */ }
    return window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
  }
  tdb.theme = initialTheme();
  document.documentElement.dataset.theme = tdb.theme;

  const hash = location.hash.length > 1;
  let map = null;
  let styleLoaded = false;
  let haveBase = false;

  function start(cfg) {
    mark('config');
    const built = S.build(cfg, tdb.theme, { tiles: tdb.tiles, sourceLayer: SOURCE_LAYER, minzoom: MIN_ZOOM, maxzoom: MAX_ZOOM });
    haveBase = built.have.osm;
    tdb.basemap = built.have;
    const attribution = ['© OpenStreetMap contributors'];
    if (built.have.world) attribution.push('Natural Earth');
    attribution.push('AIS: tracktable-data');
    // the first view: the URL's (hash), else the map's extent covering the screen
    const first = !hash && cfg.extent ? coverView(cfg.extent) : { center: [24.944, 60.1716], zoom: 15 };
    viewSet = !hash && !!cfg.extent;
    map = tdb.map = new maplibregl.Map({
      container: 'map',
      hash: true,
      center: first.center,
      zoom: first.zoom,
      minZoom: 1,
      maxZoom: 19,
      fadeDuration: 0,    // a repainted tile shows at once
      attributionControl: { compact: window.innerWidth < 600, customAttribution: attribution.join(' · ') },
      style: built.style,
    });
    map.addControl(new maplibregl.NavigationControl({ showCompass: false }), 'top-right');
    map.addControl(new maplibregl.ScaleControl(), 'bottom-right');
    map.on('error', (e) => {
      fail(e.error && e.error.message ? e.error.message : e);
      // said on the page too, not only in the console: the tile server is the usual cause
      if (e.sourceId === 'traffic') liveStatus.textContent = 'traffic tiles unavailable (tile server)';
    });
    map.on('data', (e) => {
      if (e.sourceId === 'traffic' && e.tile && /unavailable/.test(liveStatus.textContent)) liveStatus.textContent = 'live';
    });
    // the traffic source and its layers are in the style from the start
    map.on('load', () => { mark('style'); styleLoaded = true; tdb.ready = true; });
    // a phone: the attribution folded behind its (i) button, clear of the legend
    if (window.innerWidth < 600) {
      map.once('load', () => document.querySelectorAll('.maplibregl-ctrl-attrib.maplibregl-compact-show').forEach((e) => {
        e.classList.remove('maplibregl-compact-show');
        e.removeAttribute('open');
      }));
    }
    map.on('sourcedata', (e) => { if (e.sourceId === 'traffic' && e.tile) mark('traffic_tile'); if (e.sourceId === 'osm' && e.tile) mark('basemap_tile'); });
    // the first frame with base map and traffic in it: the first meaningful paint
    map.on('render', () => {
      if (tdb.marks.traffic_tile !== undefined && (tdb.marks.basemap_tile !== undefined || !haveBase)) mark('map_paint');
    });
    bindMap();
    connect();
  }


  if (PICK) {
    tdb.tiles = PICK.traffic;
    Promise.resolve().then(() => start(PICK));   // after the whole script has run
  } else {
    fetch('/config.json', { cache: 'no-store' })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`/config.json: HTTP ${r.status}`))))
      .then((c) => {
        if (!c.tiles || !c.tiles.traffic) throw new Error('/config.json names no tile server (the app has no TRAFFICDB_WEB_TILES)');
        tdb.tiles = c.tiles.traffic;
        if (c.map_name) document.getElementById('map-name').textContent = c.map_name;
        if (c.simulation && !simTimer) { pollSim(); simTimer = setInterval(pollSim, 5000); }
        start(c);
      })
      .catch(fail);
  }
  // everything asked for has arrived and been drawn
  tdb.settled = () => !!map && map.loaded() && map.areTilesLoaded() && !map.isMoving();

  // ---- light or dark --------------------------------------------------------
  document.getElementById('theme').addEventListener('click', () => {
    tdb.theme = tdb.theme === 'dark' ? 'light' : 'dark';
    document.documentElement.dataset.theme = tdb.theme;
    try { localStorage.setItem(THEME_KEY, tdb.theme); } catch (e) { /* not kept */ }
    if (map) S.apply(map, tdb.theme, SOURCE_LAYER, haveBase);
  });

  // ---- the popup: the road in a driver's terms ------------------------------
  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
  }
  function ago(ts) {
    if (!ts) return null;
    const s = Math.max(0, Math.round((Date.now() - Date.parse(ts)) / 1000));
    return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
  }
  function duration(s) {
    s = Math.round(s);
    return s < 90 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
  }
  const CLASS_NAMES = {
    motorway: 'motorway', trunk: 'trunk road', primary: 'main road', secondary: 'secondary road', tertiary: 'local road',
    residential: 'residential street', living_street: 'living street', service: 'service road', unclassified: 'minor road',
    pedestrian: 'pedestrian street', footway: 'footway', cycleway: 'cycleway', path: 'path',
  };
  function className(c) { return CLASS_NAMES[c] || (c ? String(c).replace(/_link$/, ' ramp').replace(/_/g, ' ') : 'road'); }
  // r: /roads/ID's answer, or the tile's properties while it comes
  function popupHtml(r) {
    const rows = [];
    const row = (key, label, value) => rows.push(`<tr><th>${label}</th><td data-k="${key}">${esc(value)}</td></tr>`);
    const level = r.congestion === undefined || r.congestion === null ? null : Number(r.congestion);
    if (r.speed_kmh !== undefined && r.speed_kmh !== null) {
      const ff = r.free_flow_kmh !== undefined && r.free_flow_kmh !== null ? ` of ${Math.round(r.free_flow_kmh)} km/h free flow` : '';
      row('speed_kmh', 'speed', `${Math.round(r.speed_kmh)} km/h${ff}`);
    } else {
      row('speed_kmh', 'speed', 'no traffic data');
    }
    if (r.length_m && r.speed_kmh && r.free_flow_kmh && r.speed_kmh > 0) {
      const d = r.length_m / (r.speed_kmh / 3.6) - r.length_m / (r.free_flow_kmh / 3.6);
      row('delay', 'delay', d >= 1 ? `+${duration(d)} over ${Math.round(r.length_m)} m` : `none over ${Math.round(r.length_m)} m`);
    } else if (r.length_m && r.speed_kmh === 0) {
      row('delay', 'delay', `traffic stopped over ${Math.round(r.length_m)} m`);
    }
    if (r.incident) row('incident', 'incident', r.incident);
    const when = ago(r.updated_at);
    if (when) row('updated', 'updated', when);
    const title = r.name ? esc(r.name) : `unnamed ${esc(className(r.road_class))}`;
    const sub = r.name ? esc(className(r.road_class)) : '';
    const badge = level === null ? '' :
      `<span data-k="congestion" data-level="${level}"><i class="badge" style="background:${S.TRAFFIC[level] || '#999'}"></i>${esc(LEVELS[level] || '')}</span>`;
    return `<div class="popup" data-id="${esc(r.location_id)}"><div class="ptitle" data-k="name">${title}</div>` +
      `<div class="psub">${sub}${sub && badge ? ' · ' : ''}${badge}</div><table>${rows.join('')}</table></div>`;
  }
  let popup = null;
  let popupSeq = 0;
  function bindMap() {
    map.on('click', (e) => {
      const p = e.point;
      const layers = ['roads-traffic', 'roads-base'].filter((id) => map.getLayer(id));
      const hits = layers.length ? map.queryRenderedFeatures([[p.x - 4, p.y - 4], [p.x + 4, p.y + 4]], { layers }) : [];
      if (popup) popup.remove();
      if (!hits.length) return;
      const id = hits[0].id;   // tile_mvt's feature id is the location_id
      const seq = ++popupSeq;
      popup = new maplibregl.Popup({ maxWidth: '300px' }).setLngLat(e.lngLat)
        .setHTML(popupHtml(Object.assign({ location_id: id }, hits[0].properties))).addTo(map);
      const shown = popup;
      fetch(`/roads/${encodeURIComponent(id)}`, { cache: 'no-store' })
        .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`/roads/${id}: HTTP ${r.status}`))))
        .then((road) => {
          if (seq !== popupSeq || !shown.isOpen()) return;
          shown.setHTML(popupHtml(road));
          tdb.popupRoad = road;
        })
        .catch(fail);
    });
    for (const id of ['roads-traffic', 'roads-base']) {
      map.on('mousemove', id, () => { map.getCanvas().style.cursor = 'pointer'; });
      map.on('mouseleave', id, () => { map.getCanvas().style.cursor = ''; });
    }
    map.on('idle', () => {
      // the first view complete: every tile of it drawn (the browser tests' "first meaningful paint")
      if (tdb.firstIdle === undefined && tdb.ready && map.areTilesLoaded()) { tdb.firstIdle = performance.now(); mark('idle'); }
      if (again) {
        const t = [...again.values()];
        again = null;
        map.refreshTiles('traffic', t);
      }
      if (pendingRepaint !== null) {
        tdb.repaints[pendingRepaint] = Date.now();
        pendingRepaint = null;
      }
      if (pendingTrail !== null) { tdb.trailRendered = pendingTrail; pendingTrail = null; }
    });
    map.on('moveend', showAway);
  }

  // ---- when the traffic was published, and where it comes from ------------
  const genValue = document.getElementById('gen-value');
  const genAge = document.getElementById('gen-age');
  const liveStatus = document.getElementById('live-status');
  function showAge() {
    genAge.textContent = ago(tdb.publishedAt) || '–';
  }
  setInterval(showAge, 1000);
  function setState(s) {
    if (s.generation !== undefined && s.generation !== null) tdb.generation = s.generation;
    if (s.published_at) tdb.publishedAt = s.published_at;
    genValue.textContent = tdb.generation === null ? '–' : String(tdb.generation);
    showAge();
  }
  // /sim.json, when /config.json says a simulation feeds the map
  const simLine = document.getElementById('sim');
  let simTimer = null;
  function pollSim() {
    fetch('/sim.json', { cache: 'no-store' })
      .then((r) => (r.status === 200 ? r.json() : null))   // 204: no simulation
      .then((s) => {
        tdb.sim = s;
        simLine.hidden = !s;
        if (s) simLine.textContent = `Simulated traffic (${s.simulator || 'Eclipse SUMO'}) · ${s.clock || ''} simulated`;
      })
      .catch(() => { /* no simulation: the line stays hidden */ });
  }

  // The first view when the URL names none: the map's extent [[w, s], [e, n]]
  // filling the screen (cover, not contain: a tall extract on a wide screen
  // is a city, not a strip), at most zoom 17.
  let viewSet = false;
  function coverView(extent) {
    const el = document.getElementById('map');
    const w = el.clientWidth || 800, h = el.clientHeight || 600;
    const [x0, y0] = [lon2x(extent[0][0], 1), lat2y(extent[1][1], 1)];
    const [x1, y1] = [lon2x(extent[1][0], 1), lat2y(extent[0][1], 1)];
    const fitW = Math.log2(w / 512 / Math.max(1e-12, x1 - x0)), fitH = Math.log2(h / 512 / Math.max(1e-12, y1 - y0));
    return { center: [(extent[0][0] + extent[1][0]) / 2, lat((y0 + y1) / 2, 1)], zoom: Math.max(0, Math.min(17, Math.max(fitW, fitH))) };
  }
  function firstView(extent) {
    if (viewSet) return;
    viewSet = true;
    map.jumpTo(coverView(extent));
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
      if (firstState && !hash && s.extent) firstView(s.extent);
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

  // ---- vessels on a time slider ------------------------------------------
  const toggle = document.getElementById('trail-toggle');
  const controls = document.getElementById('trail-controls');
  const slider = document.getElementById('trail-slider');
  const timeLabel = document.getElementById('trail-time');
  const countLabel = document.getElementById('trail-count');
  const away = document.getElementById('trail-away');
  let trailSeq = 0, trailTimer = null, pendingTrail = null, vesselBox = null;
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
    showAway();
  }
  // "not in view: go to them" while no vessel is on screen; the map moves only on that click
  function showAway() {
    if (!map) return;
    const pts = toggle.checked && tdb.trail ? tdb.trail.features.filter((f) => f.properties.kind === 'position') : [];
    const b = map.getBounds();
    away.hidden = !toggle.checked || pts.length === 0 || pts.some((f) => b.contains(f.geometry.coordinates));
  }
  slider.addEventListener('input', () => {
    clearTimeout(trailTimer);
    const m = Number(slider.value);
    timeLabel.textContent = hhmm(m);
    trailTimer = setTimeout(() => loadTrail(m).catch(fail), 60);
  });
  // to the vessels of the minute shown (else to those of the day)
  async function fitVessels() {
    const pts = tdb.trail ? tdb.trail.features.filter((f) => f.properties.kind === 'position').map((f) => f.geometry.coordinates) : [];
    let box = null;
    if (pts.length) {
      box = [Math.min(...pts.map((p) => p[0])), Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[1]))];
    } else {
      if (!vesselBox) {
        const r = await fetch('/trails/extent');
        vesselBox = r.ok ? await r.json() : null;
      }
      box = vesselBox;
    }
    if (box) map.fitBounds([[box[0], box[1]], [box[2], box[3]]], { padding: 40, maxZoom: 11, animate: false });
  }
  document.getElementById('trail-fit').addEventListener('click', (e) => { e.preventDefault(); fitVessels().catch(fail); });
  toggle.addEventListener('change', () => {
    const on = toggle.checked;
    controls.hidden = !on;
    if (!map || !styleLoaded) return;
    for (const id of ['vessels', 'vessel-tails']) map.setLayoutProperty(id, 'visibility', on ? 'visible' : 'none');
    if (on) loadTrail(Number(slider.value)).catch(fail);
    showAway();
  });
}());
