// web/bench/repaint.mjs: from trafficdb.publish() to the page's repainted
// tile, in headless Debian chromium (bench/livemap.sh runs it).
//
//   node web/bench/repaint.mjs BASE_URL RUNS
//
// Opens the page on a street (LIVEMAP_STREET, default Mannerheimintie) at
// zoom 16, then RUNS times: feeds the street's locations a new congestion
// level (psql, not timed), calls trafficdb.publish() and waits (at most 10 s)
// until the page has received the publication's event, fetched the tiles it
// touched again and drawn them (the map's next idle).  The feed rows and
// publish() go through one psql session (two transactions back to back), and
// the clock starts before it.  Prints one line per run: generation, ms to
// the event, ms to the repaint, tiles fetched, ms psql took (its start, the
// INSERT and publish()).  PG* variables name the cluster.
// LIVEMAP_TILES (a URL template, {z}/{x}/{y}) and LIVEMAP_SOURCE_LAYER: the
// page takes its traffic tiles from there instead of its own server
// (window.__tdbTiles, set before the page's scripts run; bench/tiles.sh).
import { execFileSync } from 'node:child_process';
import puppeteer from 'puppeteer-core';

const [base, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 20);
const PSQL = process.env.LIVEMAP_PSQL || 'psql';
const STREET = process.env.LIVEMAP_STREET || 'Mannerheimintie';
const psql2 = (a, b) => execFileSync(PSQL, ['-X', '-q', '-tA', '-v', 'ON_ERROR_STOP=1', '-c', a, '-c', b], { encoding: 'utf8', timeout: 30000 });
const sql = (q) => execFileSync(PSQL, ['-X', '-q', '-tA', '-v', 'ON_ERROR_STOP=1', '-c', q], { encoding: 'utf8', timeout: 30000 }).trim();

const [lon, lat] = sql(`SELECT round(ST_X(c)::numeric, 5) || ' ' || round(ST_Y(c)::numeric, 5)
  FROM (SELECT ST_Centroid(ST_Collect(geom)) AS c FROM trafficdb.locations WHERE name = '${STREET}') s`).split(' ');
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, timeout: 30000,
  args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-dev-shm-usage', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  if (process.env.LIVEMAP_TILES) {
    await page.evaluateOnNewDocument((traffic, layer) => { window.__tdbTiles = { traffic, source_layer: layer }; },
      process.env.LIVEMAP_TILES, process.env.LIVEMAP_SOURCE_LAYER || 'traffic');
  }
  await page.setViewport({ width: 1100, height: 750 });
  await page.goto(`${base}/map/#16/${lat}/${lon}`, { waitUntil: 'load', timeout: 30000 });
  await page.waitForFunction(() => window.__tdb && window.__tdb.ready && window.__tdb.settled() && window.__tdb.generation !== null,
    { timeout: 20000, polling: 50 });
  // the page draws roads from the tiles asked for (the right server and layer)
  const loaded = await page.evaluate(() => {
    const m = window.__tdb.map;
    const layer = m.getLayer('roads-base').sourceLayer;
    return { tiles: m.getSource('traffic').tiles[0], layer, errors: window.__tdb.errors,
      features: m.querySourceFeatures('traffic', { sourceLayer: layer }).length };
  });
  if (loaded.errors.length || !loaded.features) throw new Error(`the page drew no roads: ${JSON.stringify(loaded)}`);
  console.error(`repaint: ${loaded.features} road features of layer ${loaded.layer} drawn from ${loaded.tiles}`);
  for (let i = 0; i < runs; i++) {
    const level = i % 2 === 0 ? 4 : 0;
    const prev = Number(await page.evaluate(() => window.__tdb.generation));
    const t0 = Date.now();
    // the feed rows, then publish(): one psql session, two transactions back
    // to back (the daemon's own cycle may publish them first: then that
    // generation is the one repainted)
    psql2(`INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion)
         SELECT location_id, ${level === 4 ? 4 : 45}, 50, ${level} FROM trafficdb.locations WHERE name = '${STREET}'`,
    'SELECT trafficdb.publish()');
    const t1 = Date.now();
    const first = (prev) => Object.keys(window.__tdb.repaints).map(Number).filter((g) => g > prev).sort((a, b) => a - b)[0];
    try {
      await page.waitForFunction(`(${first})(${prev}) !== undefined`, { timeout: 10000, polling: 5 });
    } catch (e) {
      const st = await page.evaluate(() => JSON.stringify({ g: window.__tdb.generation, refreshes: window.__tdb.refreshes.slice(-4),
        repaints: window.__tdb.repaints, received: window.__tdb.received, settled: window.__tdb.settled() }));
      throw new Error(`no repaint after generation ${prev} within 10 s: ${st}`);
    }
    const r = await page.evaluate((prev, firstSrc) => {
      const g = eval(firstSrc)(prev);
      return { g, event: window.__tdb.received[g], repaint: window.__tdb.repaints[g],
        tiles: (window.__tdb.refreshes.find((x) => x.generation === g) || {}).tiles };
    }, prev, String(first));
    console.log(r.g, r.event - t0, r.repaint - t0, r.tiles ? r.tiles.length : 'all', t1 - t0);
    await new Promise((res) => setTimeout(res, 200));
  }
} finally {
  await browser.close();
}
