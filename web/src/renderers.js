// The renderer registry: which MIME type of an output's data bundle is shown, and how. As in
// JupyterLab, each renderer names its MIME types, a rank (lower wins when a bundle has several) and
// whether it is safe for untrusted data. Outputs here are never trusted (anyone's kernel may print
// anything), so unsafe renderers (application/javascript, a future widget manager that runs code) are
// never picked. This module holds the standard renderers only; as with JupyterLab's rendermime, the
// owner of a renderer's machinery adds it with registry.add({...}): main.js the charts (charts.js,
// ranked above text/html, whose copy from Plotly and Altair is only a <script> we do not run), the
// session view the widget view (it owns the widget hub). So this module imports no chart or widget code.
import { ansiToHtml } from './ansi.js';
import { renderMarkdown, fillPlaceholders, renderMath, PLACEHOLDERS } from './markdown.js';
import { sanitize } from './sanitize.js';
import { h } from './util.js';

const join = (v) => (Array.isArray(v) ? v.join('') : v);

export class RendererRegistry {
  constructor() { this.renderers = []; }

  /** add registers {mimeTypes: [...], rank, safe, render(value, ctx) -> Node}; ctx: {mime, metadata, data, ns}. */
  add(r) {
    if (!Array.isArray(r.mimeTypes) || typeof r.render !== 'function') throw new Error('renderer: mimeTypes and render are required');
    this.renderers.push({ rank: 100, safe: true, ...r });
    this.renderers.sort((a, b) => a.rank - b.rank);
  }

  /** pick returns {mime, renderer} for the best safe renderer of data's MIME types, or null. */
  pick(data, trusted = false) {
    for (const r of this.renderers) {
      if (!r.safe && !trusted) continue;
      for (const m of r.mimeTypes) {
        const mime = m instanceof RegExp ? Object.keys(data).find((k) => m.test(k)) : (data[m] != null ? m : null);
        if (mime) return { mime, renderer: r };
      }
    }
    return null;
  }

  /** render draws data (an output's data bundle) and returns a node; failures are shown, not thrown. */
  render(data, metadata = {}, ns) {
    const p = this.pick(data);
    if (!p) return h('pre.out-plain.muted', `[output with no displayable type: ${Object.keys(data).join(', ') || 'empty'}]`);
    const ctx = { mime: p.mime, metadata: (metadata && metadata[p.mime]) || {}, data, ns };
    try {
      const el = p.renderer.render(data[p.mime], ctx);
      el.dataset.mime = p.mime;
      return el;
    } catch (err) {
      return h('pre.out-plain.out-warn', `[could not render ${p.mime}: ${err.message}]`);
    }
  }
}

export function plain(text) {
  const pre = h('pre.out-plain');
  pre.innerHTML = ansiToHtml(String(text ?? ''));
  return pre;
}

function image(src, md, alt, kind) {
  const img = h('img.out-img', { src, alt: join(alt) || `${kind} image`, 'data-kind': kind });
  if (md.width) img.width = md.width;
  if (md.height) img.height = md.height;
  if (md.unconfined) img.classList.add('unconfined');
  return h('div.out-image', img);
}

/** latexSource strips the delimiters IPython's Latex()/Math() put around text/latex. */
export function latexSource(s) {
  const t = String(s).trim();
  const m = /^\$\$([\s\S]*)\$\$$/.exec(t) || /^\\\[([\s\S]*)\\\]$/.exec(t) || /^\$([\s\S]*)\$$/.exec(t) || /^\\\(([\s\S]*)\\\)$/.exec(t);
  return m ? m[1].trim() : t;
}

/** SCRIPT_NOTE: what an output that was only a script says instead of an empty box. */
export const SCRIPT_NOTE = 'This output is a script, which the page does not run (outputs never run code). ' +
  'Plotly and Altair charts are drawn here from their own data types: with Altair, run ' +
  'alt.renderers.enable("mimetype"); with Plotly, pio.renderers.default = "plotly_mimetype" ' +
  '(carryover sets both when the library is imported; a renderer chosen later, or another library, sends HTML with a script).';

/** html draws sanitized HTML; HTML that was nothing but a script (and blank markup) gets a note. */
function html(raw, ns) {
  const el = h('div.out-html.rendered', { 'data-ns': ns }, sanitize(raw, { ns })); // data-ns: its styles' scope
  const text = [...el.childNodes].filter((n) => n.localName !== 'style').map((n) => n.textContent).join('');
  if (/<script/i.test(raw) && !text.trim() && !el.querySelector('img,svg,table,video,audio,canvas')) {
    el.append(h('p.out-note.muted', { role: 'note' }, SCRIPT_NOTE));
  }
  return el;
}

export const registry = new RendererRegistry();

registry.add({ mimeTypes: ['application/javascript', 'text/javascript'], rank: 0, safe: false, render: () => h('div') });
registry.add({ mimeTypes: ['text/html'], rank: 10, render: (v, c) => html(join(v), c.ns) });
registry.add({
  mimeTypes: ['text/markdown'], rank: 20,
  render: (v, c) => {
    const el = h('div.out-markdown.rendered', { 'data-ns': c.ns }, sanitize(renderMarkdown(join(v)), { ns: c.ns, keepClasses: PLACEHOLDERS }));
    fillPlaceholders(el);
    return el;
  },
});
registry.add({
  mimeTypes: ['text/latex'], rank: 30,
  render: (v) => { const el = h('div.out-latex'); renderMath(latexSource(join(v)), el, true); return el; },
});
// An SVG shown through <img> cannot run script or load anything: sanitized by construction.
registry.add({
  mimeTypes: ['image/svg+xml'], rank: 40,
  render: (v, c) => image(`data:image/svg+xml;charset=utf-8,${encodeURIComponent(join(v))}`, c.metadata, c.data['text/plain'], 'svg'),
});
for (const [i, t] of ['png', 'jpeg', 'gif', 'webp'].entries()) {
  registry.add({
    mimeTypes: [`image/${t}`], rank: 50 + i,
    render: (v, c) => image(`data:image/${t};base64,${String(join(v)).replace(/\s+/g, '')}`, c.metadata, c.data['text/plain'], t),
  });
}
registry.add({ mimeTypes: ['application/json'], rank: 60, render: (v) => h('pre.out-json', JSON.stringify(v, null, 2)) });
registry.add({ mimeTypes: ['text/plain'], rank: 100, render: (v) => plain(join(v)) });
// Other JSON types (widget state, older Vega) until a renderer of their own is registered.
registry.add({
  mimeTypes: [/^application\/(.+\+)?json$/], rank: 110,
  render: (v, c) => h('div.out-json-typed', h('div.muted.small-print', c.mime), h('pre.out-json', JSON.stringify(v, null, 2).slice(0, 200_000))),
});
