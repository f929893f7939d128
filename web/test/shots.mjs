// web/test/shots.mjs: screenshots of the live map in headless chromium, for
// the docs (docs/live-map.md) and for looking at a change.
//
//   node test/shots.mjs URL OUT.png [WIDTHxHEIGHT] [--theme dark] [--vessels] [--wait MS] [--click LON,LAT]
//
// URL is the page with an optional #zoom/lat/lon hash; prints the page's
// console errors and exits 1 when there were any.
import puppeteer from 'puppeteer-core';

const args = process.argv.slice(2);
const WITH_VALUE = ['--theme', '--wait', '--click'];
const positional = args.filter((a, i) => !a.startsWith('--') && !WITH_VALUE.includes(args[i - 1]));
const [url, out, size = '1280x800'] = positional;
const flag = (f) => args.includes(f);
const opt = (f, d) => (args.indexOf(f) >= 0 ? args[args.indexOf(f) + 1] : d);
if (!url || !out) { console.error('usage: node test/shots.mjs URL OUT.png [WxH] [--theme dark] [--vessels] [--wait MS]'); process.exit(2); }
const [width, height] = size.split('x').map(Number);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'],
});
const errors = [];
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.setViewport({ width, height, deviceScaleFactor: 1, isMobile: width < 600, hasTouch: width < 600 });
  if (opt('--theme')) await page.evaluateOnNewDocument((t) => localStorage.setItem('trafficdb.theme', t), opt('--theme'));
  await page.goto(url, { waitUntil: 'load', timeout: 30000 });
  await page.waitForFunction(() => window.__tdb && window.__tdb.ready && window.__tdb.settled(), { timeout: 30000, polling: 100 });
  if (flag('--vessels')) {
    await page.click('#trail-toggle');
    await page.waitForFunction(() => window.__tdb.trailRendered !== null, { timeout: 20000, polling: 100 });
  }
  if (opt('--click')) {   // a click at a place: the popup of the road there
    const [lon, lat] = opt('--click').split(',').map(Number);
    const p = await page.evaluate((x, y) => { const q = window.__tdb.map.project([x, y]); return [q.x, q.y]; }, lon, lat);
    await page.mouse.click(p[0], p[1]);
    await page.waitForFunction(() => document.querySelector('.maplibregl-popup [data-k="updated"]'), { timeout: 10000 });
  }
  await new Promise((r) => setTimeout(r, Number(opt('--wait', '300'))));
  await page.waitForFunction(() => window.__tdb.settled(), { timeout: 30000, polling: 100 });
  await page.screenshot({ path: out, type: 'png' });
  const view = await page.evaluate(() => ({ zoom: window.__tdb.map.getZoom(), center: window.__tdb.map.getCenter() }));
  console.log(`${out}: zoom ${view.zoom.toFixed(2)} centre ${view.center.lng.toFixed(4)},${view.center.lat.toFixed(4)}`);
} finally {
  await browser.close();
}
for (const e of errors) console.error('console error:', e);
process.exit(errors.length ? 1 : 0);
