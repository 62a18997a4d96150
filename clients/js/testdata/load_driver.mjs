// Load for the rolling-upgrade test (server/clustertest/rolling_test.go): N sessions, each turn
// of a round appends the round's number to the session's list L, rounds in a loop until STOPFILE
// exists. Runs go through the client as an agent loop would, with no retry code of their own.
//
// Usage: node load_driver.mjs BASE_URL TOKEN PREFIX N STOPFILE
// Prints "ready", "round R" after each round, "fail SID R ERROR" for a turn that rejected, and at
// the end "final SID {"L": [...], "v": "..."}" for each session.
import { existsSync } from 'node:fs';
import { Carryover } from '../index.js';

const [base, token, prefix, nArg, stop] = process.argv.slice(2);
const c = new Carryover({ baseUrl: base, authToken: token, retrySeconds: 120 });
const say = (...a) => process.stdout.write(a.join(' ') + '\n');
const ids = Array.from({ length: Number(nArg) }, (_, i) => `${prefix}-${i}`);

for (const sid of ids) {
  await c.createAgentSession({ session_id: sid });
  await c.run(sid, `L = []\nv = ${JSON.stringify('kept-' + sid)}`);
}
say('ready');
for (let r = 0; !existsSync(stop); r++) {
  await Promise.all(ids.map((sid) => c.run(sid, `L.append(${r})`).catch((err) => {
    say('fail', sid, r, String(err?.message ?? err).replace(/\n/g, ' '));
  })));
  say('round', r);
}
for (const sid of ids) {
  const out = await c.run(sid, "import json; print(json.dumps({'L': L, 'v': v}))");
  say('final', sid, out.stdout.trim());
}
