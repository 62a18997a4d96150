// Drives carryover's Jupyter front door with JupyterLab's own client library (@jupyterlab/services)
// through what a notebook GUI does around errors and restores: the interrupt button followed by
// kernel_info_request and a cell, a cell right after `1/0`, a cell sent right after a hibernation
// (a comm open before it is reported lost), a cell sent while the session rotates (likewise), and, across a
// kill -9 + restart of carryover, a cell sent the moment this connection is connected again. Run by
// server/jupyter_node_test.go (TestJupyterNodeTurns) with BASE and TOKEN in the env; it prints
// "KILL" when the server may be killed and waits for a line on stdin once it is back.
import { ServerConnection, KernelManager } from '@jupyterlab/services';
import WebSocket from 'ws';
import readline from 'node:readline';

const settings = ServerConnection.makeSettings({
  baseUrl: process.env.BASE + '/jupyter/',
  wsUrl: process.env.BASE.replace(/^http/, 'ws') + '/jupyter/',
  token: process.env.TOKEN,
  WebSocket,
});

function check(cond, what) {
  if (!cond) {
    throw new Error('check failed: ' + what);
  }
}

// run executes code and returns {reply, stdout, stderr}.
function run(kernel, code, onIOPub) {
  const future = kernel.requestExecute({ code });
  const out = { stdout: '', stderr: '' };
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') out[msg.content.name] += msg.content.text;
    if (onIOPub) onIOPub(msg);
  };
  return future.done.then((reply) => ({ reply, ...out }));
}

function waitFor(pred, what, ms = 60000) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (pred()) return resolve();
      if (Date.now() - start > ms) return reject(new Error('timed out waiting for ' + what));
      setTimeout(tick, 20);
    };
    tick();
  });
}

async function api(path) {
  const res = await fetch(process.env.BASE + '/api/sessions/' + kernel.id + '/' + path, {
    method: 'POST', headers: { Authorization: 'Bearer ' + process.env.TOKEN },
  });
  check(res.status === 200, path + ': ' + res.status + ' ' + (await res.text()));
}

const kernels = new KernelManager({ serverSettings: settings });
const kernel = await kernels.startNew({ name: 'python3' });
await kernel.info;
console.log('KERNEL ' + kernel.id);

// The interrupt button, kernel_info_request at once, then a cell: the interrupted cell is saved.
await run(kernel, 'import time');
let asleep = false;
const sleeper = run(kernel, "v = 5\nprint('asleep', flush=True)\ntime.sleep(30)", (m) => { if (m.header.msg_type === 'stream') asleep = true; });
await waitFor(() => asleep, 'the sleeping cell');
await kernel.interrupt();
const info = kernel.requestKernelInfo();
let r = await sleeper;
check(r.reply.content.ename === 'KeyboardInterrupt', 'interrupted: ' + JSON.stringify(r.reply.content.status));
check(!r.stderr.includes('checkpoint failed'), 'the interrupted cell is checkpointed: ' + r.stderr);
await info;
r = await run(kernel, 'w = v + 1\nprint(w)');
check(r.reply.content.status === 'ok' && r.stdout === '6\n', 'the cell after the interrupt: ' + JSON.stringify(r.reply.content.status) + ' ' + r.stdout);

// 1/0, then a cell at once.
r = await run(kernel, '1/0');
check(r.reply.content.ename === 'ZeroDivisionError' && !r.stderr.includes('checkpoint failed'), '1/0: ' + r.stderr);
r = await run(kernel, 'print(w)');
check(r.reply.content.status === 'ok' && r.stdout === '6\n', 'the cell after 1/0: ' + JSON.stringify(r.reply.content.status));

// A comm open in the kernel (what a widget is), then a hibernation: the next cell wakes the kernel
// with w, and is told the comm is gone; the comm is closed on this side too.
await run(kernel, `
def _echo_target(comm, open_msg):
    pass
get_ipython().kernel.comm_manager.register_target("echo", _echo_target)
`);
const comm = kernel.createComm('echo');
await comm.open({}).done;
await api('hibernate');
r = await run(kernel, 'print(w * 2)');
check(r.reply.content.status === 'ok' && r.stdout === '12\n', 'the cell after a hibernation: ' + r.stdout);
check(r.stderr.includes(comm.commId), 'the lost comm is named: ' + JSON.stringify(r.stderr));
await waitFor(() => comm.isDisposed, 'the lost comm closed');

// A cell sent while the session rotates: it runs in the new kernel, and is told the comm opened
// in the old one is gone.
await run(kernel, 'get_ipython().kernel.comm_manager.register_target("echo", _echo_target)');
const comm2 = kernel.createComm('echo');
await comm2.open({}).done;
const rotation = api('rotate');
r = await run(kernel, 'print(w * 3)');
await rotation;
check(r.reply.content.status === 'ok' && r.stdout === '18\n', 'the cell during a rotation: ' + r.stdout);
// The cell may have reached carryover before the rotation did: then the next one meets the new kernel.
const r2 = await run(kernel, 'print(w * 3)');
check(r2.stdout === '18\n', 'the cell after a rotation: ' + r2.stdout);
check((r.stderr + r2.stderr).includes(comm2.commId), 'the comm lost in the rotation is named: ' + JSON.stringify(r.stderr + r2.stderr));

// kill -9 + restart: a cell sent the moment this connection is connected again.
let down = false;
let after = null;
kernel.connectionStatusChanged.connect((_, s) => {
  if (s !== 'connected') down = true;
  else if (down && after === null) after = run(kernel, 'print(w * 4)');
});
console.log('KILL');
const rl = readline.createInterface({ input: process.stdin });
await new Promise((res) => rl.once('line', res));
rl.close();
void kernel.reconnect(); // at once, rather than after the library's random back-off
await waitFor(() => after !== null, 'the connection back');
r = await after;
check(r.reply.content.status === 'ok' && r.stdout === '24\n', 'the cell sent on reconnecting: ' + JSON.stringify(r.reply.content.status) + ' ' + r.stdout);
kernel.dispose();
console.log('OK');
process.exit(0);
