// Charts: Plotly figures (application/vnd.plotly.v1+json) through plotly.js, and Vega / Vega-Lite
// specs (application/vnd.vegalite.v4+json, v5, application/vnd.vega.v5+json) through vega-embed.
// Each library is a chunk of its own, loaded with the first chart of its kind (like KaTeX), bundled:
// nothing is fetched at run time. Only data crosses from the kernel, never code:
// - Plotly: the figure's data and layout only; the config is ours (no links to Plotly's cloud, no
//   topojson from a CDN). plotly.js draws titles, hover templates and annotations as SVG text with
//   its own small whitelist of tags and URL schemes. A figure is drawn at its layout's height, else
//   plotly.js's default 450 px (the box is given that height: with `responsive`, plotly.js takes
//   its box's size, and an empty box is a strip). Figures with WebGL traces, which need eval, are
//   drawn in the isolated frame (isolated.js), never by relaxing the page's CSP.
// - Vega: expressions run in vega-interpreter (ast: true), never compiled with eval/Function (the
//   page's CSP forbids both); the spec's usermeta (where vega-embed reads embed options, a loader
//   among them) is dropped; the loader loads nothing (data must be inline, as Altair sends it) and
//   lets links be http(s) only; no actions menu (it opens other sites). Vega draws at its spec's size.
import { h } from './util.js';
import { PLOTLY_CONFIG, PLOTLY_HEIGHT, needsIsolation, webglMissing } from './plotly-config.js';
import { drawIsolated } from './isolated.js';

let plotlyP = null;
let vegaP = null;

/** whenAttached resolves once el is in the document (charts measure their box), or after ~2 s. */
function whenAttached(el) {
  return new Promise((resolve) => {
    let n = 0;
    const check = () => (el.isConnected || ++n > 120 ? resolve() : requestAnimationFrame(check));
    check();
  });
}

/** failed replaces a chart by what went wrong; a failed chart is never marked drawn. */
export function failed(el, kind, err) {
  el.replaceChildren(h('pre.out-plain.out-warn', `[could not draw the ${kind} chart: ${err?.message || err}]`));
  el.style.height = '';
  el.dataset.chart = 'failed';
}

const px = (v) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : null);

/** sizeBox gives a chart's box the figure's size: its layout's height (else plotly's 450 px) and width. */
function sizeBox(el, layout) {
  el.style.height = `${px(layout.height) || PLOTLY_HEIGHT}px`;
  if (px(layout.width)) el.style.width = `${px(layout.width)}px`;
}

export function renderPlotly(v) {
  const el = h('div.out-chart.out-plotly', { 'data-chart': 'pending' });
  const fig = typeof v === 'string' ? JSON.parse(v) : v;
  if (!fig || typeof fig !== 'object') throw new Error('not a Plotly figure');
  const data = Array.isArray(fig.data) ? fig.data : [];
  const layout = fig.layout && typeof fig.layout === 'object' ? fig.layout : {};
  sizeBox(el, layout);
  if (needsIsolation(data)) {
    el.classList.add('out-isolated');
    whenAttached(el).then(() => drawIsolated(el, { data, layout }))
      .then(() => { el.dataset.chart = 'drawn'; })
      .catch((err) => failed(el, 'Plotly', err));
    return el;
  }
  plotlyP ||= import('plotly.js-dist-min').then((m) => m.default || m);
  Promise.all([plotlyP, whenAttached(el)])
    .then(([Plotly]) => Plotly.newPlot(el, structuredClone(data), structuredClone(layout), PLOTLY_CONFIG))
    .then(() => {
      const why = webglMissing(el);
      if (why) throw new Error(why);
      el.dataset.chart = 'drawn';
    })
    .catch((err) => failed(el, 'Plotly', err));
  return el;
}

/** noLoader refuses every load (data must be inline) and lets links be http(s) only. */
function noLoader(vega) {
  const l = vega.loader();
  l.load = async (uri) => { throw new Error(`the chart asks to load ${String(uri).slice(0, 100)}: only inline data is drawn`); };
  l.sanitize = async (uri, opt) => {
    if (opt?.context === 'href' && /^https?:\/\//i.test(String(uri).trim())) return { href: String(uri).trim() };
    throw new Error('not loaded: only inline data is drawn');
  };
  return l;
}

export function renderVega(v, ctx) {
  const el = h('div.out-chart.out-vega', { 'data-chart': 'pending' });
  const spec = structuredClone(typeof v === 'string' ? JSON.parse(v) : v);
  if (!spec || typeof spec !== 'object') throw new Error('not a Vega spec');
  delete spec.usermeta; // vega-embed reads embed options (a loader, ast: false) from it
  const mode = /vegalite/.test(ctx.mime) ? 'vega-lite' : 'vega';
  vegaP ||= Promise.all([import('vega-embed'), import('vega'), import('vega-interpreter')])
    .then(([e, vega, i]) => ({ embed: e.default, vega, expr: i.expressionInterpreter }));
  Promise.all([vegaP, whenAttached(el)])
    .then(([{ embed, vega, expr }]) => embed(el, spec, {
      mode, renderer: 'svg', actions: false, ast: true, expr, loader: noLoader(vega), defaultStyle: false,
      logLevel: vega.Error,
    }))
    .then(() => { el.dataset.chart = 'drawn'; })
    .catch((err) => failed(el, 'Vega', err));
  return el;
}

export const VEGA_TYPES = ['application/vnd.vegalite.v5+json', 'application/vnd.vegalite.v4+json',
  'application/vnd.vegalite.v3+json', 'application/vnd.vega.v5+json'];

/** chartRenderers: the chart renderers, for the registry (ranked above text/html, whose copy from
 *  Plotly and Altair is only a <script> we do not run). main.js registers them. */
export const chartRenderers = [
  { mimeTypes: ['application/vnd.plotly.v1+json'], rank: 5, render: renderPlotly },
  { mimeTypes: VEGA_TYPES, rank: 6, render: renderVega },
];
