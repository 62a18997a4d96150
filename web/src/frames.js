// The session view's live side: the websocket's frames (a run's status, outputs, input requests,
// result and errors, whichever client started it; events; the widgets' comm frames) applied to the
// cells, and the catch-up after a reconnect.
import { api, sessionPath } from './api.js';
import { Cell } from './cell.js';
import { h } from './util.js';
import { toast, showError } from './ui.js';

/** LiveFrames applies a session websocket's frames to a view's cells. */
export class LiveFrames {
  constructor(view) {
    this.view = view;
    this.byRunId = new Map(); // run id -> cell
    this.recent = new Map(); // run id -> cell, for an error frame that follows its result
  }

  /** reconcile finds results of runs that finished while the websocket was down. */
  async reconcile(cells) {
    const missing = cells.filter((c) => c.active && !c.seenSinceReconnect);
    if (!missing.length) return;
    const v = this.view;
    try {
      const ans = await api('GET', sessionPath(v.id, '/executions?limit=20'));
      const execs = ans?.executions || [];
      const used = new Set(v.cells.map((c) => c.count).filter((n) => n != null));
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
      v.updateKernelFromCells();
    } catch (err) {
      showError('Catching up after a reconnect failed', err);
    }
  }

  /** cellFor returns the cell of frame f's run; a run started elsewhere gets a cell of its own. */
  cellFor(f, create = true) {
    if (f.id == null) return null;
    let c = this.byRunId.get(f.id);
    if (c || !create) return c || null;
    // a run started elsewhere (another tab, an API client)
    c = new Cell(this.view, { code: f.code ?? '', origin: 'remote' });
    c.codeKnown = f.code != null;
    if (!c.codeKnown) c.editor.value = '# started by another client; the code shows when it finishes';
    c.el.classList.add('remote');
    c.runId = f.id;
    this.byRunId.set(f.id, c);
    c.setStatus('queued');
    this.view.addCell(c);
    this.view.scrollToEnd(true);
    return c;
  }

  onFrame(f) {
    const c = f.id != null ? this.byRunId.get(f.id) : null;
    if (c) c.seenSinceReconnect = true;
    const v = this.view;
    switch (f.type) {
      case 'running': this.running(f); break;
      case 'status': this.status(f); break;
      case 'output': {
        const cell = this.cellFor(f);
        if (!cell) break;
        if (!cell.active) cell.markRunning();
        cell.outputs.add(f.output);
        v.scrollToEnd(true);
        break;
      }
      case 'input_request': this.cellFor(f)?.askInput(f.prompt, f.password); break;
      case 'result': this.result(f); break;
      case 'error': this.error(f); break;
      case 'event': {
        // an event is told once (not again when a second subscription's backlog repeats it), and
        // only when it is news: live, or missed while the socket was down (Panels.isNews)
        const old = !v.panels.isNews(f.event, f.backlog === true);
        if (v.panels.addEvent(f.event, false, old)) v.events.on(f.event, old);
        break;
      }
      case 'comm': case 'comm_output': case 'comm_idle': case 'comm_reset':
        v.widgets.onFrame(f);
        break;
      case 'notice':
        toast('info', 'Notice from the server', f.message || JSON.stringify(f));
        for (const cell of v.cells) if (cell.active) cell.incomplete = true;
        break;
      default:
        console.warn('unknown frame', f);
    }
  }

  /** running: a run in progress when this page connected, with its outputs so far. */
  running(f) {
    const cell = this.cellFor(f);
    if (f.code != null && !cell.codeKnown) { cell.editor.value = f.code; cell.codeKnown = true; }
    cell.seenSinceReconnect = true;
    cell.outputs.clear();
    cell.markRunning();
    for (const o of f.outputs || []) cell.outputs.add(o);
    if (f.input_request) cell.askInput(f.input_request.prompt, f.input_request.password);
    this.view.setKernel(true);
  }

  status(f) {
    if (f.execution_state === 'busy') {
      this.view.setKernel(true);
      this.cellFor(f)?.markRunning();
    } else if (f.execution_state === 'idle') {
      this.view.updateKernelFromCells();
    } else if (f.execution_state) {
      document.getElementById('kstate').textContent = f.execution_state;
    }
  }

  result(f) {
    const cell = this.cellFor(f);
    if (!cell) return;
    const v = this.view;
    const r = f.result || {};
    this.recent.set(f.id, cell);
    if (this.recent.size > 50) this.recent.delete(this.recent.keys().next().value);
    // a remote cell whose turn is already in the history (it finished while the page loaded)
    const dup = cell.origin === 'remote' && r.execution_count != null &&
      v.cells.find((o) => o !== cell && o.origin === 'history' && o.count === r.execution_count && o.kind === 'run');
    this.byRunId.delete(f.id);
    if (dup) {
      v.removeCell(cell);
    } else {
      cell.applyResult(r, { startedAt: new Date().toISOString() });
      if (!cell.codeKnown) this.fillRemoteCode(cell, r.execution_count);
    }
    v.updateKernelFromCells();
    v.afterTurn();
    v.scrollToEnd(true);
  }

  error(f) {
    const err = f.error || { code: 'error', message: 'unknown websocket error' };
    const cell = f.id != null ? this.byRunId.get(f.id) || this.recent.get(f.id) : null;
    if (!cell) {
      toast('error', `Server: ${err.code}`, err.message, err.details);
      return;
    }
    this.byRunId.delete(f.id);
    cell.fail(err);
    this.view.updateKernelFromCells();
    this.view.afterTurn();
    this.view.scrollToEnd(true);
  }

  /** fillRemoteCode shows the code of a run another client started, from the history (the record may
   *  be written just after the result frame, hence the retries). */
  async fillRemoteCode(cell, count) {
    for (const wait of [0, 300, 1000, 3000]) {
      if (wait) await new Promise((r) => setTimeout(r, wait));
      if (this.view.destroyed || cell.codeKnown) return;
      try {
        const ans = await api('GET', sessionPath(this.view.id, '/executions?limit=20'));
        const ex = (ans?.executions || []).filter((e) => e.kind !== 'exec').find((e) => e.execution_count === count);
        if (ex) { cell.editor.value = Array.isArray(ex.code) ? ex.code.join(' ') : ex.code; cell.codeKnown = true; return; }
      } catch (err) {
        showError('Loading the code of a run from another client failed', err);
        return;
      }
    }
    cell.editor.value = '# started by another client (its code is not in the history)';
  }
}
