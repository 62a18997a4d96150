// Rendering of kernel outputs (the items of a /run answer's "outputs", streamed over the websocket):
// stream, display_data, execute_result, error, update_display_data and clear_output.

import { ansiToHtml, applyControlChars } from './ansi.js';
import { registry } from './renderers.js';
import { newNamespace } from './sanitize.js';
import { h } from './util.js';

const STREAM_HEAD = 50_000; // characters kept from the start of a huge stream
const STREAM_TAIL = 400_000; // and from its end

const join = (v) => (Array.isArray(v) ? v.join('') : v);

/** DisplayRegistry maps a display_id to the places it is shown, for update_display_data. */
export class DisplayRegistry {
  constructor() { this.map = new Map(); }
  add(id, entry) {
    if (!this.map.has(id)) this.map.set(id, new Set());
    this.map.get(id).add(entry);
  }
  removeArea(area) {
    for (const set of this.map.values()) for (const e of set) if (e.area === area) set.delete(e);
  }
  update(id, data, metadata) {
    const set = this.map.get(id);
    if (!set) return false;
    for (const e of set) {
      e.output.data = data;
      e.output.metadata = metadata || {};
      e.el.replaceChildren(renderData(data, metadata || {}));
    }
    return set.size > 0;
  }
}

/**
 * renderData draws an output's data bundle through the renderer registry (renderers.js). Each call
 * gets its own id namespace, so two outputs (or an output and the page) never share an id.
 */
export function renderData(data, metadata = {}) {
  return registry.render(data || {}, metadata || {}, newNamespace());
}

function streamText(text) {
  if (text.length <= STREAM_HEAD + STREAM_TAIL) return text;
  const cut = text.length - STREAM_HEAD - STREAM_TAIL;
  return `${text.slice(0, STREAM_HEAD)}\n\n… ${cut.toLocaleString()} characters not shown …\n\n${text.slice(-STREAM_TAIL)}`;
}

/**
 * OutputArea holds the outputs of one cell. add() takes output items in kernel order; streams of the
 * same name are merged and re-rendered at most once per frame.
 */
export class OutputArea {
  constructor(registry) {
    this.registry = registry;
    this.el = h('div.outputs', { 'aria-live': 'polite' });
    this.items = []; // {output, el}
    this.pendingClear = false;
    this.scheduled = new Set();
    this.viewTable = null; // (execute_result) -> a click handler opening it in the data viewer, or null
  }

  get count() { return this.items.length; }

  clear() {
    this.registry.removeArea(this);
    this.items = [];
    this.pendingClear = false;
    this.el.replaceChildren();
  }

  setAll(outputs) {
    this.clear();
    for (const o of outputs || []) this.add(o);
  }

  /** text returns the visible plain text (streams, text/plain, errors), for tests and copy. */
  text() { return this.el.innerText; }

  add(o) {
    if (!o || typeof o !== 'object') return;
    const type = o.type || o.output_type;
    if (type === 'clear_output') {
      if (o.wait) this.pendingClear = true;
      else this.clear();
      return;
    }
    if (type === 'update_display_data') {
      const id = o.transient?.display_id ?? o.display_id;
      if (id != null) this.registry.update(id, o.data || {}, o.metadata);
      return;
    }
    if (this.pendingClear) this.clear();
    if (type === 'stream') {
      const last = this.items[this.items.length - 1];
      const name = o.name || 'stdout';
      if (last && last.output.type === 'stream' && last.output.name === name) {
        last.output.text += join(o.text) || '';
        this.schedule(last);
        return;
      }
      const item = { output: { type: 'stream', name, text: join(o.text) || '' }, el: h(`pre.out-stream.${name === 'stderr' ? 'stderr' : 'stdout'}`) };
      scrollWatch.observe(item.el);
      this.items.push(item);
      this.el.append(item.el);
      this.renderStream(item);
      return;
    }
    let el;
    if (type === 'error') {
      const tb = Array.isArray(o.traceback) ? o.traceback.join('\n') : join(o.traceback) || '';
      el = h('pre.out-error');
      el.innerHTML = ansiToHtml(tb.trim() ? tb : `${o.ename || 'Error'}: ${o.evalue || ''}`);
    } else if (type === 'display_data' || type === 'execute_result') {
      const rendered = renderData(o.data || {}, o.metadata || {});
      // boxes that scroll sideways (wide math, long JSON lines) must take focus to be scrolled by keyboard
      if (rendered.matches('.out-latex, .out-json, .out-plain')) scrollWatch.observe(rendered);
      const body = h('div.out-body', rendered);
      el = h(`div.out-rich${type === 'execute_result' ? '.out-result' : ''}`,
        type === 'execute_result' && o.execution_count != null ? h('span.out-prompt', { title: 'Result of this cell' }, `Out[${o.execution_count}]`) : null,
        body);
      const open = type === 'execute_result' ? this.viewTable?.(o) : null;
      if (open) el.append(h('button.btn.small.dv-open', { onclick: open, 'data-testid': 'open-data-viewer' }, 'Open in data viewer'));
      const id = o.transient?.display_id ?? o.display_id;
      const output = { ...o, type };
      if (id != null) this.registry.add(id, { area: this, el: body, output });
      this.items.push({ output, el });
      this.el.append(el);
      return;
    } else {
      el = h('pre.out-plain.muted', `[${type || 'unknown'} output] ${JSON.stringify(o).slice(0, 500)}`);
    }
    this.items.push({ output: { ...o, type }, el });
    this.el.append(el);
    scrollWatch.observe(el);
  }

  schedule(item) {
    if (this.scheduled.has(item)) return;
    this.scheduled.add(item);
    requestAnimationFrame(() => {
      this.scheduled.delete(item);
      if (item.el.isConnected || this.items.includes(item)) this.renderStream(item);
    });
  }

  renderStream(item) {
    item.el.innerHTML = ansiToHtml(applyControlChars(streamText(item.output.text)));
    focusableIfScrolling(item.el);
  }

  /** flush renders pending stream chunks now (before a screenshot or a result). */
  flush() {
    for (const item of this.scheduled) this.renderStream(item);
    this.scheduled.clear();
  }
}

// focusableIfScrolling lets the keyboard reach an output that scrolls (max-height in app.css): a
// scrollable region that cannot take focus cannot be scrolled without a mouse (axe's
// scrollable-region-focusable). Only scrolling ones become tab stops.
function focusableIfScrolling(el) {
  if (el.scrollHeight > el.clientHeight || el.scrollWidth > el.clientWidth) el.tabIndex = 0;
  else el.removeAttribute('tabindex');
}

// scrollWatch re-checks an output when its box changes, which includes its first layout: outputs are
// often built before their cell is in the page (history, setAll), when nothing can be measured yet.
// renderStream checks too, since a stream past max-height grows without its box changing.
const scrollWatch = new ResizeObserver((entries) => {
  for (const e of entries) focusableIfScrolling(e.target);
});

// Two changes of what a box holds leave its size alone, so the observer above misses them: KaTeX
// drawing a formula in place of its source, and a web font (KaTeX's, the mono one) arriving after the
// first layout. Both widen the content of a box whose width the page sets. Each re-checks the boxes
// it may have changed (math: the one drawn in; fonts: every watched output on the page).
const WATCHED = '.out-latex, .out-json, .out-plain, .out-stream, .out-error';
document.addEventListener('mathdrawn', (e) => {
  const box = e.target.closest?.(WATCHED);
  if (box) focusableIfScrolling(box);
});
document.fonts?.addEventListener('loadingdone', () => {
  for (const el of document.querySelectorAll(WATCHED)) focusableIfScrolling(el);
});
