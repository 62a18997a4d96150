// A chaos-harness driver (internal/chaos/drivers_test.go) over the Node client: reads one JSON
// request a line from stdin, {"sid": ..., "code": ...}, runs the code on the session with
// Carryover.run (its own key and retries, nothing of the driver's) and writes one JSON line: the
// answer's status, stdout, checkpoint_error and restore's files_ahead, or the error's code and text.
//
// Usage: node chaos_driver.mjs BASE_URL TOKEN
import { createInterface } from 'node:readline';
import { Carryover } from '../../../clients/js/index.js';

const [base, token] = process.argv.slice(2);
const c = new Carryover({ baseUrl: base, authToken: token, retrySeconds: 120 });
for await (const line of createInterface({ input: process.stdin })) {
  const req = JSON.parse(line);
  let out;
  try {
    const r = await c.run(req.sid, req.code);
    out = { status: r.status, stdout: r.stdout ?? '', checkpoint_error: r.checkpoint_error ?? '',
      files_ahead: r.restore?.files_ahead ?? [] };
  } catch (err) {
    out = { code: err?.code ?? 'error', error: String(err?.message ?? err),
      files_ahead: err?.result?.restore?.files_ahead ?? [] };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
