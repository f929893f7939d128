import puppeteer from 'puppeteer-core';
const b = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-dev-shm-usage'] });
for (let i = 0; i < 3; i++) {
  const ctx = await b.createBrowserContext();
  const p = await ctx.newPage();
  await p.setViewport({ width: 1280, height: 800 });
  await p.goto(process.argv[2], { waitUntil: 'load' });
  await p.waitForFunction(() => window.__tdb && window.__tdb.firstIdle, { timeout: 30000, polling: 50 });
  const m = await p.evaluate(() => ({ fcp: Math.round(performance.getEntriesByName('first-contentful-paint')[0]?.startTime), ...window.__tdb.marks }));
  console.log(JSON.stringify(m));
  await ctx.close();
}
await b.close();
