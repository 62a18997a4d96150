// The session view's history: past turns from GET /executions, drawn as cells. The newest FIRST
// turns are fetched and drawn first (one screenful), the rest of the first PAGE after the first paint,
// older ones on demand ("Show 200 earlier turns"), up to the API's HISTORY_LIMIT.
import { api, sessionPath } from './api.js';
import { Cell } from './cell.js';
import { h } from './util.js';
import { showError } from './ui.js';

const HISTORY_LIMIT = 1000; // the most GET /executions answers in one call
const PAGE = 200; // turns drawn at first and per "show earlier" click: a long history opens fast
export const FIRST = 40; // of those, fetched and drawn first (the screenful at the bottom); the rest fetched after the first paint

/** History draws a view's past turns and pages through older ones. */
export class History {
  constructor(view) {
    this.view = view;
    this.turns = []; // the turns drawn, oldest first
    this.hasMore = false;
    this.fetchStart = 0;
    this.fetchEnd = 0;
  }

  /** fetch gets the newest `limit` turns, oldest first (errors are shown, the list is then empty). */
  async fetch(limit = PAGE) {
    this.fetchStart = performance.now();
    try {
      const ans = await api('GET', sessionPath(this.view.id, `/executions?limit=${limit}`));
      return ans?.executions || [];
    } catch (err) {
      if (err.status !== 404) showError('Loading the history failed', err);
      return [];
    } finally {
      this.fetchEnd = performance.now();
    }
  }

  /** load draws the turns `history` resolves to (the newest FIRST), then the rest of the first page. */
  async load(history) {
    const execs = await history; // the newest FIRST turns: one screenful, fetched and drawn before anything else
    if (this.view.destroyed) return;
    this.view.loading.remove();
    this.turns = execs;
    this.hasMore = false;
    for (const ex of execs) this.view.addCell(this.cell(ex));
    this.view.updateEmpty();
    // for the browser test's measurement (ms since navigation start): the newest turns painted, then all
    const drawn = performance.now();
    const mark = (k, v) => { document.body.dataset[k] = String(Math.round(v)); };
    requestAnimationFrame(() => setTimeout(async () => {
      mark('historyMs', performance.now());
      mark('fetchMs', this.fetchEnd - this.fetchStart);
      mark('drawMs', drawn - this.fetchEnd);
      mark('mountMs', this.view.mountedAt);
      if (this.view.destroyed) return;
      // then the rest of the first page, fetched after the first paint and drawn above it
      if (execs.length >= FIRST) await this.prependOlder(PAGE);
      this.renderMore();
      requestAnimationFrame(() => setTimeout(() => mark('historyAllMs', performance.now())));
    }));
  }

  /** cell makes the cell of a past turn. */
  cell(ex) {
    const code = Array.isArray(ex.code) ? ex.code.join(' ') : ex.code ?? '';
    const cell = new Cell(this.view, { code, kind: ex.kind === 'exec' ? 'exec' : 'run', origin: 'history' });
    cell.count = ex.execution_count ?? ex.result?.execution_count ?? null;
    const result = ex.result || { status: ex.status, execution_count: ex.execution_count, outputs: [] };
    if (!result.status && ex.status) result.status = ex.status;
    cell.applyResult(result, { fromHistory: true, startedAt: ex.started_at, duration: ex.duration_ms });
    return cell;
  }

  /** renderMore shows "show earlier turns" above the first drawn cell while older ones may exist. */
  renderMore() {
    this.moreEl?.remove();
    const capped = this.turns.length >= HISTORY_LIMIT;
    if (!this.hasMore && !capped) return;
    this.moreEl = h('div.more-history', { 'data-testid': 'more-history' },
      this.hasMore ? h('button.btn.small', { onclick: (e) => { e.target.disabled = true; this.showEarlier(); } }, `Show ${PAGE} earlier turns`) : null,
      h('span.muted', ` the newest ${this.turns.length} turns are shown`,
        capped ? ' (the page shows at most 1,000; older turns are in the .ipynb download)' : ''));
    this.view.list.before(this.moreEl);
  }

  /**
   * showEarlier fetches a longer tail of the history and draws the turns older than the first drawn
   * one (found by its count and start time, so turns run meanwhile do not shift the window).
   */
  async showEarlier() {
    await this.prependOlder(Math.min(HISTORY_LIMIT, this.turns.length + PAGE));
    this.renderMore();
  }

  /** prependOlder fetches the newest `limit` turns and draws those older than the first drawn one. */
  async prependOlder(limit) {
    const list = await this.fetch(limit);
    if (this.view.destroyed) return;
    const first = this.turns[0];
    let at = first ? list.findIndex((e) => e.execution_count === first.execution_count && e.started_at === first.started_at && e.kind === first.kind) : -1;
    if (at < 0) at = Math.max(0, list.length - this.turns.length);
    const older = list.slice(0, at);
    this.turns = [...older, ...this.turns];
    this.hasMore = list.length >= limit && limit < HISTORY_LIMIT && older.length > 0;
    this.prepend(older);
  }

  /** prepend draws turns above the first cell, keeping what is on screen where it is. */
  prepend(execs) {
    if (!execs.length) return;
    const sc = this.view.main;
    const fromBottom = sc.scrollHeight - sc.scrollTop;
    const cells = execs.map((ex) => this.cell(ex));
    this.view.cells.unshift(...cells);
    this.view.list.prepend(...cells.map((c) => c.el));
    sc.scrollTop = sc.scrollHeight - fromBottom;
  }
}
