// The pure parts of the checkpoints panel (no DOM): the order of the list and which entries show their
// variables unfolded. panels.js draws the list with them; unit/checkpoints.test.mjs tests them.

/** sortCheckpoints: newest first (highest turn, then the latest created_at); the input is not changed. */
export function sortCheckpoints(list) {
  return [...list].sort((a, b) => (b.turn ?? 0) - (a.turn ?? 0) || String(b.created_at).localeCompare(String(a.created_at)));
}

/** checkpointKey: what an entry of the list shows (but its age and "latest" pill, updated in place);
 *  an entry whose key is unchanged is kept as it is on a re-render, focus and all. */
export function checkpointKey(c, names) {
  return JSON.stringify([c.id, c.turn ?? null, c.files ?? 0, c.bytes ?? 0, names]);
}

/**
 * FoldState decides whether a checkpoint's variable list is unfolded. By default the newest checkpoint
 * of the list shown is open and every older one folded; a checkpoint the user opened or closed by hand
 * keeps that choice (per id) whatever arrives later. The default depends on the list alone (not on the
 * session's last_checkpoint, fetched separately, which can lag it), and only the user's own actions are
 * recorded: the panel opening the newest by default is never taken for a choice, so that checkpoint
 * folds when a newer one arrives.
 */
export class FoldState {
  constructor() {
    this.chosen = new Map(); // checkpoint id -> open (true) or closed (false) by the user
  }

  /** isOpen: the user's choice for id, or else whether id is the newest one listed. */
  isOpen(id, newestId) {
    return this.chosen.has(id) ? this.chosen.get(id) : id === newestId;
  }

  /** choose records that the user opened (true) or closed (false) the checkpoint id. */
  choose(id, open) {
    this.chosen.set(id, Boolean(open));
  }

  /** keepOnly forgets the choices about checkpoints no longer listed. */
  keepOnly(ids) {
    const keep = new Set(ids);
    for (const id of this.chosen.keys()) if (!keep.has(id)) this.chosen.delete(id);
  }
}

/**
 * replayNote: what a restore rebuilt by replay, and what it could not, in one line each for the
 * notebook (null when the restore replayed nothing). payload is a checkpoint_restored event's (a
 * restore result, or {restore: result} for a restore the user asked for).
 */
export function replayNote(payload) {
  const r = (payload && (payload.restore || payload)) || {};
  // verified: what of the saved fingerprint the rebuilt value matched (absent for checkpoints saved
  // before fingerprints were kept).
  const rebuilt = (r.recomputed || []).map((x) =>
    `${x.name} (turn ${x.turn}, ${Math.round(x.ms)} ms${x.verified ? `, matched the saved ${x.verified}` : ''})`);
  const missed = (r.not_replayed || []).map((x) => `${x.name}: ${String(x.reason || '').replace(/^not replayed: /, '')}`);
  if (!rebuilt.length && !missed.length) return null;
  return {
    rebuilt: rebuilt.length ? `recomputed by replaying their turns: ${rebuilt.join(', ')}` : null,
    missed: missed.length ? `not rebuilt: ${missed.join('; ')}` : null,
  };
}

const names = (xs, n = 6) => (xs.length > n ? `${xs.slice(0, n).join(', ')} and ${xs.length - n} more` : xs.join(', '));

/**
 * restoreSummary says in one paragraph what a restore report (a checkpoint_restored event's payload)
 * restored: the checkpoint's turn, the variables back, what failed or was never saved, what replay
 * rebuilt and the files. It is the text of the toast after a kernel's death.
 */
export function restoreSummary(payload) {
  const r = (payload && (payload.restore || payload)) || {};
  const restored = r.restored || [];
  const failed = (r.failed || []).map((x) => `${x.name} (${x.reason || 'no reason given'})`);
  const skipped = (r.skipped || []).map((x) => x.name);
  const parts = [`Checkpoint of turn ${r.turn ?? '?'}: ${restored.length ? `${restored.length} variable${restored.length === 1 ? '' : 's'} back (${names(restored)})` : 'no variables'}`];
  if (r.files != null) parts.push(`${r.files} file${r.files === 1 ? '' : 's'}`);
  const n = replayNote(r);
  if (n?.rebuilt) parts.push(n.rebuilt);
  if (failed.length) parts.push(`not restored: ${names(failed, 3)}`);
  if (n?.missed) parts.push(n.missed);
  if (skipped.length) parts.push(`never saved: ${names(skipped)}`);
  return `${parts.join('; ')}.`;
}
