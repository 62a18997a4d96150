// Entry point: token, routing (#/ = session list, #/s/<id> = a session), the sidebar and global keys.

import 'katex/dist/katex.min.css';
import { api, initToken, getToken, setToken, onUnauthorized, sessionPath } from './api.js';
import { SessionView } from './notebook.js';
import { registry } from './renderers.js';
import { chartRenderers } from './charts.js';
import { h, relTime, localTime, isTyping } from './util.js';
import { toast, showError, confirmDialog, openHelp, closeOverlays, stateBadge, sandboxBadge, budgetMeter } from './ui.js';
import { archiveDrop } from './portable.js';

// The chart renderers plug into the registry here, as JupyterLab's extensions add their renderer
// factories to rendermime: the registry itself imports no renderer beyond the standard ones.
for (const r of chartRenderers) registry.add(r);

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

class App {
  constructor() {
    this.main = document.getElementById('main');
    this.panel = document.getElementById('panel');
    this.sideList = document.getElementById('side-list');
    this.view = null;
    this.sessions = [];
    this.currentId = null;
  }

  start() {
    initToken();
    onUnauthorized(() => this.askToken(true));
    document.getElementById('btn-help').onclick = () => openHelp();
    document.getElementById('help').addEventListener('click', (e) => {
      if (e.target.id === 'help' || e.target.closest('[data-close]')) document.getElementById('help').hidden = true;
    });
    document.getElementById('btn-interrupt').onclick = () => this.view?.interrupt();
    document.getElementById('btn-restart').onclick = () => this.view?.restart();
    document.getElementById('toggle-sidebar').onclick = () => this.toggleSidebar();
    document.getElementById('toggle-panel').onclick = () => this.togglePanel();
    document.getElementById('btn-new-side').onclick = () => this.quickCreate();
    document.addEventListener('keydown', (e) => this.onKey(e));
    window.addEventListener('hashchange', () => { document.body.classList.remove('show-sidebar'); this.route(); });
    if (localStorage.getItem('carryover.sidebar') === 'hidden') document.body.classList.add('no-sidebar');
    if (!getToken()) { this.askToken(false); return; }
    this.route();
    this.refreshList();
    this.listTimer = setInterval(() => this.refreshList(true), 5000);
  }

  // ---- token ----

  askToken(rejected) {
    if (document.getElementById('token-field')) return; // already asking
    clearInterval(this.listTimer);
    if (this.view) { this.view.unmount(); this.view = null; }
    this.panel.hidden = true;
    document.body.classList.add('no-token');
    document.getElementById('crumb').replaceChildren();
    const field = h('input.text-input', { type: 'password', autocomplete: 'off', placeholder: 'token', 'aria-label': 'Access token', id: 'token-field' });
    const go = (e) => {
      e.preventDefault();
      if (!field.value.trim()) return;
      setToken(field.value.trim());
      location.hash = location.hash || '#/';
      location.reload();
    };
    this.main.replaceChildren(h('div.token-screen',
      h('form.card', { onsubmit: go },
        h('h1', 'carryover'),
        rejected ? h('p.error-text', 'The server rejected the token (401 unauthorized). Paste the right one.') :
          h('p', 'This page needs the access token printed by ', h('code', 'carryover serve'), '.'),
        h('p.muted', 'Open the link it prints (', h('code', '/?token=…'), ') or paste the token here. It is kept for this tab only (sessionStorage).'),
        h('div.row', field, h('button.btn.primary', { type: 'submit' }, 'Continue')))));
    field.focus();
  }

  // ---- routing ----

  route() {
    if (!getToken()) return;
    const m = /^#\/s\/(.+)$/.exec(location.hash);
    const id = m ? decodeURIComponent(m[1]) : null;
    if (id && this.view && this.view.id === id) return;
    if (this.view) { this.view.unmount(); this.view = null; }
    this.currentId = id;
    this.renderSide();
    if (id) {
      document.body.classList.add('in-session');
      this.view = new SessionView(this, id);
      this.main.scrollTop = 0;
      this.view.mount(this.main, this.panel);
    } else {
      document.body.classList.remove('in-session');
      this.panel.hidden = true;
      document.title = 'Sessions · carryover';
      document.getElementById('crumb').replaceChildren(h('span.crumb-name', 'Sessions'));
      this.renderHome();
    }
  }

  open(id) { location.hash = `#/s/${encodeURIComponent(id)}`; }

  // ---- session list ----

  async refreshList(quiet) {
    try {
      const ans = await api('GET', '/api/sessions');
      this.sessions = ans?.sessions || [];
      this.sessions.sort((a, b) => String(b.last_activity || b.created_at).localeCompare(String(a.last_activity || a.created_at)));
      this.renderSide();
      if (!this.currentId && this.homeTable) this.renderHomeTable();
      this.listError = null;
    } catch (err) {
      if (err.status === 401) return;
      // polling: report a failure once, not every 5 seconds
      if (!quiet || !this.listError) showError('Listing sessions failed', err);
      this.listError = err;
      this.homeSig = null;
      if (this.homeTable) this.homeTable.replaceChildren(h('div.panel-error', `Cannot list sessions: ${err.code}: ${err.message}`));
    }
  }

  sessionUpdated(s) {
    const i = this.sessions.findIndex((x) => x.id === s.id);
    if (i >= 0) this.sessions[i] = s; else this.sessions.unshift(s);
    this.renderSide();
  }

  renderSide() {
    const items = this.sessions.map((s) => h('li',
      h(`a.side-item${s.id === this.currentId ? '.current' : ''}`, { href: `#/s/${encodeURIComponent(s.id)}`, title: `${s.id} · ${s.state}`, 'aria-current': s.id === this.currentId ? 'page' : null },
        h(`span.dot.state-${s.state}`, { 'aria-hidden': 'true' }),
        h('span.side-name', s.name || s.id),
        h('span.side-time', relTime(s.last_activity || s.created_at)))));
    this.sideList.replaceChildren(...(items.length ? items : [h('li.muted.pad', 'No sessions yet.')]));
  }

  renderHome() {
    const idField = h('input.text-input', { name: 'session_id', placeholder: 'id (optional)', 'aria-label': 'Session id', spellcheck: false, autocomplete: 'off' });
    const nameField = h('input.text-input', { name: 'name', placeholder: 'name (optional)', 'aria-label': 'Session name', autocomplete: 'off' });
    const num = (name, label, ph) => h('label.field', h('span', label), h('input.text-input.num', { name, type: 'number', min: 0, step: 'any', placeholder: ph, 'aria-label': label }));
    const limits = h('details.limits', h('summary', 'Budget limits and sandbox'),
      h('div.limit-grid',
        num('iteration_limit', 'iteration limit', 'none'),
        num('cost_cap_cents', 'cost cap (cents)', 'none'),
        num('duration_limit_seconds', 'duration limit (s)', 'none'),
        num('timeout_seconds', 'sandbox timeout (s)', 'default'),
        h('label.field.check', h('input', { type: 'checkbox', name: 'network' }), h('span', 'network access'))));
    const form = h('form.create', { onsubmit: (e) => { e.preventDefault(); this.create(form); }, 'aria-label': 'New session' },
      h('div.row', idField, nameField, h('button.btn.primary', { type: 'submit' }, '+ Create session')), limits);
    this.createForm = form;
    this.homeSig = null;
    this.homeTable = h('div.sessions-table');
    const home = h('div.home', { 'data-testid': 'home' });
    const archive = archiveDrop(home, (s) => { this.sessionUpdated(s); this.open(s.id); });
    home.append(
      h('div.home-head', h('h1', 'Sessions'), h('span.muted', 'Each session has its own Python kernel; variables and files are saved after every turn.')),
      form,
      h('p.muted.small-print', h('button.btn.small', { title: 'Make a new session of an archive exported from any carryover server (or drop the file here)', 'data-testid': 'archive-import', onclick: () => archive.click() }, 'Import archive…'),
        ' or drop a .carryover.tar on this page', archive),
      this.homeTable);
    this.main.replaceChildren(home);
    this.renderHomeTable();
    this.refreshList();
  }

  renderHomeTable() {
    const list = this.sessions;
    // polling re-renders: skip when nothing changed, keep the focused row focused otherwise
    const sig = JSON.stringify([Math.floor(Date.now() / 30000), list.map((s) => [s.id, s.name, s.state, s.sandbox?.status, s.budget, s.budget_consumed, s.last_activity])]);
    if (sig === this.homeSig && this.homeTable.firstChild) return;
    this.homeSig = sig;
    const focused = document.activeElement?.closest?.('tr[data-id]')?.dataset.id;
    if (!list.length) {
      this.homeTable.replaceChildren(h('div.empty-cells', 'No sessions yet: create one above (or press n).'));
      return;
    }
    const rows = list.map((s) => {
      const tr = h('tr', { tabindex: 0, 'data-id': s.id,
        onkeydown: (e) => {
          if (e.target !== tr) return;
          if (e.key === 'Enter') this.open(s.id);
          else if (e.key === 'Delete' || e.key === 'Backspace') this.remove(s);
          else if (e.key === 'ArrowDown' || e.key === 'j') { e.preventDefault(); tr.nextElementSibling?.focus(); }
          else if (e.key === 'ArrowUp' || e.key === 'k') { e.preventDefault(); tr.previousElementSibling?.focus(); }
        },
        ondblclick: () => this.open(s.id) },
      h('td', h('a.sess-link', { href: `#/s/${encodeURIComponent(s.id)}`, tabindex: -1 }, s.name || s.id), s.name && s.name !== s.id ? h('div.muted.mono.small-print', s.id) : null),
      h('td', stateBadge(s.state)),
      h('td', sandboxBadge(s.sandbox)),
      h('td.budget-cell', budgetMeter(s, true)),
      h('td.muted', { title: localTime(s.last_activity) }, relTime(s.last_activity || s.created_at)),
      h('td.muted', { title: localTime(s.created_at) }, relTime(s.created_at)),
      h('td.actions', h('button.btn.small.danger', { title: `Delete ${s.id}`, onclick: () => this.remove(s) }, 'Delete')));
      return tr;
    });
    this.homeTable.replaceChildren(h('table.sessions',
      h('thead', h('tr', ['session', 'state', 'sandbox', 'budget used', 'last activity', 'created', ''].map((t) => h('th', t)))),
      h('tbody', rows)));
    if (focused) this.homeTable.querySelector(`tr[data-id="${CSS.escape(focused)}"]`)?.focus();
  }

  async create(form) {
    const f = new FormData(form);
    const body = {};
    const id = String(f.get('session_id') || '').trim();
    const name = String(f.get('name') || '').trim();
    if (id) {
      if (!ID_RE.test(id)) { toast('error', 'Invalid session id', 'Use letters, digits, "_", "." and "-" (starting with a letter or digit), at most 128.'); return; }
      body.session_id = id;
    }
    if (name) body.name = name;
    const budget = {};
    for (const k of ['iteration_limit', 'cost_cap_cents', 'duration_limit_seconds']) {
      const v = f.get(k);
      if (v !== null && v !== '') budget[k] = Number(v);
    }
    if (Object.keys(budget).length) body.budget = budget;
    const sandbox = {};
    if (f.get('timeout_seconds')) sandbox.timeout_seconds = Number(f.get('timeout_seconds'));
    if (f.get('network')) sandbox.network = true;
    if (Object.keys(sandbox).length) body.sandbox = sandbox;
    const btn = form.querySelector('button[type=submit]');
    btn.disabled = true;
    try {
      const ans = await api('POST', '/api/sessions', { json: body });
      toast('ok', `Created ${ans.session.id}`, '');
      this.sessionUpdated(ans.session);
      this.open(ans.session.id);
    } catch (err) {
      showError('Creating the session failed', err);
    } finally {
      btn.disabled = false;
    }
  }

  async quickCreate() {
    try {
      const ans = await api('POST', '/api/sessions', { json: {} });
      this.sessionUpdated(ans.session);
      this.open(ans.session.id);
    } catch (err) {
      showError('Creating a session failed', err);
    }
  }

  async remove(s) {
    if (!await confirmDialog(`Delete session "${s.name || s.id}"? Its kernel is stopped and its history, checkpoints and files are removed for good.`, 'Delete')) return;
    try {
      await api('DELETE', sessionPath(s.id));
      toast('ok', `Deleted ${s.id}`, '');
      this.sessions = this.sessions.filter((x) => x.id !== s.id);
      if (this.currentId === s.id) location.hash = '#/';
      this.renderSide();
      if (!this.currentId && this.homeTable) this.renderHomeTable();
    } catch (err) {
      showError(`Deleting ${s.id} failed`, err);
    }
  }

  // ---- layout toggles and keys ----

  toggleSidebar() {
    if (matchMedia('(max-width: 1100px)').matches) {
      // narrow screens: the list slides over the page instead of taking a column
      document.body.classList.toggle('show-sidebar');
      return;
    }
    const hidden = document.body.classList.toggle('no-sidebar');
    localStorage.setItem('carryover.sidebar', hidden ? 'hidden' : 'shown');
  }

  togglePanel() {
    if (!this.view) return;
    this.panel.hidden = !this.panel.hidden;
    localStorage.setItem('carryover.panel', this.panel.hidden ? 'hidden' : 'shown');
  }

  onKey(e) {
    if (e.key === 'Escape' && closeOverlays()) { e.preventDefault(); return; }
    if (!document.getElementById('confirm').hidden) return;
    if (!document.getElementById('help').hidden) return;
    if (isTyping(e.target)) return;
    if (e.key === '?' && !e.ctrlKey && !e.metaKey) { e.preventDefault(); openHelp(); return; }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === '[') { this.toggleSidebar(); return; }
    if (e.key === ']') { this.togglePanel(); return; }
    if (this.view) {
      if (this.view.keydown(e)) e.preventDefault();
      return;
    }
    if (e.key === 'n') { e.preventDefault(); this.createForm?.querySelector('input')?.focus(); return; }
    if ((e.key === 'ArrowDown' || e.key === 'j') && !e.target.closest?.('tr')) {
      e.preventDefault();
      this.homeTable?.querySelector('tbody tr')?.focus();
    }
  }
}

window.addEventListener('unhandledrejection', (e) => {
  showError('Unexpected error', e.reason instanceof Error ? e.reason : new Error(String(e.reason)));
});

new App().start();
