// The browser half of carryover-bench's "browser UI: long sessions" rows: opens each session of
// SESSIONS (comma-separated) in Debian's chromium, RELOADS times, and prints one JSON line per session:
// the medians of the page's own marks (ms since navigation start): the newest turns on screen
// (historyMs), the first page all drawn (historyAllMs), GET /executions (fetchMs).
//
//   CARRYOVER_URL=... CARRYOVER_TOKEN=... SESSIONS=a,b RELOADS=5 node web/e2e/bench-history.mjs
import { chromium } from 'playwright-core';

const BASE = process.env.CARRYOVER_URL.replace(/\/$/, '');
const TOKEN = process.env.CARRYOVER_TOKEN;
const RELOADS = Number(process.env.RELOADS || 5);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
try {
  const page = await (await browser.newContext({ viewport: { width: 1366, height: 768 } })).newPage();
  await page.goto(`${BASE}/?token=${encodeURIComponent(TOKEN)}`);
  await page.locator('form.create').waitFor().catch(async (err) => {
    throw new Error(`the page did not open: ${err.message}\n${(await page.locator('body').innerText()).slice(0, 500)}`);
  });
  for (const sid of process.env.SESSIONS.split(',')) {
    const runs = [];
    for (let i = 0; i <= RELOADS; i++) {
      await page.goto(`${BASE}/#/s/${encodeURIComponent(sid)}`);
      await page.reload();
      await page.waitForFunction(() => document.body.dataset.historyAllMs, null, { timeout: 60_000 });
      const m = await page.evaluate(() => ({
        historyMs: Number(document.body.dataset.historyMs),
        historyAllMs: Number(document.body.dataset.historyAllMs),
        fetchMs: Number(document.body.dataset.fetchMs),
        cells: document.querySelectorAll('article.cell').length,
        newest: document.querySelector('article.cell:last-of-type .prompt')?.textContent || '',
      }));
      if (i > 0) runs.push(m); // the first load warms the server's and the browser's caches
    }
    console.log(JSON.stringify({ session: sid, historyMs: median(runs.map((r) => r.historyMs)),
      historyAllMs: median(runs.map((r) => r.historyAllMs)), fetchMs: median(runs.map((r) => r.fetchMs)),
      cells: runs[0].cells, newest: runs[0].newest }));
  }
} finally {
  await browser.close();
}
