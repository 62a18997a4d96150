// Tests of the checkpoints panel's pure parts: list order and fold state (node --test unit/).
import test from 'node:test';
import assert from 'node:assert/strict';
import { sortCheckpoints, checkpointKey, FoldState } from '../src/checkpoints.js';

const ck = (id, turn, created_at = `2025-01-01T00:00:${String(turn).padStart(2, '0')}Z`) => ({ id, turn, created_at });

test('checkpoints are listed newest first, by turn then creation time, without changing the input', () => {
  const list = [ck('a', 1), ck('c', 3), ck('b', 2), ck('c2', 3, '2025-01-01T00:01:00Z')];
  assert.deepEqual(sortCheckpoints(list).map((c) => c.id), ['c2', 'c', 'b', 'a']);
  assert.deepEqual(list.map((c) => c.id), ['a', 'c', 'b', 'c2']);
});

test('by default the newest checkpoint is open and older ones folded', () => {
  const f = new FoldState();
  assert.equal(f.isOpen('c3', 'c3'), true);
  assert.equal(f.isOpen('c2', 'c3'), false);
  // a newer checkpoint arrives: the previous newest folds (the default was never a choice)
  assert.equal(f.isOpen('c4', 'c4'), true);
  assert.equal(f.isOpen('c3', 'c4'), false);
});

test("the user's choices survive newer checkpoints arriving", () => {
  const f = new FoldState();
  f.choose('c1', true); // opened an old one
  f.choose('c3', false); // closed the newest
  for (const newest of ['c3', 'c4', 'c5']) {
    assert.equal(f.isOpen('c1', newest), true, `c1 stays open with ${newest} newest`);
    assert.equal(f.isOpen('c3', newest), false, `c3 stays closed with ${newest} newest`);
    assert.equal(f.isOpen('c2', newest), false);
  }
  assert.equal(f.isOpen('c5', 'c5'), true);
  // a choice can be changed, and is kept as the user left it
  f.choose('c1', false);
  f.choose('c3', true);
  assert.equal(f.isOpen('c1', 'c5'), false);
  assert.equal(f.isOpen('c3', 'c5'), true);
});

test('choices about checkpoints no longer listed are forgotten', () => {
  const f = new FoldState();
  f.choose('gone', true);
  f.choose('kept', true);
  f.keepOnly(['kept', 'new']);
  assert.deepEqual([...f.chosen.keys()], ['kept']);
  assert.equal(f.isOpen('gone', 'new'), false);
});

test('an entry is kept on a re-render only while what it shows is unchanged', () => {
  const c = { id: 'x', turn: 2, files: 1, bytes: 10, created_at: 't' };
  assert.equal(checkpointKey(c, ['a', 'b']), checkpointKey({ ...c }, ['a', 'b']));
  assert.notEqual(checkpointKey(c, ['a', 'b']), checkpointKey(c, ['a']));
  assert.notEqual(checkpointKey(c, ['a']), checkpointKey({ ...c, bytes: 11 }, ['a']));
  assert.notEqual(checkpointKey(c, ['a']), checkpointKey({ ...c, id: 'y' }, ['a']));
});

test('a restore that replayed says what it rebuilt and what it could not', async () => {
  const { replayNote } = await import('../src/checkpoints.js');
  assert.equal(replayNote({ restored: ['x'], recomputed: [], not_replayed: [] }), null);
  const n = replayNote({ restore: {
    recomputed: [{ name: 'output', turn: 3, turns: [3, 4], ms: 4.2, verified: 'type, shape, dtype, requires_grad, grad_fn, data' },
      { name: 'loss', turn: 4, turns: [3, 4], ms: 4.2 }],
    not_replayed: [{ name: 'conn', reason: 'not replayed: turn 7 is not safe to run again: it uses the network (imports socket)' }],
  } });
  assert.equal(n.rebuilt, 'recomputed by replaying their turns: output (turn 3, 4 ms, matched the saved type, shape, dtype, requires_grad, grad_fn, data), loss (turn 4, 4 ms)');
  assert.equal(n.missed, 'not rebuilt: conn: turn 7 is not safe to run again: it uses the network (imports socket)');
});

test('restoreSummary: what the toast after a restore says, from the restore report', async () => {
  const { restoreSummary } = await import('../src/checkpoints.js');
  assert.equal(restoreSummary({ turn: 4, restored: ['a', 'b'], files: 1, failed: [{ name: 'conn', reason: 'socket' }], skipped: [{ name: 'gen' }] }),
    'Checkpoint of turn 4: 2 variables back (a, b); 1 file; not restored: conn (socket); never saved: gen.');
  assert.equal(restoreSummary({ restore: { turn: 1, restored: [], files: 0 } }), 'Checkpoint of turn 1: no variables; 0 files.');
  assert.match(restoreSummary({ turn: 2, restored: ['x'], recomputed: [{ name: 'm', turn: 2, ms: 3 }] }), /recomputed by replaying their turns: m \(turn 2, 3 ms\)/);
});
