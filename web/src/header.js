// The session view's part of the top bar and its state banner: the breadcrumb with the session's
// state and sandbox badges, the websocket's and the kernel's state, and the banner over the new-cell
// box for a paused, closed or rotating session.
import { h, fill } from './util.js';
import { stateBadge, sandboxBadge } from './ui.js';

const CLOSED_STATES = new Set(['completed', 'failed', 'cancelled']);

/** renderHeader draws view.session into the top bar and the composer's state banner. */
export function renderHeader(view) {
  const s = view.session;
  fill(document.getElementById('crumb'), h('a', { href: '#/' }, 'Sessions'), h('span.sep', ' / '),
    h('span.crumb-name', { title: `id: ${s.id}` }, s.name || s.id), s.name && s.name !== s.id ? h('span.crumb-id', s.id) : null,
    stateBadge(s.state), sandboxBadge(s.sandbox));
  document.title = `${s.name || s.id} · carryover`;
  let msg = null;
  if (s.state === 'paused') {
    msg = h('div.banner.warn', 'This session is paused: runs are refused until it is resumed. ',
      h('button.btn.small', { onclick: () => view.lifecycle('resume') }, 'Resume'));
  } else if (CLOSED_STATES.has(s.state)) {
    msg = h('div.banner.error', `This session is ${s.state}: it cannot run code any more. Its history, files and checkpoints stay readable.`);
  } else if (s.state === 'rotating') {
    msg = h('div.banner.info', 'Rotating to a fresh sandbox: runs wait until the new kernel has the state back.');
  }
  view.composerBox.stateBanner.replaceChildren(...(msg ? [msg] : []));
  view.composerBox.el.classList.toggle('disabled', CLOSED_STATES.has(s.state));
}

/** setConn shows the websocket's state (open, connecting, closed) and why. */
export function setConn(state, why) {
  const el = document.getElementById('conn');
  el.dataset.state = state;
  document.getElementById('conn-text').textContent = state === 'open' ? 'live' : state === 'connecting' ? 'connecting' : 'offline';
  el.title = `Websocket: ${state}${why ? ` (${why})` : ''}`;
}

/** showKernel shows whether the kernel is busy. */
export function showKernel(busy) {
  const el = document.getElementById('kstate');
  el.textContent = busy ? 'busy' : 'idle';
  el.dataset.state = busy ? 'busy' : 'idle';
}
