// Portable sessions in the UI: a session's archive downloaded (GET .../export) and an archive made
// into a new session (POST /api/sessions/import) from a file picked or dropped on the session list.
// docs/export-format.md has the format; the server verifies an archive whole before it commits.

import { api, sessionPath } from './api.js';
import { h } from './util.js';
import { toast, showError } from './ui.js';

/** exportArchive downloads session id's archive (its current state) as <id>.carryover.tar. */
export async function exportArchive(id) {
  try {
    const res = await api('GET', sessionPath(id, '/export'), { raw: true, headers: { Accept: 'application/x-tar' } });
    const url = URL.createObjectURL(await res.blob());
    const a = h('a', { href: url, download: `${id}.carryover.tar` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    showError('Exporting the session failed', err);
  }
}

/** importArchive makes a new session of file (an archive; sent as the browser reads it) and
 * answers it, or null when the server refused it (the reason is shown). */
export async function importArchive(file) {
  try {
    const ans = await api('POST', '/api/sessions/import', { body: file, headers: { 'Content-Type': 'application/x-tar' } });
    const warn = ans.warnings?.length ? ` (${ans.warnings.join('; ')})` : '';
    toast('ok', `Imported ${ans.session.id}`, `from ${ans.source.session_id}, turn ${ans.source.turn}${warn}`);
    return ans.session;
  } catch (err) {
    showError(`Importing ${file.name} failed`, err);
    return null;
  }
}

/** archiveDrop makes el take a dropped file (or one picked with the input it answers) and hands
 * the session imported from it to done. */
export function archiveDrop(el, done) {
  const take = async (file) => {
    if (!file) return;
    el.classList.add('importing');
    try {
      const s = await importArchive(file);
      if (s) done(s);
    } finally {
      el.classList.remove('importing');
    }
  };
  el.addEventListener('dragover', (e) => {
    if (![...(e.dataTransfer?.types || [])].includes('Files')) return;
    e.preventDefault();
    el.classList.add('drop-over');
  });
  el.addEventListener('dragleave', () => el.classList.remove('drop-over'));
  el.addEventListener('drop', (e) => {
    el.classList.remove('drop-over');
    if (!e.dataTransfer?.files?.length) return;
    e.preventDefault();
    take(e.dataTransfer.files[0]);
  });
  const input = h('input', { type: 'file', accept: '.tar,application/x-tar', hidden: true, 'data-testid': 'archive-input', 'aria-label': 'Session archive' });
  input.addEventListener('change', () => { const f = input.files[0]; input.value = ''; take(f); });
  return input;
}
