// The widget manager (a chunk of its own, loaded with the first widget; widgets.js says how frames
// reach it). Built on the official packages: @jupyter-widgets/base-manager's ManagerBase (models,
// state, buffers, the widget protocol), @jupyter-widgets/base and the core @jupyter-widgets/controls
// views, drawn with lumino as JupyterLab draws them. Only vetted code runs:
// - loadClass answers from a fixed table of the core modules; any other module or class (a kernel
//   naming a third-party widget, or markup as a name) gets an inert "not drawn" view, never code
//   loaded from anywhere (the html-manager would fetch it from a CDN);
// - the views that set innerHTML from kernel data (HTML, HTMLMath, descriptions with
//   description_allow_html) go through the page's sanitizer (DOMPurify + the output namespace);
// - the Output widget draws its outputs through the page's OutputArea (the renderer registry).
// ipywidgets 6 (Debian bookworm's python3-ipywidgets) speaks an older protocol: the state is the
// comm_open's data itself, the model module is "jupyter-js-widgets", and the frontend sends
// {"method": "backbone", "sync_data"}; legacy() translates both ways.
import * as base from '@jupyter-widgets/base';
import * as controls from '@jupyter-widgets/controls';
import * as output from '@jupyter-widgets/output';
import { ManagerBase } from '@jupyter-widgets/base-manager';
import { Widget } from '@lumino/widgets';
import '@jupyter-widgets/controls/css/widgets.css';
import { OutputArea, DisplayRegistry } from './outputs.js';
import { sanitize, newNamespace } from './sanitize.js';
import { escapeHtml, h } from './util.js';

/** sanitizeInto replaces el's children by html, sanitized like an output. */
function sanitizeInto(el, html) {
  el.replaceChildren(sanitize(String(html ?? ''), { ns: newNamespace() }));
}

class SafeHTMLView extends controls.HTMLView {
  update() {
    sanitizeInto(this.content, this.model.get('value'));
    return controls.StringView.prototype.update.call(this);
  }
}

class SafeHTMLMathView extends controls.HTMLMathView {
  update() {
    sanitizeInto(this.content, this.model.get('value'));
    return controls.StringView.prototype.update.call(this);
  }
}

/** OutputModel keeps what an Output widget captured; the manager routes comm_output frames to it. */
class OutputModel extends output.OutputModel {
  defaults() { return { ...super.defaults(), msg_id: '', outputs: [] }; }

  initialize(attributes, options) {
    super.initialize(attributes, options);
    this.items = [];
    this.listeners = new Set();
    this.on('change:outputs', () => { if (!(this.get('outputs') || []).length) this.clearOutputs(); });
  }

  addOutput(o) {
    if (o?.type === 'clear_output' && !o.wait) this.items = [];
    else this.items.push(o);
    for (const area of this.listeners) area.add(o);
  }

  clearOutputs() {
    this.items = [];
    for (const area of this.listeners) area.clear();
  }
}

class OutputView extends output.OutputView {
  render() {
    this.area = new OutputArea(new DisplayRegistry());
    this.el.classList.add('widget-output', 'out-widget-output');
    this.el.append(this.area.el);
    for (const o of this.model.items || []) this.area.add(o);
    this.model.listeners?.add(this.area);
  }

  remove() {
    this.model.listeners?.delete(this.area);
    return super.remove();
  }
}

/** UnknownView stands for any widget class the page does not vet: it says so, as text. */
class UnknownModel extends base.DOMWidgetModel {
  defaults() { return { ...super.defaults(), _view_name: 'UnknownView' }; }
}
class UnknownView extends base.DOMWidgetView {
  render() {
    const s = this.model.get('_model_module') + '.' + this.model.get('_model_name');
    this.el.append(h('p.out-note.muted', { role: 'note' },
      `This widget (${s.slice(0, 200)}) is not one of the core widgets the page draws; custom widget code from the kernel is never run.`));
  }
}

const CORE = { ...base, ...controls, HTMLView: SafeHTMLView, HTMLMathView: SafeHTMLMathView, OutputModel, OutputView };
/** MODULES: the only code a kernel's widget names can reach. */
const MODULES = {
  '@jupyter-widgets/base': CORE,
  '@jupyter-widgets/controls': CORE,
  '@jupyter-widgets/output': CORE,
  'jupyter-js-widgets': CORE, // ipywidgets 6
};

/** Comm is one comm of the relay (IClassicComm, as ManagerBase and WidgetModel use it). */
class Comm {
  constructor(manager, id, target, legacyProtocol) {
    this.manager = manager;
    this.comm_id = id;
    this.target_name = target;
    this.legacy = legacyProtocol;
    this.onMsg = null;
    this.onClose = null;
  }

  open(data, callbacks, metadata, buffers) {
    return this.post('comm_open', { comm_id: this.comm_id, target_name: this.target_name, data }, callbacks, metadata, buffers);
  }

  send(data, callbacks, metadata, buffers) {
    if (this.legacy && data?.method === 'update') {
      data = { method: 'backbone', sync_data: data.state, buffer_keys: (data.buffer_paths || []).map((p) => p[0]) };
    }
    return this.post('comm_msg', { comm_id: this.comm_id, data }, callbacks, metadata, buffers);
  }

  close(data, callbacks, metadata, buffers) {
    this.manager.comms.delete(this.comm_id);
    return this.post('comm_close', { comm_id: this.comm_id, data: data || {} }, callbacks, metadata, buffers);
  }

  on_msg(cb) { this.onMsg = cb; }
  on_close(cb) { this.onClose = cb; }

  post(msgType, content, callbacks, metadata, buffers) {
    const msgId = base.uuid();
    const ok = this.manager.hub.send({
      type: 'comm', msg_type: msgType, msg_id: msgId, content, metadata: metadata || {},
      buffers: (buffers || []).map(toBase64),
    });
    if (callbacks?.iopub?.status) {
      if (ok) this.manager.waiting.set(msgId, callbacks);
      else queueMicrotask(() => callbacks.iopub.status({ content: { execution_state: 'idle' }, parent_header: { msg_id: msgId } }));
    }
    return msgId;
  }
}

function toBase64(b) {
  const bytes = b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64(s) {
  const bin = atob(s);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new DataView(bytes.buffer);
}

export class Manager extends ManagerBase {
  constructor(hub) {
    super();
    this.hub = hub;
    this.comms = new Map(); // comm id -> Comm
    this.waiting = new Map(); // msg id -> callbacks of a page's comm message, until its comm_idle
    this.early = new Map(); // comm id -> outputs that came before the widget's comm_open
    this.chain = Promise.resolve(); // frames are handled one after another, in order
  }

  /** loadClass answers from MODULES only; anything else is null, and becomes Unknown* below. */
  async loadClass(className, moduleName) {
    const mod = MODULES[moduleName];
    return mod && Object.hasOwn(mod, className) && typeof mod[className] === 'function' ? mod[className] : null;
  }

  async loadModelClass(className, moduleName) {
    const c = await this.loadClass(className, moduleName);
    return c && c.prototype instanceof base.WidgetModel ? c : UnknownModel;
  }

  async loadViewClass(className, moduleName) {
    const c = await this.loadClass(className, moduleName);
    return c && c.prototype instanceof base.WidgetView ? c : UnknownView;
  }

  /** callbacks: a view's extra message callbacks (none: outputs are routed by comm_output frames). */
  callbacks() { return {}; }

  inline_sanitize(s) { return escapeHtml(String(s ?? '')); }

  async _create_comm(target, modelId, data, metadata, buffers) {
    const comm = new Comm(this, modelId || base.uuid(), target, false);
    this.comms.set(comm.comm_id, comm);
    comm.open(data, undefined, metadata, buffers);
    return comm;
  }

  async _get_comm_info() { return {}; }

  onFrame(f) {
    this.chain = this.chain.then(() => this.handle(f)).catch((err) => console.warn('widget frame', f.type, err));
  }

  async handle(f) {
    switch (f.type) {
      case 'comm': return this.handleComm(f);
      case 'comm_output': {
        // the run's frames and the relay's travel apart: an output may come before its widget's comm_open
        if (!this.has_model(f.comm_id)) {
          const list = this.early.get(f.comm_id) || [];
          list.push(f.output);
          this.early.set(f.comm_id, list);
          return undefined;
        }
        const m = await this.get_model(f.comm_id);
        m.addOutput?.(f.output);
        return undefined;
      }
      case 'comm_idle': {
        const cb = this.waiting.get(f.parent_msg_id);
        this.waiting.delete(f.parent_msg_id);
        cb?.iopub?.status?.({ content: { execution_state: 'idle' }, parent_header: { msg_id: f.parent_msg_id } });
        return undefined;
      }
      case 'comm_reset':
        this.waiting.clear();
        this.comms.clear();
        this.early.clear();
        await this.clear_state();
        return undefined;
      default: return undefined;
    }
  }

  async handleComm(f) {
    const c = f.content || {};
    const buffers = (f.buffers || []).map(fromBase64);
    if (f.msg_type === 'comm_open') {
      if (c.target_name !== 'jupyter.widget') return;
      // a widget the server sends again (a page connecting, a restore): the page's own model stays
      if (f.metadata?.carryover_sync && this.has_model(c.comm_id)) return;
      let data = c.data || {};
      let metadata = f.metadata || {};
      const legacyProtocol = !('state' in data);
      if (legacyProtocol) {
        data = { state: data, buffer_paths: [] };
        metadata = { ...metadata, version: '2.1.0' };
      }
      const comm = new Comm(this, c.comm_id, c.target_name, legacyProtocol);
      this.comms.set(c.comm_id, comm);
      const model = await this.handle_comm_open(comm, { content: { comm_id: c.comm_id, target_name: c.target_name, data }, metadata, buffers });
      for (const o of f.metadata?.outputs || []) model.addOutput?.(o); // what a restored Output widget showed
      for (const o of this.early.get(c.comm_id) || []) model.addOutput?.(o);
      this.early.delete(c.comm_id);
      return;
    }
    const comm = this.comms.get(c.comm_id);
    if (!comm) return;
    if (f.msg_type === 'comm_close') {
      this.comms.delete(c.comm_id);
      comm.onClose?.({ content: { comm_id: c.comm_id, data: c.data || {} } });
      return;
    }
    let data = c.data || {};
    if (comm.legacy) {
      if (data.method === 'display') return; // ipywidgets 6 says "display" twice: the view comes as display_data
      if (data.method === 'update' && Array.isArray(data.buffers)) {
        data = { method: 'update', state: data.state, buffer_paths: data.buffers.map((k) => [k]) };
      }
    }
    await comm.onMsg?.({ content: { comm_id: c.comm_id, data }, buffers, parent_header: { msg_id: f.parent_msg_id }, metadata: f.metadata || {} });
  }

  /** display draws a view of model id into el; false when the page has no such model. */
  async display(id, el) {
    await this.chain;
    if (!this.has_model(id)) return false;
    const model = await this.get_model(id);
    const view = await this.create_view(model, {});
    el.replaceChildren();
    Widget.attach(view.luminoWidget, el);
    return true;
  }

  dispose() {
    for (const cb of this.waiting.values()) cb?.iopub?.status?.({ content: { execution_state: 'idle' } });
    this.waiting.clear();
  }
}
