// A run longer than Node fetch's own wait for an answer's headers (300 s, undici's headersTimeout)
// against a real server (clients/js/js_test.go). This file runs in a process of its own (node
// --test), whose fetch gets a 1 s header clock: the same Agent class Node's fetch uses, its limit
// lowered. The client's retry clock (0.5 s) is shorter than that, as the default 60 s is shorter
// than 300 s, so the call is cut after its retries are spent, as a real long run's is.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';

import { Carryover } from '../index.js';

const baseUrl = process.env.CARRYOVER_URL;
const authToken = process.env.CARRYOVER_TOKEN;
if (!baseUrl) throw new Error('CARRYOVER_URL is not set: run through `go test ./clients/js/`');

const client = new Carryover({ baseUrl, authToken });
const id = `js${Date.now().toString(36)}-long`;

after(async () => { await client.deleteAgentSession(id).catch(() => {}); });

test('a run, an exec and an execute() that outlast fetch\'s header clock answer their results, run once', async () => {
  await client.createAgentSession({ session_id: id });
  await client.run(id, 'n = 0');
  const slot = Symbol.for('undici.globalDispatcher.1'); // set by the fetches above
  const dispatcher = globalThis[slot];
  assert.ok(dispatcher, 'Node\'s fetch keeps no global dispatcher under Symbol.for(undici.globalDispatcher.1)');
  globalThis[slot] = new dispatcher.constructor({ headersTimeout: 1000 });
  try {
    // the clock is real: a bare fetch of the same run gives up
    const cut = await fetch(`${baseUrl}/api/sessions/${id}/run`, {
      method: 'POST', headers: { Authorization: `Bearer ${authToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ code: 'import time\ntime.sleep(2)' }),
    }).then(() => null, (err) => err);
    assert.equal(cut?.cause?.code, 'UND_ERR_HEADERS_TIMEOUT', `a bare fetch: ${cut}`);
    const slow = new Carryover({ baseUrl, authToken, retrySeconds: 0.5 });
    const t0 = Date.now();
    const r = await slow.run(id, 'import time\nn += 1\ntime.sleep(3.5)\nprint(n)');
    assert.equal(r.stdout, '1\n');
    assert.ok(Date.now() - t0 >= 3500, `answered after ${Date.now() - t0} ms`);
    const e = await slow.executeInAgentSession(id, { command: 'sleep 2.5; echo done' });
    assert.equal(e.stdout, 'done\n');
    const x = await slow.execute('import time\ntime.sleep(2.5)\nprint(7)');
    assert.equal(x.stdout, '7\n');
  } finally {
    globalThis[slot] = dispatcher;
  }
  assert.equal((await client.run(id, 'print(n)')).stdout, '1\n', 'the run ran once');
});
