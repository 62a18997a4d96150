// The session view: a notebook of cells that is also the chat-like history of the session's turns.
// Past turns come from GET /executions; live ones stream over the session websocket, whichever client
// started them. A reload mid-run gets a "running" frame with the outputs so far, then the live frames.
//
// The view holds the cells and their order, runs them and handles the kernel's lifecycle; the rest is
// split by concern: cell.js (a cell), composer.js (the new-cell box), history.js (past turns, paged),
// frames.js (the websocket's frames, the catch-up after a reconnect), session-events.js (what events
// are told as), header.js (the top bar), keys.js (command-mode keys).

import { api, sessionPath, SessionSocket, ApiError } from './api.js';
import { DisplayRegistry } from './outputs.js';
import { Panels } from './panels.js';
import { WidgetHub, renderWidget, WIDGET_MIME } from './widgets.js';
import { registry as renderers } from './renderers.js';
import { Cell } from './cell.js';
import { Composer } from './composer.js';
import { History, FIRST } from './history.js';
import { LiveFrames } from './frames.js';
import { SessionEvents } from './session-events.js';
import { renderHeader, setConn, showKernel } from './header.js';
import { commandKey } from './keys.js';
import { h, fill, newId, isTyping } from './util.js';
import { toast, showError, confirmDialog } from './ui.js';

// The session view owns the widget hub (one per view), so it registers the widget-view renderer, as
// the owner of JupyterLab's widget manager adds its renderer to rendermime; renderers.js imports no
// widget code (outputs -> renderers -> widgets -> widget-manager -> outputs was a circle).
renderers.add({ mimeTypes: [WIDGET_MIME], rank: 4, render: renderWidget });

export class SessionView {
  constructor(app, id) {
    this.app = app;
    this.id = id;
    this.session = null;
    this.cells = [];
    this.registry = new DisplayRegistry();
    this.history = new History(this);
    this.frames = new LiveFrames(this);
    this.events = new SessionEvents(this);
    this.selected = null;
    this.ready = false;
    this.buffer = [];
    this.keySeq = '';
    this.destroyed = false;
  }

  // ---- mounting ----

  mount(main, panel) {
    this.list = h('div.cells', { 'aria-label': 'Cells' });
    this.banner = h('div.banner-slot');
    this.composerBox = new Composer(this);
    this.composer = this.composerBox.editor;
    this.empty = h('div.empty-cells', 'No turns yet. Write some Python (or switch to $ Shell for a command) below and press Shift+Enter.');
    this.loading = h('div.loading', 'Loading history…');
    main.replaceChildren(h('div.notebook', this.banner, this.loading, this.list, this.composerBox.el));
    this.main = main;
    this.mountedAt = performance.now();
    this.panelRoot = panel;
    panel.hidden = true;
    if (!isTyping()) this.composer.focus();
    fill(document.getElementById('crumb'), h('a', { href: '#/' }, 'Sessions'), h('span.sep', ' / '), h('span.crumb-name', this.id));
    this.start();
  }

  async start() {
    setConn('connecting');
    this.widgets = new WidgetHub((f) => !!this.socket?.send(f));
    this.socket = new SessionSocket(this.id, {
      onFrame: (f) => (this.ready ? this.frames.onFrame(f) : this.buffer.push(f)),
      onState: (st, info) => this.onSocketState(st, info),
      onOpen: () => this.onSocketOpen(),
    });
    // websocket first, history second: a run finishing in between is in one of the two (deduplicated);
    // both start before the session's own GET answers, so a long history is not one round trip later
    this.socket.connect();
    const history = this.history.fetch(FIRST);
    try {
      const ans = await api('GET', sessionPath(this.id));
      this.session = ans.session;
    } catch (err) {
      this.socket.close();
      if (!this.destroyed) this.cannotOpen(err);
      return;
    }
    if (this.destroyed) return;
    this.panels = new Panels(this, this.panelRoot);
    document.getElementById('kernel-tools').hidden = false;
    renderHeader(this);
    this.panels.renderInfo();
    this.app.sessionUpdated(this.session); // the panels subscribe to events once their first page is listed
    this.poll = setInterval(() => this.refreshSession(), 15000);
    await this.history.load(history);
    if (this.destroyed) return;
    // the frames that came while the history loaded, in order
    this.ready = true;
    for (const f of this.buffer.splice(0)) this.frames.onFrame(f);
    this.scrollToEnd();
  }

  /** cannotOpen replaces the view by why the session cannot be shown. */
  cannotOpen(err) {
    this.loading.remove();
    this.composerBox.el.remove();
    const notFound = err instanceof ApiError && err.code === 'not_found';
    if (!notFound) showError(`Loading session ${this.id} failed`, err);
    this.banner.replaceChildren(h('div.notfound',
      h('h2', notFound ? `No session "${this.id}"` : `Cannot open session "${this.id}"`),
      h('p', notFound ? 'It may have been deleted, or it belongs to another token.' : `${err.code}: ${err.message}`),
      h('div.row', h('a.btn', { href: '#/' }, '← All sessions'),
        notFound ? null : h('button.btn', { onclick: () => location.reload() }, 'Retry'))));
  }

  unmount() {
    this.destroyed = true;
    clearInterval(this.poll);
    this.socket?.close();
    this.widgets?.dispose();
    for (const c of this.cells) c.stopTimer();
    this.panels?.destroy();
    document.getElementById('kernel-tools').hidden = true;
  }

  async refreshSession(first) {
    try {
      const ans = await api('GET', sessionPath(this.id));
      if (this.destroyed) return;
      this.session = ans.session;
      renderHeader(this);
      this.panels?.renderInfo();
      this.app.sessionUpdated(this.session);
    } catch (err) {
      if (first || !(err instanceof ApiError && err.code === 'network')) showError(`Loading session ${this.id} failed`, err);
      if (err instanceof ApiError && err.code === 'not_found') {
        this.socket?.close();
        setConn('closed', 'session not found');
      }
      if (first) throw err;
    }
  }

  onSocketState(state, info) {
    setConn(state, info?.reason);
    if (state === 'closed' && this.panels) delete this.panels.evs.dataset.subscribed; // until the next socket subscribes
    if (state === 'closed' && info && !info.opened && info.failures === 3) {
      // the handshake keeps failing: ask the API why (unknown session, bad token, ...)
      api('GET', sessionPath(this.id)).then(
        () => toast('error', 'Live connection failed', 'The websocket to this session cannot be opened; runs fall back to POST /run without live output. Retrying.'),
        (err) => showError('Live connection failed', err));
    }
  }

  onSocketOpen() {
    this.panels?.subscribeEvents();
    this.reconnectedAt = performance.now();
    for (const c of this.cells) c.seenSinceReconnect = false;
    const waiting = this.cells.filter((c) => c.active && c.runId);
    if (waiting.length) setTimeout(() => this.frames.reconcile(waiting), 1500);
  }

  refreshSessionSoon() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refreshSession(), 300);
  }

  afterTurn() {
    this.refreshSessionSoon();
    this.panels.refreshFilesSoon();
    this.panels.refreshCheckpointsSoon();
  }

  updateKernelFromCells() {
    this.setKernel(this.cells.some((c) => c.status === 'running'));
  }

  setKernel(busy) { showKernel(busy); }

  // ---- cells ----

  addCell(cell) {
    this.cells.push(cell);
    this.list.append(cell.el);
    this.updateEmpty();
  }

  /** moveCell swaps a cell with its neighbour on the page (the session's history is not reordered). */
  moveCell(cell, delta) {
    const i = this.cells.indexOf(cell);
    const j = i + delta;
    if (i < 0 || j < 0 || j >= this.cells.length) return;
    const other = this.cells[j];
    this.cells[i] = other;
    this.cells[j] = cell;
    if (delta < 0) other.el.before(cell.el); else other.el.after(cell.el);
    this.select(cell, true);
  }

  /** deleteCell removes a cell from the page; a running one is refused (interrupt it first). */
  deleteCell(cell) {
    if (cell.active) { toast('info', 'Still running', 'Interrupt the cell (I, I) before removing it.'); return; }
    const i = this.cells.indexOf(cell);
    this.removeCell(cell);
    this.frames.byRunId.forEach((c, id) => { if (c === cell) this.frames.byRunId.delete(id); });
    toast('ok', 'Cell removed from the page', 'The turn stays in the session history (it comes back on reload and is in the .ipynb).');
    const next = this.cells[Math.min(i, this.cells.length - 1)];
    if (next) this.select(next, true); else this.composer.focus();
  }

  removeCell(cell) {
    cell.stopTimer();
    cell.outputs.clear();
    cell.el.remove();
    this.cells = this.cells.filter((c) => c !== cell);
    this.updateEmpty();
  }

  updateEmpty() {
    if (!this.cells.length && !this.empty.isConnected && !this.loading.isConnected) this.list.before(this.empty);
    else if (this.cells.length) this.empty.remove();
  }

  runComposer() {
    const code = this.composer.value;
    if (!code.trim()) return;
    const cell = new Cell(this, { code, kind: this.composerBox.mode });
    this.addCell(cell);
    this.composer.value = '';
    this.run(cell);
    this.scrollToEnd();
    this.composer.focus();
  }

  runCell(cell, mode) {
    if (!cell.editor.value.trim()) return;
    this.run(cell);
    if (mode === 'next') this.focusNextAfter(cell);
  }

  focusNextAfter(cell) {
    const i = this.cells.indexOf(cell);
    const next = this.cells[i + 1];
    if (next) { this.select(next, false); next.editor.focus(true); } else this.composer.focus();
  }

  copyToComposer(cell) {
    this.composerBox.setMode(cell.kind);
    this.composer.value = cell.editor.value;
    this.composer.focus(true);
  }

  async run(cell) {
    if (cell.active) {
      toast('info', 'Already running', 'This cell is still running; interrupt it first (I, I).');
      return;
    }
    cell.origin = cell.origin === 'remote' ? 'remote' : 'local';
    const code = cell.editor.value;
    const runId = newId();
    cell.beginRun(runId);
    this.frames.byRunId.set(runId, cell);
    if (cell.kind === 'exec') return this.runExec(cell, code);
    if (this.socket?.send({ type: 'run', id: runId, code })) return;
    // no websocket: run over HTTP (no live output, same answer at the end)
    cell.markRunning();
    cell.outputs.el.append(h('div.out-note', 'live connection down: running over HTTP, the output shows when the run ends'));
    this.setKernel(true);
    try {
      const r = await api('POST', sessionPath(this.id, '/run'), { json: { code } });
      if (this.frames.byRunId.get(runId) !== cell) return;
      this.frames.byRunId.delete(runId);
      cell.incomplete = true;
      cell.applyResult(r, { startedAt: new Date().toISOString() });
    } catch (err) {
      this.frames.byRunId.delete(runId);
      cell.fail(err);
    }
    this.updateKernelFromCells();
    this.afterTurn();
    this.scrollToEnd(true);
  }

  async runExec(cell, command) {
    const runId = cell.runId;
    cell.markRunning();
    try {
      const r = await api('POST', sessionPath(this.id, '/exec'), { json: { command } });
      if (this.destroyed || cell.runId !== runId) return;
      cell.applyResult(r, { startedAt: new Date().toISOString() });
    } catch (err) {
      if (this.destroyed || cell.runId !== runId) return;
      cell.fail(err);
    }
    this.frames.byRunId.delete(runId);
    this.afterTurn();
    this.scrollToEnd(true);
  }

  async complete(code, cursorPos) {
    return api('POST', sessionPath(this.id, '/complete'), { json: { code, cursor_pos: cursorPos } });
  }

  // ---- kernel and lifecycle ----

  async interrupt() {
    try {
      await api('POST', sessionPath(this.id, '/interrupt'));
      toast('ok', 'Interrupt sent', '');
    } catch (err) {
      showError('Interrupt failed', err);
    }
  }

  async restart() {
    if (!await confirmDialog('Restart the kernel? A fresh kernel starts and gets the variables and files of the last checkpoint back; a running cell is stopped.', 'Restart')) return;
    const btn = document.getElementById('btn-restart');
    btn.disabled = true;
    try {
      await api('POST', sessionPath(this.id, '/restart'));
      toast('ok', 'Kernel restarted', 'Variables and files were restored from the last checkpoint.');
      this.addMarker('kernel restarted · state restored from the last checkpoint');
    } catch (err) {
      showError('Restart failed', err);
    } finally {
      btn.disabled = false;
      this.refreshSessionSoon();
    }
  }

  async lifecycle(action, body) {
    try {
      const ans = await api('POST', sessionPath(this.id, `/${action}`), body ? { json: body } : {});
      toast('ok', `${action}: done`, '');
      if (ans?.session) { this.session = ans.session; renderHeader(this); this.panels.renderInfo(); this.app.sessionUpdated(this.session); }
      this.refreshSessionSoon();
      this.panels.refreshCheckpointsSoon();
      return ans;
    } catch (err) {
      showError(`${action} failed`, err);
      return null;
    }
  }

  addMarker(text) {
    this.list.append(h('div.marker', { role: 'note' }, h('span', text), h('span.muted', ` · ${new Date().toLocaleTimeString()}`)));
    this.scrollToEnd(true);
  }

  // ---- selection and keys ----

  select(cell, focusCell) {
    if (this.selected && this.selected !== cell) this.selected.el.classList.remove('selected');
    this.selected = cell;
    if (!cell) return;
    cell.el.classList.add('selected');
    if (focusCell) {
      cell.editor.closePopup();
      cell.el.focus({ preventScroll: true });
      cell.el.scrollIntoView({ block: 'nearest' });
    }
  }

  scrollToEnd(onlyIfNear) {
    const sc = this.main;
    if (onlyIfNear && sc.scrollHeight - sc.scrollTop - sc.clientHeight > 250) return;
    requestAnimationFrame(() => { sc.scrollTop = sc.scrollHeight; });
  }

  /** keydown handles command-mode keys (keys.js); returns true when it used the key. */
  keydown(e) { return commandKey(this, e); }
}
