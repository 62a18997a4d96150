// The session view: a notebook of cells that is also the chat-like history of the session's turns.
// Past turns come from GET /executions; live ones stream over the session websocket, whichever client
// started them. A reload mid-run gets a "running" frame with the outputs so far, then the live frames.

import { api, sessionPath, SessionSocket, ApiError } from './api.js';
import { Editor } from './editor.js';
import { OutputArea, DisplayRegistry } from './outputs.js';
import { Panels } from './panels.js';
import { replayNote, restoreSummary } from './checkpoints.js';
import { WidgetHub, renderWidget, WIDGET_MIME } from './widgets.js';
import { registry as renderers } from './renderers.js';
import { openDataViewer, tableName } from './dataviewer.js';
import { h, fill, icon, formatBytes, formatMs, localTime, newId, isTyping } from './util.js';
import { toast, showError, confirmDialog, stateBadge, sandboxBadge } from './ui.js';

// The session view owns the widget hub (one per view), so it registers the widget-view renderer, as
// the owner of JupyterLab's widget manager adds its renderer to rendermime; renderers.js imports no
// widget code (outputs -> renderers -> widgets -> widget-manager -> outputs was a circle).
renderers.add({ mimeTypes: [WIDGET_MIME], rank: 4, render: renderWidget });

const CLOSED_STATES = new Set(['completed', 'failed', 'cancelled']);
const HISTORY_LIMIT = 1000; // the most GET /executions answers in one call
const PAGE = 200; // turns drawn at first and per "show earlier" click: a long history opens fast
const FIRST = 40; // of those, fetched and drawn first (the screenful at the bottom); the rest fetched after the first paint

/** checkpointLine summarizes what a turn's checkpoint saved and skipped (the skips in warning colour). */
export function checkpointLine(cp, status) {
  const line = h('div.ckpt', { 'data-testid': 'checkpoint' });
  if (!cp) {
    line.classList.add('muted');
    line.append(h('span.ckpt-icon', '◇'), status === 'ok' || status === 'error'
      ? 'no checkpoint reported for this turn' : 'no checkpoint');
    return line;
  }
  const parts = [];
  const sep = () => h('span.sep', ' · ');
  const saved = cp.saved || [];
  if (cp.error && !cp.id && !saved.length && cp.unchanged == null) {
    // no checkpoint at all: only the reason
  } else if (saved.length) {
    const shown = saved.slice(0, 10);
    parts.push(h('span.ckpt-saved', { title: saved.join(', ') }, 'saved: ', h('b', shown.join(', ')),
      saved.length > shown.length ? ` +${saved.length - shown.length} more` : ''));
  } else {
    parts.push(h('span.ckpt-saved.muted', 'no variable changed'));
  }
  if (cp.unchanged != null) parts.push(h('span', `${cp.unchanged} unchanged`));
  const skipped = cp.skipped || [];
  if (skipped.length) {
    parts.push(h('span.ckpt-skipped', { 'data-testid': 'skipped', title: 'Not saved: these variables will be missing after a restart or restore' },
      '⚠ skipped: ', skipped.map((s, i) => [i ? ', ' : '', h('b', s.name),
        ` (${[s.type, s.reason].filter(Boolean).join(': ')})`])));
  }
  if (cp.files_saved != null) parts.push(h('span', `${cp.files_saved} file${cp.files_saved === 1 ? '' : 's'} saved`));
  const fsk = cp.files_skipped || [];
  if (fsk.length) {
    parts.push(h('span.ckpt-skipped', '⚠ files skipped: ', fsk.map((f, i) => [i ? ', ' : '', h('b', f.path), f.reason ? ` (${f.reason})` : ''])));
  }
  if (cp.bytes_written != null) parts.push(h('span', { title: 'bytes written to the database for this checkpoint' }, formatBytes(cp.bytes_written)));
  if (cp.duration_ms != null) {
    const t = cp.timings || {};
    const split = ['detect', 'serialize', 'write', 'files'].filter((k) => t[`${k}_ms`] != null).map((k) => `${k} ${formatMs(t[`${k}_ms`])}`);
    parts.push(h('span', { title: `time the checkpoint took${split.length ? ': ' + split.join(', ') : ''}` }, formatMs(cp.duration_ms)));
  }
  if (cp.error) parts.push(h('span.ckpt-skipped', `⚠ checkpoint error: ${typeof cp.error === 'string' ? cp.error : JSON.stringify(cp.error)}`));
  line.append(h('span.ckpt-icon', { title: cp.id ? `checkpoint ${cp.id}${cp.turn != null ? `, turn ${cp.turn}` : ''}` : 'checkpoint' }, '⛁'));
  parts.forEach((p, i) => { if (i) line.append(sep()); line.append(p); });
  if (skipped.length || fsk.length || cp.error) line.classList.add('warn');
  return line;
}

const STATUS_TEXT = {
  new: '', queued: 'queued', running: 'running', ok: 'ok', error: 'error', aborted: 'aborted', failed: 'not run', lost: 'result not received',
};

class Cell {
  constructor(view, { code = '', kind = 'run', origin = 'local' } = {}) {
    this.view = view;
    this.kind = kind; // 'run' (Python) or 'exec' (shell command)
    this.origin = origin; // 'local' | 'history' | 'remote'
    this.runId = null;
    this.count = null;
    this.status = 'new';
    this.startedAt = null;
    this.timer = null;
    this.incomplete = false; // outputs were dropped: re-render from the result
    this.codeKnown = origin !== 'remote';
    this.editor = new Editor({
      value: code,
      label: kind === 'exec' ? 'Shell command' : 'Python code',
      onRun: (mode) => this.view.runCell(this, mode),
      onEscape: () => this.view.select(this, true),
      complete: kind === 'run' ? (c, p) => this.view.complete(c, p) : null,
      onError: (err) => showError('Completion failed', err),
      plain: kind === 'exec',
      lazy: origin === 'history',
    });
    this.prompt = h('div.prompt', { title: 'execution count' }, '[ ]');
    this.statusEl = h('span.cell-status');
    this.timeEl = h('span.cell-time');
    this.runBtn = h('button.btn.small.run-btn', { title: 'Run this cell (Shift+Enter)', onclick: () => this.view.runCell(this, 'stay') }, '▶ Run');
    const copyBtn = h('button.btn.small.ghost', { title: 'Copy this code into the new-cell box', onclick: () => this.view.copyToComposer(this) }, icon('copy'), ' Copy');
    // arranging cells changes this page only: the session's history (and its .ipynb) keeps every turn in order
    const tool = (label, title, fn, testid) => h('button.btn.small.ghost.cell-tool', { title, 'aria-label': title, 'data-testid': testid, onclick: fn }, label);
    this.collapseBtn = tool('▾', 'Collapse the outputs (o)', () => this.toggleCollapse(), 'collapse');
    this.meta = h('div.cell-meta', this.statusEl, this.timeEl, h('span.spacer'), this.runBtn, copyBtn,
      tool('↑', 'Move the cell up on this page (Shift+K)', () => this.view.moveCell(this, -1), 'move-up'),
      tool('↓', 'Move the cell down on this page (Shift+J)', () => this.view.moveCell(this, 1), 'move-down'),
      this.collapseBtn,
      tool('✕', 'Remove the cell from this page; the session history keeps the turn (d, d)', () => this.view.deleteCell(this), 'delete'));
    this.outputs = new OutputArea(view.registry);
    this.outputs.viewTable = (o) => {
      const name = tableName(this.editor?.value, o);
      return name ? () => openDataViewer(view.id, name) : null;
    };
    this.inputBox = h('div.input-slot');
    this.ckptSlot = h('div.ckpt-slot');
    this.el = h('article.cell', { tabindex: -1, 'data-kind': kind },
      h('div.gutter', this.prompt),
      h('div.cell-body',
        kind === 'exec' ? h('div.cell-kind', { title: 'a shell command run with POST /exec' }, '$ shell') : null,
        this.editor.el, this.meta, this.outputs.el, this.inputBox, this.ckptSlot));
    this.el.addEventListener('focusin', () => this.view.select(this, false));
    this.el.addEventListener('mousedown', () => this.view.select(this, false));
    this.el._cell = this;
    this.setStatus('new');
  }

  setStatus(s) {
    this.status = s;
    this.el.dataset.status = s;
    this.statusEl.className = `cell-status st-${s}`;
    const icon = { ok: '✓ ', error: '✗ ', aborted: '■ ', running: '', queued: '… ', failed: '✗ ', lost: '? ' }[s] || '';
    this.statusEl.textContent = STATUS_TEXT[s] ? icon + STATUS_TEXT[s] : '';
    if (s === 'running') this.prompt.textContent = '[*]';
    else if (s === 'queued') this.prompt.textContent = '[…]';
    else this.prompt.textContent = this.kind === 'exec' ? '[$]' : `[${this.count ?? ' '}]`;
    this.el.classList.toggle('is-running', s === 'running' || s === 'queued');
  }

  toggleCollapse(on = !this.el.classList.contains('collapsed')) {
    this.el.classList.toggle('collapsed', on);
    this.collapseBtn.textContent = on ? '▸' : '▾';
    this.collapseBtn.title = on ? 'Expand the outputs (o)' : 'Collapse the outputs (o)';
    this.collapseBtn.setAttribute('aria-label', this.collapseBtn.title);
    this.collapseBtn.setAttribute('aria-expanded', String(!on));
  }

  get active() { return this.status === 'running' || this.status === 'queued'; }

  /** beginRun resets the cell for a new run with the given id. */
  beginRun(runId) {
    this.runId = runId;
    this.finished = false;
    this.count = null;
    this.incomplete = false;
    this.outputs.clear();
    this.ckptSlot.replaceChildren();
    this.inputBox.replaceChildren();
    this.startedAt = null;
    this.timeEl.textContent = '';
    this.setStatus('queued');
  }

  markRunning() {
    if (this.status === 'running') return;
    this.startedAt = performance.now();
    this.setStatus('running');
    clearInterval(this.timer);
    this.timer = setInterval(() => {
      this.timeEl.textContent = formatMs(performance.now() - this.startedAt);
    }, 100);
  }

  stopTimer() {
    clearInterval(this.timer);
    this.timer = null;
  }

  /** applyResult shows the final /run (or /exec) answer. */
  applyResult(r, { fromHistory = false, startedAt = null, duration = null } = {}) {
    this.stopTimer();
    this.inputBox.replaceChildren();
    if (this.kind === 'exec') return this.applyExec(r, startedAt, duration);
    this.count = r.execution_count ?? this.count;
    const outs = r.outputs || [];
    if (fromHistory || this.incomplete || (this.outputs.count === 0 && outs.length)) this.outputs.setAll(outs);
    else this.outputs.flush();
    if (r.status === 'error' && !this.outputs.items.some((i) => i.output.type === 'error')) {
      const e = r.error || {};
      this.outputs.add({ type: 'error', ename: e.ename || e.code || 'Error', evalue: e.evalue || e.message || '', traceback: e.traceback || [] });
    }
    this.setStatus(['ok', 'error', 'aborted'].includes(r.status) ? r.status : 'ok');
    const ms = r.duration_ms ?? duration;
    const when = startedAt ? ` · ${new Date(startedAt).toLocaleTimeString()}` : '';
    this.timeEl.textContent = ms != null ? `${formatMs(ms)}${when}` : when.slice(3);
    if (startedAt) this.timeEl.title = `started ${localTime(startedAt)}`;
    if (r.status === 'aborted') this.outputs.el.append(h('div.out-note', 'aborted: the kernel was interrupted or an earlier queued cell failed'));
    if (r.output_dropped_bytes) {
      this.outputs.el.append(h('div.out-note', `${formatBytes(r.output_dropped_bytes)} of output over the server's limit were not kept`));
    }
    const cp = r.checkpoint_error && !r.checkpoint?.error ? { ...(r.checkpoint || {}), error: r.checkpoint_error } : r.checkpoint;
    this.ckptSlot.replaceChildren(checkpointLine(cp, r.status));
    this.finished = true;
  }

  applyExec(r, startedAt, duration) {
    this.outputs.clear();
    if (r.stdout) this.outputs.add({ type: 'stream', name: 'stdout', text: r.stdout });
    if (r.stderr) this.outputs.add({ type: 'stream', name: 'stderr', text: r.stderr });
    this.outputs.flush();
    const ok = r.exit_code === 0 || r.status === 'ok';
    this.setStatus(ok ? 'ok' : 'error');
    if (r.exit_code != null) this.statusEl.textContent += ` · exit ${r.exit_code}`;
    if (r.timed_out) {
      this.setStatus('aborted');
      this.statusEl.textContent = `■ timed out${r.exit_code != null ? ` · exit ${r.exit_code}` : ''}`;
      this.outputs.el.append(h('div.out-note', 'the command ran past the time limit and was stopped'));
    }
    if (!r.stdout && !r.stderr && !r.timed_out) this.outputs.el.append(h('div.out-note', 'no output'));
    this.finished = true;
    const ms = r.duration_ms ?? duration;
    this.timeEl.textContent = [ms != null ? formatMs(ms) : '', startedAt ? new Date(startedAt).toLocaleTimeString() : ''].filter(Boolean).join(' · ');
  }

  /** fail shows an API or websocket error for this run (after its result, when the server sent both). */
  fail(err) {
    if (this.finished) {
      this.outputs.el.append(h('div.out-apierror', { role: 'alert' }, h('b', err.code || 'error'), `: ${err.message || ''}`));
      if (err.code === 'timeout') { this.setStatus('aborted'); this.statusEl.textContent = '■ timeout'; }
      return;
    }
    this.stopTimer();
    this.inputBox.replaceChildren();
    this.outputs.flush();
    const code = err.code || 'error';
    this.outputs.el.append(h('div.out-apierror', { role: 'alert' }, h('b', code), `: ${err.message || ''}`,
      err.details && Object.keys(err.details).length ? h('pre', JSON.stringify(err.details, null, 2)) : null));
    this.setStatus(code === 'timeout' ? 'aborted' : 'failed');
    if (this.startedAt) this.timeEl.textContent = formatMs(performance.now() - this.startedAt);
  }

  /** askInput shows an inline input() prompt; the reply goes back over the websocket. */
  askInput(prompt, password) {
    const field = h('input.input-field', { type: password ? 'password' : 'text', autocomplete: 'off', spellcheck: false, 'aria-label': prompt || 'input' });
    const send = () => {
      const ok = this.view.socket.send({ type: 'input_reply', id: this.runId, value: field.value });
      if (!ok) { toast('error', 'Cannot send the input', 'the websocket is not connected; it reconnects by itself, then press Enter again'); return; }
      this.outputs.add({ type: 'stream', name: 'stdout', text: `${prompt || ''}${password ? '········' : field.value}\n` });
      this.inputBox.replaceChildren();
      this.view.focusNextAfter(this);
    };
    field.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); send(); }
      e.stopPropagation();
    });
    this.outputs.flush();
    this.inputBox.replaceChildren(h('label.input-row', h('span.input-prompt', prompt || 'input: '), field,
      h('button.btn.small', { onclick: send }, 'Send ⏎')));
    field.focus({ preventScroll: true });
    this.inputBox.scrollIntoView({ block: 'center' });
  }
}

export class SessionView {
  constructor(app, id) {
    this.app = app;
    this.id = id;
    this.session = null;
    this.cells = [];
    this.byRunId = new Map();
    this.recent = new Map(); // run id -> cell, for an error frame that follows its result
    this.registry = new DisplayRegistry();
    this.selected = null;
    this.ready = false;
    this.buffer = [];
    this.kernelBusy = false;
    this.keySeq = '';
    this.destroyed = false;
  }

  // ---- mounting ----

  mount(main, panel) {
    this.list = h('div.cells', { 'aria-label': 'Cells' });
    this.banner = h('div.banner-slot');
    this.composer = new Editor({
      placeholder: 'Type Python here · Shift+Enter runs it · Tab completes',
      label: 'New cell',
      id: 'composer',
      onRun: () => this.runComposer(),
      onEscape: () => { this.composer.blur(); if (this.cells.length) this.select(this.cells[this.cells.length - 1], true); },
      complete: (c, p) => this.complete(c, p),
      onError: (err) => showError('Completion failed', err),
    });
    this.runBtn = h('button.btn.primary', { onclick: () => this.runComposer() }, '▶ Run');
    // the kind of the next cell: Python (POST /run over the websocket) or a shell command (POST /exec)
    this.modeBtns = ['run', 'exec'].map((m) => h('button.mode-btn', {
      type: 'button', 'data-mode': m,
      title: m === 'run' ? 'New cells run Python in the kernel (p in command mode)' : 'New cells run a shell command in the workspace, /bin/sh -c (! in command mode)',
      onclick: () => { this.setMode(m); this.composer.focus(); },
    }, m === 'run' ? 'Python' : '$ Shell'));
    this.modeHint = h('span.hint');
    this.stateBanner = h('div.banner-slot');
    this.composerEl = h('div.composer', this.stateBanner, h('div.composer-box', this.composer.el, h('div.composer-actions', this.runBtn,
      h('div.mode-toggle', { role: 'group', 'aria-label': 'Kind of the new cell' }, this.modeBtns), this.modeHint)));
    this.setMode('run');
    this.empty = h('div.empty-cells', 'No turns yet. Write some Python (or switch to $ Shell for a command) below and press Shift+Enter.');
    this.loading = h('div.loading', 'Loading history…');
    main.replaceChildren(h('div.notebook', this.banner, this.loading, this.list, this.composerEl));
    this.main = main;
    this.mountedAt = performance.now();
    this.panelRoot = panel;
    panel.hidden = true;
    if (!isTyping()) this.composer.focus();
    fill(document.getElementById('crumb'), h('a', { href: '#/' }, 'Sessions'), h('span.sep', ' / '), h('span.crumb-name', this.id));
    this.start();
  }

  /** setMode switches the new-cell box between Python code ('run') and a shell command ('exec'). */
  setMode(mode) {
    this.mode = mode === 'exec' ? 'exec' : 'run';
    const shell = this.mode === 'exec';
    for (const b of this.modeBtns) b.setAttribute('aria-pressed', String(b.dataset.mode === this.mode));
    const c = this.composer;
    c.configure({
      plain: shell,
      placeholder: shell ? 'Type a shell command (/bin/sh -c in the workspace) · Shift+Enter runs it'
        : 'Type Python here · Shift+Enter runs it · Tab completes',
      label: shell ? 'New cell: shell command' : 'New cell',
    });
    this.composerEl.dataset.mode = this.mode;
    this.runBtn.title = shell ? 'Run the shell command (Shift+Enter)' : 'Run (Shift+Enter)';
    this.modeHint.replaceChildren(h('kbd', 'Shift'), '+', h('kbd', 'Enter'), ' run · ',
      ...(shell ? [] : [h('kbd', 'Tab'), ' complete · ']), h('kbd', '?'), ' help');
  }

  async start() {
    this.setConn('connecting');
    this.widgets = new WidgetHub((f) => !!this.socket?.send(f));
    this.socket = new SessionSocket(this.id, {
      onFrame: (f) => (this.ready ? this.onFrame(f) : this.buffer.push(f)),
      onState: (st, info) => this.onSocketState(st, info),
      onOpen: () => this.onSocketOpen(),
    });
    // websocket first, history second: a run finishing in between is in one of the two (deduplicated);
    // both start before the session's own GET answers, so a long history is not one round trip later
    this.socket.connect();
    const history = this.fetchHistory(FIRST);
    try {
      const ans = await api('GET', sessionPath(this.id));
      this.session = ans.session;
    } catch (err) {
      this.socket.close();
      if (this.destroyed) return;
      this.loading.remove();
      this.composerEl.remove();
      const notFound = err instanceof ApiError && err.code === 'not_found';
      if (!notFound) showError(`Loading session ${this.id} failed`, err);
      this.banner.replaceChildren(h('div.notfound',
        h('h2', notFound ? `No session "${this.id}"` : `Cannot open session "${this.id}"`),
        h('p', notFound ? 'It may have been deleted, or it belongs to another token.' : `${err.code}: ${err.message}`),
        h('div.row', h('a.btn', { href: '#/' }, '← All sessions'),
          notFound ? null : h('button.btn', { onclick: () => location.reload() }, 'Retry'))));
      return;
    }
    if (this.destroyed) return;
    this.panels = new Panels(this, this.panelRoot);
    document.getElementById('kernel-tools').hidden = false;
    this.renderHeader();
    this.panels.renderInfo();
    this.app.sessionUpdated(this.session);
    if (this.socket.open) this.panels.subscribeEvents();
    this.poll = setInterval(() => this.refreshSession(), 15000);
    await this.load(history);
  }

  /** fetchHistory gets the newest `limit` turns, oldest first (errors are shown, the list is then empty). */
  async fetchHistory(limit = PAGE) {
    this.fetchStart = performance.now();
    try {
      const ans = await api('GET', sessionPath(this.id, `/executions?limit=${limit}`));
      return ans?.executions || [];
    } catch (err) {
      if (err.status !== 404) showError('Loading the history failed', err);
      return [];
    } finally {
      this.fetchEnd = performance.now();
    }
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

  async load(history) {
    const execs = await history; // the newest FIRST turns: one screenful, fetched and drawn before anything else
    if (this.destroyed) return;
    this.loading.remove();
    this.history = execs; // the turns drawn, oldest first
    this.hasMore = false;
    for (const ex of execs) this.addCell(this.historyCell(ex));
    this.updateEmpty();
    // for the browser test's measurement (ms since navigation start): the newest turns painted, then all
    const drawn = performance.now();
    const mark = (k, v) => { document.body.dataset[k] = String(Math.round(v)); };
    requestAnimationFrame(() => setTimeout(async () => {
      mark('historyMs', performance.now());
      mark('fetchMs', this.fetchEnd - this.fetchStart);
      mark('drawMs', drawn - this.fetchEnd);
      mark('mountMs', this.mountedAt);
      if (this.destroyed) return;
      // then the rest of the first page, fetched after the first paint and drawn above it
      if (execs.length >= FIRST) await this.prependOlder(PAGE);
      this.renderMore();
      requestAnimationFrame(() => setTimeout(() => mark('historyAllMs', performance.now())));
    }));
    this.ready = true;
    const buffered = this.buffer;
    this.buffer = [];
    for (const f of buffered) this.onFrame(f);
    this.scrollToEnd();
  }

  historyCell(ex) {
    const code = Array.isArray(ex.code) ? ex.code.join(' ') : ex.code ?? '';
    const cell = new Cell(this, { code, kind: ex.kind === 'exec' ? 'exec' : 'run', origin: 'history' });
    cell.count = ex.execution_count ?? ex.result?.execution_count ?? null;
    const result = ex.result || { status: ex.status, execution_count: ex.execution_count, outputs: [] };
    if (!result.status && ex.status) result.status = ex.status;
    cell.applyResult(result, { fromHistory: true, startedAt: ex.started_at, duration: ex.duration_ms });
    return cell;
  }

  /** renderMore shows "show earlier turns" above the first drawn cell while older ones may exist. */
  renderMore() {
    this.moreEl?.remove();
    const capped = this.history.length >= HISTORY_LIMIT;
    if (!this.hasMore && !capped) return;
    this.moreEl = h('div.more-history', { 'data-testid': 'more-history' },
      this.hasMore ? h('button.btn.small', { onclick: (e) => { e.target.disabled = true; this.showEarlier(); } }, `Show ${PAGE} earlier turns`) : null,
      h('span.muted', ` the newest ${this.history.length} turns are shown`,
        capped ? ' (the page shows at most 1,000; older turns are in the .ipynb download)' : ''));
    this.list.before(this.moreEl);
  }

  /**
   * showEarlier fetches a longer tail of the history and draws the turns older than the first drawn
   * one (found by its count and start time, so turns run meanwhile do not shift the window).
   */
  async showEarlier() {
    await this.prependOlder(Math.min(HISTORY_LIMIT, this.history.length + PAGE));
    this.renderMore();
  }

  /** prependOlder fetches the newest `limit` turns and draws those older than the first drawn one. */
  async prependOlder(limit) {
    const list = await this.fetchHistory(limit);
    if (this.destroyed) return;
    const first = this.history[0];
    let at = first ? list.findIndex((e) => e.execution_count === first.execution_count && e.started_at === first.started_at && e.kind === first.kind) : -1;
    if (at < 0) at = Math.max(0, list.length - this.history.length);
    const older = list.slice(0, at);
    this.history = [...older, ...this.history];
    this.hasMore = list.length >= limit && limit < HISTORY_LIMIT && older.length > 0;
    this.prependHistory(older);
  }

  /** prependHistory draws turns above the first cell, keeping what is on screen where it is. */
  prependHistory(execs) {
    if (!execs.length) return;
    const sc = this.main;
    const fromBottom = sc.scrollHeight - sc.scrollTop;
    const cells = execs.map((ex) => this.historyCell(ex));
    this.cells.unshift(...cells);
    this.list.prepend(...cells.map((c) => c.el));
    sc.scrollTop = sc.scrollHeight - fromBottom;
  }

  async refreshSession(first) {
    try {
      const ans = await api('GET', sessionPath(this.id));
      if (this.destroyed) return;
      this.session = ans.session;
      this.renderHeader();
      this.panels?.renderInfo();
      this.app.sessionUpdated(this.session);
    } catch (err) {
      if (first || !(err instanceof ApiError && err.code === 'network')) showError(`Loading session ${this.id} failed`, err);
      if (err instanceof ApiError && err.code === 'not_found') {
        this.socket?.close();
        this.setConn('closed', 'session not found');
      }
      if (first) throw err;
    }
  }

  renderHeader() {
    const s = this.session;
    const crumb = document.getElementById('crumb');
    fill(crumb, h('a', { href: '#/' }, 'Sessions'), h('span.sep', ' / '),
      h('span.crumb-name', { title: `id: ${s.id}` }, s.name || s.id), s.name && s.name !== s.id ? h('span.crumb-id', s.id) : null,
      stateBadge(s.state), sandboxBadge(s.sandbox));
    document.title = `${s.name || s.id} · carryover`;
    let msg = null;
    if (s.state === 'paused') {
      msg = h('div.banner.warn', 'This session is paused: runs are refused until it is resumed. ',
        h('button.btn.small', { onclick: () => this.lifecycle('resume') }, 'Resume'));
    } else if (CLOSED_STATES.has(s.state)) {
      msg = h('div.banner.error', `This session is ${s.state}: it cannot run code any more. Its history, files and checkpoints stay readable.`);
    } else if (s.state === 'rotating') {
      msg = h('div.banner.info', 'Rotating to a fresh sandbox: runs wait until the new kernel has the state back.');
    }
    this.stateBanner.replaceChildren(...(msg ? [msg] : []));
    this.composerEl.classList.toggle('disabled', CLOSED_STATES.has(s.state));
  }

  setConn(state, why) {
    const el = document.getElementById('conn');
    el.dataset.state = state;
    document.getElementById('conn-text').textContent = state === 'open' ? 'live' : state === 'connecting' ? 'connecting' : 'offline';
    el.title = `Websocket: ${state}${why ? ` (${why})` : ''}`;
  }

  setKernel(busy) {
    this.kernelBusy = busy;
    const el = document.getElementById('kstate');
    el.textContent = busy ? 'busy' : 'idle';
    el.dataset.state = busy ? 'busy' : 'idle';
  }

  onSocketState(state, info) {
    this.setConn(state, info?.reason);
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
    if (waiting.length) setTimeout(() => this.reconcile(waiting), 1500);
  }

  /** reconcile finds results of runs that finished while the websocket was down. */
  async reconcile(cells) {
    const missing = cells.filter((c) => c.active && !c.seenSinceReconnect);
    if (!missing.length) return;
    try {
      const ans = await api('GET', sessionPath(this.id, '/executions?limit=20'));
      const execs = ans?.executions || [];
      const used = new Set(this.cells.map((c) => c.count).filter((n) => n != null));
      for (const c of missing) {
        const ex = execs.find((e) => e.code === c.editor.value && !used.has(e.execution_count));
        if (ex) {
          used.add(ex.execution_count);
          this.byRunId.delete(c.runId);
          c.applyResult(ex.result || { status: ex.status }, { fromHistory: true, startedAt: ex.started_at, duration: ex.duration_ms });
        } else if (c.active) {
          c.stopTimer();
          c.setStatus('lost');
          c.outputs.el.append(h('div.out-note', 'The connection dropped during this run and its result was not found yet; reload the page to see it from the history.'));
        }
      }
      this.updateKernelFromCells();
    } catch (err) {
      showError('Catching up after a reconnect failed', err);
    }
  }

  // ---- frames ----

  cellFor(f, create = true) {
    if (f.id == null) return null;
    let c = this.byRunId.get(f.id);
    if (c || !create) return c || null;
    // a run started elsewhere (another tab, an API client): give it a cell of its own
    c = new Cell(this, { code: f.code ?? '', origin: 'remote' });
    c.codeKnown = f.code != null;
    if (!c.codeKnown) c.editor.value = '# started by another client; the code shows when it finishes';
    c.el.classList.add('remote');
    c.runId = f.id;
    this.byRunId.set(f.id, c);
    c.setStatus('queued');
    this.addCell(c);
    this.scrollToEnd(true);
    return c;
  }

  onFrame(f) {
    const c = f.id != null ? this.byRunId.get(f.id) : null;
    if (c) c.seenSinceReconnect = true;
    switch (f.type) {
      case 'running': {
        const cell = this.cellFor(f);
        if (f.code != null && !cell.codeKnown) { cell.editor.value = f.code; cell.codeKnown = true; }
        cell.seenSinceReconnect = true;
        cell.outputs.clear();
        cell.markRunning();
        for (const o of f.outputs || []) cell.outputs.add(o);
        if (f.input_request) cell.askInput(f.input_request.prompt, f.input_request.password);
        this.setKernel(true);
        break;
      }
      case 'status':
        if (f.execution_state === 'busy') {
          this.setKernel(true);
          this.cellFor(f)?.markRunning();
        } else if (f.execution_state === 'idle') {
          this.updateKernelFromCells();
        } else if (f.execution_state) {
          document.getElementById('kstate').textContent = f.execution_state;
        }
        break;
      case 'output': {
        const cell = this.cellFor(f);
        if (!cell) break;
        if (!cell.active) cell.markRunning();
        cell.outputs.add(f.output);
        this.scrollToEnd(true);
        break;
      }
      case 'input_request':
        this.cellFor(f)?.askInput(f.prompt, f.password);
        break;
      case 'result': {
        const cell = this.cellFor(f);
        if (!cell) break;
        const r = f.result || {};
        this.recent.set(f.id, cell);
        if (this.recent.size > 50) this.recent.delete(this.recent.keys().next().value);
        // a remote cell whose turn is already in the history (it finished while the page loaded)
        const dup = cell.origin === 'remote' && r.execution_count != null &&
          this.cells.find((o) => o !== cell && o.origin === 'history' && o.count === r.execution_count && o.kind === 'run');
        this.byRunId.delete(f.id);
        if (dup) {
          this.removeCell(cell);
        } else {
          cell.applyResult(r, { startedAt: new Date().toISOString() });
          if (!cell.codeKnown) this.fillRemoteCode(cell, r.execution_count);
        }
        this.updateKernelFromCells();
        this.afterTurn();
        this.scrollToEnd(true);
        break;
      }
      case 'error': {
        const err = f.error || { code: 'error', message: 'unknown websocket error' };
        const cell = f.id != null ? this.byRunId.get(f.id) || this.recent.get(f.id) : null;
        if (cell) {
          this.byRunId.delete(f.id);
          cell.fail(err);
          this.updateKernelFromCells();
          this.afterTurn();
          this.scrollToEnd(true);
        } else {
          toast('error', `Server: ${err.code}`, err.message, err.details);
        }
        break;
      }
      case 'event':
        this.panels.addEvent(f.event);
        this.onEvent(f.event);
        break;
      case 'comm':
      case 'comm_output':
      case 'comm_idle':
      case 'comm_reset':
        this.widgets.onFrame(f);
        break;
      case 'notice':
        toast('info', 'Notice from the server', f.message || JSON.stringify(f));
        for (const cell of this.cells) if (cell.active) cell.incomplete = true;
        break;
      default:
        console.warn('unknown frame', f);
    }
  }

  onEvent(ev) {
    if (!ev) return;
    const t = ev.event_type || '';
    if (/^(session_|sandbox_|rotation_|budget_|kernel_died|checkpoint_restored|checkpoint_created)/.test(t)) this.refreshSessionSoon();
    if (t === 'checkpoint_created' || t === 'checkpoint_restored') this.panels.refreshCheckpointsSoon();
    // A death is followed by a new kernel (sandbox_created) and, when there is a checkpoint, its
    // restore (checkpoint_restored): only the restore's own event may say the session is restored.
    if (t === 'kernel_died') {
      this.restoring = toast('error', 'The kernel died', 'Restoring the session from its last checkpoint…', ev.payload);
    }
    if (t === 'checkpoint_restored' && this.restoring) {
      this.restoring.querySelector('.toast-msg').textContent = 'A new kernel took its place.';
      this.restoring = null;
      toast('info', 'The session was restored from its last checkpoint', restoreSummary(ev.payload), ev.payload);
    }
    if (t === 'sandbox_created' && this.restoring && !this.session?.last_checkpoint) {
      this.restoring.querySelector('.toast-msg').textContent = 'A new kernel took its place.';
      this.restoring = null;
      toast('info', 'A new kernel started', 'There was no checkpoint yet: it starts with no variables.');
    }
    if (t === 'checkpoint_restored') {
      const n = replayNote(ev.payload);
      if (n && n.rebuilt) this.addMarker(n.rebuilt);
      if (n && n.missed) this.addMarker(n.missed);
    }
    if (t === 'budget_exceeded') toast('error', 'Budget exceeded', 'This session reached a budget limit.', ev.payload);
    if (t === 'budget_warning') toast('info', 'Budget warning', JSON.stringify(ev.payload || {}));
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

  /** fillRemoteCode shows the code of a run another client started, from the history (the record may
   *  be written just after the result frame, hence the retries). */
  async fillRemoteCode(cell, count) {
    for (const wait of [0, 300, 1000, 3000]) {
      if (wait) await new Promise((r) => setTimeout(r, wait));
      if (this.destroyed || cell.codeKnown) return;
      try {
        const ans = await api('GET', sessionPath(this.id, '/executions?limit=20'));
        const ex = (ans?.executions || []).filter((e) => e.kind !== 'exec').find((e) => e.execution_count === count);
        if (ex) { cell.editor.value = Array.isArray(ex.code) ? ex.code.join(' ') : ex.code; cell.codeKnown = true; return; }
      } catch (err) {
        showError('Loading the code of a run from another client failed', err);
        return;
      }
    }
    cell.editor.value = '# started by another client (its code is not in the history)';
  }

  updateKernelFromCells() {
    this.setKernel(this.cells.some((c) => c.status === 'running'));
  }

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
    this.byRunId.forEach((c, id) => { if (c === cell) this.byRunId.delete(id); });
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
    const cell = new Cell(this, { code, kind: this.mode });
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
    this.setMode(cell.kind);
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
    this.byRunId.set(runId, cell);
    if (cell.kind === 'exec') return this.runExec(cell, code);
    if (this.socket?.send({ type: 'run', id: runId, code })) return;
    // no websocket: run over HTTP (no live output, same answer at the end)
    cell.markRunning();
    cell.outputs.el.append(h('div.out-note', 'live connection down: running over HTTP, the output shows when the run ends'));
    this.setKernel(true);
    try {
      const r = await api('POST', sessionPath(this.id, '/run'), { json: { code } });
      if (this.byRunId.get(runId) !== cell) return;
      this.byRunId.delete(runId);
      cell.incomplete = true;
      cell.applyResult(r, { startedAt: new Date().toISOString() });
    } catch (err) {
      this.byRunId.delete(runId);
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
    this.byRunId.delete(runId);
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
      if (ans?.session) { this.session = ans.session; this.renderHeader(); this.panels.renderInfo(); this.app.sessionUpdated(this.session); }
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

  move(delta) {
    if (!this.cells.length) return;
    let i = this.cells.indexOf(this.selected);
    if (i < 0) i = delta > 0 ? -1 : this.cells.length;
    i = Math.max(0, Math.min(this.cells.length - 1, i + delta));
    this.select(this.cells[i], true);
  }

  scrollToEnd(onlyIfNear) {
    const sc = this.main;
    if (onlyIfNear && sc.scrollHeight - sc.scrollTop - sc.clientHeight > 250) return;
    requestAnimationFrame(() => { sc.scrollTop = sc.scrollHeight; });
  }

  /** keydown handles command-mode keys; returns true when it used the key. */
  keydown(e) {
    if (isTyping(e.target) || e.ctrlKey || e.metaKey || e.altKey) return false;
    const k = e.key;
    const seq = this.keySeq;
    this.keySeq = '';
    if ((k === 'i' || k === 'I') && (seq === 'i')) { this.interrupt(); return true; }
    if (k === 'i' || k === 'I') { this.keySeq = 'i'; return true; }
    if (k === '0' && seq === '0') { this.restart(); return true; }
    if (k === '0') { this.keySeq = '0'; return true; }
    if (k === 'g' && seq === 'g') { if (this.cells.length) this.select(this.cells[0], true); return true; }
    if (k === 'g') { this.keySeq = 'g'; return true; }
    if (k === 'G') { if (this.cells.length) this.select(this.cells[this.cells.length - 1], true); return true; }
    if (k === 'ArrowDown' || k === 'j') {
      if (this.selected && this.selected === this.cells[this.cells.length - 1] && k === 'ArrowDown') { this.composer.focus(); return true; }
      this.move(1); return true;
    }
    if (k === 'ArrowUp' || k === 'k') { this.move(-1); return true; }
    if (k === 'Enter' && e.shiftKey && this.selected) { this.runCell(this.selected, 'stay'); return true; }
    if (k === 'Enter' && this.selected && e.target === this.selected.el) { this.selected.editor.focus(); return true; }
    if (k === 'n' || k === '/') { this.composer.focus(true); return true; }
    if (k === '!') { this.setMode('exec'); this.composer.focus(true); return true; }
    if (k === 'p') { this.setMode('run'); this.composer.focus(true); return true; }
    if (k === 'f') { this.panels?.show('files'); return true; }
    if (k === 'c') { this.panels?.show('checkpoints'); return true; }
    if (k === 'v') { this.panels?.show('variables'); return true; }
    if (k === 'd' && seq === 'd') { if (this.selected) this.deleteCell(this.selected); return true; }
    if (k === 'd') { this.keySeq = 'd'; return true; }
    if (k === 'o' && this.selected) { this.selected.toggleCollapse(); return true; }
    if (k === 'K' && this.selected) { this.moveCell(this.selected, -1); return true; }
    if (k === 'J' && this.selected) { this.moveCell(this.selected, 1); return true; }
    if (k === 'e') { this.panels?.show('events'); return true; }
    if (k === 's') { this.panels?.show('info'); return true; }
    return false;
  }
}
