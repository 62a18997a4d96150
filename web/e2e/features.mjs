// The notebook features of the browser test: variable inspector, checkpoint diff, fork, .ipynb out and
// in, cell arranging, a long history, dark theme, and axe-core on every panel. Each export is one step
// of ui.test.mjs; `t` carries the helpers of that file (page, run, shot, cells, editorValue, BASE, sid).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const promptCount = async (cell) => Number((await cell.locator('.prompt').innerText()).replace(/\D/g, ''));

export async function variables(t) {
  const { page, run } = t;
  const before = await promptCount(await run('inspect_me = [1, 2, 3]\nimport numpy as np\narr = np.zeros((3, 4))'));
  await page.locator('#main').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('Escape');
  await page.keyboard.press('v');
  const table = page.locator('[data-testid=variables]');
  await table.locator('tr[data-name=arr]').waitFor({ timeout: 15_000 });
  const arr = await table.locator('tr[data-name=arr]').innerText();
  assert.match(arr, /ndarray/, arr);
  assert.match(arr, /\(3, 4\)/, arr);
  assert.match(arr, /96 B/, arr); // 12 float64
  assert.match(arr, /saved/, arr);
  assert.match(await table.locator('tr[data-name=inspect_me]').innerText(), /list\s+len 3/);
  assert.match(await table.locator('tr[data-name=g]').innerText(), /skipped/);
  // refreshing the inspector runs no turn: the next cell's count is the previous one + 1
  for (let i = 0; i < 3; i++) {
    await page.locator('[aria-label="Refresh variables"]').click();
    await page.waitForTimeout(200);
  }
  const after = await promptCount(await run('1 + 1'));
  assert.equal(after, before + 1, 'the variable inspector moved the execution count');
  await t.shot('variables-panel');
}

/** math: Markdown with $...$ and $$...$$ and a text/latex output are drawn by KaTeX (loaded on demand). */
export async function math(t) {
  const cell = await t.run(String.raw`from IPython.display import Markdown, Latex, display
display(Markdown(r"""Euler: $e^{i\pi} + 1 = 0$ and

$$\int_0^1 x\,dx = \frac{1}{2}$$

| a | b |
|---|---|
| 1 | 2 |"""))
display(Latex(r"$$\sum_{k=1}^{n} k = \frac{n(n+1)}{2}$$"))`);
  await t.page.waitForFunction((el) => el.querySelectorAll('[data-math=done] .katex').length >= 3, await cell.elementHandle(), { timeout: 15_000 });
  assert.equal(await cell.locator('.out-markdown .math-display .katex-display').count(), 1);
  assert.equal(await cell.locator('.out-markdown table td').count(), 2);
  assert.equal(await cell.locator('.out-latex .katex-display').count(), 1);
  assert.match(await cell.locator('.out-latex .katex-mathml annotation').textContent(), /\\sum_\{k=1\}/);
  // A web font arriving after the first layout widens what an output holds without resizing its box
  // (so no ResizeObserver entry): the page must then make it a tab stop if it now scrolls (axe's
  // scrollable-region-focusable). Here the formula is widened in place, its box keeping its size,
  // then a font of the page's own is loaded.
  const focus = await cell.locator('.out-latex').evaluate(async (box) => {
    const frames = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    const size = [box.clientWidth, box.clientHeight];
    box.querySelector('.katex').style.width = `${box.clientWidth * 3}px`;
    await frames();
    const widened = { scrolls: box.scrollWidth > box.clientWidth, sameBox: box.clientWidth === size[0] && box.clientHeight === size[1], tabIndex: box.tabIndex };
    const font = new FontFace('carryover-late-font', 'url(dist/fonts/KaTeX_AMS-Regular.woff2)');
    document.fonts.add(font);
    await font.load();
    await frames();
    return { widened, afterFont: box.tabIndex };
  });
  assert.deepEqual(focus.widened, { scrolls: true, sameBox: true, tabIndex: -1 }, 'the widened formula scrolls in a box of the same size, not yet a tab stop');
  assert.equal(focus.afterFont, 0, 'after a font arrived, the scrolling formula is a tab stop');
  await t.shot('math');
}

/** inspectOnHover hovers a name in the editor: the kernel's type (and signature) shows in a tooltip. */
export async function inspectOnHover(t) {
  const { page } = t;
  await page.locator('#composer').fill('import collections\ncollections.OrderedDict');
  const word = page.locator('.composer .cm-line').nth(1);
  const box = await word.boundingBox();
  await page.mouse.move(box.x + 5, box.y + box.height / 2);
  await page.mouse.move(box.x + 150, box.y + box.height / 2);
  const tip = page.locator('[data-testid=inspect]');
  await tip.waitFor({ timeout: 15_000 });
  const text = await tip.innerText();
  assert.match(text, /OrderedDict/, text);
  assert.match(text, /class/, text);
  await t.shot('inspect-on-hover');
  await page.locator('#composer').fill('');
}

export async function diffAndFork(t) {
  const { page, run } = t;
  await run('diffvar = [1, 2, 3]\nwith open("notes.txt", "w") as f: f.write("one")');
  await run('diffvar.append(4)\nnewvar = "x" * 1000\nwith open("notes.txt", "w") as f: f.write("two two")');
  await page.locator('[data-tab=checkpoints]').click();
  // wait until the list has the newest turn, then diff the two newest (the default choice)
  const newest = await promptCount(t.cells().last());
  await page.locator('.ckpt-item .ckpt-turn', { hasText: `turn ${newest}` }).first().waitFor({ timeout: 15_000 });
  await page.waitForFunction((n) => document.querySelector('.diff-box select[aria-label="Newer checkpoint"] option')?.textContent === `turn ${n}`, newest);
  await page.locator('[data-testid=diff-btn]').click();
  const diff = page.locator('[data-testid=diff]');
  await diff.waitFor();
  const text = await diff.innerText();
  assert.match(text, /\+\s*newvar\s+str/, text);
  assert.match(text, /~\s*diffvar\s+list/, text);
  assert.match(text, /~\s*notes\.txt/, text);
  assert.match(text, /variables: 1 added, 1 changed, 0 removed/i, text);
  await t.shot('checkpoint-diff');
  // fork the newest checkpoint: a new session with its variables and files
  await page.locator('.ckpt-item').first().locator('[data-testid=fork]').click();
  await page.waitForFunction((sid) => /#\/s\//.test(location.hash) && !location.hash.endsWith(`/${sid}`), t.sid, { timeout: 15_000 });
  const forkId = decodeURIComponent(page.url().split('#/s/')[1]);
  await page.locator('#composer').waitFor();
  const cell = await run('print(diffvar, len(newvar), open("notes.txt").read())');
  assert.match(await cell.locator('.out-stream').innerText(), /\[1, 2, 3, 4\] 1000 two two/);
  await t.shot('forked-session');
  await page.goto(`${t.BASE}/#/s/${encodeURIComponent(t.sid)}`);
  await page.locator('#composer').waitFor();
  await page.locator('#conn[data-state=open]').waitFor({ timeout: 15_000 });
  return forkId;
}

export async function notebookInOut(t) {
  const { page } = t;
  await page.keyboard.press('Escape');
  await page.locator('[data-tab=info]').click();
  // The session's usage: CPU, memory peak, stored bytes of its checkpoints (GET .../usage).
  const usage = page.locator('[data-testid=usage]');
  await usage.locator('th', { hasText: 'memory peak' }).waitFor();
  assert.match(await usage.innerText(), /CPU\s+\d+\.\d s[\s\S]*memory peak\s+\d[\s\S]*stored\s+\d[\s\S]* · \d+ checkpoints?/);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('[data-testid=nb-download]').click()]);
  const nb = JSON.parse(fs.readFileSync(await dl.path(), 'utf8'));
  assert.equal(nb.nbformat, 4);
  assert.ok(nb.cells.some((c) => [].concat(c.source).join('').includes('diffvar.append(4)')), 'the .ipynb lacks a cell');
  const n = await t.cells().count();
  const upload = { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [
    { cell_type: 'markdown', metadata: {}, source: ['# from a file'] },
    { cell_type: 'code', metadata: {}, execution_count: null, outputs: [], source: ['opened = "from ipynb"\n', 'print(opened)'] }] };
  await page.locator('[data-testid=nb-input]').setInputFiles({ name: 'in.ipynb', mimeType: 'application/x-ipynb+json', buffer: Buffer.from(JSON.stringify(upload)) });
  await page.locator('.out-stream', { hasText: 'from ipynb' }).waitFor({ timeout: 60_000 });
  assert.equal(await t.cells().count(), n + 1);
  await page.locator('.toast', { hasText: 'Ran in.ipynb' }).waitFor({ timeout: 15_000 });
}

export async function arrangeCells(t) {
  const { page, cells } = t;
  const codes = async () => Promise.all((await cells().all()).map((c) => t.editorValue(c)));
  const before = await codes();
  const n = before.length;
  // move the last cell up with its button, then back down by keyboard (Shift+J on the selected cell)
  await cells().nth(n - 1).locator('[data-testid=move-up]').click();
  let now = await codes();
  assert.equal(now[n - 2], before[n - 1]);
  assert.equal(now[n - 1], before[n - 2]);
  await page.keyboard.press('Shift+J');
  assert.deepEqual(await codes(), before);
  // collapse the outputs (o) and expand them with the button
  const last = cells().nth(n - 1);
  await page.keyboard.press('o');
  assert.equal(await last.locator('.outputs').isVisible(), false);
  await last.locator('[data-testid=collapse]').click();
  assert.equal(await last.locator('.outputs').isVisible(), true);
  // delete: d, d removes the selected cell from the page only; a reload brings it back
  await page.keyboard.press('d');
  await page.keyboard.press('d');
  now = await codes();
  assert.equal(now.length, n - 1);
  await page.locator('.toast', { hasText: 'Cell removed from the page' }).waitFor();
  await t.shot('cells-arranged');
  await page.reload();
  await page.waitForFunction((want) => document.querySelectorAll('article.cell').length === want, n, { timeout: 20_000 });
}

/** longHistory opens a session page whose history has 2,000 executions and measures it. */
export async function longHistory(t) {
  const { page } = t;
  const real = await (await fetch(`${t.BASE}/api/sessions/${t.sid}/executions?limit=5`, { headers: { Authorization: `Bearer ${t.TOKEN}` } })).json();
  const sample = real.executions.filter((e) => e.kind !== 'exec');
  // The server answers at most 1,000 per call; the page's paging is what is measured here, so the
  // history is the real records of this session repeated to 2,000 (counts renumbered).
  const many = Array.from({ length: 2000 }, (_, i) => {
    const e = structuredClone(sample[i % sample.length]);
    e.execution_count = i + 1;
    if (e.result) e.result.execution_count = i + 1;
    return e;
  });
  // answered as the server does: the newest `limit` (at most 1,000), oldest first
  const isHistory = (u) => u.pathname.endsWith(`/sessions/${t.sid}/executions`);
  await page.route(isHistory, (route) => {
    const limit = Math.min(1000, Number(new URL(route.request().url()).searchParams.get('limit') || 200));
    return route.fulfill({ json: { executions: many.slice(-limit) } });
  });
  await page.goto(`${t.BASE}/#/s/${encodeURIComponent(t.sid)}`);
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.historyAllMs, null, { timeout: 30_000 });
  const m = await page.evaluate(() => ({
    historyMs: Number(document.body.dataset.historyMs),
    historyAllMs: Number(document.body.dataset.historyAllMs),
    fetchMs: Number(document.body.dataset.fetchMs),
    drawMs: Number(document.body.dataset.drawMs),
    mountMs: Number(document.body.dataset.mountMs),
    fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
    load: performance.getEntriesByType('navigation')[0]?.loadEventEnd,
    cells: document.querySelectorAll('article.cell').length,
  }));
  assert.equal(m.cells, 200, 'the page drew more than one page of history');
  await page.locator('[data-testid=more-history] button').click();
  await page.waitForFunction(() => document.querySelectorAll('article.cell').length === 400);
  // the earlier page is the 200 turns before the first drawn one, in order
  assert.match(await t.cells().first().locator('.prompt').innerText(), /\[1601\]/);
  assert.match(await t.cells().nth(200).locator('.prompt').innerText(), /\[1801\]/);
  await t.shot('long-history');
  await page.unroute(isHistory);
  await page.reload();
  await page.locator('#composer').waitFor();
  return m;
}

/** axePanels runs axe-core on each panel of the UI (light and dark) and fails on serious/critical. */
export async function axePanels(t) {
  const { page } = t;
  const found = [];
  const check = async (where) => {
    await page.evaluate(axeSource); // evaluate() is not subject to the page's CSP; a <script> tag would be
    const res = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`);
    });
    for (const v of res) found.push(`${where}: ${v}`);
  };
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.goto(`${t.BASE}/#/`);
    await page.locator('form.create').waitFor();
    await check(`${scheme} session list`);
    await page.goto(`${t.BASE}/#/s/${encodeURIComponent(t.sid)}`);
    await page.locator('#composer').waitFor();
    await page.locator('article.cell').first().waitFor();
    for (const tab of ['files', 'checkpoints', 'variables', 'events', 'info']) {
      await page.locator(`[data-tab=${tab}]`).click();
      await page.waitForTimeout(300);
      await check(`${scheme} notebook + ${tab} panel`);
    }
    await page.locator('#main').click({ position: { x: 5, y: 5 } });
    await page.keyboard.press('?');
    await page.locator('#help').waitFor();
    await check(`${scheme} help`);
    await page.keyboard.press('Escape');
    if (scheme === 'dark') {
      const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const [r, g, b] = bg.match(/\d+/g).map(Number);
      assert.ok(r + g + b < 150, `the dark theme's background is ${bg}`);
      await t.shot('dark-theme');
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  assert.deepEqual(found, [], 'axe-core: serious or critical violations');
}

/**
 * shownCheckpoints waits until the checkpoints panel lists exactly the checkpoints the API lists (asked
 * again on every try, so a checkpoint still arriving is waited for too), and answers their ids in the
 * panel's order. The steps that read the panel wait on this, not on time.
 */
export async function shownCheckpoints(t, { timeout = 20_000 } = {}) {
  const deadline = Date.now() + timeout;
  let api = [], shown = [];
  for (;;) {
    api = (await t.apiCall('GET', `/api/sessions/${encodeURIComponent(t.sid)}/checkpoints`)).checkpoints.map((c) => c.id);
    shown = await t.page.evaluate(() => [...document.querySelectorAll('.ckpt-item')].map((li) => li.dataset.id));
    if (shown.length === api.length && api.every((id) => shown.includes(id))) return shown;
    if (Date.now() > deadline) throw new Error(`the checkpoints panel shows ${JSON.stringify(shown)}, the API lists ${JSON.stringify(api)}`);
    await t.page.waitForTimeout(100);
  }
}

/**
 * checkpointFolds: checkpoints arriving while the panel is open keep the user's fold choices (and the
 * focus), and the newest is open by default only until a newer one arrives. The arrivals are made
 * (POST /checkpoint) after the user's clicks, and each is waited for in the list, so the order of
 * events is fixed, not left to timing.
 */
export async function checkpointFolds(t) {
  const { page } = t;
  await page.locator('[data-tab=checkpoints]').click();
  const states = () => page.evaluate(() => Object.fromEntries([...document.querySelectorAll('.ckpt-item')]
    .map((li) => [li.dataset.id, li.querySelector('details.ckpt-vars')?.open ?? null])));
  const focusedItem = () => page.evaluate(() => document.activeElement?.closest('.ckpt-item')?.dataset.id ?? null);
  const summary = (id) => page.locator(`.ckpt-item[data-id="${id}"] details.ckpt-vars > summary`);
  const checkpointNow = async () => (await t.apiCall('POST', `/api/sessions/${encodeURIComponent(t.sid)}/checkpoint`)).checkpoint.id;

  const ids = await shownCheckpoints(t);
  assert.ok(ids.length >= 4, `want 4+ checkpoints to fold and unfold, got ${ids.length}`);
  const [newest, , older] = ids;
  let before = await states();
  assert.equal(before[newest], true, 'the newest checkpoint is open by default');
  // the user unfolds an older one with the mouse and folds the newest from the keyboard (focus stays on it)
  if (before[older]) await summary(older).click(); // (a previous step may have opened it: start folded)
  await summary(older).click();
  await summary(newest).focus();
  await page.keyboard.press('Enter');
  before = await states();
  assert.equal(before[older], true);
  assert.equal(before[newest], false);

  // a checkpoint arrives: it is open (the newest), every other entry is as the user left it, focus too
  const first = await checkpointNow();
  let after = await shownCheckpoints(t);
  assert.equal(after[0], first, 'the new checkpoint is listed first');
  let now = await states();
  assert.equal(now[first], true, 'the new checkpoint is open');
  for (const id of ids) assert.equal(now[id], before[id], `checkpoint ${id} kept its fold state (${before[id]})`);
  assert.equal(await focusedItem(), newest, 'the focus stayed on the summary the user used');

  // another arrives, the previous newest untouched: that one folds (its default was not a choice)
  const second = await checkpointNow();
  after = await shownCheckpoints(t);
  assert.equal(after[0], second);
  now = await states();
  assert.equal(now[second], true, 'the newest checkpoint is open');
  assert.equal(now[first], false, 'the previous newest, never touched, folds when a newer one arrives');
  for (const id of ids) assert.equal(now[id], before[id], `checkpoint ${id} kept its fold state (${before[id]})`);
  await t.shot('checkpoint-folds');
}

/** portableInOut: the session panel's Export archive downloads a tar of the session; dropped on the
 * session list, it becomes a new session holding the same state. */
export async function portableInOut(t) {
  const { page } = t;
  const mark = `carried-${Math.random().toString(36).slice(2)}`;
  await t.run(`portable_mark = "${mark}"\nprint("marked")`); // an output: the next step folds the last cell's
  await page.keyboard.press('Escape');
  await page.locator('[data-tab=info]').click();
  const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('[data-testid=archive-export]').click()]);
  assert.match(dl.suggestedFilename(), /\.carryover\.tar$/);
  const tar = fs.readFileSync(await dl.path());
  assert.equal(tar.subarray(0, 20).toString(), 'carryover/index.json', 'the download is not a session archive');
  const source = decodeURIComponent(/#\/s\/(.+)$/.exec(page.url())[1]);
  await page.goto(`${t.BASE}/#/`);
  const home = page.locator('[data-testid=home]');
  await home.waitFor();
  const drop = await page.evaluateHandle(async ({ b64, name }) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], name, { type: 'application/x-tar' }));
    return dt;
  }, { b64: tar.toString('base64'), name: dl.suggestedFilename() });
  await home.dispatchEvent('dragover', { dataTransfer: drop });
  await home.dispatchEvent('drop', { dataTransfer: drop });
  await page.locator('.toast', { hasText: 'Imported ' }).waitFor({ timeout: 60_000 });
  await page.waitForFunction((src) => /^#\/s\//.test(location.hash) && !location.hash.endsWith(`/${encodeURIComponent(src)}`), source);
  const cell = await t.run('print(portable_mark)');
  assert.equal((await cell.locator('.out-stream').innerText()).trim(), mark);
  await page.goto(`${t.BASE}/#/s/${encodeURIComponent(source)}`);
  await t.cells().first().waitFor();
}
