// The code of the isolated chart frame (static/sandbox.html), an entry of its own in the bundle. It
// runs in a document the server sends with `sandbox allow-scripts` (an opaque origin: no cookies,
// no storage, no access to the page, its token or its DOM) and a policy that allows eval here only,
// for what needs it (plotly.js's WebGL traces compile their shaders' glue with new Function). It
// draws one Plotly figure the parent posts, and answers with what happened:
//   parent -> frame  {type: 'draw', data, layout}
//   frame -> parent  {type: 'ready'} | {type: 'drawn', width, height} | {type: 'failed', message}
// Nothing here can reach the network (connect-src 'none', images from data: only), navigate the
// page (no allow-top-navigation) or open windows (no allow-popups).
import { PLOTLY_CONFIG, webglMissing } from './plotly-config.js';

const post = (m) => window.parent.postMessage(m, '*'); // the parent's origin is not ours to know

async function draw({ data, layout }) {
  const el = document.getElementById('chart');
  el.style.height = `${window.innerHeight}px`;
  const m = await import('plotly.js-dist-min');
  const Plotly = m.default || m;
  await Plotly.newPlot(el, data, layout, PLOTLY_CONFIG);
  const why = webglMissing(el);
  if (why) throw new Error(why);
  const r = el.getBoundingClientRect();
  return { width: Math.round(r.width), height: Math.round(r.height) };
}

let drawing = false;
window.addEventListener('message', (e) => {
  if (e.source !== window.parent || drawing || e.data?.type !== 'draw') return;
  drawing = true; // one figure per frame
  draw(e.data)
    .then((size) => post({ type: 'drawn', ...size }))
    .catch((err) => post({ type: 'failed', message: String(err?.message || err).slice(0, 500) }));
});
post({ type: 'ready' });
