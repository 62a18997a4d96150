// frame-turns.js: the isolated chart frames draw a few at a time, in order, and a turn is given
// back once whatever its taker does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { frameLimit, turns } from '../src/frame-turns.js';

test('at most limit turns at once, given in the order asked', () => {
  const t = turns(2);
  const started = [];
  const releases = {};
  for (const n of ['a', 'b', 'c', 'd']) t.take((r) => { started.push(n); releases[n] = r; });
  assert.deepEqual(started, ['a', 'b']);
  assert.equal(t.active, 2);
  assert.equal(t.waiting, 2);
  releases.b();
  assert.deepEqual(started, ['a', 'b', 'c']);
  releases.b(); // a second release of the same turn gives nothing back
  assert.deepEqual(started, ['a', 'b', 'c']);
  assert.equal(t.active, 2);
  releases.a();
  releases.c();
  assert.deepEqual(started, ['a', 'b', 'c', 'd']);
  releases.d();
  assert.equal(t.active, 0);
  assert.equal(t.waiting, 0);
});

test('a taker no longer wanted (its frame left the page) is dropped, not started', () => {
  const t = turns(1);
  const started = [];
  let first;
  t.take((r) => { started.push('a'); first = r; });
  t.take(() => started.push('gone'), () => false);
  t.take(() => started.push('c'));
  first();
  assert.deepEqual(started, ['a', 'c']);
  assert.equal(t.waiting, 0);
});

test('a turn released within its start lets the next one start', () => {
  const t = turns(1);
  const started = [];
  t.take((r) => { started.push('a'); r(); });
  t.take((r) => { started.push('b'); r(); });
  assert.deepEqual(started, ['a', 'b']);
  assert.equal(t.active, 0);
});

test('frameLimit: half the cores, from 2 to 4', () => {
  assert.equal(frameLimit(undefined), 2);
  assert.equal(frameLimit(2), 2);
  assert.equal(frameLimit(6), 3);
  assert.equal(frameLimit(64), 4);
});
