// Runs turns through the Node client while the Go test (restart_test.go) kills the server with -9
// and restarts it (servertest.DriveThroughKills). Each turn appends its number to the session's
// list L; the test checks that L ends as 0..n-1: no turn lost, none run twice.
//
// Usage: node restart_driver.mjs BASE_URL TOKEN SESSION_ID N SLOW_TURN
import { Carryover } from '../index.js';

const [base, token, sid, nArg, slowArg] = process.argv.slice(2);
const n = Number(nArg);
const slow = Number(slowArg);
const c = new Carryover({ baseUrl: base, authToken: token, retrySeconds: 120 });
const say = (...a) => process.stdout.write(a.join(' ') + '\n');

await c.createAgentSession({ session_id: sid });
await c.run(sid, 'L = []');
say('ready');
for (let i = 0; i < n; i++) {
  say('turn', i);
  let code = `import pathlib, time\nL.append(${i})\npathlib.Path('started-${i}').write_text('x')\n`;
  if (i === slow) code += 'time.sleep(3)\n';
  try {
    // Every other turn streams over the websocket (reconnected after the kill), the others POST.
    if (i % 2) await c.runStream(sid, code); else await c.run(sid, code);
  } catch (err) {
    if (err?.code !== 'run_interrupted') throw err;
    // The server died mid-cell: the turn's effects are in L only if its checkpoint committed.
    say('interrupted', i);
    const has = await c.run(sid, `print(${i} in L)`);
    if (has.stdout.trim() !== 'True') await c.run(sid, code);
  }
  say('done', i);
}
const out = await c.run(sid, 'import json; print(json.dumps(L))');
say('L', JSON.stringify(JSON.parse(out.stdout)));
