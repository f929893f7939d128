// web/test/browser.mjs: Debian's chromium, headless, as the browser tests
// (livemap.test.mjs, mapview.test.mjs) drive it through puppeteer-core.
import puppeteer from 'puppeteer-core';

// software WebGL (SwiftShader): no GPU here; root needs --no-sandbox
export function launch() {
  return puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-dev-shm-usage',
      '--no-first-run', '--disable-background-networking', '--disable-component-update'],
    timeout: 30000,
  });
}

// a tile request the page aborted itself: MapLibre cancels the tiles it no
// longer needs when the view moves on (Chromium reports net::ERR_ABORTED;
// a server that fails them gives another error, or a status).  The base
// map's tiles are range requests into its PMTiles archive, which the pmtiles
// protocol aborts with the tile (a clean chroot's run, as a user with sudo,
// saw two such aborts of /basemap/map.pmtiles and failed the session's check)
function abortedTile(r) {
  const u = new URL(r.url());
  return r.failure()?.errorText === 'net::ERR_ABORTED' &&
    (/\/\d+\/\d+\/\d+(\?[^/]*)?$/.test(u.pathname + u.search) || u.pathname.endsWith('.pmtiles'));
}

// the page's console errors, uncaught exceptions and failed requests (not
// the tiles it aborted), into errors
export function watch(page, errors) {
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('requestfailed', (r) => {
    if (!abortedTile(r)) errors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
}

// wait for a condition in the page, at most ms; the error names what was awaited
export async function waitIn(page, fn, ms, what, ...args) {
  try {
    await page.waitForFunction(fn, { timeout: ms, polling: 50 }, ...args);
  } catch (e) {
    throw new Error(`timed out after ${ms} ms waiting for ${what}`);
  }
}

// the rectangles the page's panels, controls and popup cover (not the map), grown by 2 px
export function overlays(page) {
  return page.$$eval('.panel, .maplibregl-ctrl, .maplibregl-popup', (els) => els.map((e) => {
    const r = e.getBoundingClientRect();
    return [r.left - 2, r.top - 2, r.right + 2, r.bottom + 2];
  }));
}
