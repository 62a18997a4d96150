// Widgets (ipywidgets): the session's side of the comm relay. The server forwards the kernel's comm
// messages as "comm" frames, the outputs a widget owns as "comm_output", the end of a comm message's
// handling as "comm_idle" and a new kernel as "comm_reset" (server/session/comms.go); the page's
// comm messages go back as "comm" frames. The widget manager itself (widget-manager.js: the official
// @jupyter-widgets packages, the core controls only) is a chunk of its own, loaded with the first
// widget; frames that arrive before it are kept, in order.
import { h } from './util.js';

export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

/** LOST: what a widget view says when its model is not on this page. */
export const LOST = 'This widget is not live on this page: its kernel is not running. Widgets are saved with each ' +
  'checkpoint and come back, with their values and outputs, when the session\'s kernel starts again (run a cell).';

let current = null; // the WidgetHub of the session on screen

/** WidgetHub connects one session view's socket to the widget manager. */
export class WidgetHub {
  constructor(send) {
    this.send = send; // (frame) -> bool
    this.manager = null;
    this.loading = null;
    this.queue = [];
    this.reset = null; // the message of the last comm_reset, shown by views drawn before it
    this.opened = new Set(); // comm ids the kernel opened while this page listened
    this.waiters = new Map(); // comm id -> [resolve], views waiting for their comm_open
    current = this;
  }

  dispose() {
    if (current === this) current = null;
    this.manager?.dispose?.();
  }

  /** load brings the manager chunk (once) and replays the frames that waited for it. */
  load() {
    this.loading ||= import('./widget-manager.js').then((m) => {
      this.manager = new m.Manager(this);
      for (const f of this.queue.splice(0)) this.manager.onFrame(f);
      return this.manager;
    });
    return this.loading;
  }

  /** onFrame takes comm, comm_output, comm_idle and comm_reset frames. */
  onFrame(f) {
    if (f.type === 'comm_reset') {
      this.reset = f.message;
      this.opened.clear();
      this.markLost();
    }
    if (f.type === 'comm' && f.msg_type === 'comm_open') {
      const id = f.content?.comm_id;
      this.opened.add(id);
      for (const w of this.waiters.get(id) || []) w(true);
      this.waiters.delete(id);
      this.revive(id);
    }
    if (this.manager) { this.manager.onFrame(f); return; }
    if (f.type === 'comm' && f.msg_type === 'comm_open') this.load();
    if (f.type !== 'comm_reset') this.queue.push(f);
  }

  /**
   * opened resolves true once the kernel opened comm id, false after ms without it. A view's
   * display_data (the run's frames) and its model's comm_open (the relay's) travel apart.
   */
  whenOpened(id, ms = 4000) {
    if (this.opened.has(id)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const list = this.waiters.get(id) || [];
      list.push(resolve);
      this.waiters.set(id, list);
      setTimeout(() => resolve(false), ms);
    });
  }

  /**
   * revive draws again the views of model id that lost their kernel: a restore re-created the model
   * (with its id) and the server sent it (server/session/widget_sync.go).
   */
  revive(id) {
    for (const el of document.querySelectorAll('.out-widget[data-widget=lost]')) {
      if (el.dataset.modelId === id) show(this, id, el);
    }
  }

  /** markLost replaces the views whose model died with the kernel by the note. */
  markLost() {
    for (const el of document.querySelectorAll('.out-widget[data-widget=live]')) lost(el);
  }
}

function lost(el) {
  el.dataset.widget = 'lost';
  el.replaceChildren(h('p.out-note.muted', { role: 'note' }, LOST));
}

/** renderWidget is the renderer of application/vnd.jupyter.widget-view+json: a view of a live model. */
export function renderWidget(v) {
  const el = h('div.out-widget', { 'data-widget': 'pending' });
  const id = v && typeof v === 'object' ? String(v.model_id || '') : '';
  const hub = current;
  el.dataset.modelId = id;
  if (!hub || !id) { lost(el); return el; }
  hub.whenOpened(id).then((open) => { if (open) show(hub, id, el); else if (el.dataset.widget === 'pending') lost(el); });
  return el;
}

/** show draws a view of model id in el (live), or says why it cannot. */
function show(hub, id, el) {
  el.dataset.widget = 'drawing';
  hub.load().then((m) => m.display(id, el))
    .then((ok) => { if (!ok) lost(el); else el.dataset.widget = 'live'; })
    .catch((err) => { el.dataset.widget = 'failed'; el.replaceChildren(h('pre.out-plain.out-warn', `[could not draw the widget: ${err?.message || err}]`)); });
}
