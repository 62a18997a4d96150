// The StateSet agent-sessions "Complete Example: Multi-Step Coding Agent"
// (shared/reference/stateset-agent-sessions.txt) against carryover. The calls and their
// arguments are the reference's; what differs:
//   - the import and the client (baseUrl/authToken from CARRYOVER_URL/CARRYOVER_TOKEN);
//   - step 1 clones `repo` (default the reference's URL) into `project`, relative to the
//     session's working directory /workspace: without the sandbox (sandbox.enabled=false) a
//     command's absolute /workspace/... argument would name the host's /workspace, while
//     working_dir and file paths are mapped either way;
//   - the client is a parameter, the session id is returned beside the result.
//
//   CARRYOVER_URL=http://127.0.0.1:8080 CARRYOVER_TOKEN=... node examples/coding-agent.mjs [repo]
import { StateSetSandbox } from '../index.js';

export async function codingAgent(client, task, { repo = 'https://github.com/example/project.git' } = {}) {
  // Create and start session
  const { session } = await client.createAgentSession({
    name: `coding-${Date.now()}`,
    budget: { cost_cap_cents: 500, iteration_limit: 50 },
    sandbox: { cpus: '2', memory: '4Gi', timeout_seconds: 3600 },
  });
  await client.startAgentSession(session.id);
  try {
    // Step 1: Set up project
    const clone = await client.executeInAgentSession(session.id, {
      command: `git clone -q ${repo} project`,
    });
    if (clone.exit_code !== 0) throw new Error(`git clone failed: ${clone.stderr}`);
    await client.updateAgentContext(session.id, { working_dir: '/workspace/project' });
    // Step 2: Install dependencies
    await client.executeInAgentSession(session.id, {
      command: ['npm', 'install', '--no-audit', '--no-fund'],
      working_dir: '/workspace/project',
    });
    // Step 3: Write code
    await client.writeAgentSessionFile(
      session.id,
      '/workspace/project/src/feature.ts',
      `export function newFeature() {\n return 'implemented';\n}\n`,
    );
    // Step 4: Run tests
    const testResult = await client.executeInAgentSession(session.id, {
      command: ['npm', 'test'],
      working_dir: '/workspace/project',
    });
    // Step 5: Track result in context
    await client.updateAgentContext(session.id, {
      custom_state: {
        task,
        tests_passed: testResult.exit_code === 0,
        output: testResult.stdout.slice(0, 500),
      },
    });
    return { sessionId: session.id, success: testResult.exit_code === 0, output: testResult.stdout };
  } finally {
    await client.stopAgentSession(session.id, 'Agent finished');
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const client = new StateSetSandbox({
    baseUrl: process.env.CARRYOVER_URL ?? 'http://127.0.0.1:8080',
    authToken: process.env.CARRYOVER_TOKEN,
  });
  const res = await codingAgent(client, 'add newFeature', process.argv[2] ? { repo: process.argv[2] } : {});
  console.log(res);
}
