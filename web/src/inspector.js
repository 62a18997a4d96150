// The variable inspector (GET /variables: the kernel answers one silent user expression, so the
// execution count does not move) and the diff between two checkpoints (GET /checkpoints/{cid}).

import { api, sessionPath } from './api.js';
import { h, fill, icon, formatBytes } from './util.js';
import { showError } from './ui.js';
import { isTable, openDataViewer } from './dataviewer.js';

/**
 * checkpointDiff compares two checkpoint details (older a, newer b): variables and files added,
 * removed, and changed (a different content reference or type). Pure, for unit tests.
 */
export function checkpointDiff(a, b) {
  const by = (list, key) => new Map((list || []).map((x) => [x[key], x]));
  const side = (from, to, key, same) => {
    const A = by(from, key);
    const B = by(to, key);
    const out = { added: [], removed: [], changed: [] };
    for (const [k, v] of B) {
      if (!A.has(k)) out.added.push(v);
      else if (!same(A.get(k), v)) out.changed.push({ ...v, before: A.get(k) });
    }
    for (const [k, v] of A) if (!B.has(k)) out.removed.push(v);
    for (const l of Object.values(out)) l.sort((x, y) => String(x[key]).localeCompare(String(y[key])));
    return out;
  };
  return {
    variables: side(a.variables, b.variables, 'name', (x, y) => x.ref === y.ref && x.type === y.type),
    files: side(a.files, b.files, 'path', (x, y) => x.ref === y.ref),
  };
}

const shapeText = (v) => (v.shape ? `(${v.shape.join(', ')}${v.shape.length === 1 ? ',' : ''})` : v.length != null ? `len ${v.length}` : '');

export class VariablesPanel {
  constructor(view, root) {
    this.view = view;
    this.root = root;
    this.body = h('div.var-body', h('div.muted.pad', 'Loading…'));
    this.note = h('p.muted.pad-x.small-print');
    root.replaceChildren(
      h('div.panel-head', h('span', 'Variables'),
        h('button.icon-btn', { title: 'Refresh (does not run a turn)', 'aria-label': 'Refresh variables', onclick: () => this.refresh() }, icon('refresh'))),
      this.note, this.body);
  }

  async refresh() {
    try {
      const ans = await api('GET', sessionPath(this.view.id, '/variables'));
      this.render(ans);
    } catch (err) {
      this.body.replaceChildren(h('div.panel-error', `Cannot list variables: ${err.code}: ${err.message}`));
      showError('Listing variables failed', err);
    }
  }

  render(ans) {
    const vars = ans?.variables || [];
    this.note.textContent = ans?.live ? 'From the kernel (read without running a turn); state as of the latest checkpoint.' : (ans?.note || '');
    if (!vars.length) { this.body.replaceChildren(h('div.muted.pad', 'No variables yet.')); return; }
    fill(this.body, h('table.vars', { 'data-testid': 'variables' },
      h('thead', h('tr', ['name', 'type', 'shape / length', 'size', 'saved', 'table'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', vars.map((v) => h('tr', { 'data-name': v.name },
        h('td', h('code', v.name)),
        h('td.muted', { title: v.type }, (v.type || '').split('.').pop()),
        h('td', shapeText(v)),
        h('td.num', v.bytes != null ? formatBytes(v.bytes) : ''),
        h(`td.state-${v.state}`, { title: v.reason || '' }, v.state === 'skipped' ? `⚠ skipped${v.reason ? `: ${v.reason}` : ''}` : v.state),
        h('td', ans?.live && isTable(v) ? h('button.btn.small', { 'data-testid': 'view-rows', title: `Page, sort and search ${v.name}`,
          onclick: () => openDataViewer(this.view.id, v.name) }, 'View') : null))))));
  }
}

/** DiffBox is the "compare two checkpoints" form of the checkpoints panel. */
export class DiffBox {
  constructor(view) {
    this.view = view;
    this.from = h('select.small-input', { 'aria-label': 'Older checkpoint' });
    this.to = h('select.small-input', { 'aria-label': 'Newer checkpoint' });
    this.out = h('div.diff-out', { 'aria-live': 'polite' });
    for (const sel of [this.from, this.to]) sel.addEventListener('change', () => { sel.dataset.picked = '1'; });
    this.el = h('div.diff-box', h('div.diff-row', h('span', 'Compare'), this.from, h('span', '→'), this.to,
      h('button.btn.small', { onclick: () => this.compare(), 'data-testid': 'diff-btn' }, 'Diff')), this.out);
  }

  /** setList fills the two selects (newest first): the two newest turns until the user picks others. */
  setList(sorted) {
    const opts = (sel, pick) => {
      const keep = sel.value;
      sel.replaceChildren(...sorted.map((c) => h('option', { value: c.id }, `turn ${c.turn ?? '?'}`)));
      sel.value = sel.dataset.picked && sorted.some((c) => c.id === keep) ? keep : pick;
    };
    opts(this.to, sorted[0]?.id);
    opts(this.from, (sorted[1] || sorted[0])?.id);
    this.el.hidden = sorted.length < 2;
  }

  async compare() {
    const get = (cid) => api('GET', sessionPath(this.view.id, `/checkpoints/${encodeURIComponent(cid)}`)).then((a) => a.checkpoint);
    try {
      const [a, b] = await Promise.all([get(this.from.value), get(this.to.value)]);
      this.render(a, b, checkpointDiff(a, b));
    } catch (err) {
      showError('Comparing checkpoints failed', err);
    }
  }

  render(a, b, d) {
    const vline = (sign, v) => h(`li.diff-${sign === '+' ? 'add' : sign === '-' ? 'del' : 'chg'}`,
      h('span.diff-sign', { 'aria-hidden': 'true' }, sign), h('code', v.name), ' ',
      h('span.muted', `${(v.type || v.kind || '').split('.').pop()} · ${formatBytes(v.bytes ?? 0)}`),
      v.before ? h('span.muted', ` (was ${(v.before.type || '').split('.').pop()} · ${formatBytes(v.before.bytes ?? 0)})`) : null);
    const fline = (sign, f) => h(`li.diff-${sign === '+' ? 'add' : sign === '-' ? 'del' : 'chg'}`,
      h('span.diff-sign', { 'aria-hidden': 'true' }, sign), h('code', f.path), ' ', h('span.muted', formatBytes(f.size)),
      f.before ? h('span.muted', ` (was ${formatBytes(f.before.size)})`) : null);
    const list = (title, s, line) => {
      const items = [...s.added.map((x) => line('+', x)), ...s.changed.map((x) => line('~', x)), ...s.removed.map((x) => line('-', x))];
      return [h('h4', `${title}: ${s.added.length} added, ${s.changed.length} changed, ${s.removed.length} removed`),
        items.length ? h('ul.diff-list', items) : h('div.muted.pad-x', 'no change')];
    };
    fill(this.out, h('div', { 'data-testid': 'diff' }, h('div.muted.small-print', `turn ${a.turn} → turn ${b.turn}`),
      list('Variables', d.variables, vline), list('Files', d.files, fline)));
  }
}
