// Widgets that come back (issue 37): an interact slider moved to 13 on the page is saved without a
// cell (server/session/widget_checkpoint.go); after a kill -9 of the kernel, a page reload, and a
// hibernation and wake, the slider shows 13, its Output widget "n = 13", the kernel has 13, and
// moving it runs the function again. Run by web/e2e_test.go (TestBrowserWidgets), or by hand:
//
//   CARRYOVER_URL=http://127.0.0.1:8080 CARRYOVER_TOKEN=secret node web/e2e/widgets.test.mjs
import { chromium } from 'playwright-core';
import { pollEvery } from './poll.mjs';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BASE = (process.env.CARRYOVER_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const TOKEN = process.env.CARRYOVER_TOKEN || '';
const SHOTS = process.env.SCREENSHOT_DIR || path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
const RUN_TIMEOUT = 90_000;
fs.mkdirSync(SHOTS, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = pollEvery(await (await browser.newContext({ viewport: { width: 1366, height: 900 } })).newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => { if (m.type() === 'error') console.log(`  [console.error] ${m.text()}`); });

let stepN = 0;
async function step(name, fn) {
  const t0 = Date.now();
  stepN++;
  try {
    await fn();
    console.log(`ok ${stepN} - ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    console.log(`not ok ${stepN} - ${name}`);
    await page.screenshot({ path: path.join(SHOTS, `widgets-FAILED-${stepN}.png`) }).catch(() => {});
    throw err;
  }
}

async function apiCall(method, p, body) {
  const res = await fetch(`${BASE}${p}`, { method, headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' }, body });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const cells = () => page.locator('article.cell');

/** run types code into the new-cell box, presses Shift+Enter and waits for the cell to finish. */
async function run(code, { expect = 'ok' } = {}) {
  const before = await cells().count();
  await page.locator('#composer').fill(code);
  await page.locator('#composer').press('Shift+Enter');
  const cell = cells().nth(before);
  await cell.waitFor();
  await page.waitForFunction((el) => ['ok', 'error', 'aborted', 'failed'].includes(el.dataset.status),
    await cell.elementHandle(), { timeout: RUN_TIMEOUT });
  const status = await cell.getAttribute('data-status');
  if (expect && status !== expect) {
    throw new Error(`cell ended with status ${status}, want ${expect}; its output:\n${await cell.locator('.outputs').innerText()}`);
  }
  return cell;
}

/** newest is the id of the session's newest checkpoint (the list is newest first, and capped). */
const newest = async (sid) => (await apiCall('GET', `/api/sessions/${sid}/checkpoints`)).checkpoints[0]?.id;

/** markOld marks the widget views on the page now, so comesBack knows a redrawn view from them. */
const markOld = () => page.evaluate(() => {
  for (const el of document.querySelectorAll('.out-widget .widget-slider, .out-widget .widget-output')) el.dataset.old = '1';
});

/** poll waits until fn answers true, or fails with what(). */
async function poll(fn, what, ms = 30_000) {
  const t0 = Date.now();
  while (!(await fn())) {
    if (Date.now() - t0 > ms) throw new Error(await what());
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * comesBack waits until the interact cell's widget is drawn again (not a view marked old) at value,
 * with its output, and checks the kernel has the value.
 */
async function comesBack(value, what) {
  const live = cells().first().locator('.out-widget[data-widget=live]');
  const slider = live.locator('.widget-slider:not([data-old])');
  await slider.waitFor({ timeout: 60_000 });
  const readout = () => slider.locator('.widget-readout').textContent().then((t) => t.trim()).catch(() => '?');
  await poll(async () => (await readout()) === String(value), async () => `${what}: the slider reads ${await readout()}, want ${value}`);
  await live.locator('.widget-output:not([data-old])', { hasText: `n = ${value}` }).waitFor({ timeout: 30_000 });
  const printed = await run('print(square.widget.children[0].value)');
  assert.match(await printed.locator('.outputs').innerText(), new RegExp(`^${value}$`, 'm'), `${what}: the kernel's value`);
}

const sid = `wd-${Date.now().toString(36)}`;
try {
  await apiCall('POST', '/api/sessions', JSON.stringify({ session_id: sid, name: 'widgets' }));
  await page.goto(`${BASE}/?token=${encodeURIComponent(TOKEN)}#/s/${sid}`);
  await page.locator('#conn[data-state=open]').waitFor({ timeout: 15_000 });

  await step('an interact slider moved to 13 is saved without a cell; its function is not skipped', async () => {
    const cell = await run('from ipywidgets import interact\n@interact(n=(0, 20))\ndef square(n=5):\n    print("n =", n)');
    const out = cell.locator('.out-widget .widget-output');
    await out.filter({ hasText: 'n = 5' }).waitFor({ timeout: 20_000 });
    assert.doesNotMatch(await cell.innerText(), /skipped|HMAC/, 'the checkpoint line names no widget');
    const before = await newest(sid);
    const handle = cell.locator('.out-widget .noUi-handle').first();
    await handle.focus();
    for (let i = 0; i < 8; i++) await page.keyboard.press('ArrowRight');
    await out.filter({ hasText: 'n = 13' }).waitFor({ timeout: 20_000 });
    await poll(async () => (await newest(sid)) !== before, () => 'no checkpoint after the slider moved');
  });

  await step('kill -9 of the kernel: the slider shows 13 and its output n = 13', async () => {
    await markOld();
    await run('import os, signal\nos.kill(os.getpid(), signal.SIGKILL)', { expect: null });
    await page.locator('.toast', { hasText: 'restored from its last checkpoint' }).waitFor({ timeout: 60_000 });
    await comesBack(13, 'after kill -9');
    await page.screenshot({ path: path.join(SHOTS, 'widgets-after-kill.png') });
  });

  await step('the restored widget is live: moving it runs the function again', async () => {
    const live = cells().first().locator('.out-widget[data-widget=live]');
    await live.locator('.noUi-handle').first().focus();
    await page.keyboard.press('ArrowLeft');
    await live.locator('.widget-output', { hasText: 'n = 12' }).waitFor({ timeout: 20_000 });
    await page.keyboard.press('ArrowRight');
    await live.locator('.widget-output', { hasText: 'n = 13' }).waitFor({ timeout: 20_000 });
  });

  await step('after a page reload: the slider shows 13 and n = 13', async () => {
    await page.reload();
    await page.locator('#conn[data-state=open]').waitFor({ timeout: 15_000 });
    await comesBack(13, 'after a reload');
  });

  await step('after a hibernation and wake: the slider shows 13 and n = 13', async () => {
    await apiCall('POST', `/api/sessions/${sid}/hibernate`, '{}');
    await markOld();
    await run('woke = True'); // wakes the session: a new kernel, the checkpoint restored
    await comesBack(13, 'after a wake');
    await page.screenshot({ path: path.join(SHOTS, 'widgets-after-wake.png') });
  });

  assert.deepEqual(problems, []);
  console.log('widgets: all steps passed');
} finally {
  await browser.close();
}
