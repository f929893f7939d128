// web/test/mapview.test.mjs: the live map as a person looks at it, in
// Debian's chromium (headless, puppeteer-core): a base map (land, water,
// labelled roads) at the first view and at zooms 8, 12 and 16; traffic
// colours that a simulation put there, told apart under colour-vision
// deficiencies; a phone's viewport; the vessels' view; the first view's
// paint time and bytes.  test/livemap.sh runs it (after livemap.test.mjs)
// for Helsinki with SUMO traffic and for Delaware, with:
//   MAPVIEW_URL     the app, e.g. http://127.0.0.1:8080
//   MAPVIEW_MAP     helsinki | delaware (the map the cluster has loaded)
//   PGHOST, PGPORT, PGUSER, PGDATABASE, MAPVIEW_PSQL   the cluster and its psql
//   MAPVIEW_SIM     the SUMO feeder's status file (web/sumo_feeder.py --status), when it fed the map
//   MAPVIEW_JAM     the way the feeder jammed (--jam), when it did
//   MAPVIEW_OUT     a directory for the screenshots and first-view.json (optional)
//   CHROMIUM        the browser (default /usr/bin/chromium)
// Every wait is bounded; nothing but 127.0.0.1 is contacted.
import { test as nodeTest, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launch, overlays, waitIn, watch } from './browser.mjs';
import { PNG } from 'pngjs';

const BASE = process.env.MAPVIEW_URL;
const MAP = process.env.MAPVIEW_MAP || 'helsinki';
const PSQL = process.env.MAPVIEW_PSQL || 'psql';
const SIM = process.env.MAPVIEW_SIM || '';
const JAM = process.env.MAPVIEW_JAM || '';
const OUT = process.env.MAPVIEW_OUT || '';
if (!BASE) throw new Error('MAPVIEW_URL is not set (test/livemap.sh runs this)');
// MAPVIEW_SKIP: a regular expression of test names to skip (the second map
// skips what does not depend on the map: the legend's colours, the vessels)
const SKIP = process.env.MAPVIEW_SKIP ? new RegExp(process.env.MAPVIEW_SKIP) : null;
function test(name, opts, fn) {
  if (typeof opts === 'function') [opts, fn] = [{}, opts];
  return nodeTest(name, { ...opts, skip: opts.skip || (SKIP && SKIP.test(name) ? 'MAPVIEW_SKIP' : false) }, fn);
}
const tmp = mkdtempSync(path.join(os.tmpdir(), 'mapview-'));

function rows(q) {
  const out = execFileSync(PSQL, ['-X', '-q', '-tA', '-F', '\t', '-v', 'ON_ERROR_STOP=1', '-c', q],
    { encoding: 'utf8', timeout: 60000 }).replace(/\n$/, '');
  return out === '' ? [] : out.split('\n').map((l) => l.split('\t'));
}

let browser, page;
const consoleErrors = [];
// every response the page got (its workers' tile fetches too): URL and body bytes
const responses = [];

const until = (fn, ms, what, ...args) => waitIn(page, fn, ms, what, ...args);
async function settled(ms = 30000) {
  await until(() => window.__tdb && window.__tdb.ready && window.__tdb.settled(), ms, 'the map to draw every tile');
}
async function view(zoom, lon, lat) {
  await page.evaluate((z, x, y) => window.__tdb.map.jumpTo({ zoom: z, center: [x, y] }), zoom, lon, lat);
  await new Promise((r) => setTimeout(r, 100));
  await settled();
}
async function shot(name, p = page) {
  const buf = await p.screenshot({ type: 'png' });
  if (OUT) writeFileSync(path.join(OUT, `${MAP}-${name}.png`), buf);
  return { png: PNG.sync.read(buf), buf };
}
const rgb = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16));
const near = (p, c, tol) => Math.abs(p[0] - c[0]) <= tol && Math.abs(p[1] - c[1]) <= tol && Math.abs(p[2] - c[2]) <= tol;
// the share of the screenshot's pixels (outside the panels) within tol of each colour
async function shares(png, colours, tol = 6) {
  const cover = await overlays(page);
  const counts = Object.fromEntries(Object.keys(colours).map((k) => [k, 0]));
  let n = 0;
  for (let y = 0; y < png.height; y += 2) {
    for (let x = 0; x < png.width; x += 2) {
      if (cover.some(([l, t, r, b]) => x >= l && x <= r && y >= t && y <= b)) continue;
      n++;
      const i = (png.width * y + x) * 4;
      const p = [png.data[i], png.data[i + 1], png.data[i + 2]];
      for (const [k, c] of Object.entries(colours)) if (near(p, c, tol)) counts[k]++;
    }
  }
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / n]));
}
async function theme() {
  return page.evaluate(() => window.tdbStyle.THEMES[window.__tdb.theme]);
}
// tesseract's reading of the map's labels: a screenshot at twice the pixels
// with every layer but the labels and the land hidden (tesseract reads text on
// a plain ground, not between coloured lines), then the map as it was
async function ocr(name) {
  const hidden = await page.evaluate(() => {
    const m = window.__tdb.map;
    const ids = m.getStyle().layers.filter((l) => !['background', 'earth', 'world-earth'].includes(l.id) && !/-label$/.test(l.id) &&
      m.getLayoutProperty(l.id, 'visibility') !== 'none').map((l) => l.id);
    for (const id of ids) m.setLayoutProperty(id, 'visibility', 'none');
    return ids;
  });
  const vp = page.viewport();
  try {
    await page.setViewport({ ...vp, deviceScaleFactor: 2 });
    await settled();
    const buf = await page.screenshot({ type: 'png' });
    const f = path.join(tmp, `${name}.png`);
    writeFileSync(f, buf);
    if (OUT) writeFileSync(path.join(OUT, `${MAP}-${name}.png`), buf);
    return execFileSync('tesseract', [f, 'stdout', '--psm', '11'], { encoding: 'utf8', timeout: 120000, stdio: ['ignore', 'pipe', 'ignore'] });
  } finally {
    await page.setViewport(vp);
    await page.evaluate((ids) => { for (const id of ids) window.__tdb.map.setLayoutProperty(id, 'visibility', 'visible'); }, hidden);
    await settled();
  }
}

let centre, waterPoint;

before(async () => {
  [centre] = rows(`SELECT ST_X(c), ST_Y(c) FROM (SELECT ST_Centroid(ST_Extent(geom)::geometry) AS c FROM trafficdb.locations) s`).map((r) => r.map(Number));
  browser = await launch();
  page = await browser.newPage();
  watch(page, consoleErrors);
  page.on('response', (r) => {
    // (the event stream never ends: its body is never complete)
    if (responses.length >= 100000 || /event-stream/.test(r.headers()['content-type'] || '') || r.status() === 304) return;
    const len = Number(r.headers()['content-length']);
    const body = Promise.race([r.buffer().then((b) => b.length, () => len || 0),
      new Promise((res) => { setTimeout(() => res(len || 0), 5000); })]);
    responses.push(body.then((n) => [r.url(), r.status(), n]));
  });
  await page.setViewport({ width: 1280, height: 800 });
  await page.evaluateOnNewDocument(() => localStorage.setItem('trafficdb.theme', 'light'));
});

after(async () => {
  if (browser) await browser.close();
  rmSync(tmp, { recursive: true, force: true });
});

test(`${MAP}: the first view (no hash) is the map filled with land, roads and traffic, within seconds`, async () => {
  const t0 = Date.now();
  const resp = await page.goto(`${BASE}/map/`, { waitUntil: 'load', timeout: 30000 });
  assert.equal(resp.status(), 200);
  await settled();
  const wall = Date.now() - t0;
  const t = await theme();
  const { png } = await shot('first-view');
  const s = await shares(png, { land: rgb(t.land), water: rgb(t.water) });
  // Chromium's timings (performance API) and the bytes of every response of the first view
  const perf = await page.evaluate(() => {
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const nav = performance.getEntriesByType('navigation')[0];
    return {
      first_contentful_paint_ms: fcp ? Math.round(fcp.startTime) : null,
      dom_content_loaded_ms: nav ? Math.round(nav.domContentLoadedEventEnd) : null,
      // the first frame with base-map and traffic tiles in it (the page's mark)
      first_meaningful_paint_ms: window.__tdb.marks.map_paint,
      first_view_complete_ms: Math.round(window.__tdb.firstIdle),
      zoom: Math.round(window.__tdb.map.getZoom() * 100) / 100,
      marks: window.__tdb.marks,
    };
  });
  const got = await Promise.all(responses);
  const of = (re) => got.filter(([u]) => re.test(u));
  const sum = (l) => l.reduce((a, [, , n]) => a + n, 0);
  Object.assign(perf, {
    traffic_tiles: of(/\/traffic\/\d+\//).length, traffic_bytes: sum(of(/\/traffic\/\d+\//)),
    basemap_requests: of(/\/basemap\//).length, basemap_bytes: sum(of(/\/basemap\//)),
    glyph_requests: of(/\/fonts\//).length, glyph_bytes: sum(of(/\/fonts\//)),
    page_bytes: sum(of(/\/(map\/|vendor\/|config\.json)/)), requests: got.length, bytes: sum(got),
  });
  perf.wall_ms = wall;
  console.log(`${MAP} first view:`, JSON.stringify(perf), 'land', s.land.toFixed(3), 'water', s.water.toFixed(3));
  if (OUT) writeFileSync(path.join(OUT, `${MAP}-first-view.json`), JSON.stringify(perf, null, 1) + '\n');
  assert.ok(perf.first_view_complete_ms > 0, 'the page records when its first view was complete');
  assert.ok(perf.traffic_tiles > 0 && perf.traffic_bytes > 0, 'the first view loaded traffic tiles');
  assert.ok(perf.basemap_bytes > 0 && perf.glyph_requests > 0, 'the first view loaded the base map and its glyphs');
  assert.ok(s.land > 0.15, `land covers ${(s.land * 100).toFixed(1)} % of the first view`);
  const traffic = await page.evaluate(() => window.__tdb.map.queryRenderedFeatures({ layers: ['roads-traffic'] }).length);
  assert.ok(traffic > 20, `${traffic} coloured roads in the first view`);
  assert.deepEqual(consoleErrors, []);
});

// a point of the base map's water near the centre: the zooms below are
// centred between it and the centre, so each view has water in it
test(`${MAP}: the base map has water near the roads`, async () => {
  await view(12, centre[0], centre[1]);
  waterPoint = await page.evaluate((c) => {
    const m = window.__tdb.map;
    let best = null;
    for (const f of m.queryRenderedFeatures({ layers: ['water'] })) {
      const rings = f.geometry.type === 'Polygon' ? [f.geometry.coordinates[0]] : f.geometry.coordinates.map((p) => p[0]);
      for (const ring of rings) {
        for (const [x, y] of ring) {
          const d = (x - c[0]) ** 2 + (y - c[1]) ** 2;
          if (!best || d < best[2]) best = [x, y, d];
        }
      }
    }
    return best;
  }, centre);
  assert.ok(waterPoint, 'water is drawn within a z12 view of the centre');
});

for (const zoom of [8, 12, 16]) {
  test(`${MAP}: at zoom ${zoom} the screenshot has land, water, roads with traffic and labels`, async () => {
    // at z16 the view is a few hundred metres: go to the shore
    const [lon, lat] = zoom >= 14 && waterPoint ? [waterPoint[0], waterPoint[1]] : centre;
    await view(zoom, lon, lat);
    const t = await theme();
    const { png } = await shot(`z${zoom}`);
    const tr = await page.evaluate(() => window.tdbStyle.TRAFFIC);
    const colours = { land: rgb(t.land), water: rgb(t.water) };
    tr.forEach((c, i) => { colours[`traffic${i}`] = rgb(c); });
    const s = await shares(png, colours);
    const traffic = tr.reduce((a, c, i) => a + s[`traffic${i}`], 0);
    console.log(`${MAP} z${zoom}:`, Object.entries(s).map(([k, v]) => `${k} ${(v * 100).toFixed(2)} %`).join(', '));
    assert.ok(s.land > 0.05, `land ${(s.land * 100).toFixed(2)} %`);
    assert.ok(s.water > 0.005, `water ${(s.water * 100).toFixed(2)} %`);
    const drawn = await page.evaluate(() => window.__tdb.map.queryRenderedFeatures({ layers: ['roads-traffic'] }).length);
    assert.ok(drawn > 0, `coloured roads drawn at z${zoom}: ${drawn}`);
    // pixels of traffic colours where the roads are more than a dot (a city's centre at z8 is a few pixels)
    if (zoom >= 12) assert.ok(traffic > { 12: 0.0003, 16: 0.003 }[zoom], `traffic colours ${(traffic * 100).toFixed(3)} %`);
    const labels = await page.evaluate(() => window.__tdb.map.queryRenderedFeatures(
      { layers: ['road-label', 'place-label', 'country-label', 'water-label'].filter((l) => window.__tdb.map.getLayer(l)) })
      .map((f) => f.properties.name).filter(Boolean));
    assert.ok(labels.length > 0, `labels drawn at z${zoom}`);
  });
}

// Tesseract reads straight, level text: the views are the centre at z16 and
// the middles of the three longest nearly straight, nearly east-west named
// roads (a label on a slanted road is drawn slanted, letter by letter along a
// curve), then the centre at z12, whose place names are level
test(`${MAP}: tesseract reads a street name the map draws at zoom 16 (else a place name at 12)`, async () => {
  const views = [[16, ...centre]].concat(rows(`SELECT 16, ST_X(p), ST_Y(p) FROM (
      SELECT ST_LineInterpolatePoint(geom, 0.5) AS p, length_m,
             ST_Distance(ST_StartPoint(geom)::geography, ST_EndPoint(geom)::geography) / nullif(length_m, 0) AS straight,
             abs(sin(ST_Azimuth(ST_StartPoint(geom), ST_EndPoint(geom)))) AS east_west
        FROM trafficdb.locations WHERE name IS NOT NULL AND length_m > 250) s
      WHERE straight > 0.98 AND east_west > 0.97 ORDER BY length_m DESC LIMIT 3`).map((r) => r.map(Number)), [[12, ...centre]]);
  const tried = [];
  for (const [i, [zoom, lon, lat]] of views.entries()) {
    await view(zoom, lon, lat);
    const layer = zoom >= 16 ? 'road-label' : 'place-label';
    const drawn = await page.evaluate((l) => [...new Set(window.__tdb.map.queryRenderedFeatures({ layers: [l] })
      .map((f) => f.properties.name).filter(Boolean))], layer);
    if (!drawn.length) continue;
    const text = (await ocr(`ocr-${i}`)).replace(/\s+/g, ' ');
    const read = drawn.filter((n) => n.length >= 5 && text.includes(n));
    tried.push(`z${zoom} ${lon.toFixed(4)},${lat.toFixed(4)} (${layer}): drawn ${JSON.stringify(drawn.slice(0, 8))}, read ${JSON.stringify(read)}`);
    if (read.length) {
      console.log(`${MAP} OCR: ${tried.join('; ')}`);
      return;
    }
  }
  assert.fail(`tesseract read none of the names drawn: ${tried.join('; ')}`);
});

// the rendered colour of a road: the pixel at its midpoint, labels hidden
async function renderedLevel(wayId) {
  const [[x, y]] = rows(`SELECT ST_X(p), ST_Y(p) FROM (SELECT ST_LineInterpolatePoint(geom, 0.5) AS p
      FROM trafficdb.locations WHERE location_id = ${BigInt(wayId)}) s`);
  await view(17, Number(x), Number(y));
  const px = await page.evaluate((lon, lat) => { const p = window.__tdb.map.project([lon, lat]); return [p.x, p.y]; }, Number(x), Number(y));
  const { png } = await shot(`way-${wayId}`);
  const tr = (await page.evaluate(() => window.tdbStyle.TRAFFIC)).map(rgb);
  // the level whose colour most pixels within 2 px of the midpoint have
  const votes = tr.map(() => 0);
  for (let dy = -2; dy <= 2; dy++) {
    for (let dx = -2; dx <= 2; dx++) {
      const i = (png.width * Math.round(px[1] + dy) + Math.round(px[0] + dx)) * 4;
      const p = [png.data[i], png.data[i + 1], png.data[i + 2]];
      tr.forEach((c, k) => { if (near(p, c, 8)) votes[k]++; });
    }
  }
  const best = votes.indexOf(Math.max(...votes));
  return votes[best] > 0 ? best : null;
}

test(`${MAP}: the colours drawn are the simulation's speeds (SUMO), a jammed road at standstill`, { skip: !SIM }, async () => {
  await page.evaluate(() => { for (const id of ['road-label', 'place-label', 'water-label']) if (window.__tdb.map.getLayer(id)) window.__tdb.map.setLayoutProperty(id, 'visibility', 'none'); });
  try {
    const status = JSON.parse(readFileSync(SIM, 'utf8'));
    const ways = Object.entries(status.ways || {});
    assert.ok(ways.length > 50, `the simulation fed ${ways.length} roads`);
    // the page shows what it is
    await until(() => !document.getElementById('sim').hidden, 10000, 'the simulation line');
    assert.match(await page.$eval('#sim', (e) => e.textContent), /Simulated traffic \(Eclipse SUMO.*\) · \d\d:\d\d simulated/);
    if (JAM) {
      assert.equal(status.ways[JAM]?.congestion, 4, `the jammed way ${JAM} is at standstill in the simulation`);
      assert.equal(await renderedLevel(JAM), 4, `the jammed way ${JAM} is drawn in the standstill colour`);
    }
    // one road of each level the simulation has (major roads: coloured at every zoom), drawn in its colour
    const published = new Map(rows(`SELECT location_id, congestion FROM trafficdb.locations
        WHERE congestion IS NOT NULL AND road_class IN ('motorway','trunk','primary','secondary','tertiary') AND length_m > 60`));
    const checked = [];
    for (let level = 0; level <= 4; level++) {
      const w = ways.find(([id, v]) => v.congestion === level && published.get(id) === String(level) && id !== JAM);
      if (!w) continue;
      assert.equal(await renderedLevel(w[0]), level, `way ${w[0]} (simulated ${w[1].speed_kmh} km/h of ${w[1].free_flow_kmh}) drawn at level ${level}`);
      checked.push(`${w[0]}:${level}`);
    }
    console.log(`${MAP}: simulated levels drawn as simulated: ${checked.join(' ')}`);
    assert.ok(checked.length >= 2, `at least two levels checked (${checked.length})`);
  } finally {
    await page.evaluate(() => { for (const id of ['road-label', 'place-label', 'water-label']) if (window.__tdb.map.getLayer(id)) window.__tdb.map.setLayoutProperty(id, 'visibility', 'visible'); });
  }
});

// CIE L*a*b* of an sRGB colour, and the distance between two (ΔE 1976)
function lab([r, g, b]) {
  const lin = (c) => { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const [R, G, B] = [lin(r), lin(g), lin(b)];
  const f = (t) => (t > 0.008856 ? Math.cbrt(t) : 7.787 * t + 16 / 116);
  const X = (0.4124 * R + 0.3576 * G + 0.1805 * B) / 0.95047, Y = 0.2126 * R + 0.7152 * G + 0.0722 * B;
  const Z = (0.0193 * R + 0.1192 * G + 0.9505 * B) / 1.08883;
  return [116 * f(Y) - 16, 500 * (f(X) - f(Y)), 200 * (f(Y) - f(Z))];
}
const dE = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);

test(`${MAP}: the five traffic colours stay apart under simulated colour-vision deficiencies`, async () => {
  const cdp = await page.createCDPSession();
  const report = [];
  try {
    for (const type of ['none', 'protanopia', 'deuteranopia', 'tritanopia', 'achromatopsia']) {
      await cdp.send('Emulation.setEmulatedVisionDeficiency', { type });
      const { png } = await shot(`legend-${type}`);
      const swatches = await page.$$eval('#legend .row i', (is) => is.map((i) => { const r = i.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }));
      const cols = swatches.map(([x, y]) => { const i = (png.width * Math.round(y) + Math.round(x)) * 4; return [png.data[i], png.data[i + 1], png.data[i + 2]]; });
      let min = Infinity;
      for (let a = 0; a < cols.length; a++) for (let b = a + 1; b < cols.length; b++) min = Math.min(min, dE(lab(cols[a]), lab(cols[b])));
      report.push(`${type} ${min.toFixed(1)}`);
      // achromatopsia leaves only lightness: told apart less well, still apart
      assert.ok(min >= (type === 'achromatopsia' ? 5 : 12), `${type}: two legend colours ΔE ${min.toFixed(1)} apart`);
    }
  } finally {
    await cdp.send('Emulation.setEmulatedVisionDeficiency', { type: 'none' });
    await cdp.detach();
  }
  console.log(`${MAP}: smallest ΔE76 between legend colours: ${report.join(', ')}`);
});

test(`${MAP}: the dark theme repaints the same map dark`, async () => {
  await view(14, centre[0], centre[1]);
  await page.click('#theme');
  await until(() => window.__tdb.theme === 'dark', 2000, 'the dark theme');
  await settled();
  const t = await theme();
  const { png } = await shot('dark-z14');
  const s = await shares(png, { land: rgb(t.land), water: rgb(t.water), building: rgb(t.building) });
  assert.ok(s.land + s.water + s.building > 0.3, `dark land/water/buildings ${JSON.stringify(s)}`);
  await page.click('#theme');
  await until(() => window.__tdb.theme === 'light', 2000, 'the light theme');
  await settled();
});

test(`${MAP}: the popup speaks a driver's language`, async () => {
  const [[id, x, y, name]] = rows(`SELECT location_id, ST_X(p), ST_Y(p), name FROM (SELECT location_id, name, ST_LineInterpolatePoint(geom, 0.5) AS p
      FROM trafficdb.locations WHERE congestion IS NOT NULL AND name IS NOT NULL AND road_class IN ('primary','secondary','tertiary')
      ORDER BY length_m DESC LIMIT 1) s`);
  await view(17, Number(x), Number(y));
  const p = await page.evaluate((lon, lat) => { const q = window.__tdb.map.project([lon, lat]); return [q.x, q.y]; }, Number(x), Number(y));
  await page.mouse.click(p[0], p[1]);
  await until((i) => document.querySelector(`.maplibregl-popup .popup[data-id="${i}"] td[data-k="updated"]`), 5000, 'the popup with the road from /roads', id);
  const shown = await page.$$eval('.maplibregl-popup [data-k]', (els) => Object.fromEntries(els.map((e) => [e.dataset.k, e.textContent])));
  assert.equal(shown.name, name);
  assert.match(shown.speed_kmh, /^\d+ km\/h of \d+ km\/h free flow$/);
  assert.match(shown.delay, /^(\+\d+ (s|min \d+ s)|none) over \d+ m$|^traffic stopped over \d+ m$/);
  assert.match(shown.updated, /^\d+ (s|min|h) ago$/);
  const text = await page.$eval('.maplibregl-popup', (e) => e.textContent);
  assert.doesNotMatch(text, /generation|location_id|changed_generation/);
  await page.keyboard.press('Escape');
  await page.evaluate(() => document.querySelectorAll('.maplibregl-popup').forEach((e) => e.remove()));
});

test(`${MAP}: vessels come on where the map is, with their own legend; only "go to them" moves the map`, async () => {
  await view(13, centre[0], centre[1]);
  const before = await page.evaluate(() => window.__tdb.map.getCenter().toArray());
  await page.click('#trail-toggle');
  await until(() => window.__tdb.trailRendered !== null, 20000, 'the vessels');
  const after = await page.evaluate(() => window.__tdb.map.getCenter().toArray());
  assert.deepEqual(after, before, 'turning the vessels on did not move the map');
  assert.equal(await page.$eval('#trail-controls .vlegend', (e) => e.offsetParent !== null), true);
  await until(() => !document.getElementById('trail-away').hidden, 5000, '"not in view: go to them"');
  await page.click('#trail-fit');
  await until((b) => { const c = window.__tdb.map.getCenter(); return c.lng !== b[0] || c.lat !== b[1]; }, 10000, 'the map to go to the vessels', before);
  await new Promise((r) => setTimeout(r, 200));
  await settled();
  const t = await theme();
  const { png } = await shot('vessels');
  const s = await shares(png, { land: rgb(t.land), water: rgb(t.water), vessel: rgb(t.vessel) }, 10);
  console.log(`${MAP} vessels:`, JSON.stringify(s));
  assert.ok(s.land > 0.02 && s.water > 0.02, `the vessels' view has a coastline: ${JSON.stringify(s)}`);
  assert.ok(s.vessel > 0, 'vessels drawn');
  assert.equal(await page.$eval('#trail-away', (e) => e.hidden), true);
  await page.click('#trail-toggle');
});

test(`${MAP}: on a 390 × 844 phone the panels fit, leave the map visible and a tap opens the popup`, async () => {
  const phone = await browser.newPage();
  const errors = [];
  phone.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  try {
    await phone.setViewport({ width: 390, height: 844, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    await phone.goto(`${BASE}/map/`, { waitUntil: 'load', timeout: 30000 });
    await phone.waitForFunction(() => window.__tdb && window.__tdb.ready && window.__tdb.settled(), { timeout: 30000, polling: 100 });
    const rects = await phone.$$eval('.panel, .maplibregl-ctrl-group', (els) => els.filter((e) => e.offsetParent !== null).map((e) => {
      const r = e.getBoundingClientRect();
      return { id: e.id || e.className, l: r.left, t: r.top, r: r.right, b: r.bottom };
    }));
    for (const a of rects) {
      assert.ok(a.l >= 0 && a.t >= 0 && a.r <= 390 && a.b <= 844, `${a.id} within the screen: ${JSON.stringify(a)}`);
    }
    for (let i = 0; i < rects.length; i++) {
      for (let j = i + 1; j < rects.length; j++) {
        const a = rects[i], b = rects[j];
        assert.ok(a.r <= b.l || b.r <= a.l || a.b <= b.t || b.b <= a.t, `${a.id} and ${b.id} overlap`);
      }
    }
    const covered = rects.reduce((s, a) => s + (a.r - a.l) * (a.b - a.t), 0) / (390 * 844);
    assert.ok(covered < 0.35, `panels cover ${(covered * 100).toFixed(0)} % of the phone's screen`);
    assert.equal(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'no sideways scrolling');
    const buf = await phone.screenshot({ type: 'png' });
    if (OUT) writeFileSync(path.join(OUT, `${MAP}-phone.png`), buf);
    // a tap on a coloured road
    const hit = await phone.evaluate(() => {
      const m = window.__tdb.map;
      const f = m.queryRenderedFeatures({ layers: ['roads-traffic'] }).find((g) => g.geometry.type === 'LineString');
      if (!f) return null;
      const c = f.geometry.coordinates[Math.floor(f.geometry.coordinates.length / 2)];
      const p = m.project(c);
      return p.x > 20 && p.x < 370 && p.y > 150 && p.y < 650 ? [p.x, p.y] : null;
    });
    if (hit) {
      await phone.touchscreen.tap(hit[0], hit[1]);
      await phone.waitForFunction(() => document.querySelector('.maplibregl-popup'), { timeout: 5000 });
      const r = await phone.$eval('.maplibregl-popup', (e) => { const b = e.getBoundingClientRect(); return [b.left, b.right]; });
      assert.ok(r[0] >= 0 && r[1] <= 390, `the popup fits the screen: ${r}`);
    }
    assert.deepEqual(errors, []);
  } finally {
    await phone.close();
  }
});

test(`${MAP}: no console errors over the whole session`, () => {
  assert.deepEqual(consoleErrors, []);
});
