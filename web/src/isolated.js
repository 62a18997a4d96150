// The isolated chart frame, seen from the page. Some renderers need what the page's CSP refuses
// (plotly.js's WebGL traces build code with new Function). Rather than weaken the page's policy,
// such a chart is drawn in an <iframe sandbox="allow-scripts"> of static/sandbox.html, the way VS Code
// and JupyterLab isolate untrusted output: the frame has an opaque origin (no access to the page's
// DOM, storage, token or cookies), a policy of its own sent by the server (eval allowed there only,
// no connections, images from data: only), no popups and no top navigation. Only the figure's data
// and layout cross, by postMessage (structured clone: data, never code); the frame answers whether
// it drew the chart, and a chart that failed says why instead of being marked drawn.
import { h } from './util.js';
import { frameLimit, turns } from './frame-turns.js';

const FRAMES = new Map(); // contentWindow -> (message) => void
const TIMEOUT_MS = 60_000; // for the frame to say it is ready, then for its draw once its turn came
const TURNS = turns(frameLimit(navigator.hardwareConcurrency));

window.addEventListener('message', (e) => {
  const handle = FRAMES.get(e.source); // only our frames' messages, matched by their window
  if (handle && e.data && typeof e.data === 'object') handle(e.data);
});

/**
 * drawIsolated draws fig ({data, layout}) in a sandboxed frame filling el, and resolves when the
 * frame says it is drawn; it rejects with the frame's reason, or when the frame does not answer.
 * The frame loads at once and says it is ready; it is sent the figure when its turn comes
 * (frame-turns.js), and the turn is given back when it answers, fails to, or leaves the page.
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
    const send = () => win.postMessage({ type: 'draw', data: fig.data, layout: fig.layout }, '*');
    let settled = false;
    let asked = false; // the frame said ready and waits for its turn, or has it
    let release = null; // the turn's, once it came
    let timer = setTimeout(() => done(reject, new Error('the isolated chart frame did not load')), TIMEOUT_MS);
    let watch = 0;
    const done = (fn, v) => {
      clearTimeout(timer);
      clearInterval(watch);
      release?.();
      if (!settled) fn(v);
      settled = true;
    };
    const start = (r) => {
      release = r; // start runs only while wanted (stillWanted): never once settled
      clearTimeout(timer);
      timer = setTimeout(() => done(reject, new Error('the isolated chart frame did not answer')), TIMEOUT_MS);
      // a cell cleared while its chart draws gives the turn back
      watch = setInterval(() => { if (!frame.isConnected) done(reject, new Error('the chart left the page')); }, 1000);
      send();
    };
    // a frame that left the page while it waited for its turn is not drawn, and says so
    const stillWanted = () => {
      if (frame.isConnected && !settled) return true;
      done(reject, new Error('the chart left the page'));
      return false;
    };
    // the handler stays while the frame is on the page: a frame moved in the DOM (a cell moved) loads
    // again, says ready again and gets the figure again (at once if its turn came)
    FRAMES.set(win, (m) => {
      if (!frame.isConnected) { FRAMES.delete(win); return; }
      if (m.type === 'ready' && !asked) {
        asked = true;
        clearTimeout(timer); // loaded: it waits for its turn, whose own clock starts with it
        TURNS.take(start, stillWanted);
      } else if (m.type === 'ready' && release) send();
      else if (m.type === 'drawn') done(resolve, m);
      else if (m.type === 'failed') done(reject, new Error(String(m.message || 'unknown error').slice(0, 500)));
    });
  });
}
