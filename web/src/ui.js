// Page-level pieces: toasts (errors stay until closed), the confirm dialog, the help overlay.

import { h } from './util.js';

const MAX_TOASTS = 6;

/** toast shows a message. kind: 'error' (stays until closed), 'info', 'ok' (fade after a while). */
export function toast(kind, title, message, details) {
  const box = document.getElementById('toasts');
  const close = h('button.icon-btn.toast-close', { 'aria-label': 'Dismiss', title: 'Dismiss' }, '×');
  const det = details != null && !(typeof details === 'object' && Object.keys(details).length === 0)
    ? h('details', h('summary', 'details'), h('pre', typeof details === 'string' ? details : JSON.stringify(details, null, 2)))
    : null;
  const t = h(`div.toast.${kind}`, { role: kind === 'error' ? 'alert' : 'status' },
    h('div.toast-title', title), message ? h('div.toast-msg', message) : null, det, close);
  close.onclick = () => t.remove();
  box.append(t);
  while (box.children.length > MAX_TOASTS) box.firstElementChild.remove();
  if (kind !== 'error') setTimeout(() => t.remove(), kind === 'ok' ? 3500 : 6000);
  return t;
}

/** showError renders an ApiError (or any Error) as an error toast; `what` says what failed. */
export function showError(what, err) {
  if (err && err.name === 'AbortError') return;
  console.error(what, err);
  const code = err && err.code ? err.code : 'error';
  const status = err && err.status ? ` (HTTP ${err.status})` : '';
  toast('error', `${what}: ${code}${status}`, err ? err.message : String(err), err && err.details);
}

/** confirmDialog resolves true when the user confirms. */
export function confirmDialog(text, okLabel = 'OK', danger = true) {
  const dlg = document.getElementById('confirm');
  dlg.querySelector('#confirm-text').textContent = text;
  const yes = dlg.querySelector('[data-answer=yes]');
  const no = dlg.querySelector('[data-answer=no]');
  yes.textContent = okLabel;
  yes.classList.toggle('danger', danger);
  const prev = document.activeElement;
  dlg.hidden = false;
  yes.focus();
  return new Promise((resolve) => {
    const done = (v) => {
      dlg.hidden = true;
      dlg.removeEventListener('keydown', onKey, true);
      yes.onclick = no.onclick = dlg.onclick = null;
      if (prev && prev.isConnected) prev.focus({ preventScroll: true });
      resolve(v);
    };
    const onKey = (e) => {
      if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); done(false); }
      if (e.key === 'Tab') { e.preventDefault(); (document.activeElement === yes ? no : yes).focus(); }
    };
    dlg.addEventListener('keydown', onKey, true);
    yes.onclick = () => done(true);
    no.onclick = () => done(false);
    dlg.onclick = (e) => { if (e.target === dlg) done(false); };
  });
}

export function openHelp() {
  const dlg = document.getElementById('help');
  dlg.hidden = false;
  dlg.querySelector('[data-close]').focus();
}

export function closeOverlays() {
  let closed = false;
  for (const id of ['help']) {
    const d = document.getElementById(id);
    if (!d.hidden) { d.hidden = true; closed = true; }
  }
  return closed;
}

/** stateBadge: a coloured pill for a session state. */
export function stateBadge(state) {
  return h(`span.pill.state-${state || 'unknown'}`, { title: `session state: ${state || 'unknown'}` }, state || 'unknown');
}

/** sandboxBadge: sandbox status with its resources in the title. */
export function sandboxBadge(sb) {
  const status = sb?.status || 'none';
  const bits = [sb?.cpus && `${sb.cpus} CPU`, sb?.memory, sb?.network === false ? 'no network' : sb?.network ? 'network' : null].filter(Boolean);
  return h(`span.pill.sbx-${status}`, { title: `sandbox ${sb?.id || ''} ${status}${bits.length ? ' · ' + bits.join(' · ') : ''}` }, status);
}

const fmtCents = (c) => (c == null ? '' : `$${(Number(c) / 100).toFixed(Number(c) < 10 ? 3 : 2)}`);
const fmtSecs = (s) => {
  s = Number(s);
  if (isNaN(s)) return '';
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 >= 1 ? ` ${Math.round(s % 60)} s` : ''}`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
};

/** budgetRows: [{label, used, limit, text, frac}] for a session's budget and consumption. */
export function budgetRows(s) {
  const b = s.budget || {};
  const c = s.budget_consumed || {};
  const row = (label, used, limit, fmt) => ({
    label, used, limit,
    text: limit ? `${fmt(used || 0)} / ${fmt(limit)}` : `${fmt(used || 0)}`,
    frac: limit ? Math.min(1, (used || 0) / limit) : null,
  });
  return [
    row('iterations', c.iterations, b.iteration_limit, (v) => String(v ?? 0)),
    row('cost', c.cost_cents, b.cost_cap_cents, fmtCents),
    row('duration', c.duration_seconds, b.duration_limit_seconds, fmtSecs),
  ];
}

/** budgetMeter: compact budget display (three small bars with text). */
export function budgetMeter(s, compact) {
  return h(`div.budget${compact ? '.compact' : ''}`, budgetRows(s).map((r) => h('div.budget-row', {
    title: `${r.label}: ${r.text}${r.limit ? '' : ' (no limit)'}`,
  },
  h('span.budget-label', r.label),
  h('span.bar', h(`span.bar-fill${r.frac == null ? '.none' : r.frac >= 1 ? '.full' : r.frac >= 0.8 ? '.warn' : ''}`, { style: { width: `${r.frac == null ? 0 : Math.max(2, r.frac * 100)}%` } })),
  h('span.budget-text', r.text + (r.limit ? '' : compact ? '' : ' (no limit)')))));
}
