// The modules of src/ import one another without a circle (static imports and import() alike): the
// registry of renderers imports no renderer beyond the standard ones; whoever owns a renderer's
// machinery registers it (main.js the charts, the session view the widget view), as in JupyterLab.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const src = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src');

function graph() {
  const g = new Map();
  for (const f of fs.readdirSync(src).filter((n) => n.endsWith('.js'))) {
    const text = fs.readFileSync(path.join(src, f), 'utf8');
    g.set(f, [...text.matchAll(/(?:\bfrom|\bimport\s*\(|^import)\s*'\.\/([\w-]+\.js)'/gm)].map((m) => m[1]));
  }
  return g;
}

test('src/ has no import circle', () => {
  const g = graph();
  const state = new Map(); // file -> 'open' | 'done'
  const circles = [];
  const visit = (f, trail) => {
    if (state.get(f) === 'done') return;
    if (state.get(f) === 'open') { circles.push([...trail.slice(trail.indexOf(f)), f].join(' -> ')); return; }
    state.set(f, 'open');
    for (const d of g.get(f) || []) visit(d, [...trail, f]);
    state.set(f, 'done');
  };
  for (const f of g.keys()) visit(f, []);
  assert.deepEqual(circles, []);
});

test('the renderer registry imports no chart or widget code', () => {
  assert.deepEqual(graph().get('renderers.js').filter((d) => /charts|widget|isolated/.test(d)), []);
});
