import puppeteer from 'puppeteer-core';
import { readFileSync } from 'node:fs';
const b = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-dev-shm-usage'] });
const p = await b.newPage();
await p.setViewport({ width: 1280, height: 800 });
await p.tracing.start({ path: '/tmp/trace.json', categories: ['devtools.timeline', 'v8', 'gpu', 'toplevel', 'disabled-by-default-devtools.timeline'] });
await p.goto(process.argv[2], { waitUntil: 'load' });
await p.waitForFunction(() => window.__tdb && window.__tdb.firstIdle, { timeout: 30000, polling: 50 });
console.log(JSON.stringify(await p.evaluate(() => window.__tdb.marks)));
await p.tracing.stop();
await b.close();
const t = JSON.parse(readFileSync('/tmp/trace.json'));
const ev = t.traceEvents || t;
const names = {};
for (const e of ev) if (e.name === 'thread_name') names[`${e.pid}:${e.tid}`] = e.args.name;
const agg = {};
for (const e of ev) {
  if (e.ph !== 'X' || !e.dur) continue;
  const th = names[`${e.pid}:${e.tid}`] || `${e.pid}:${e.tid}`;
  const k = `${th} | ${e.name}`;
  agg[k] = (agg[k] || 0) + e.dur / 1000;
}
for (const [k, v] of Object.entries(agg).sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(v.toFixed(0).padStart(7), k);
