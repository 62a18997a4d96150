// Drives carryover's Jupyter front door with JupyterLab's own client library (@jupyterlab/services),
// as JupyterLab does: a session with a kernel, streaming execution, stdin, a comm echo with binary
// buffers both ways, interrupt, restart; then the test kills carryover with SIGKILL and starts it
// again, and both a fresh client and this same kernel connection (reconnecting by itself) find the
// kernel and its variables. Run by server/jupyter_node_test.go with BASE and TOKEN in the env; it
// prints "KILL" when the server may be killed and waits for a line on stdin once it is back.
import { ServerConnection, SessionManager, KernelManager, KernelSpecManager } from '@jupyterlab/services';
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

// run executes code and returns {reply, stdout, outputs}.
async function run(kernel, code, hooks = {}) {
  const future = kernel.requestExecute({ code, allow_stdin: !!hooks.onStdin });
  let stdout = '';
  const outputs = [];
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') stdout += msg.content.text;
    if (['execute_result', 'display_data', 'error', 'stream'].includes(msg.header.msg_type)) outputs.push(msg);
    if (hooks.onIOPub) hooks.onIOPub(msg);
  };
  if (hooks.onStdin) future.onStdin = (msg) => hooks.onStdin(msg, future);
  const reply = await future.done;
  return { reply, stdout, outputs };
}

function waitFor(pred, what, ms = 90000) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (pred()) return resolve();
      if (Date.now() - start > ms) return reject(new Error('timed out waiting for ' + what));
      setTimeout(tick, 100);
    };
    tick();
  });
}

const specs = new KernelSpecManager({ serverSettings: settings });
await specs.ready;
check(specs.specs.default === 'python3' && specs.specs.kernelspecs.python3.language === 'python', 'kernelspecs: ' + JSON.stringify(specs.specs));

const kernels = new KernelManager({ serverSettings: settings });
const sessions = new SessionManager({ serverSettings: settings, kernelManager: kernels });
const sess = await sessions.startNew({ path: 'work/analysis.ipynb', name: 'analysis.ipynb', type: 'notebook', kernel: { name: 'python3' } });
const kernel = sess.kernel;
check(/^\w+-\w+-\w+-\w+-\w+$/.test(kernel.id), 'kernel id is UUID-shaped: ' + kernel.id);
const info = await kernel.info;
check(info.language_info.name === 'python', 'kernel_info: ' + JSON.stringify(info.language_info));
console.log('protocol', kernel.serverSettings && kernel.handleComms, 'subprotocol', kernel._selectedProtocol);

// Streaming: three chunks arrive as three stream messages before the reply.
let chunks = 0;
let r = await run(kernel, 'import time\nfor i in range(3):\n    print("tick", i, flush=True)\n    time.sleep(0.3)\n', {
  onIOPub: (m) => { if (m.header.msg_type === 'stream') chunks++; },
});
check(r.reply.content.status === 'ok' && r.stdout === 'tick 0\ntick 1\ntick 2\n', 'streaming: ' + JSON.stringify(r.stdout));
check(chunks >= 2, 'output streamed in several messages, got ' + chunks);

// stdin: input() is answered through the kernel connection.
r = await run(kernel, 'name = input("who? ")\nprint("hello", name)', {
  onStdin: (msg) => { check(msg.content.prompt === 'who? ', 'prompt'); kernel.sendInputReply({ status: 'ok', value: 'carryover' }, msg.header); },
});
check(r.stdout.includes('hello carryover'), 'stdin: ' + JSON.stringify(r.stdout));

// A comm echoing data and binary buffers both ways.
await run(kernel, `
def _echo_target(comm, open_msg):
    @comm.on_msg
    def _recv(msg):
        comm.send({"echo": msg["content"]["data"], "sizes": [len(b) for b in msg["buffers"]]},
                  buffers=[bytes(reversed(bytes(b))) for b in msg["buffers"]])
get_ipython().kernel.comm_manager.register_target("echo", _echo_target)
`);
const comm = kernel.createComm('echo');
let echoed = null;
comm.onMsg = (msg) => { echoed = msg; };
await comm.open({}).done;
comm.send({ hello: 'world' }, {}, [new Uint8Array([1, 2, 3, 4]).buffer]);
await waitFor(() => echoed !== null, 'the comm echo');
check(echoed.content.data.echo.hello === 'world' && echoed.content.data.sizes[0] === 4, 'comm echo data: ' + JSON.stringify(echoed.content.data));
const back = new Uint8Array(echoed.buffers[0].buffer ? echoed.buffers[0].buffer : echoed.buffers[0]);
check(back.length === 4 && back[0] === 4 && back[3] === 1, 'comm echo buffer: ' + Array.from(back));

// Interrupt: a sleeping cell ends with KeyboardInterrupt; the kernel keeps its state.
await run(kernel, 'kept = 7');
const sleeper = run(kernel, 'import time\ntime.sleep(60)');
await new Promise((res) => setTimeout(res, 1500));
await kernel.interrupt();
r = await sleeper;
check(r.reply.content.status === 'error' && r.reply.content.ename === 'KeyboardInterrupt', 'interrupt: ' + JSON.stringify(r.reply.content));
r = await run(kernel, 'print(kept)');
check(r.stdout === '7\n', 'state kept across interrupt: ' + r.stdout);

// Restart: Jupyter's meaning, a fresh namespace.
await kernel.restart();
r = await run(kernel, 'print("kept" in globals())');
check(r.stdout === 'False\n', 'restart gives a fresh namespace: ' + r.stdout);

// State that must survive carryover's kill -9.
r = await run(kernel, 'x = "survives " + str(6 * 7)\nprint(x)');
check(r.stdout === 'survives 42\n', 'x set');
const countBefore = r.reply.content.execution_count;
const kernelID = kernel.id;
const sessionID = sess.id;

let sawRestartingOrReconnect = false;
kernel.connectionStatusChanged.connect((_, s) => { if (s === 'connecting') sawRestartingOrReconnect = true; });
console.log('KERNEL ' + kernelID);
console.log('KILL');
const rl = readline.createInterface({ input: process.stdin });
await new Promise((res) => rl.once('line', res));
rl.close();

// A fresh client finds the same session and kernel id, and x.
const kernels2 = new KernelManager({ serverSettings: settings });
const sessions2 = new SessionManager({ serverSettings: settings, kernelManager: kernels2 });
await sessions2.refreshRunning();
const models = Array.from(sessions2.running());
check(models.some((m) => m.id === sessionID && m.kernel.id === kernelID && m.path === 'work/analysis.ipynb'),
  'the session is listed after the restart: ' + JSON.stringify(models));
const sess2 = sessions2.connectTo({ model: models.find((m) => m.id === sessionID) });
r = await run(sess2.kernel, 'print(x)');
check(r.stdout === 'survives 42\n', 'fresh client sees x: ' + JSON.stringify(r.stdout));
check(r.reply.content.execution_count > countBefore, 'execution count continues: ' + r.reply.content.execution_count + ' after ' + countBefore);

// The same kernel connection reconnects by itself and continues.
await waitFor(() => kernel.connectionStatus === 'connected' && sawRestartingOrReconnect, 'the first client to reconnect');
r = await run(kernel, 'print(x.upper())');
check(r.stdout === 'SURVIVES 42\n', 'reconnected client sees x: ' + JSON.stringify(r.stdout));

sess2.dispose();
await sess.shutdown();
const after = await fetch(process.env.BASE + '/jupyter/api/kernels?token=' + process.env.TOKEN).then((res) => res.json());
check(!after.some((k) => k.id === kernelID), 'a shut down kernel leaves the list');
console.log('OK');
process.exit(0);
