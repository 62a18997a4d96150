// The side panel of a session: workspace files, checkpoints (with restore), the live event log and
// the session's details (sandbox, budget, lifecycle buttons).

import { api, sessionPath, filePath, getToken } from './api.js';
import { h, fill, icon, formatBytes, relTime, localTime } from './util.js';
import { toast, showError, confirmDialog, stateBadge, sandboxBadge, budgetMeter } from './ui.js';
import { VariablesPanel, DiffBox } from './inspector.js';
import { exportArchive } from './portable.js';
import { sortCheckpoints, checkpointKey, FoldState } from './checkpoints.js';

const TABS = ['files', 'checkpoints', 'variables', 'events', 'info'];
const EVENTS_PAGE = 200; // events asked for at a time: the newest page at opening, then older ones on request
const EVENTS_SHOWN = 300; // the newest events the list draws (raised by each older page asked for)

const EVENT_CLASS = [
  [/failed|died|exceeded|cancelled/, 'ev-bad'],
  [/warning|skipped/, 'ev-warn'],
  [/started|created|completed|resumed|restored/, 'ev-good'],
];

/** summarize renders an event payload as "key: value · key: value" (values compact JSON). */
function summarize(p) {
  if (!p || typeof p !== 'object' || !Object.keys(p).length) return '';
  return Object.entries(p).map(([k, v]) => {
    if (Array.isArray(v) && v.length && v.every((x) => x && typeof x === 'object' && 'name' in x)) {
      v = v.map((x) => x.name + (x.reason ? ` (${x.reason})` : '')).join(', ');
    }
    return `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`;
  }).join(' · ');
}

export class Panels {
  constructor(view, root) {
    this.view = view;
    this.root = root;
    this.events = [];
    this.seen = new Set(); // the sequence numbers listed (kept when old ones leave the list: told once)
    this.lastSeq = 0;
    this.listed = false; // the first page of the log was asked for: subscribing waits for it
    this.listedTo = null; // the newest event that first page listed: later ones happened while the page was open
    this.evShown = EVENTS_SHOWN; // how many of the newest events the list draws
    this.unread = 0;
    this.timers = {};
    this.folds = new FoldState(); // which checkpoints show their variables (kept across re-renders)
    this.ckptItems = new Map(); // checkpoint id -> its entry in the list {key, li, age, pill, vars}
    this.files = this.root.querySelector('[data-panel=files]');
    this.ckpts = this.root.querySelector('[data-panel=checkpoints]');
    this.evs = this.root.querySelector('[data-panel=events]');
    this.info = this.root.querySelector('[data-panel=info]');
    this.vars = new VariablesPanel(view, this.root.querySelector('[data-panel=variables]'));
    this.tabs = Array.from(this.root.querySelectorAll('[role=tab]'));
    this.onTab = (e) => { const t = e.target.closest('[role=tab]'); if (t) this.show(t.dataset.tab); };
    this.onTabKey = (e) => {
      const i = this.tabs.indexOf(document.activeElement);
      if (i < 0 || (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft')) return;
      const n = this.tabs[(i + (e.key === 'ArrowRight' ? 1 : -1) + this.tabs.length) % this.tabs.length];
      n.focus();
      this.show(n.dataset.tab);
    };
    this.root.querySelector('.tabs').addEventListener('click', this.onTab);
    this.root.querySelector('.tabs').addEventListener('keydown', this.onTabKey);
    this.root.hidden = localStorage.getItem('carryover.panel') === 'hidden';
    this.buildFiles();
    this.buildCheckpoints();
    this.buildEvents();
    this.info.replaceChildren(h('div.muted.pad', 'Loading…'));
    this.show(localStorage.getItem('carryover.tab') || 'files', true);
    this.refreshFiles();
    this.refreshCheckpoints();
    this.vars.refresh();
    this.loadEvents();
  }

  destroy() {
    Object.values(this.timers).forEach(clearTimeout);
    cancelAnimationFrame(this.evFrame);
    this.root.querySelector('.tabs').removeEventListener('click', this.onTab);
    this.root.querySelector('.tabs').removeEventListener('keydown', this.onTabKey);
    for (const p of [this.files, this.ckpts, this.evs, this.info, this.vars.root]) p.replaceChildren();
  }

  show(tab, quiet) {
    if (!TABS.includes(tab)) tab = 'files';
    this.current = tab;
    if (!quiet) {
      this.root.hidden = false;
      localStorage.setItem('carryover.panel', 'shown');
    }
    localStorage.setItem('carryover.tab', tab);
    for (const t of this.tabs) {
      const on = t.dataset.tab === tab;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
    }
    for (const p of this.root.querySelectorAll('[role=tabpanel]')) p.hidden = p.dataset.panel !== tab;
    if (tab === 'events') { this.unread = 0; this.renderUnread(); }
    if (!quiet) this.root.querySelector(`[data-tab=${tab}]`).focus();
  }

  soon(name, fn, ms = 400) {
    clearTimeout(this.timers[name]);
    this.timers[name] = setTimeout(fn, ms);
  }

  refreshFilesSoon() { this.soon('files', () => this.refreshFiles()); }
  refreshCheckpointsSoon() {
    this.soon('ckpts', () => this.refreshCheckpoints(), 600);
    this.soon('vars', () => this.vars.refresh(), 700);
  }

  // ---- files ----

  buildFiles() {
    this.fileInput = h('input', { type: 'file', multiple: true, hidden: true, 'data-testid': 'file-input' });
    this.fileInput.addEventListener('change', () => { this.upload(Array.from(this.fileInput.files)); this.fileInput.value = ''; });
    this.dirInput = h('input.small-input', { type: 'text', placeholder: 'workspace root', 'aria-label': 'Upload into folder', spellcheck: false });
    this.fileList = h('div.file-list');
    const drop = h('div.dropzone', { tabindex: 0, role: 'button',
      onclick: () => this.fileInput.click(),
      onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.fileInput.click(); } },
    }, h('b', 'Upload'), ' — click or drop files here');
    for (const ev of ['dragenter', 'dragover']) drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('over'); });
    for (const ev of ['dragleave', 'drop']) drop.addEventListener(ev, () => drop.classList.remove('over'));
    drop.addEventListener('drop', (e) => { e.preventDefault(); this.upload(Array.from(e.dataTransfer.files)); });
    this.files.replaceChildren(
      h('div.panel-head', h('span', 'Workspace ', h('code', '/workspace')), h('button.icon-btn', { title: 'Refresh the file list', 'aria-label': 'Refresh', onclick: () => this.refreshFiles() }, icon('refresh'))),
      h('div.upload-row', drop, h('label.upload-dir', h('span', 'into folder'), this.dirInput), this.fileInput),
      this.fileList);
  }

  async refreshFiles() {
    try {
      const ans = await api('GET', sessionPath(this.view.id, '/files'));
      this.renderFiles(ans?.files || []);
    } catch (err) {
      this.fileList.replaceChildren(h('div.panel-error', `Cannot list files: ${err.code}: ${err.message}`));
      showError('Listing files failed', err);
    }
  }

  renderFiles(files) {
    if (!files.length) {
      this.fileList.replaceChildren(h('div.muted.pad', 'No files yet. Upload some, or write them from code (open("notes.txt", "w")).'));
      return;
    }
    files.sort((a, b) => a.path.localeCompare(b.path));
    this.fileList.replaceChildren(h('table.files', h('thead', h('tr', h('th', 'path'), h('th.num', 'size'), h('th', 'modified'), h('th', h('span.sr', 'actions')))),
      h('tbody', files.map((f) => h('tr', { 'data-path': f.path },
        h('td.path', h('button.linklike', { title: `Download ${f.path}`, onclick: () => this.download(f.path) }, f.path)),
        h('td.num', formatBytes(f.size)),
        h('td.muted', { title: localTime(f.modified_at) }, relTime(f.modified_at)),
        h('td.actions',
          h('button.icon-btn', { title: `Insert code that reads ${f.path}`, 'aria-label': `Use ${f.path} in code`, onclick: () => this.insertRead(f.path) }, icon('insert')),
          h('button.icon-btn', { title: `Download ${f.path}`, 'aria-label': `Download ${f.path}`, onclick: () => this.download(f.path) }, icon('download')),
          h('button.icon-btn.danger', { title: `Delete ${f.path}`, 'aria-label': `Delete ${f.path}`, onclick: () => this.remove(f.path) }, icon('trash'))))))));
  }

  insertRead(path) {
    const c = this.view.composer;
    const p = JSON.stringify(path);
    const code = /\.csv$/i.test(path) ? `import pandas as pd\ndf = pd.read_csv(${p})\ndf.head()` :
      /\.json$/i.test(path) ? `import json\nwith open(${p}) as f:\n    data = json.load(f)\ndata` :
        `with open(${p}) as f:\n    text = f.read()\nprint(text[:2000])`;
    c.value = (c.value.trim() ? c.value.replace(/\s*$/, '\n') : '') + code;
    c.focus(true);
  }

  async upload(list) {
    if (!list.length) return;
    const dir = this.dirInput.value.trim().replace(/^\/+|\/+$/g, '');
    for (const file of list) {
      const path = dir ? `${dir}/${file.name}` : file.name;
      const t = toast('info', `Uploading ${path}`, formatBytes(file.size));
      try {
        await api('PUT', filePath(this.view.id, path), { body: file, headers: { 'Content-Type': 'application/octet-stream' } });
        t.remove();
        toast('ok', `Uploaded ${path}`, formatBytes(file.size));
      } catch (err) {
        t.remove();
        showError(`Uploading ${path} failed`, err);
      }
    }
    this.refreshFiles();
  }

  async download(path) {
    try {
      const res = await api('GET', filePath(this.view.id, path), { raw: true, headers: { Accept: '*/*' } });
      const blob = await res.blob();
      const url = URL.createObjectURL(blob);
      const a = h('a', { href: url, download: path.split('/').pop() });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      showError(`Downloading ${path} failed`, err);
    }
  }

  async remove(path) {
    if (!await confirmDialog(`Delete ${path} from the workspace? It is also gone from the next checkpoint (older checkpoints keep it).`, 'Delete')) return;
    try {
      await api('DELETE', filePath(this.view.id, path));
      toast('ok', `Deleted ${path}`, '');
    } catch (err) {
      showError(`Deleting ${path} failed`, err);
    }
    this.refreshFiles();
  }

  // ---- checkpoints ----

  buildCheckpoints() {
    this.ckptList = h('div.ckpt-list');
    this.diff = new DiffBox(this.view);
    this.ckpts.replaceChildren(
      h('div.panel-head', h('span', 'Checkpoints'),
        h('span', h('button.btn.small', { title: 'Take a checkpoint now (POST /checkpoint)', onclick: () => this.checkpointNow() }, 'Checkpoint now'),
          h('button.icon-btn', { title: 'Refresh the list', 'aria-label': 'Refresh', onclick: () => this.refreshCheckpoints() }, icon('refresh')))),
      h('p.muted.pad-x', 'Every turn saves the namespace and the workspace. Restore puts the session back to that turn (variables and files); Fork makes a new session from it.'),
      this.diff.el, this.ckptList);
  }

  async refreshCheckpoints() {
    try {
      const ans = await api('GET', sessionPath(this.view.id, '/checkpoints'));
      this.renderCheckpoints(ans?.checkpoints || []);
    } catch (err) {
      this.ckptList.replaceChildren(h('div.panel-error', `Cannot list checkpoints: ${err.code}: ${err.message}`));
      showError('Listing checkpoints failed', err);
    }
  }

  /**
   * renderCheckpoints draws the list newest first. It runs again whenever a checkpoint arrives, so it
   * keeps what the user did: an entry whose content is unchanged stays the same element (its fold
   * state, and the focus if it is inside it, survive), and the fold state of every entry comes from
   * this.folds (the newest open, older ones folded, except those the user opened or closed by hand).
   */
  renderCheckpoints(list) {
    if (!list.length) {
      this.ckptItems = new Map();
      this.ckptList.replaceChildren(h('div.muted.pad', 'No checkpoint yet: one is taken after every turn.'));
      return;
    }
    const sorted = sortCheckpoints(list);
    const newest = sorted[0].id;
    this.diff.setList(sorted);
    this.folds.keepOnly(sorted.map((c) => c.id));
    let ol = this.ckptList.querySelector(':scope > ol.ckpts');
    if (!ol) {
      ol = h('ol.ckpts');
      this.ckptList.replaceChildren(ol);
      this.ckptItems = new Map();
    }
    const items = new Map();
    sorted.forEach((c, i) => {
      const names = (c.variables || []).map((v) => (typeof v === 'string' ? v : v.name)).filter(Boolean);
      const key = checkpointKey(c, names);
      let item = this.ckptItems.get(c.id);
      if (!item || item.key !== key) item = this.ckptItem(c, names, key);
      item.age.textContent = relTime(c.created_at);
      item.age.title = localTime(c.created_at);
      if (item.vars) item.vars.open = this.folds.isOpen(c.id, newest);
      items.set(c.id, item);
      // moves only what is out of place: a checkpoint arriving is inserted, the others stay put
      if (ol.children[i] !== item.li) ol.insertBefore(item.li, ol.children[i] || null);
    });
    while (ol.children.length > sorted.length) ol.lastElementChild.remove();
    this.ckptItems = items;
    this.markLatestCheckpoint();
  }

  /** markLatestCheckpoint moves the "latest" pill to the session's last checkpoint (the session is
   *  fetched apart from the list: this runs again when it arrives). */
  markLatestCheckpoint() {
    const latest = this.view.session?.last_checkpoint?.id;
    for (const [id, item] of this.ckptItems || []) item.pill.hidden = id !== latest;
  }

  /** ckptItem builds one entry of the list. */
  ckptItem(c, names, key) {
    const age = h('span.muted');
    const pill = h('span.pill.small', { hidden: true }, 'latest');
    const vars = this.varList(c, names);
    const li = h('li.ckpt-item', { 'data-id': c.id },
      h('div.ckpt-row',
        h('span.ckpt-turn', `turn ${c.turn ?? '?'}`),
        pill,
        age,
        h('span.spacer'),
        h('button.btn.small', { title: `Make a new session from the checkpoint of turn ${c.turn}`, 'data-testid': 'fork', onclick: () => this.fork(c) }, 'Fork'),
        h('button.btn.small', { title: `Restore the session to turn ${c.turn}`, onclick: () => this.restore(c) }, 'Restore')),
      h('div.ckpt-sub.muted', { 'data-testid': 'ckpt-sub' },
        `${names.length} variable${names.length === 1 ? '' : 's'} · ${c.files ?? 0} file${c.files === 1 ? '' : 's'} · `,
        h('span', { title: 'bytes newly written for this checkpoint (unchanged values are shared with earlier ones)' }, formatBytes(c.bytes ?? 0))),
      vars);
    return { key, li, age, pill, vars: vars.tagName === 'DETAILS' ? vars : null };
  }

  /** varList: the checkpoint's variable names, a one-line preview that expands to all of them. Only a
   *  click on its summary (mouse, or Enter/Space on it) is recorded as the user's choice: the toggle
   *  event would also report the panel's own default, asynchronously. */
  varList(c, names) {
    if (!names.length) return h('div.ckpt-vars.muted', 'no variables');
    const sortedNames = [...names].sort((a, b) => a.localeCompare(b));
    const preview = sortedNames.slice(0, 6).join(', ') + (sortedNames.length > 6 ? ` +${sortedNames.length - 6}` : '');
    const d = h('details.ckpt-vars', { 'data-testid': 'ckpt-vars' },
      h('summary', {
        title: `variables in the checkpoint of turn ${c.turn}`,
        onclick: (e) => { if (!e.defaultPrevented) this.folds.choose(c.id, !d.open); },
      }, h('span.ckpt-vars-preview', preview), h('span.ckpt-vars-label', `${sortedNames.length} variable${sortedNames.length === 1 ? '' : 's'}`)),
      h('ul.var-chips', { 'aria-label': `Variables of turn ${c.turn}` }, sortedNames.map((n) => h('li', h('code', n)))));
    return d;
  }

  async restore(c) {
    if (!await confirmDialog(`Restore the session to turn ${c.turn}? Variables and workspace files go back to that checkpoint; later changes are replaced (later checkpoints stay in the list).`, 'Restore')) return;
    try {
      await api('POST', sessionPath(this.view.id, `/checkpoints/${encodeURIComponent(c.id)}/restore`));
      toast('ok', `Restored to turn ${c.turn}`, 'Variables and files are back to that checkpoint.');
      this.view.addMarker(`restored to the checkpoint of turn ${c.turn}`);
    } catch (err) {
      showError(`Restoring turn ${c.turn} failed`, err);
    }
    this.refreshCheckpoints();
    this.refreshFiles();
    this.view.refreshSessionSoon();
  }

  async fork(c) {
    try {
      const ans = await api('POST', sessionPath(this.view.id, '/fork'), { json: { checkpoint_id: c.id } });
      toast('ok', `Forked turn ${c.turn}`, `New session ${ans.session.id}: its variables and files are those of this checkpoint.`);
      this.view.app.sessionUpdated(ans.session);
      this.view.app.open(ans.session.id);
    } catch (err) {
      showError(`Forking turn ${c.turn} failed`, err);
    }
  }

  async checkpointNow() {
    const ans = await this.view.lifecycle('checkpoint');
    if (ans) this.refreshCheckpoints();
  }

  // ---- events ----

  buildEvents() {
    this.evList = h('ol.events', { 'aria-live': 'polite' });
    this.evFilter = h('input.small-input', { type: 'search', placeholder: 'filter by type', 'aria-label': 'Filter events', oninput: () => this.renderEvents() });
    this.evOlder = h('button.btn.small.ev-older', { hidden: true, 'data-testid': 'events-older', title: 'List the events before these', onclick: () => this.loadOlderEvents() }, 'Older events');
    this.evs.replaceChildren(h('div.panel-head', h('span', 'Events ', h('span.muted.live-dot', '● live')), this.evFilter), this.evList, this.evOlder);
  }

  /**
   * loadEvents lists the newest page of the log (GET /events?order=desc), then subscribes after it:
   * a session with thousands of events opens with its end, and the socket's backlog holds only what
   * happened between the two (the oldest-first page it asked for before left all the rest to it).
   */
  async loadEvents() {
    try {
      const ans = await api('GET', sessionPath(this.view.id, `/events?order=desc&limit=${EVENTS_PAGE}`));
      this.addOlder(ans?.events || []);
      this.listedTo = this.lastSeq;
    } catch (err) {
      this.evList.replaceChildren(h('li.panel-error', `Cannot load events: ${err.code}: ${err.message}`));
      showError('Loading events failed', err);
    }
    this.listed = true;
    this.subscribeEvents();
  }

  /**
   * isNews says whether an event is told (toasted, counted unread): a live one is; one of a
   * subscription's backlog is when it is newer than what the page listed at its opening, as the
   * events missed while the socket was down (a kernel that died while the laptop slept).
   */
  isNews(ev, backlog) {
    return !backlog || (this.listedTo != null && ev?.sequence_number > this.listedTo);
  }

  /** loadOlderEvents lists the page of events before the oldest listed one, and draws them too. */
  async loadOlderEvents() {
    this.evOlder.disabled = true;
    try {
      const ans = await api('GET', sessionPath(this.view.id, `/events?order=desc&limit=${EVENTS_PAGE}&before_sequence=${this.events[0]?.sequence_number ?? 0}`));
      this.evShown += ans?.events?.length || 0;
      this.addOlder(ans?.events || []);
    } catch (err) {
      showError('Loading older events failed', err);
    } finally {
      this.evOlder.disabled = false;
    }
  }

  /** addOlder lists a page of events older than the listed ones (newest first, as order=desc answers). */
  addOlder(page) {
    for (const ev of page) this.addEvent(ev, true);
    this.evOlder.hidden = !(page.length === EVENTS_PAGE && (this.events[0]?.sequence_number ?? 1) > 1);
    this.renderEvents();
  }

  /** subscribeEvents asks the socket for the events after the last listed one, then live ones. */
  subscribeEvents() {
    if (!this.listed) return; // loadEvents subscribes once the page is listed
    // the panel says when the page hears events live (a test waits for it before a kill)
    if (this.view.socket?.send({ type: 'subscribe_events', after_sequence: this.lastSeq })) this.evs.dataset.subscribed = 'true';
  }

  /**
   * addEvent lists an event; false when it was listed already (or is not one), true when new. A
   * subscription's backlog can bring thousands at once: each is O(1) here and the list is drawn once
   * per frame, not once per event. An old event (logged before the page opened: not isNews) is
   * listed but not counted unread.
   */
  addEvent(ev, quiet, old = false) {
    if (!ev || ev.sequence_number == null || this.seen.has(ev.sequence_number)) return false;
    this.seen.add(ev.sequence_number);
    const last = this.events[this.events.length - 1];
    if (last && last.sequence_number > ev.sequence_number) {
      // an older page's event (newest first): in its place, found by halving; nothing is dropped
      let lo = 0, hi = this.events.length;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (this.events[mid].sequence_number < ev.sequence_number) lo = mid + 1; else hi = mid; }
      this.events.splice(lo, 0, ev);
    } else {
      this.events.push(ev);
      // a long-lived page keeps what it draws and a margin; the older pages it was asked for stay
      const keep = Math.max(1500, this.evShown + 200);
      if (this.events.length > keep) this.events.splice(0, this.events.length - keep);
    }
    this.lastSeq = Math.max(this.lastSeq, ev.sequence_number);
    if (!quiet) {
      if (!old && (this.current !== 'events' || this.root.hidden)) this.unread++; // unread: what happened while watching
      this.drawEventsSoon();
    }
    return true;
  }

  /** drawEventsSoon draws the list and the unread count at the next frame (once for many events). */
  drawEventsSoon() {
    if (this.evFrame) return;
    this.evFrame = requestAnimationFrame(() => {
      this.evFrame = 0;
      this.renderUnread();
      this.renderEvents();
    });
  }

  renderUnread() {
    const b = document.getElementById('events-unread');
    b.hidden = !this.unread;
    b.textContent = this.unread > 99 ? '99+' : String(this.unread);
  }

  renderEvents() {
    this.evList.dataset.draws = String(Number(this.evList.dataset.draws || 0) + 1); // how often the list was drawn (a test reads it)
    const f = this.evFilter.value.trim().toLowerCase();
    const list = this.events.filter((e) => !f || (e.event_type || '').includes(f)).slice(-this.evShown).reverse();
    if (!list.length) { this.evList.replaceChildren(h('li.muted.pad', f ? 'No event of that type.' : 'No events yet.')); return; }
    this.evList.replaceChildren(...list.map((e) => {
      const t = e.event_type || '?';
      const cls = (EVENT_CLASS.find(([re]) => re.test(t)) || [null, ''])[1];
      const payload = summarize(e.payload);
      return h(`li.event${cls ? '.' + cls : ''}`,
        h('div.ev-row', h('span.ev-seq', `#${e.sequence_number}`), h('span.ev-type', t),
          h('span.muted.ev-time', { title: localTime(e.created_at) }, e.created_at ? new Date(e.created_at).toLocaleTimeString() : '')),
        payload ? (payload.length > 120
          ? h('details.ev-payload', h('summary', payload.slice(0, 110) + '…'), h('pre', JSON.stringify(e.payload, null, 2)))
          : h('div.ev-payload.mono', payload)) : null);
    }));
  }

  // ---- session info ----

  renderInfo() {
    const s = this.view.session;
    if (!s) return;
    this.markLatestCheckpoint();
    if (!this.nbInput) {
      this.nbInput = h('input', { type: 'file', accept: '.ipynb,application/x-ipynb+json,application/json', hidden: true, 'data-testid': 'nb-input', 'aria-label': 'Notebook file' });
      this.nbInput.addEventListener('change', () => { const f = this.nbInput.files[0]; this.nbInput.value = ''; if (f) this.openNotebook(f); });
    }
    const sb = s.sandbox || {};
    const row = (k, ...v) => h('tr', h('th', k), h('td', ...v));
    const paused = s.state === 'paused';
    const closed = ['completed', 'failed', 'cancelled'].includes(s.state);
    fill(this.info,
      h('div.panel-head', h('span', 'Session'), stateBadge(s.state)),
      h('table.kv',
        row('id', h('code', s.id)),
        s.name ? row('name', s.name) : null,
        row('language', s.language || 'python'),
        row('sandbox', sandboxBadge(sb), ' ', [sb.cpus && `${sb.cpus} CPU`, sb.memory, sb.network === false ? 'no network' : sb.network ? 'network' : null,
          sb.timeout_seconds ? `timeout ${sb.timeout_seconds} s` : null].filter(Boolean).join(' · ')),
        sb.started_at ? row('sandbox since', h('span', { title: localTime(sb.started_at) }, relTime(sb.started_at))) : null,
        row('created', h('span', { title: localTime(s.created_at) }, relTime(s.created_at))),
        row('last activity', h('span', { title: localTime(s.last_activity) }, relTime(s.last_activity))),
        s.last_checkpoint ? row('last checkpoint', `turn ${s.last_checkpoint.turn}`, h('span.muted', ` · ${relTime(s.last_checkpoint.created_at)}`)) : null,
        s.client_id ? row('client', h('code', s.client_id)) : null,
        s.agent_context?.working_dir ? row('working dir', h('code', s.agent_context.working_dir)) : null),
      h('h4', 'Budget'),
      budgetMeter(s, false),
      h('h4', 'Usage'),
      this.usageBox(),
      h('h4', 'Notebook'),
      h('div.btn-row',
        h('button.btn.small', { title: 'Download the history as a Jupyter notebook', 'data-testid': 'nb-download', onclick: () => this.downloadNotebook() }, icon('download'), ' Download .ipynb'),
        h('button.btn.small', { title: 'Run the code cells of an .ipynb in this session, in order', onclick: () => this.nbInput.click() }, 'Open .ipynb…'),
        this.nbInput),
      h('h4', 'Archive'),
      h('div.btn-row',
        h('button.btn.small', { title: 'Download the session (variables, files, packages, settings) as one archive another carryover server imports', 'data-testid': 'archive-export', onclick: () => exportArchive(this.view.id) }, icon('download'), ' Export archive')),
      h('h4', 'Lifecycle'),
      h('div.btn-row',
        paused ? h('button.btn.small', { onclick: () => this.view.lifecycle('resume') }, 'Resume')
          : h('button.btn.small', { disabled: closed, onclick: () => this.view.lifecycle('pause') }, 'Pause'),
        h('button.btn.small', { disabled: closed, title: 'Move to a fresh sandbox, carrying the state over', onclick: () => this.view.lifecycle('rotate') }, 'Rotate'),
        h('button.btn.small', { disabled: closed, title: 'Take a checkpoint now', onclick: () => this.checkpointNow() }, 'Checkpoint'),
        h('button.btn.small.danger', { disabled: closed, title: 'Complete the session (final checkpoint)', onclick: async () => {
          if (await confirmDialog('Stop this session? It is marked completed after a final checkpoint and cannot run code any more.', 'Stop')) this.view.lifecycle('stop', { reason: 'stopped from the UI' });
        } }, 'Stop')),
      s.data && Object.keys(s.data).length ? [h('h4', 'Data'), h('pre.kv-json', JSON.stringify(s.data, null, 2))] : null,
      h('p.muted.small-print', 'Token in use: ', h('code', getToken() ? `${getToken().slice(0, 4)}…` : 'none')));
  }
}

/** usageBox is the session's usage table, kept across re-renders of the info panel; each render
 * asks the server again (GET .../usage), one request at a time. */
Panels.prototype.usageBox = function usageBox() {
  if (!this.usageEl) this.usageEl = h('table.kv', { 'data-testid': 'usage' }, h('tr', h('td.muted', 'loading…')));
  this.loadUsage();
  return this.usageEl;
};

Panels.prototype.loadUsage = async function loadUsage() {
  if (this.usageLoading) return;
  this.usageLoading = true;
  try {
    const { usage: u } = await api('GET', sessionPath(this.view.id, '/usage'));
    const row = (k, v, title) => h('tr', { title }, h('th', k), h('td', v));
    this.usageEl.replaceChildren(
      row('CPU', `${(u.cpu_seconds ?? 0).toFixed(1)} s`, 'CPU seconds of every kernel and shell command the session had'),
      row('memory peak', formatBytes(u.memory_peak_bytes ?? 0), 'the largest resident memory any kernel of the session was seen at'),
      row('memory now', u.memory_bytes ? formatBytes(u.memory_bytes) : `none (${u.sandbox})`, "the live kernel's resident memory"),
      row('stored', `${formatBytes(u.stored_bytes ?? 0)} · ${u.checkpoints} checkpoint${u.checkpoints === 1 ? '' : 's'}`,
        'what the kept checkpoints wrote to the store (variables, workspace files), after deduplication and compression'));
  } catch (err) {
    this.usageEl.replaceChildren(h('tr', h('td.muted', `usage unavailable: ${err.message}`)));
  } finally {
    this.usageLoading = false;
  }
};

Panels.prototype.downloadNotebook = async function downloadNotebook() {
  try {
    const res = await api('GET', sessionPath(this.view.id, '/notebook'), { raw: true, headers: { Accept: 'application/x-ipynb+json' } });
    const url = URL.createObjectURL(await res.blob());
    const a = h('a', { href: url, download: `${this.view.id}.ipynb` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    showError('Downloading the notebook failed', err);
  }
};

/** openNotebook runs the code cells of an .ipynb into this session (their turns stream in as cells). */
Panels.prototype.openNotebook = async function openNotebook(file) {
  let nb;
  try {
    nb = JSON.parse(await file.text());
  } catch (err) {
    toast('error', `${file.name} is not a notebook`, `It does not parse as JSON: ${err.message}`);
    return;
  }
  const t = toast('info', `Running ${file.name}`, 'Its code cells run in order; each becomes a turn.');
  try {
    const ans = await api('POST', sessionPath(this.view.id, '/notebook'), { json: nb });
    t.remove();
    const stopped = ans.stopped_at != null ? `; stopped at cell ${ans.stopped_at} (an error)` : '';
    toast(stopped ? 'error' : 'ok', `Ran ${file.name}`, `${ans.ran} cell${ans.ran === 1 ? '' : 's'} ran${stopped}.`);
  } catch (err) {
    t.remove();
    showError(`Running ${file.name} failed`, err);
  }
  this.view.afterTurn();
};
