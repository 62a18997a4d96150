// Type-level tests of ../index.d.ts: compiled (never run) by `go test ./clients/js/`
// (TestTypingsCompile). A typing that drifts from the uses below fails the compile.
import { Carryover, CarryoverError, StateSetSandbox } from '../index.js';
import type { Output, RunResult, Schemas, Session, SessionState } from '../index.js';

type Equal<X, Y> = (<T>() => T extends X ? 1 : 2) extends <T>() => T extends Y ? 1 : 2 ? true : false;
function assert<T extends true>(): void {}

// The exported names are the spec's schemas.
assert<Equal<Session, Schemas.Session>>();
assert<Equal<RunResult, Schemas.RunResult>>();
assert<Equal<SessionState, 'pending' | 'running' | 'paused' | 'rotating' | 'completed' | 'failed' | 'cancelled'>>();
assert<Equal<typeof StateSetSandbox, typeof Carryover>>();

async function uses(c: Carryover) {
  const { session } = await c.createAgentSession({ name: 'n', sandbox: { network: { allow: ['pypi.org'] }, disk: '1Gi' }, start: true });
  const id: string = session.id;
  const state: SessionState = session.state;
  const last: number | undefined = session.last_checkpoint?.turn;
  const cwd: string = session.agent_context.working_dir;

  const r = await c.run(id, 'x = 1', { timeout: 5, updateData: { a: 1 } });
  assert<Equal<typeof r, RunResult>>();
  const text: string | null = r.result;
  const saved: string[] | null | undefined = r.checkpoint?.saved;
  for (const o of r.outputs ?? []) {
    if (o.type === 'stream') {
      const s: string = o.text;
      const n: 'stdout' | 'stderr' = o.name;
    } else if (o.type === 'error') {
      const e: string = o.ename;
    }
  }
  const err = r.error;
  if (err) {
    const tb: string[] | null | undefined = err.traceback;
  }

  const ex = await c.executeInAgentSession(id, { command: ['ls', '-l'], timeout_seconds: 3 });
  const code: number = ex.exit_code;
  await c.updateAgentContext(id, { working_dir: '/workspace', env_vars: { A: '1' } });
  const { events } = await c.getAgentSessionEvents(id, { after_sequence: 0 });
  const seq: number = events[0].sequence_number;
  const { checkpoints } = await c.listCheckpoints(id);
  const { restore } = await c.restoreCheckpoint(id, checkpoints[0].id);
  const restored: string[] | null = restore.restored;
  const { file } = await c.putFile(id, 'a.txt', 'hi');
  const size: number = file.size;
  const { tool } = await c.registerAgentTool(id, { name: 't', input_schema: { type: 'object' } });
  const nb = await c.runNotebook(id, {}, { continueOnError: true });
  const arch: Uint8Array = await c.exportSession(id, { checkpointId: 'ckpt_x' });
  const imp = await c.importSession(arch, { sessionId: 'copy' });
  const importedId: string = imp.session.id;
  const present: number = imp.chunks_present;
  void importedId; void present;
  const ran: number = nb.ran;
  const streamed = await c.runStream(id, 'print(1)', { onOutput: (o: Output) => o.type, onStatus: (s) => s === 'busy' });
  assert<Equal<typeof streamed, RunResult>>();
  const re = await c.reattachAgentSession('client');
  const maybe: Session | null = re.session;

  try {
    await c.run(id, 'while True: pass', { timeout: 1 });
  } catch (e) {
    if (e instanceof CarryoverError && e.code === 'timeout') {
      const partial = e.result;
    }
  }
}
void uses;
