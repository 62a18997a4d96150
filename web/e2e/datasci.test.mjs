// The data-science part of the browser test: Plotly and Altair charts drawn from their JSON types
// (marks counted, again after a reload, no kernel-sent script run), the XSS corpus through the chart
// renderers, widgets (interact, tqdm.notebook) over the comm relay, and the data viewer. Run by
// web/e2e_test.go (TestBrowserDataScience), or by hand:
//
//   CARRYOVER_URL=http://127.0.0.1:8080 CARRYOVER_TOKEN=secret node web/e2e/datasci.test.mjs
import { chromium } from 'playwright-core';
import { pollEvery } from './poll.mjs';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chartCorpus } from './xss-charts.mjs';
import { markSpread } from './pixels.mjs';

const BASE = (process.env.CARRYOVER_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const TOKEN = process.env.CARRYOVER_TOKEN || '';
const SHOTS = process.env.SCREENSHOT_DIR || path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
const ONLY = process.env.DATASCI_ONLY || ''; // a regexp of step names, for work by hand
const RUN_TIMEOUT = 90_000;
fs.mkdirSync(SHOTS, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
const page = pollEvery(await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => { if (m.type() === 'error') console.log(`  [console.error] ${m.text()}`); });
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(BASE) && !u.startsWith('data:') && !u.startsWith('blob:') && !u.startsWith(BASE.replace(/^http/, 'ws'))) {
    problems.push(`the page loaded something from outside the server: ${u}`);
  }
});
const dialogs = [];
page.on('dialog', (d) => { dialogs.push(`${d.type()}: ${d.message()}`); d.dismiss().catch(() => {}); });

let stepN = 0;
async function step(name, fn) {
  if (ONLY && !new RegExp(ONLY).test(name)) return;
  const t0 = Date.now();
  stepN++;
  try {
    await fn();
    console.log(`ok ${stepN} - ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    console.log(`not ok ${stepN} - ${name}`);
    await page.screenshot({ path: path.join(SHOTS, `datasci-FAILED-${stepN}.png`) }).catch(() => {});
    throw err;
  }
}
// historyDrawn waits until a (re)loaded page has drawn its history's first page; when it does not,
// the error says how far the page got (which of the history's marks are set, cells, page errors).
async function historyDrawn() {
  try {
    // 60 s as the other heavy waits: the full history (79 charts of the XSS step among them) is drawn
    // again while make test loads both cores (step 14: 4.4 s quiet, 6.3 s beside six CPU hogs; twice
    // past 30 s in make test, ci39 and ci5 of 2026-11-30)
    await page.waitForFunction(() => document.body.dataset.historyAllMs, null, { timeout: 60_000 });
  } catch (err) {
    const state = await page.evaluate(() => ({
      marks: { ...document.body.dataset }, cells: document.querySelectorAll('.cell').length,
      loading: !!document.querySelector('.loading'), toasts: [...document.querySelectorAll('.toast')].map((t) => t.innerText),
    })).catch((e) => `unreadable: ${e.message}`);
    throw new Error(`the history was not drawn: ${err.message}\npage: ${JSON.stringify(state)}\nproblems: ${JSON.stringify(problems)}`);
  }
}
async function shot(name) {
  const file = path.join(SHOTS, `datasci-${name}.png`);
  await page.screenshot({ path: file, fullPage: false });
  console.log(`  screenshot: ${file}`);
}

async function apiCall(method, p, body, type = 'application/json') {
  const res = await fetch(`${BASE}${p}`, { method, headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': type }, body });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text && type === 'application/json' ? JSON.parse(text) : text;
}

const cells = () => page.locator('article.cell');

/** run types code into the new-cell box, presses Shift+Enter and waits for the cell to finish. */
async function run(code, { expect = 'ok', wait = true } = {}) {
  const before = await cells().count();
  await page.locator('#composer').fill(code);
  await page.locator('#composer').press('Shift+Enter');
  const cell = cells().nth(before);
  await cell.waitFor();
  if (!wait) return cell;
  await page.waitForFunction((el) => ['ok', 'error', 'aborted', 'failed'].includes(el.dataset.status),
    await cell.elementHandle(), { timeout: RUN_TIMEOUT });
  const status = await cell.getAttribute('data-status');
  if (expect && status !== expect) {
    throw new Error(`cell ended with status ${status}, want ${expect}; its output:\n${await cell.locator('.outputs').innerText()}`);
  }
  return cell;
}

async function openSession(id) {
  await page.goto(`${BASE}/?token=${encodeURIComponent(TOKEN)}#/s/${id}`);
  await page.locator('#composer').waitFor();
  await page.locator('#conn[data-state=open]').waitFor({ timeout: 15_000 });
}

/** probeScripts arms the page: any script a chart carried would set window.__xss or open a dialog. */
const armProbe = () => page.evaluate(() => {
  window.__xss = undefined;
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
});

const sid = `ds-${Date.now().toString(36)}`;
const SCATTER_N = 37;
const GL_VECTORS = 13; // the chart corpus's own vectors also go through a WebGL trace
const BARS = ['a', 'b', 'c', 'd', 'e'];

/** chartMarks counts what was drawn: Plotly's scatter points and Vega's bars (SVG). */
async function chartMarks(cell, timeout = 60_000) {
  await page.waitForFunction((el) => {
    const cs = el.querySelectorAll('.out-chart');
    return cs.length && [...cs].every((c) => c.dataset.chart !== 'pending');
  }, await cell.elementHandle(), { timeout });
  return cell.evaluate((el) => ({
    failed: [...el.querySelectorAll('.out-chart[data-chart=failed]')].map((c) => c.innerText),
    points: el.querySelectorAll('.out-plotly .scatterlayer path.point').length,
    bars: el.querySelectorAll('.out-vega svg .mark-rect path').length,
    svgs: el.querySelectorAll('.out-chart svg').length,
    scripts: el.querySelectorAll('script').length,
  }));
}

// SIZED: charts with no height of their own; each is drawn at plotly.js's 450 px, Altair's at Vega's.
const SIZED = [
  ['px.scatter', 'px.scatter(x=list(range(30)), y=[i*i for i in range(30)])'],
  ['px.line', 'px.line(x=list(range(30)), y=[i*i for i in range(30)])'],
  ['px.histogram', 'px.histogram(x=[i % 7 for i in range(200)] + [3] * 60)'],
  ['altair', 'alt.Chart(pd.DataFrame({"x": list(range(30)), "y": [i*i for i in range(30)]})).mark_point().encode(x="x", y="y")'],
];

/**
 * chartsSeen measures what a person sees of each chart of a cell: the height of the box it was
 * drawn in and, on a screenshot of that box, the share of its height and width the marks' colour
 * covers (points spread over the axis, not squeezed into a strip).
 */
async function chartsSeen(cell) {
  await page.waitForFunction((el) => {
    const cs = el.querySelectorAll('.out-chart');
    return cs.length && [...cs].every((c) => c.dataset.chart !== 'pending');
  }, await cell.elementHandle(), { timeout: 90_000 });
  const charts = cell.locator('.out-chart');
  const seen = [];
  for (let i = 0; i < await charts.count(); i++) {
    const c = charts.nth(i);
    await c.scrollIntoViewIfNeeded();
    await page.waitForTimeout(150); // plotly.js's responsive relayout, the frame's paint
    const box = await c.boundingBox();
    // The page's default 30 s is too short for this capture on a loaded machine: software GL
    // composites every WebGL frame of the page first (a CI run at 3x its usual time timed out
    // here); a slow one is said, so the log shows the machine's state.
    const t0 = Date.now();
    const m = markSpread(await c.screenshot({ timeout: 120_000 }));
    if (Date.now() - t0 > 5_000) console.log(`  screenshot of chart ${i + 1}: ${Date.now() - t0} ms`);
    seen.push({ state: await c.getAttribute('data-chart'), height: Math.round(box.height), width: Math.round(box.width),
      spreadY: +m.spreadY.toFixed(2), spreadX: +m.spreadX.toFixed(2), pixels: m.pixels });
  }
  return seen;
}

function assertSpread(seen, names, min = 0.5) {
  seen.forEach((s, i) => {
    const what = `${names[i]}: ${JSON.stringify(s)}`;
    assert.equal(s.state, 'drawn', what);
    assert.ok(s.height >= 300, `${what}: drawn at least 300 px tall`);
    assert.ok(s.spreadY >= min && s.spreadX >= min, `${what}: its marks spread over the plot`);
  });
}

try {
  await apiCall('POST', '/api/sessions', JSON.stringify({ session_id: sid, name: 'data science' }));
  await openSession(sid);
  await armProbe();

  let scatter; let bars;
  await step('a Plotly scatter is drawn from application/vnd.plotly.v1+json, its points counted', async () => {
    scatter = await run(`import plotly.express as px\nfig = px.scatter(x=list(range(${SCATTER_N})), y=[i*i for i in range(${SCATTER_N})], title="squares")\nfig.show()`);
    const m = await chartMarks(scatter);
    assert.deepEqual(m.failed, []);
    assert.equal(m.points, SCATTER_N, JSON.stringify(m));
    assert.equal(m.scripts, 0);
    assert.equal(await scatter.locator('.out-plotly').getAttribute('data-mime'), 'application/vnd.plotly.v1+json');
    await shot('plotly-scatter');
  });

  await step('an Altair bar chart is drawn by vega-embed (no eval), its bars counted', async () => {
    bars = await run('import altair as alt, pandas as pd\n' +
      `df = pd.DataFrame({"k": ${JSON.stringify(BARS)}, "v": [3, 1, 4, 1, 5]})\n` +
      'alt.Chart(df).mark_bar().encode(x="k", y="v")');
    const m = await chartMarks(bars);
    assert.deepEqual(m.failed, []);
    assert.equal(m.bars, BARS.length, JSON.stringify(m));
    assert.match(await bars.locator('.out-vega').getAttribute('data-mime'), /^application\/vnd\.vegalite\.v\d\+json$/);
    await shot('altair-bars');
  });

  let sized;
  await step('charts with no height of their own are drawn at their size, their marks spread over the axes', async () => {
    sized = await run('import plotly.express as px, altair as alt, pandas as pd\nfrom IPython.display import display\n' +
      SIZED.map(([, code]) => `display(${code})`).join('\n'));
    const seen = await chartsSeen(sized);
    console.log(`  sizes: ${SIZED.map(([n], i) => `${n} ${seen[i].height} px, spread ${seen[i].spreadY}x${seen[i].spreadX}`).join('; ')}`);
    assertSpread(seen, SIZED.map(([n]) => n));
    for (const s of seen.slice(0, 3)) assert.equal(s.height, 450, "plotly.js's default height");
    await sized.locator('.out-chart').first().scrollIntoViewIfNeeded();
    await shot('charts-sized');
  });

  await step('WebGL charts (Scattergl, 2,000 points; a 3-D scatter) are drawn in the isolated frame; one that cannot be drawn says why', async () => {
    await armProbe();
    const cell = await run('import plotly.graph_objects as go, numpy as np\nrng = np.random.default_rng(1)\n' +
      'display(go.Figure(go.Scattergl(x=rng.random(2000), y=rng.random(2000), mode="markers")))\n' +
      'display(go.Figure(go.Scatter3d(x=rng.random(300), y=rng.random(300), z=rng.random(300), mode="markers")))\n' +
      'display({"application/vnd.plotly.v1+json": {"data": [{"type": "scattermapbox", "lat": [1], "lon": [2]}], "layout": {"mapbox": {"style": "streets"}}}, "text/plain": "map"}, raw=True)');
    const seen = await chartsSeen(cell);
    console.log(`  webgl: ${seen.slice(0, 2).map((s) => `${s.height} px, spread ${s.spreadY}x${s.spreadX}, ${s.pixels} px of marks`).join('; ')}`);
    assertSpread(seen.slice(0, 1), ['scattergl']);
    assertSpread(seen.slice(1, 2), ['scatter3d'], 0.25); // its cube takes the middle of the box
    assert.ok(seen[0].pixels > 5000, `2,000 points are painted: ${JSON.stringify(seen[0])}`);
    const frames = await cell.locator('iframe.out-frame').evaluateAll((fs) => fs.map((f) => f.getAttribute('sandbox')));
    assert.deepEqual(frames, ['allow-scripts', 'allow-scripts'], 'each WebGL chart is in a frame with an opaque origin');
    const warn = cell.locator('.out-chart.out-isolated[data-chart=failed]'); // its frame gave way to the reason
    assert.equal(await warn.count(), 1);
    assert.match(await warn.innerText(), /could not draw the Plotly chart: .+/);
    const csp = await page.evaluate(() => window.__csp);
    assert.deepEqual(csp, [], 'the page itself was asked for nothing its policy refuses (no eval)');
    await cell.locator('.out-chart').first().scrollIntoViewIfNeeded();
    await shot('charts-webgl');
  });

  await step('a pandas Styler keeps its colours: background_gradient over 12 cells shows 12 distinct backgrounds, scoped to its output', async () => {
    const cell = await run('import pandas as pd\n' +
      'sdf = pd.DataFrame([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]], columns=list("abc"))\n' +
      'st = sdf.style.background_gradient(axis=None)\nst');
    const table = cell.locator('.out-html table');
    await table.waitFor();
    const bgs = await table.locator('td').evaluateAll((tds) => tds.map((td) => getComputedStyle(td).backgroundColor));
    assert.equal(bgs.length, 12);
    assert.equal(new Set(bgs).size, 12, `12 distinct backgrounds: ${bgs}`);
    assert.ok(!bgs.includes('rgba(0, 0, 0, 0)'), 'every cell is coloured');
    // the rules reach no other output: the same table (the same ids) without its style sheet stays plain
    const other = await run('from IPython.display import HTML\nHTML(st.to_html().split("</style>", 1)[1])');
    assert.match(await other.locator('.out-html td').first().getAttribute('id'), /^o\d+-T_/);
    const plainBgs = await other.locator('.out-html td').evaluateAll((tds) => tds.map((td) => getComputedStyle(td).backgroundColor));
    assert.deepEqual([...new Set(plainBgs)], ['rgba(0, 0, 0, 0)'], 'the first output\'s rules do not style another output');
    await table.scrollIntoViewIfNeeded();
    await shot('styler');
  });

  await step('after a kernel kill, "restored" is said only once the restore is done, with what the restore report says', async () => {
    await run('kept_a = 41\nkept_b = "still here"');
    // the order in which the browser got the restore's event and showed the toast
    const seen = [];
    let report = null; // the restore report, as the checkpoint_restored frame carried it
    const onWs = (ws) => ws.on('framereceived', ({ payload }) => {
      if (typeof payload !== 'string' || !payload.includes('"checkpoint_restored"')) return;
      seen.push('checkpoint_restored frame');
      report = JSON.parse(payload).event?.payload;
    });
    page.on('websocket', onWs);
    await page.exposeFunction('__toastShown', (text) => seen.push(`toast: ${text}`)).catch(() => {});
    // the websocket frames are watched from here on: reconnect so the page's socket is a new one
    await page.reload();
    await historyDrawn();
    await page.locator('#conn[data-state=open]').waitFor({ timeout: 15_000 });
    await page.locator('[data-panel=events][data-subscribed]').waitFor({ state: 'attached', timeout: 15_000 }); // the page hears events live
    await page.evaluate(() => new MutationObserver((ms) => {
      for (const m of ms) for (const n of m.addedNodes) if (n.classList?.contains('toast')) window.__toastShown(n.innerText);
    }).observe(document.getElementById('toasts'), { childList: true }));
    await run('import os, signal\nos.kill(os.getpid(), signal.SIGKILL)', { expect: null });
    const restored = page.locator('.toast', { hasText: 'restored from its last checkpoint' });
    await restored.waitFor({ timeout: 60_000 });
    const text = await restored.innerText();
    assert.equal(await page.locator('.toast', { hasText: 'Restoring the session' }).count(), 0, 'the death\'s toast no longer says it is restoring');
    page.off('websocket', onWs);
    const iToast = seen.findIndex((x) => x.startsWith('toast:') && x.includes('restored from its last checkpoint'));
    const iFrame = seen.indexOf('checkpoint_restored frame');
    assert.ok(iFrame >= 0 && iFrame < iToast, `the restore's event came before the toast: ${JSON.stringify(seen)}`);
    assert.ok(seen.some((x, i) => i < iFrame && /The kernel died/.test(x) && /Restoring/.test(x)), `the death was told first: ${JSON.stringify(seen)}`);
    // what the toast says is the restore report's: its turn, how many variables came back, the first names
    assert.ok(report?.restored?.includes('kept_a') && report.restored.includes('kept_b'), JSON.stringify(report));
    assert.ok(text.includes(`Checkpoint of turn ${report.turn}: ${report.restored.length} variables back (${report.restored.slice(0, 3).join(', ')}`), text);
    assert.match(await restored.locator('details pre').textContent(), /"kept_a"/);
    const back = await run('print(kept_a + 1, kept_b)');
    assert.match(await back.locator('.outputs').innerText(), /42 still here/);
    await shot('restored-toast');
  });

  await step('an HTML output that is only a script says so instead of an empty box', async () => {
    const cell = await run('import altair as alt\nalt.renderers.enable("html")\n' +
      'alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x")');
    const note = cell.locator('.out-html .out-note');
    await note.waitFor();
    assert.match(await note.innerText(), /script, which the page does not run/);
    await run('alt.renderers.enable("mimetype")');
  });

  await step('both charts are drawn again after a reload, from the history; the past kernel death is listed, not told again', async () => {
    // the events panel lists the newest page of the log (the kill above among them) from GET /events;
    // an event the socket's backlog brings again comes marked backlog
    let died = null;
    const onWs = (ws) => ws.on('framereceived', ({ payload }) => {
      if (typeof payload === 'string' && payload.includes('"kernel_died"')) died = JSON.parse(payload);
    });
    page.on('websocket', onWs);
    await page.reload();
    await historyDrawn();
    await page.locator('[data-panel=events][data-subscribed]').waitFor({ state: 'attached', timeout: 15_000 });
    await page.locator('[data-panel=events] li.event .ev-type', { hasText: 'kernel_died' }).first().waitFor({ state: 'attached', timeout: 15_000 });
    page.off('websocket', onWs);
    assert.ok(!died || died.backlog === true, `the past death came over the socket unmarked: ${JSON.stringify(died)}`);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50))));
    assert.equal(await page.locator('.toast', { hasText: 'The kernel died' }).count(), 0, 'reopening the page told a past death as news');
    await armProbe();
    const all = await cells().count();
    const sc = cells().filter({ has: page.locator('.out-plotly') }).first();
    const bc = cells().filter({ has: page.locator('.out-vega') }).first();
    assert.ok(all >= 3);
    assert.equal((await chartMarks(sc)).points, SCATTER_N);
    assert.equal((await chartMarks(bc)).bars, BARS.length);
    if (sized) {
      const again = cells().filter({ has: page.locator('.out-plotly') }).filter({ hasText: 'display(px.scatter' }).first();
      const seen = await chartsSeen(again);
      assertSpread(seen, SIZED.map(([n]) => `${n} after a reload`));
    }
    const gl = cells().filter({ has: page.locator('.out-isolated') }).first();
    if (await gl.count()) {
      const seen = await chartsSeen(gl);
      assertSpread(seen.slice(0, 1), ['scattergl after a reload']);
      assertSpread(seen.slice(1, 2), ['scatter3d after a reload'], 0.25);
    }
  });

  await step('the XSS corpus through the chart renderers: Plotly titles and hover templates, Vega titles, tooltips and links', async () => {
    await apiCall('PUT', `/api/sessions/${sid}/files/chart-xss.json`, JSON.stringify(chartCorpus), 'application/octet-stream');
    const cell = await run('import json\nfrom IPython.display import display\n' +
      `P = json.load(open("chart-xss.json", encoding="utf-8"))\nGL = ${GL_VECTORS}\n` +
      'for i, p in enumerate(P):\n' +
      '    fig = {"data": [{"type": "scatter", "x": [1, 2], "y": [1, 2], "name": p, "text": [p, p], "hovertemplate": p + "<extra>" + p + "</extra>"}],\n' +
      '           "layout": {"title": {"text": p}, "xaxis": {"title": {"text": p}},\n' +
      '                      "annotations": [{"text": p, "x": 1, "y": 1, "showarrow": False}]}}\n' +
      '    display({"application/vnd.plotly.v1+json": fig, "text/plain": "fig"}, raw=True)\n' +
      '    if i < GL:  # the same vectors through WebGL traces, drawn in the isolated frame (eval allowed there)\n' +
      '        gl = {"data": [dict(fig["data"][0], type="scattergl")], "layout": fig["layout"]}\n' +
      '        display({"application/vnd.plotly.v1+json": gl, "text/plain": "fig"}, raw=True)\n' +
      '    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v4.json", "title": p,\n' +
      '            "data": {"values": [{"a": p, "b": 1, "u": p}, {"a": "x", "b": 2, "u": "javascript:window.__xss=1"}]},\n' +
      '            "mark": "bar", "encoding": {"x": {"field": "a", "type": "nominal", "title": p}, "y": {"field": "b", "type": "quantitative"},\n' +
      '                                       "href": {"field": "u", "type": "nominal"}, "tooltip": [{"field": "a"}, {"field": "u"}]},\n' +
      '            "usermeta": {"embedOptions": {"ast": False, "loader": {"baseURL": "http://example.invalid/"}, "actions": True}}}\n' +
      '    display({"application/vnd.vegalite.v4+json": spec, "text/plain": "chart"}, raw=True)\n' +
      'print("charts done")');
    await cell.locator('.out-stream', { hasText: 'charts done' }).waitFor({ timeout: 120_000 });
    // the 13 isolated frames each compile plotly.js, a few at a time (frame-turns.js)
    const m = await chartMarks(cell, 180_000);
    assert.deepEqual(m.failed, [], 'every chart of the corpus is drawn');
    assert.equal(await cell.locator('.out-plotly').count(), chartCorpus.length + GL_VECTORS);
    assert.equal(await cell.locator('.out-plotly iframe.out-frame').count(), GL_VECTORS);
    assert.equal(await cell.locator('.out-vega').count(), chartCorpus.length);
    // hover every Plotly point and Vega bar (tooltips draw the markup), click every Vega link
    for (const p of await cell.locator('.out-vega svg .mark-rect path').all()) {
      await p.hover({ force: true, timeout: 2000 }).catch(() => {});
      await p.click({ force: true, timeout: 2000, modifiers: [] }).catch(() => {});
    }
    for (const p of (await cell.locator('.out-plotly .scatterlayer path.point').all()).slice(0, 40)) {
      await p.hover({ force: true, timeout: 2000 }).catch(() => {});
    }
    await page.waitForTimeout(500);
    const report = await page.evaluate(() => {
      const bad = [];
      for (const el of document.querySelectorAll('.outputs .out-chart *')) {
        for (const a of el.attributes) {
          const n = a.name.toLowerCase();
          if (n.startsWith('on')) bad.push(`${el.localName}[${n}]`);
          if ((n === 'href' || n === 'xlink:href') && /^\s*(javascript|data|vbscript):/i.test(a.value)) bad.push(`${n}=${a.value}`);
        }
        // the one frame allowed: the isolated chart frame, sandboxed to an opaque origin
        const ours = el.localName === 'iframe' && el.matches('.out-frame[sandbox="allow-scripts"]') &&
          new URL(el.src).pathname === '/sandbox.html' && el.attributes.length === 6;
        if (['script', 'iframe', 'object', 'embed', 'foreignobject'].includes(el.localName) && !ours) bad.push(`<${el.localName}>`);
      }
      const ids = [...document.querySelectorAll('#confirm, #toasts, #help, #panel, #composer')].filter((e) => e.closest('.outputs'));
      return { xss: window.__xss, csp: window.__csp, bad, clobbered: ids.length, url: location.href };
    });
    assert.equal(report.xss, undefined, 'a vector executed');
    const isolated = page.frames().filter((f) => f.url().endsWith('/sandbox.html'));
    assert.ok(isolated.length >= GL_VECTORS);
    for (const f of isolated) assert.equal(await f.evaluate(() => window.__xss), undefined, 'a vector executed in the isolated frame');
    assert.deepEqual(report.bad, []);
    assert.equal(report.clobbered, 0);
    assert.deepEqual(report.csp.filter((c) => /script|eval/.test(c)), [], 'no script or eval was attempted');
    assert.deepEqual(dialogs, []);
    assert.ok(report.url.startsWith(BASE), `the page navigated to ${report.url}`);
    console.log(`  chart xss corpus: ${chartCorpus.length} vectors, ${chartCorpus.length * 2 + GL_VECTORS} charts (${GL_VECTORS} in isolated frames), executed=0, clobbers=0, csp=${report.csp.length}`);
    await shot('chart-xss');
  });

  await step('widgets: interact with a slider; moving it changes the output (comm relay both ways)', async () => {
    const cell = await run('from ipywidgets import interact\n' +
      'def square(n=3):\n    print("square of", n, "is", n * n)\n' +
      'w = interact(square, n=(0, 20))');
    const slider = cell.locator('.out-widget .widget-slider');
    await slider.waitFor({ timeout: 20_000 });
    const out = cell.locator('.out-widget .widget-output');
    await out.filter({ hasText: 'square of 3 is 9' }).waitFor({ timeout: 20_000 });
    // the Output widget captured the first call: the cell's own outputs do not show it, and the
    // widget's clear_output(wait=True) did not clear the cell (the slider is still there)
    const cellText = await cell.evaluate((el) => [...el.querySelector('.outputs').children]
      .filter((c) => !c.querySelector('.out-widget')).map((c) => c.innerText).join('\n'));
    assert.ok(!cellText.includes('square of'), `the captured output leaked into the cell: ${cellText}`);
    // move the slider with the keyboard: the handle has focus, each key sends one update
    const handle = cell.locator('.out-widget .noUi-handle').first();
    await handle.focus();
    for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowRight');
    await out.filter({ hasText: 'square of 7 is 49' }).waitFor({ timeout: 20_000 });
    assert.equal(await out.locator('pre', { hasText: 'square of 3' }).count(), 0, 'interact clears its output first');
    const ns = await run('print(w.widget.children[0].value)');
    assert.match(await ns.locator('.outputs').innerText(), /^7$/m, 'the kernel got the value');
    await shot('interact');
  });

  await step('widgets: tqdm.notebook advances while the cell runs and ends at 100%', async () => {
    const cell = await run('from tqdm.notebook import tqdm\nimport time\n' +
      'for i in tqdm(range(40), desc="steps"):\n    time.sleep(0.1)', { wait: false });
    const bar = cell.locator('.out-widget .widget-hprogress');
    await bar.waitFor({ timeout: 30_000 });
    const seen = new Set();
    const t0 = Date.now();
    while (Date.now() - t0 < 60_000) {
      const v = await cell.locator('.out-widget .widget-html-content').first().innerText().catch(() => '');
      const pct = /(\d+)%/.exec(v)?.[1];
      if (pct != null) seen.add(Number(pct));
      if (await cell.getAttribute('data-status') === 'ok' && seen.has(100)) break;
      await page.waitForTimeout(100);
    }
    const mid = [...seen].filter((p) => p > 0 && p < 100);
    assert.ok(mid.length >= 2, `the bar advanced during the run: saw ${[...seen].sort((a, b) => a - b)}`);
    assert.ok(seen.has(100), `the bar ended at 100%: saw ${[...seen]}`);
    const text = await cell.locator('.out-widget').innerText();
    assert.match(text, /steps/);
    assert.match(text, /40\/40/);
    await shot('tqdm');
  });

  await step('widgets run no kernel-sent code: HTML values sanitized, unknown modules drawn as a note', async () => {
    await armProbe();
    const cell = await run('import ipywidgets as W\nfrom IPython.display import display\n' +
      'display(W.HTML(value=\'<img src=x onerror="window.__xss=1"><b id="confirm">bold</b><script>window.__xss=2</script>\'))\n' +
      'display(W.HTMLMath(value=\'<a href="javascript:window.__xss=3">m</a>\'))\n' +
      'display(W.Label(value=\'<img src=x onerror="window.__xss=4">\', description=\'<img src=x onerror="window.__xss=5">\'))\n' +
      'class Evil(W.DOMWidget):\n' +
      '    from traitlets import Unicode\n' +
      '    _view_name = Unicode(\'<img src=x onerror="window.__xss=6">\').tag(sync=True)\n' +
      '    _model_name = Unicode(\'EvilModel\').tag(sync=True)\n' +
      '    _view_module = Unicode(\'https://example.invalid/evil.js\').tag(sync=True)\n' +
      '    _model_module = Unicode(\'https://example.invalid/evil.js\').tag(sync=True)\n' +
      'display(Evil())');
    await cell.locator('.out-widget b', { hasText: 'bold' }).waitFor({ timeout: 20_000 });
    await cell.locator('.out-widget .out-note', { hasText: 'not one of the core widgets' }).waitFor({ timeout: 20_000 });
    await page.waitForTimeout(500);
    const r = await page.evaluate(() => ({
      xss: window.__xss,
      handlers: [...document.querySelectorAll('.out-widget *')].flatMap((e) => [...e.attributes].filter((a) => a.name.startsWith('on')).map((a) => a.name)),
      scripts: document.querySelectorAll('.out-widget script').length,
      js: [...document.querySelectorAll('.out-widget [href]')].filter((e) => /^\s*javascript:/i.test(e.getAttribute('href'))).length,
      confirm: document.getElementById('confirm')?.closest('.outputs') ? 'taken' : 'ok',
    }));
    assert.deepEqual(r, { xss: undefined, handlers: [], scripts: 0, js: 0, confirm: 'ok' });
    assert.deepEqual(dialogs, []);
  });

  await step('data viewer: a 1M-row frame paged, sorted and searched; only a page crosses the wire', async () => {
    const N = 1_000_000;
    const cell = await run('import numpy as np, pandas as pd\n' +
      `big = pd.DataFrame({"id": np.arange(${N}), "score": np.random.default_rng(7).random(${N}), ` +
      `"city": np.array(["paris", "oslo", "lima", "rome"])[np.arange(${N}) % 4]})\n` +
      'print(repr(big.score.max()), big.score.idxmax())\nbig');
    const [maxScore, maxId] = (await cell.locator('.out-stream').innerText()).trim().split(/\s+/);
    const wire = [];
    const onResp = async (r) => {
      if (!r.url().includes('/rows?')) return;
      const body = await r.body().catch(() => Buffer.alloc(0));
      let rows = -1;
      try { rows = JSON.parse(body.toString()).rows.length; } catch { /* an error answer */ }
      wire.push({ bytes: body.length, rows, status: r.status() });
    };
    page.on('response', onResp);
    // from the frame's output
    await cell.locator('[data-testid=open-data-viewer]').click();
    const dv = page.locator('[data-testid=data-viewer]');
    await page.waitForFunction(() => document.querySelector('[data-testid=data-viewer]')?.dataset.state === 'ready');
    const rowsOnScreen = () => dv.locator('tbody tr').count();
    assert.equal(await rowsOnScreen(), 50);
    assert.match(await dv.innerText(), /rows 1–50 of 1,000,000/);
    await dv.locator('[data-testid=dv-next]').click();
    await dv.locator('tbody tr th', { hasText: /^50$/ }).first().waitFor();
    assert.match(await dv.innerText(), /rows 51–100 of 1,000,000/);
    await dv.locator('[data-testid=dv-close]').click();
    // from the variable inspector
    await page.click('[data-tab=variables]');
    const viewBtn = page.locator('table.vars tr[data-name=big] [data-testid=view-rows]');
    // the panel lists from the checkpoint while the kernel is busy (a checkpoint, the viewer's last page)
    for (let i = 0; i < 20 && !(await viewBtn.count()); i++) {
      await page.locator('[aria-label="Refresh variables"]').click();
      await page.waitForTimeout(300);
    }
    await viewBtn.click();
    await page.waitForFunction(() => document.querySelector('[data-testid=data-viewer]')?.dataset.state === 'ready');
    const sortBtn = dv.locator('button.dv-sort[data-col=score]');
    await sortBtn.click(); // ascending
    await page.waitForFunction(() => /sorted by score ↑/.test(document.querySelector('[data-testid=data-viewer]').innerText) &&
      document.querySelector('[data-testid=data-viewer]').dataset.state === 'ready', null, { timeout: 60_000 });
    await sortBtn.click(); // descending
    await page.waitForFunction(() => /sorted by score ↓/.test(document.querySelector('[data-testid=data-viewer]').innerText) &&
      document.querySelector('[data-testid=data-viewer]').dataset.state === 'ready', null, { timeout: 60_000 });
    const first = await dv.locator('tbody tr').first().evaluate((tr) => [...tr.children].map((c) => c.textContent));
    assert.equal(first[0], maxId, `the first row after sorting descending is the max's (${first})`);
    assert.equal(Number(first[2]), Number(maxScore));
    await dv.locator('input[type=search]').fill('oslo');
    await page.waitForFunction(() => /of 250,000 matching/.test(document.querySelector('[data-testid=data-viewer]').innerText), null, { timeout: 60_000 });
    assert.equal(await rowsOnScreen(), 50);
    const cities = await dv.locator('tbody tr td:nth-child(4)').allInnerTexts();
    assert.deepEqual([...new Set(cities)], ['oslo']);
    await shot('data-viewer');
    await page.keyboard.press('Escape');
    await dv.waitFor({ state: 'detached' });
    page.off('response', onResp);
    const ok = wire.filter((w) => w.status === 200);
    assert.ok(ok.length >= 5, `pages fetched: ${JSON.stringify(wire)}`);
    assert.ok(ok.every((w) => w.rows <= 50), `a response carried more than a page: ${JSON.stringify(wire)}`);
    const total = wire.reduce((a, w) => a + w.bytes, 0);
    assert.ok(wire.every((w) => w.bytes < 16_000), `a response was larger than a page: ${JSON.stringify(wire)}`);
    console.log(`  data viewer: ${wire.length} pages fetched for a ${N.toLocaleString()}-row frame, ${total.toLocaleString()} bytes in all, ` +
      `at most ${Math.max(...ok.map((w) => w.rows))} rows and ${Math.max(...wire.map((w) => w.bytes)).toLocaleString()} bytes per response`);
  });

  await step('after a reload, a widget comes back from the live kernel at its value, with its output', async () => {
    await page.reload();
    await historyDrawn();
    const cell = cells().filter({ has: page.locator('.out-widget .widget-slider') }).first();
    const live = cell.locator('.out-widget[data-widget=live]');
    const t0 = Date.now();
    try {
      await live.locator('.widget-output', { hasText: 'square of 7 is 49' }).waitFor({ timeout: 60_000 }); // as historyDrawn
    } catch (err) {
      // how far each widget view of the page got (pending, drawing, live, lost, failed) and what it shows
      const views = await page.evaluate(() => [...document.querySelectorAll('.out-widget')].map((el) =>
        `${el.dataset.widget} ${el.dataset.modelId}: ${el.innerText.slice(0, 80).replace(/\s+/g, ' ')}`)).catch((e) => [e.message]);
      throw new Error(`${err.message}\nafter ${Date.now() - t0} ms, the widget views: ${JSON.stringify(views, null, 1)}`);
    }
    assert.equal((await live.locator('.widget-readout').first().textContent()).trim(), '7');
  });

  await step('a session with 1,500 events opens with its newest listed, without the log sent over its socket; older pages on request', async () => {
    const id = 'many-events';
    await apiCall('POST', '/api/sessions', JSON.stringify({ session_id: id }));
    let left = 1500;
    await Promise.all(Array.from({ length: 8 }, async () => { while (left-- > 0) await apiCall('POST', `/api/sessions/${id}/heartbeat`); }));
    const tail = await apiCall('GET', `/api/sessions/${id}/events?order=desc&limit=1`);
    const newest = tail.events[0].sequence_number;
    assert.ok(newest >= 1500, `newest event ${newest}`);
    let frames = 0;
    const onWs = (ws) => ws.on('framereceived', ({ payload }) => { if (typeof payload === 'string' && payload.startsWith('{"type":"event"')) frames++; });
    page.on('websocket', onWs);
    // the page's sockets, kept so the test can drop one, and held back while the test says so
    await page.addInitScript(() => {
      const Orig = window.WebSocket;
      window.__sockets = [];
      window.WebSocket = class extends Orig {
        constructor(...a) {
          if (window.__holdSockets) throw new Error('held by the test');
          super(...a);
          window.__sockets.push(this);
        }
      };
    });
    await openSession(id);
    // the panel lists the newest 200 from GET /events and subscribes after them
    await page.locator('[data-panel=events] .ev-seq', { hasText: new RegExp(`^#${newest}$`) }).first().waitFor({ state: 'attached', timeout: 60_000 });
    await page.locator('[data-panel=events][data-subscribed]').waitFor({ state: 'attached', timeout: 15_000 });
    await page.evaluate(() => new Promise((r) => setTimeout(r, 300)));
    page.off('websocket', onWs);
    assert.ok(frames < 20, `opening the session sent ${frames} events over its socket (its log has ${newest})`);
    const draws = Number(await page.locator('[data-panel=events] ol.events').getAttribute('data-draws'));
    assert.ok(draws >= 1 && draws <= 20, `the events list was drawn ${draws} times for 1,500 events`);
    console.log(`  1,500 events: ${frames} sent over the socket at opening, the list drawn ${draws} times`);
    // events logged before the page opened are listed, not counted as unread news
    assert.ok(await page.locator('#events-unread').isHidden(), `unread: ${await page.locator('#events-unread').textContent()}`);
    assert.equal(await page.locator('.toast', { hasText: /Budget|kernel died/ }).count(), 0);
    // events logged while the page's socket was down are news when it is back: counted unread
    await page.click('[role=tab][data-tab=files]');
    await page.evaluate(() => { window.__holdSockets = true; window.__sockets.at(-1).close(); });
    await page.locator('[data-panel=events][data-subscribed]').waitFor({ state: 'detached', timeout: 15_000 });
    await apiCall('POST', `/api/sessions/${id}/heartbeat`);
    await apiCall('POST', `/api/sessions/${id}/heartbeat`);
    await page.evaluate(() => { window.__holdSockets = false; });
    await page.locator('[data-panel=events][data-subscribed]').waitFor({ state: 'attached', timeout: 30_000 });
    await page.locator('#events-unread:not([hidden])').waitFor({ timeout: 15_000 });
    assert.equal((await page.locator('#events-unread').textContent()).trim(), '2', 'the 2 events missed while the socket was down');
    // the page asked for the newest 200: the one before them comes with "Older events"
    const before = newest - 200;
    const seq = (n) => page.locator('[data-panel=events] .ev-seq', { hasText: new RegExp(`^#${n}$`) });
    assert.equal(await seq(before).count(), 0, `#${before} listed before it was asked for`);
    await page.click('[role=tab][data-tab=events]');
    await page.click('[data-testid=events-older]');
    await seq(before).first().waitFor({ state: 'attached', timeout: 15_000 });
    assert.equal(await seq(newest).count(), 1, 'the newest event left the list when older ones came');
  });

  assert.deepEqual(problems, []);
  console.log('datasci: all steps passed');
} finally {
  await browser.close();
}
