// Tests of the Node client against a real carryover server: CARRYOVER_URL and CARRYOVER_TOKEN
// name it (clients/js/js_test.go starts one and runs `node --test` with them).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, createReadStream, createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Carryover, CarryoverError, StateSetSandbox } from '../index.js';
import { codingAgent } from '../examples/coding-agent.mjs';

const baseUrl = process.env.CARRYOVER_URL;
const authToken = process.env.CARRYOVER_TOKEN;
if (!baseUrl) throw new Error('CARRYOVER_URL is not set: run through `go test ./clients/js/`');

const client = new Carryover({ baseUrl, authToken });
const run = `js${Date.now().toString(36)}`;
const created = [];
/** A session id of this run, deleted at the end. */
const sid = (name) => {
  const id = `${run}-${name}`;
  created.push(id);
  return id;
};

after(async () => {
  await Promise.all(created.map((id) => client.deleteAgentSession(id).catch(() => {})));
});

/** Resolves to the CarryoverError fn rejects with (fails when it resolves or rejects otherwise). */
async function rejection(fn) {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof CarryoverError, `not a CarryoverError: ${err?.stack ?? err}`);
    return err;
  }
  assert.fail('expected a CarryoverError');
}

test("the reference's complete coding-agent example runs against carryover", async () => {
  // A local repository stands in for https://github.com/example/project.git: its `npm test`
  // passes only once the agent has written src/feature.ts.
  const dir = mkdtempSync(join(tmpdir(), 'carryover-js-'));
  try {
    const repo = join(dir, 'project');
    execFileSync('mkdir', ['-p', repo]);
    writeFileSync(join(repo, 'package.json'), JSON.stringify({
      name: 'project', version: '1.0.0', private: true, scripts: { test: 'node test.mjs' },
    }));
    writeFileSync(join(repo, 'test.mjs'), [
      "import { readFileSync } from 'node:fs';",
      "const src = readFileSync('src/feature.ts', 'utf8');",
      "if (!src.includes(\"return 'implemented'\")) { console.log('newFeature: FAIL'); process.exit(1); }",
      "console.log('newFeature: ok (1 passing)');",
    ].join('\n'));
    const git = (...args) => execFileSync('git', args, {
      cwd: repo, stdio: 'pipe',
      env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@x' },
    });
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'init');

    const seedsClient = new StateSetSandbox({ baseUrl, authToken });
    const res = await codingAgent(seedsClient, 'add newFeature', { repo });
    created.push(res.sessionId);
    assert.equal(res.success, true, res.output);
    assert.match(res.output, /newFeature: ok/);

    const { session } = await client.getAgentSession(res.sessionId);
    assert.equal(session.state, 'completed');
    assert.equal(session.stop_reason, 'Agent finished');
    assert.equal(session.agent_context.working_dir, '/workspace/project');
    assert.equal(session.agent_context.custom_state.task, 'add newFeature');
    assert.equal(session.agent_context.custom_state.tests_passed, true);
    assert.deepEqual(session.budget, { cost_cap_cents: 500, iteration_limit: 50 });
    assert.equal(session.budget_consumed.iterations, 3); // clone, npm install, npm test
    const feature = await client.getFile(res.sessionId, '/workspace/project/src/feature.ts', { encoding: 'utf-8' });
    assert.equal(feature, "export function newFeature() {\n return 'implemented';\n}\n");

    const { events } = await client.getAgentSessionEvents(res.sessionId, { limit: 200 });
    const types = events.map((e) => e.event_type);
    for (const t of ['session_started', 'exec_started', 'exec_completed', 'session_completed']) {
      assert.ok(types.includes(t), `no ${t} in ${types}`);
    }
    assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i + 1));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('StateSet names: tools, events, heartbeat, reattach, context, pause and resume', async () => {
  const id = sid('stateset');
  const clientId = `${run}-agent-instance`;
  const { session } = await client.createAgentSession({ session_id: id, name: 'my-agent', client_id: clientId });
  assert.equal(session.state, 'pending');
  const started = await client.startAgentSession(id);
  assert.equal(started.session.state, 'running');

  const { tool } = await client.registerAgentTool(id, {
    name: 'run_tests', tool_type: 'custom', description: 'Run the project test suite',
    input_schema: { type: 'object', properties: { filter: { type: 'string', description: 'Test name filter' } } },
  });
  assert.equal(tool.name, 'run_tests');
  const { tools } = await client.listAgentTools(id);
  assert.deepEqual(tools.map((t) => t.name), ['run_tests']);

  await client.updateAgentContext(id, {
    working_dir: '/workspace/project', env_vars: { NODE_ENV: 'test' },
    custom_state: { current_task: 'implement-login' },
  });
  await client.writeAgentSessionFile(id, '/workspace/project/x.txt', 'x');
  const ctx = await client.run(id, 'import os\nprint(os.getcwd().endswith("project"), os.environ["NODE_ENV"])');
  assert.equal(ctx.stdout, 'True test\n');
  assert.deepEqual((await client.getAgentSession(id)).session.agent_context.custom_state, { current_task: 'implement-login' });

  const hb = await client.agentSessionHeartbeat(id);
  assert.equal(hb.session.id, id);
  const { session: existing } = await client.reattachAgentSession(clientId);
  assert.equal(existing.id, id);
  const { session: none } = await client.reattachAgentSession(`${run}-nobody`);
  assert.equal(none, null);

  assert.equal((await client.pauseAgentSession(id)).session.state, 'paused');
  const paused = await rejection(() => client.run(id, '1'));
  assert.equal(paused.code, 'session_paused');
  assert.equal(paused.status, 409);
  assert.equal((await client.resumeAgentSession(id)).session.state, 'running');

  let lastSeq = 0;
  const { events } = await client.getAgentSessionEvents(id, { after_sequence: lastSeq, limit: 50 });
  assert.ok(events.length > 0);
  lastSeq = events.at(-1).sequence_number;
  const { events: tr } = await client.getAgentSessionEvents(id, { event_type: 'tool_registered' });
  assert.equal(tr.length, 1);
  assert.deepEqual((await client.getAgentSessionEvents(id, { after_sequence: lastSeq })).events, []);
  assert.ok((await client.listAgentSessions()).sessions.some((s) => s.id === id));
});

test('sessions in pages: every session once, in creation order, either way', async () => {
  const prefix = sid('pg');
  const made = [];
  for (let i = 0; i < 5; i++) made.push((await client.createAgentSession({ session_id: `${prefix}-${i}` })).session.id);
  const mine = [];
  for await (const s of client.iterAgentSessions({ pageSize: 2 })) if (s.id.startsWith(prefix)) mine.push(s.id);
  assert.deepEqual(mine, made);
  const newest = [];
  for await (const s of client.iterAgentSessions({ pageSize: 2, newest: true })) if (s.id.startsWith(prefix)) newest.push(s.id);
  assert.deepEqual(newest, [...made].reverse());
  const page = await client.listAgentSessions({ limit: 1 });
  assert.equal(page.sessions.length, 1);
  assert.ok(page.next_cursor);
  for (const id of made) await client.deleteAgentSession(id);
});

test('run keeps state across turns; updateData, env, result', async () => {
  const id = sid('state');
  await client.createAgentSession({ session_id: id });
  const r1 = await client.run(id, 'import numpy as np\nx = np.arange(10)\ncounter = 0');
  assert.equal(r1.status, 'ok');
  assert.equal(r1.execution_count, 1);
  assert.ok(r1.checkpoint.saved.includes('counter'), JSON.stringify(r1.checkpoint));
  const r2 = await client.run(id, 'import os\ncounter += 1\nprint(x.sum(), counter, os.environ["X"])\ncounter * 10',
    { updateData: { last_result: 42 }, env: { X: 'one' }, timeout: 30 });
  assert.equal(r2.status, 'ok');
  assert.equal(r2.stdout, '45 1 one\n');
  assert.equal(r2.result, '10');
  assert.equal(r2.execution_count, 2);
  assert.deepEqual((await client.getAgentSession(id)).session.data, { last_result: 42 });
  assert.equal((await client.run(id, 'counter')).result, '1');
  const r3 = await client.run(id, "a = input('a? ')\ntry:\n    input()\nexcept EOFError:\n    a += '+eof'\na", { stdin: 'yes\n' });
  assert.deepEqual([r3.result, r3.stdout], ["'yes+eof'", '']);
});

test('a Python error is an answer with status error, and the session goes on', async () => {
  const id = sid('pyerr');
  await client.createAgentSession({ session_id: id });
  await client.run(id, 'y = 7');
  const r = await client.run(id, 'print("before")\n1/0');
  assert.equal(r.status, 'error');
  assert.equal(r.stdout, 'before\n');
  assert.equal(r.error.ename, 'ZeroDivisionError');
  assert.equal(r.error.evalue, 'division by zero');
  assert.ok(r.outputs.some((o) => o.type === 'error'));
  assert.equal((await client.run(id, 'y')).result, '7');
});

test('API errors are CarryoverErrors with code, status, details and result', async () => {
  const missing = `${run}-missing`;
  const nf = await rejection(() => client.getAgentSession(missing));
  assert.equal(nf.code, 'not_found');
  assert.equal(nf.status, 404);
  assert.equal(nf.details.session_id, missing);
  assert.equal(nf.name, 'CarryoverError');
  assert.ok(nf instanceof Error);
  assert.equal((await rejection(() => client.run(missing, '1'))).status, 404);

  const bad = await rejection(() => client.createAgentSession({ session_id: 'no spaces allowed' }));
  assert.equal(bad.code, 'invalid_request');
  assert.equal(bad.status, 400);

  const id = sid('errors');
  await client.createAgentSession({ session_id: id });
  const typed = await rejection(() => client.run(id, 5));
  assert.equal(typed.code, 'invalid_request');
  assert.equal(typed.details.field, 'code');
  const dup = await rejection(() => client.createAgentSession({ session_id: id }));
  assert.equal(dup.code, 'conflict');
  assert.equal(dup.status, 409);
  const outside = await rejection(() => client.writeAgentSessionFile(id, '/etc/passwd', 'x'));
  assert.equal(outside.status, 400);
  const dots = await rejection(() => client.getFile(id, 'a/../../b'));
  assert.equal(dots.code, 'invalid_request');
  assert.equal(dots.status, 0); // refused before sending: a URL would resolve the dots

  const unauth = await rejection(() => new Carryover({ baseUrl, authToken: 'wrong' }).listAgentSessions());
  assert.equal(unauth.code, 'unauthorized');
  assert.equal(unauth.status, 401);
  const down = await rejection(() => new Carryover({ baseUrl: 'http://127.0.0.1:1', authToken }).listAgentSessions());
  assert.equal(down.code, 'connection_error');
  const noWS = await rejection(() => new Carryover({ baseUrl, authToken, WebSocket: false }).runStream(id, '1'));
  assert.equal(noWS.code, 'websocket_unavailable');

  // A timeout interrupts the kernel, keeps the state and carries the partial answer.
  await client.run(id, 'kept = 1');
  const to = await rejection(() => client.run(id, 'import time\nprint("started", flush=True)\ntime.sleep(30)', { timeout: 1 }));
  assert.equal(to.code, 'timeout');
  assert.equal(to.status, 504);
  assert.equal(to.result.stdout, 'started\n');
  assert.equal((await client.run(id, 'kept')).result, '1');
});

test('runStream calls back in order while the code runs, answers input() and resolves to the run answer', async () => {
  const id = sid('stream');
  await client.createAgentSession({ session_id: id });
  const seen = [];
  const t0 = Date.now();
  let firstAt = 0;
  const code = [
    'import sys, time',
    'print("one", flush=True)',
    'time.sleep(0.4)',
    'print("two", file=sys.stderr, flush=True)',
    'time.sleep(0.2)  # input_request travels on another channel than the streams',
    'name = input("Name: ")',
    'print("hello", name, flush=True)',
    'from IPython.display import display, HTML',
    'display(HTML("<b>x</b>"))',
    '6 * 7',
  ].join('\n');
  const res = await client.runStream(id, code, {
    onStdout: (t) => { firstAt ||= Date.now(); seen.push(['stdout', t]); },
    onStderr: (t) => seen.push(['stderr', t]),
    onOutput: (o) => seen.push(['output', o.type]),
    onStatus: (s) => seen.push(['status', s]),
    onInput: async (prompt, { password }) => { seen.push(['input', prompt, password]); return 'Ada'; },
  });
  const doneAt = Date.now();
  assert.deepEqual(seen, [
    ['status', 'busy'],
    ['stdout', 'one\n'], ['output', 'stream'],
    ['stderr', 'two\n'], ['output', 'stream'],
    ['input', 'Name: ', false],
    ['stdout', 'hello Ada\n'], ['output', 'stream'],
    ['output', 'display_data'],
    ['output', 'execute_result'],
    ['status', 'idle'],
  ]);
  // Streamed: "one" arrived before the 0.4 s sleep was over, not with the answer.
  assert.ok(doneAt - firstAt >= 300, `first stdout ${firstAt - t0} ms, done ${doneAt - t0} ms`);
  assert.equal(res.status, 'ok');
  assert.equal(res.result, '42');
  assert.equal(res.stdout, 'one\nhello Ada\n');
  assert.equal(res.stderr, 'two\n');
  assert.deepEqual(res.outputs.map((o) => o.type), ['stream', 'stream', 'stream', 'display_data', 'execute_result']);
  assert.ok(res.checkpoint.saved.includes('name'));
  // The turn is the session's, as an HTTP run's is.
  assert.equal((await client.run(id, 'name')).result, "'Ada'");

  // onInput answering null (the end of input): input() raises EOFError, so a loop reading lines ends.
  const lines = ['a', 'b'];
  const eof = await client.runStream(id, 'got = []\nwhile True:\n    try:\n        got.append(input())\n    except EOFError:\n        break\ngot',
    { onInput: () => lines.shift() ?? null, timeout: 60 });
  assert.equal(eof.result, "['a', 'b']");

  // A Python error resolves; a timeout rejects with the partial answer.
  const err = await client.runStream(id, '1/0');
  assert.equal(err.status, 'error');
  assert.equal(err.error.ename, 'ZeroDivisionError');
  const to = await rejection(() => client.runStream(id, 'import time\nprint("t", flush=True)\ntime.sleep(30)', { timeout: 1 }));
  assert.equal(to.code, 'timeout');
  assert.equal(to.status, 0);
  assert.equal(to.result?.stdout, 't\n');

  const nf = await rejection(() => client.runStream(`${run}-missing`, '1'));
  assert.equal(nf.code, 'not_found');
  assert.equal(nf.status, 404);
});

test('files: put, list, get, writeAgentSessionFile, read from Python, delete', async () => {
  const id = sid('files');
  await client.createAgentSession({ session_id: id });
  const bytes = new Uint8Array(256).map((_, i) => i);
  const put = await client.putFile(id, 'data/all bytes.bin', bytes);
  assert.deepEqual(put.file.path, 'data/all bytes.bin');
  assert.equal(put.file.size, 256);
  assert.deepEqual(await client.getFile(id, '/workspace/data/all bytes.bin'), bytes);

  await client.writeAgentSessionFile(id, '/workspace/notes.md', '# Progress\n- Step 1 done ✓');
  await client.writeAgentSessionFile(id, 'raw.bin', new Uint8Array([0, 255, 10]));
  const { files } = await client.listFiles(id);
  const byPath = Object.fromEntries(files.map((f) => [f.path, f]));
  assert.equal(byPath['data/all bytes.bin'].size, 256);
  assert.equal(byPath['raw.bin'].size, 3);
  assert.ok(byPath['notes.md']);

  const r = await client.run(id, 'print(open("notes.md", encoding="utf-8").read().splitlines()[-1])\nopen("out.txt", "w").write("from python")');
  assert.equal(r.stdout, '- Step 1 done ✓\n');
  assert.equal(await client.getFile(id, 'out.txt', { encoding: 'utf-8' }), 'from python');

  await client.deleteFile(id, 'notes.md');
  const gone = await rejection(() => client.getFile(id, 'notes.md'));
  assert.equal(gone.code, 'not_found');
  assert.equal(gone.status, 404);
});

test('exportSession and importSession: the state in a new session; a damaged archive refused with its reason', async () => {
  const src = sid('port-src');
  await client.createAgentSession({ session_id: src });
  await client.run(src, 'm = {"k": [1, 2]}\nopen("g.txt", "w").write("moved")');
  const archive = await client.exportSession(src);
  const res = await client.importSession(archive, { sessionId: `${src}-in` });
  assert.equal(res.session.id, `${src}-in`);
  assert.equal(res.source.session_id, src);
  assert.equal((await client.run(`${src}-in`, 'm')).result, "{'k': [1, 2]}");
  assert.equal(await client.getFile(`${src}-in`, 'g.txt', { encoding: 'utf-8' }), 'moved');
  const bad = await rejection(() => client.importSession(archive.slice(0, archive.length >> 1)));
  assert.equal(bad.code, 'invalid_request');
  assert.equal(bad.details.reason, 'truncated');

  // Streamed both ways, with the events: to a file as it comes, and from the file as it is read.
  const file = join(mkdtempSync(join(tmpdir(), 'carryover-js-')), 's.carryover.tar');
  await pipeline(Readable.fromWeb(await client.exportSession(src, { stream: true, events: true })), createWriteStream(file));
  const streamed = await client.importSession(createReadStream(file), { sessionId: `${src}-streamed` });
  assert.equal(streamed.source.session_id, src);
  assert.ok(streamed.events > 0, `events imported: ${streamed.events}`);
  assert.equal((await client.run(`${src}-streamed`, 'm')).result, "{'k': [1, 2]}");
});

test('fork: same variables and files, independent afterwards; checkpoints list and restore', async () => {
  const src = sid('fork-src');
  const dst = sid('fork-dst');
  await client.createAgentSession({ session_id: src, data: { owner: 'me' } });
  await client.run(src, 'a = [1]\nopen("f.txt", "w").write("source")');
  const { session } = await client.fork(src, { sessionId: dst });
  assert.equal(session.id, dst);
  assert.deepEqual(session.data, { owner: 'me' });

  await client.run(dst, 'a.append(2)\nopen("f.txt", "w").write("fork")');
  await client.run(src, 'a.append(3)');
  assert.equal((await client.run(src, 'a')).result, '[1, 3]');
  assert.equal((await client.run(dst, 'a')).result, '[1, 2]');
  assert.equal(await client.getFile(src, 'f.txt', { encoding: 'utf-8' }), 'source');
  assert.equal(await client.getFile(dst, 'f.txt', { encoding: 'utf-8' }), 'fork');

  // Back to the turn where a was [1].
  const { checkpoints } = await client.listCheckpoints(src);
  const first = checkpoints.find((c) => c.turn === 1);
  assert.ok(first, JSON.stringify(checkpoints));
  assert.ok(first.variables.includes('a'));
  const restored = await client.restoreCheckpoint(src, first.id);
  assert.equal(restored.session.id, src);
  assert.equal((await client.run(src, 'a')).result, '[1]');
  assert.equal((await client.run(dst, 'a')).result, '[1, 2]');

  const nf = await rejection(() => client.fork(`${run}-missing`));
  assert.equal(nf.status, 404);

  // Fan-out: three children of one checkpoint in one call; a count out of range makes none.
  const { sessions } = await client.fork(src, { sessionId: `${dst}-k`, count: 3 });
  assert.deepEqual(sessions.map((s) => s.id), [1, 2, 3].map((i) => `${dst}-k-${i}`));
  assert.equal((await client.run(sessions[2].id, 'a')).result, '[1]');
  const bad = await rejection(() => client.fork(src, { sessionId: `${dst}-z`, count: 101 }));
  assert.equal(bad.status, 400);
  assert.equal(bad.code, 'invalid_request');

  // The source's usage: its checkpoints' bytes as listed, CPU from every kernel it had.
  const { usage } = await client.getUsage(src);
  const listed = (await client.listCheckpoints(src)).checkpoints;
  assert.equal(usage.session_id, src);
  assert.equal(usage.checkpoints, listed.length);
  assert.equal(usage.stored_bytes, listed.reduce((n, c) => n + c.bytes, 0));
  assert.ok(usage.memory_peak_bytes > 0 && usage.cpu_seconds > 0, JSON.stringify(usage));
  assert.equal((await rejection(() => client.getUsage(`${run}-missing`))).status, 404);
});

test('notebooks: run an .ipynb into a session, stopping at the first error unless asked; export the history', async () => {
  const id = sid('nb');
  await client.createAgentSession({ session_id: id });
  const nb = {
    nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [
      { cell_type: 'code', source: ['n = 2\n', 'm = n * 21'], metadata: {}, outputs: [], execution_count: null },
      { cell_type: 'code', source: 'raise ValueError("stop here")', metadata: {}, outputs: [], execution_count: null },
      { cell_type: 'code', source: 'print(m)', metadata: {}, outputs: [], execution_count: null },
    ],
  };
  let out = await client.runNotebook(id, nb);
  assert.equal(out.ran, 2);
  assert.equal(out.stopped_at, 1);
  assert.equal(out.cells[1].result.error.ename, 'ValueError');
  out = await client.runNotebook(id, JSON.stringify(nb), { continueOnError: true });
  assert.equal(out.ran, 3);
  assert.equal(out.cells[2].result.stdout, '42\n');
  const exported = await client.getNotebook(id);
  assert.equal(exported.nbformat, 4);
  assert.ok(exported.cells.some((c) => [].concat(c.source).join('') === 'print(m)'), JSON.stringify(exported.cells));
  const bad = await rejection(() => client.runNotebook(id, { nbformat: 3, cells: [] }));
  assert.equal(bad.code, 'invalid_request');
});

test('a run or exec repeated with its idempotency key answers the first result and runs once', async () => {
  const id = sid('idem');
  await client.createAgentSession({ session_id: id });
  await client.run(id, 'L = []');
  const first = await client.run(id, 'L.append(len(L)); print(L)', { idempotencyKey: 'js-k1' });
  const again = await client.run(id, 'L.append(len(L)); print(L)', { idempotencyKey: 'js-k1' });
  assert.equal(first.stdout, '[0]\n');
  assert.equal(again.stdout, first.stdout);
  assert.equal(again.execution_count, first.execution_count);
  const err = await rejection(() => client.run(id, "print('other')", { idempotencyKey: 'js-k1' }));
  assert.equal(err.code, 'idempotency_key_reused');
  assert.equal(err.status, 422);
  assert.equal((await client.run(id, 'print(L)')).stdout, '[0]\n');
  const e1 = await client.executeInAgentSession(id, { command: 'date +%s%N', idempotencyKey: 'js-e1' });
  const e2 = await client.executeInAgentSession(id, { command: 'date +%s%N', idempotency_key: 'js-e1' });
  assert.equal(e2.stdout, e1.stdout);
  const streamed = await client.runStream(id, 'L.append(len(L)); print(L)', { idempotencyKey: 'js-s1' });
  const restreamed = await client.runStream(id, 'L.append(len(L)); print(L)', { idempotencyKey: 'js-s1' });
  assert.equal(restreamed.stdout, streamed.stdout);
  assert.equal((await client.run(id, 'print(L)')).stdout, '[0, 1]\n');
  // POST /api/execute: a throwaway session, the key the tenant's.
  const x1 = await client.execute('import random; print(random.random())', { idempotencyKey: `js-x-${id}` });
  const x2 = await client.execute('import random; print(random.random())', { idempotencyKey: `js-x-${id}` });
  assert.equal(x2.stdout, x1.stdout);
});
