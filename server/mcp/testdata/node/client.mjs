// Drives carryover's /mcp with the official MCP TypeScript SDK: node client.mjs <url> <token>.
// Exits non-zero with a clear message on the first mismatch. Run by server/mcp_test.go.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { readFileSync } from 'node:fs';

const [url, token] = process.argv.slice(2);
if (!url || !token) {
  console.error('usage: node client.mjs <url> <token>');
  process.exit(2);
}

function fail(msg, res) {
  console.error(`FAIL: ${msg}` + (res ? `\n${JSON.stringify(res, null, 2).slice(0, 4000)}` : ''));
  process.exit(1);
}

const texts = (res) => (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'carryover-node-test', version: '1.0.0' });
await client.connect(transport);
const sdkVersion = JSON.parse(readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url))).version;
console.log(`connected: @modelcontextprotocol/sdk ${sdkVersion}, server ${JSON.stringify(client.getServerVersion())}, protocol ${transport.protocolVersion}, session ${transport.sessionId}`);
if (!transport.sessionId) fail('no Mcp-Session-Id from the server');

async function call(name, args, { wantError = false } = {}) {
  const res = await client.callTool({ name, arguments: args });
  if (!!res.isError !== wantError) fail(`${name} ${JSON.stringify(args)}: isError ${!!res.isError}, want ${wantError}`, res);
  return res;
}

// tools/list
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
for (const want of ['run_python', 'run_shell', 'read_file', 'write_file', 'list_files', 'list_variables',
  'checkpoints', 'restore_checkpoint', 'fork_session']) {
  if (!names.includes(want)) fail(`tools/list lacks ${want}: ${names}`);
}
console.log(`tools: ${names.join(', ')}`);

// Two runs in one session share state: the id comes back in structuredContent.
let res = await call('run_python', { code: 'x = 41' });
const id = res.structuredContent?.session_id;
if (!id) fail('run_python without session_id returned no structuredContent.session_id', res);
res = await call('run_python', { code: 'x + 1', session_id: id });
if (res.structuredContent.result !== '42' || !texts(res).includes('42')) fail(`x + 1 is not 42`, res);
console.log(`session ${id}: x + 1 -> ${res.structuredContent.result}`);

// An image: matplotlib's figure as MCP image content (base64 PNG).
res = await call('run_python', { code: 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()', session_id: id });
const img = (res.content || []).find((c) => c.type === 'image');
if (!img || img.mimeType !== 'image/png') fail('no image/png content from plt.show()', res);
const png = Buffer.from(img.data, 'base64');
if (png.subarray(1, 4).toString() !== 'PNG') fail(`image data is not a PNG (${png.subarray(0, 8).toString('hex')})`);
console.log(`image: ${img.mimeType}, ${png.length} bytes`);

// A Python error is a tool result with isError, not a protocol error.
res = await call('run_python', { code: '1/0', session_id: id }, { wantError: true });
if (!texts(res).includes('ZeroDivisionError') || res.structuredContent?.session_id !== id) fail('1/0 answer', res);

// Kill the kernel mid-session: that call is a kernel_died tool error; the next one sees the last checkpoint.
await call('run_python', { code: 'y = x * 2', session_id: id });
res = await call('run_python', { code: 'import os; os.kill(os.getpid(), 9)', session_id: id }, { wantError: true });
if (!texts(res).startsWith('kernel_died')) fail('killing the kernel is not a kernel_died tool error', res);
res = await call('run_python', { code: 'x, y', session_id: id });
if (res.structuredContent.result !== '(41, 82)') fail(`after the kernel died, x, y is ${res.structuredContent.result}, want (41, 82)`, res);
console.log(`after kill -9 of the kernel: x, y -> ${res.structuredContent.result}`);

// Variables of the latest checkpoint.
res = await call('list_variables', { session_id: id });
for (const v of ['x', 'y']) {
  if (!res.structuredContent.variables.includes(v)) fail(`list_variables lacks ${v}`, res);
}

// Fork: the fork has the state; changing it leaves the source alone.
res = await call('fork_session', { session_id: id });
const fork = res.structuredContent.session_id;
if (!fork || fork === id) fail('fork_session returned no new session_id', res);
res = await call('run_python', { code: 'x = x * 10\nx', session_id: fork });
if (res.structuredContent.result !== '410') fail(`fork: x * 10 is ${res.structuredContent.result}, want 410`, res);
res = await call('run_python', { code: 'x', session_id: id });
if (res.structuredContent.result !== '41') fail(`source after fork: x is ${res.structuredContent.result}, want 41`, res);
console.log(`fork ${fork}: x -> 410, source keeps 41`);

// An API error is a tool error carrying the code.
res = await call('list_files', { session_id: 'no-such-session' }, { wantError: true });
if (!texts(res).startsWith('not_found')) fail('unknown session is not a not_found tool error', res);

await client.close();
console.log('OK');
