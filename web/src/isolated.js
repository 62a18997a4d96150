// The isolated chart frame, seen from the page. Some renderers need what the page's CSP refuses
// (plotly.js's WebGL traces build code with new Function). Rather than weaken the page's policy,
// such a chart is drawn in an <iframe sandbox="allow-scripts"> of static/sandbox.html, the way VS Code
// and JupyterLab isolate untrusted output: the frame has an opaque origin (no access to the page's
// DOM, storage, token or cookies), a policy of its own sent by the server (eval allowed there only,
// no connections, images from data: only), no popups and no top navigation. Only the figure's data
// and layout cross, by postMessage (structured clone: data, never code); the frame answers whether
// it drew the chart, and a chart that failed says why instead of being marked drawn.
import { h } from './util.js';

const FRAMES = new Map(); // contentWindow -> (message) => void
const TIMEOUT_MS = 60_000;

window.addEventListener('message', (e) => {
  const handle = FRAMES.get(e.source); // only our frames' messages, matched by their window
  if (handle && e.data && typeof e.data === 'object') handle(e.data);
});

/**
 * drawIsolated draws fig ({data, layout}) in a sandboxed frame filling el, and resolves when the
 * frame says it is drawn; it rejects with the frame's reason, or when the frame does not answer.
 */
export function drawIsolated(el, fig) {
  const frame = h('iframe.out-frame', {
    sandbox: 'allow-scripts', src: new URL('sandbox.html', document.baseURI).href,
    title: 'chart (drawn in an isolated frame)', referrerpolicy: 'no-referrer', loading: 'eager',
  });
  el.replaceChildren(frame);
  return new Promise((resolve, reject) => {
    const win = frame.contentWindow;
    if (!win) { reject(new Error('the isolated chart frame could not be made')); return; }
    let settled = false;
    const done = (fn, v) => { clearTimeout(timer); if (!settled) fn(v); settled = true; };
    const timer = setTimeout(() => done(reject, new Error('the isolated chart frame did not answer')), TIMEOUT_MS);
    // the handler stays while the frame is on the page: a frame moved in the DOM (a cell moved) loads
    // again, says ready again and gets the figure again
    FRAMES.set(win, (m) => {
      if (!frame.isConnected) { FRAMES.delete(win); return; }
      if (m.type === 'ready') win.postMessage({ type: 'draw', data: fig.data, layout: fig.layout }, '*');
      else if (m.type === 'drawn') done(resolve, m);
      else if (m.type === 'failed') done(reject, new Error(String(m.message || 'unknown error').slice(0, 500)));
    });
  });
}
