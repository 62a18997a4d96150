// The data viewer: a DataFrame, Series or 1-D/2-D numpy array of the live kernel as a paged,
// sortable, searchable table. Each page is one GET /variables/{name}/rows: the kernel searches,
// sorts and cuts it (the agent's op_rows), so only the rows on screen reach the page, whatever the
// frame's size. Opened from the variable inspector and from a cell whose result is a frame.
import { api, sessionPath } from './api.js';
import { h } from './util.js';

export const PAGE_ROWS = 50;

/** isTable says whether the variable inspector's entry v can be opened in the viewer. */
export function isTable(v) {
  const t = v?.type || '';
  if (/^pandas\..*\.(DataFrame|Series)$/.test(t)) return true;
  return /^numpy\.ndarray$/.test(t) && Array.isArray(v.shape) && v.shape.length >= 1 && v.shape.length <= 2;
}

/** tableName is the variable a cell's result shows when it can be viewed: the cell's last line is a bare name. */
export function tableName(code, output) {
  const lines = String(code || '').trimEnd().split('\n');
  const last = (lines[lines.length - 1] || '').trim();
  if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(last)) return null;
  const d = output?.data || {};
  const html = Array.isArray(d['text/html']) ? d['text/html'].join('') : String(d['text/html'] || '');
  const plain = Array.isArray(d['text/plain']) ? d['text/plain'].join('') : String(d['text/plain'] || '');
  return /class="dataframe/.test(html) || /^array\(/.test(plain) ? last : null;
}

const cellText = (v) => (v == null ? '' : typeof v === 'number' ? String(v) : String(v));

/** openDataViewer shows variable name of session id in a modal dialog (Esc or Close ends it). */
export function openDataViewer(id, name) {
  const state = { offset: 0, sort: null, desc: false, q: '', page: null, seq: 0 };
  const title = h('h2', { id: 'dv-title' }, name);
  const info = h('p.muted.small-print', { 'aria-live': 'polite' }, 'Loading…');
  const search = h('input.small-input', { type: 'search', placeholder: 'Search all columns', 'aria-label': `Search ${name}` });
  const table = h('table.dv-table', { 'data-testid': 'data-viewer-table' });
  const prev = h('button.btn.small', { 'data-testid': 'dv-prev' }, '← Previous');
  const next = h('button.btn.small', { 'data-testid': 'dv-next' }, 'Next →');
  const close = h('button.btn', { 'data-testid': 'dv-close' }, 'Close');
  const dialog = h('div.overlay.dv-overlay', { role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'dv-title', 'data-testid': 'data-viewer' },
    h('div.dialog.dv-dialog',
      h('div.dialog-head', title, close),
      h('div.dv-tools', search, info),
      h('div.dv-scroll', { tabindex: '0', 'aria-label': `Rows of ${name}` }, table),
      h('div.dialog-actions', prev, next)));
  const before = document.activeElement;
  const end = () => { dialog.remove(); document.removeEventListener('keydown', onKey, true); before?.focus?.(); };
  const onKey = (e) => { if (e.key === 'Escape') { e.stopPropagation(); e.preventDefault(); end(); } };
  document.addEventListener('keydown', onKey, true);
  close.onclick = end;
  dialog.addEventListener('click', (e) => { if (e.target === dialog) end(); });

  async function load() {
    const seq = ++state.seq;
    const qs = new URLSearchParams({ offset: String(state.offset), limit: String(PAGE_ROWS) });
    if (state.sort != null) { qs.set('sort', state.sort); qs.set('desc', String(state.desc)); }
    if (state.q) qs.set('q', state.q);
    dialog.dataset.state = 'loading';
    try {
      const page = await api('GET', sessionPath(id, `/variables/${encodeURIComponent(name)}/rows?${qs}`));
      if (seq !== state.seq) return;
      state.page = page;
      draw(page);
      dialog.dataset.state = 'ready';
    } catch (err) {
      if (seq !== state.seq) return;
      dialog.dataset.state = 'error';
      info.textContent = `${err.code || 'error'}: ${err.message}`;
      table.replaceChildren();
    }
  }

  function draw(p) {
    title.textContent = `${p.name} · ${p.type.split('.').pop()}`;
    const first = p.matched_rows ? p.offset + 1 : 0;
    const last = p.offset + p.rows.length;
    info.textContent = `rows ${first.toLocaleString()}–${last.toLocaleString()} of ${p.matched_rows.toLocaleString()}` +
      (p.matched_rows !== p.total_rows ? ` matching (${p.total_rows.toLocaleString()} in all)` : '') +
      (state.sort != null ? ` · sorted by ${state.sort} ${state.desc ? '↓' : '↑'}` : '');
    const head = h('tr', h('th.dv-index', { scope: 'col' }, ''), p.columns.map((c) => {
      const sorted = state.sort === c.name;
      return h('th', { scope: 'col', 'aria-sort': sorted ? (state.desc ? 'descending' : 'ascending') : 'none' },
        h('button.dv-sort', { title: `Sort by ${c.name} (${c.dtype})`, 'data-col': c.name, onclick: () => sortBy(c.name) },
          c.name, sorted ? (state.desc ? ' ↓' : ' ↑') : ''));
    }));
    table.replaceChildren(h('thead', head), h('tbody', p.rows.map((r, i) => h('tr',
      h('th.dv-index', { scope: 'row' }, cellText(p.index[i])),
      r.map((v) => h(typeof v === 'number' ? 'td.num' : 'td', v == null ? h('span.muted', 'NaN') : cellText(v)))))));
    prev.disabled = p.offset === 0;
    next.disabled = last >= p.matched_rows;
  }

  function sortBy(col) {
    if (state.sort !== col) { state.sort = col; state.desc = false; } else if (!state.desc) state.desc = true; else state.sort = null;
    state.offset = 0;
    load();
  }
  prev.onclick = () => { state.offset = Math.max(0, state.offset - PAGE_ROWS); load(); };
  next.onclick = () => { state.offset += PAGE_ROWS; load(); };
  let timer = null;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = search.value.trim(); state.offset = 0; load(); }, 300);
  });
  document.body.append(dialog);
  search.focus();
  load();
  return { close: end };
}
