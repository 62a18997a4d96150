// A cell of the session view: one turn (Python or a shell command), its editor, outputs, status and
// checkpoint line. The view (notebook.js) owns the list of cells; a cell calls back into it for what
// concerns other cells (run, select, move, remove).
import { Editor } from './editor.js';
import { OutputArea } from './outputs.js';
import { openDataViewer, tableName } from './dataviewer.js';
import { h, icon, formatBytes, formatMs, localTime } from './util.js';
import { toast, showError } from './ui.js';

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

export class Cell {
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
    if (r.interrupted) {
      this.setStatus('aborted');
      this.statusEl.textContent = `■ interrupted${r.exit_code != null ? ` · exit ${r.exit_code}` : ''}`;
      this.outputs.el.append(h('div.out-note', 'the command was stopped by an interrupt'));
    }
    if (!r.stdout && !r.stderr && !r.timed_out && !r.interrupted) this.outputs.el.append(h('div.out-note', 'no output'));
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
