// Types of @carryover/client (index.js). Field names are the API's (shared/API.md,
// server/httpapi/openapi.json); every method resolves to the API's JSON answer.

export type SessionState = 'pending' | 'running' | 'paused' | 'rotating' | 'completed' | 'failed' | 'cancelled';

export interface Budget {
  cost_cap_cents?: number;
  iteration_limit?: number;
  duration_limit_seconds?: number;
}

export interface BudgetConsumed {
  cost_cents: number;
  iterations: number;
  duration_seconds: number;
  cpu_seconds?: number;
  memory_gib_hours?: number;
}

export interface SandboxConfig {
  cpus?: string;
  memory?: string;
  /** Size of the workspace disk, e.g. "20Gi" (at most the server's sandbox.max_disk). */
  disk?: string;
  timeout_seconds?: number;
  network?: boolean;
}

export interface Sandbox extends SandboxConfig {
  id?: string;
  status: 'none' | 'starting' | 'live' | 'hibernated';
  started_at?: string;
}

export interface AgentContext {
  working_dir?: string;
  env_vars?: Record<string, string>;
  custom_state?: any;
}

export interface CheckpointRef {
  id: string;
  turn: number;
  created_at: string;
}

export interface Session {
  id: string;
  name: string;
  language: string;
  state: SessionState;
  tenant?: string;
  sandbox: Sandbox;
  data: Record<string, any>;
  agent_context: Required<AgentContext>;
  budget: Budget;
  budget_consumed: BudgetConsumed;
  rotation: { pre_rotate_buffer_seconds?: number };
  client_id?: string;
  last_checkpoint: CheckpointRef | null;
  execution_count?: number;
  stop_reason?: string;
  created_at: string;
  updated_at: string;
  last_activity: string;
  [key: string]: any;
}

export interface CreateAgentSessionOptions {
  session_id?: string;
  name?: string;
  language?: string;
  data?: Record<string, any>;
  budget?: Budget;
  sandbox?: SandboxConfig;
  rotation?: { pre_rotate_buffer_seconds?: number };
  client_id?: string;
  start?: boolean;
}

export interface SessionAnswer {
  session: Session;
}

export interface ExecRequest {
  command: string | string[];
  working_dir?: string;
  env?: Record<string, string>;
  timeout_seconds?: number;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exit_code: number;
  duration_ms: number;
  timed_out?: boolean;
  stdout_dropped_bytes?: number;
  stderr_dropped_bytes?: number;
  record_error?: string;
}

export interface FileInfo {
  path: string;
  size: number;
  modified_at: string;
}

export interface AgentEvent {
  sequence_number: number;
  event_type: string;
  payload: any;
  created_at: string;
}

export interface EventsQuery {
  after_sequence?: number;
  limit?: number;
  event_type?: string;
}

export interface Tool {
  name: string;
  tool_type?: string;
  description?: string;
  input_schema?: any;
  created_at?: string;
}

export type Output =
  | { type: 'stream'; name: 'stdout' | 'stderr'; text: string }
  | { type: 'display_data' | 'update_display_data'; data: Record<string, any>; metadata?: Record<string, any> }
  | { type: 'execute_result'; data: Record<string, any>; execution_count: number; metadata?: Record<string, any> }
  | { type: 'error'; ename: string; evalue: string; traceback: string[] }
  | { type: string; [key: string]: any };

export interface VarSkip {
  name: string;
  type: string;
  reason: string;
}

export interface CheckpointResult {
  id: string;
  turn: number;
  saved: string[];
  unchanged: number;
  skipped: VarSkip[];
  files_saved: number;
  files_skipped: { path: string; reason: string }[];
  bytes_written: number;
  duration_ms: number;
  [key: string]: any;
}

export interface RunResult {
  session_id?: string;
  execution_count: number;
  status: 'ok' | 'error' | 'aborted';
  stdout: string;
  stderr: string;
  /** text/plain of the execute_result; null if none */
  result: string | null;
  outputs: Output[];
  error: { ename: string; evalue: string; traceback: string[] } | null;
  duration_ms: number;
  checkpoint?: CheckpointResult;
  checkpoint_error?: string;
  output_dropped_bytes?: number;
  record_error?: string;
}

export interface CheckpointInfo {
  id: string;
  turn: number;
  created_at: string;
  variables: string[];
  files: number;
  bytes: number;
}

export interface RunOptions {
  /** merged into the session's data after the run */
  updateData?: Record<string, any>;
  /** seconds; the server's default when absent */
  timeout?: number;
  env?: Record<string, string>;
}

export interface RunStreamOptions {
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** every output item, in the kernel's order (streams included) */
  onOutput?: (output: Output) => void;
  onStatus?: (state: 'busy' | 'idle' | string) => void;
  /** answers input(); without it an input() interrupts the run */
  onInput?: (prompt: string, info: { password: boolean }) => string | Promise<string>;
  /** seconds */
  timeout?: number;
  /** aborting interrupts the kernel */
  signal?: AbortSignal;
}

export interface ClientOptions {
  /** default $CARRYOVER_URL, then http://127.0.0.1:8080 */
  baseUrl?: string;
  /** default $CARRYOVER_TOKEN */
  authToken?: string;
  fetch?: typeof fetch;
  /** a WebSocket constructor for runStream when there is no global one (e.g. the `ws` package's) */
  WebSocket?: any;
  /** extra headers on every HTTP request */
  headers?: Record<string, string>;
}

export declare class CarryoverError extends Error {
  constructor(message: string, opts?: { code?: string; status?: number; details?: Record<string, any> | null; result?: any; cause?: unknown });
  name: 'CarryoverError';
  /** not_found, invalid_request, unauthorized, conflict, session_paused, session_closed,
   * budget_exceeded, payload_too_large, timeout, kernel_died, internal; client side:
   * connection_error, websocket_unavailable, aborted */
  code: string;
  /** HTTP status; 0 for a websocket error frame or a connection failure */
  status: number;
  details: Record<string, any> | null;
  /** the partial run/exec answer of a timeout or kernel death, else null */
  result: RunResult | ExecResult | null;
}

export declare class Carryover {
  constructor(options?: ClientOptions);
  readonly baseUrl: string;
  readonly authToken: string;

  request(method: string, path: string, opts?: { json?: any; body?: any; raw?: boolean; query?: Record<string, any> }): Promise<any>;

  // StateSet agent-session names
  createAgentSession(opts?: CreateAgentSessionOptions): Promise<SessionAnswer>;
  startAgentSession(sessionId: string): Promise<SessionAnswer>;
  executeInAgentSession(sessionId: string, req: ExecRequest): Promise<ExecResult>;
  writeAgentSessionFile(sessionId: string, path: string, content: string | Uint8Array | ArrayBuffer, opts?: { encoding?: 'utf-8' | 'base64' }): Promise<{ file: FileInfo }>;
  updateAgentContext(sessionId: string, context: AgentContext): Promise<SessionAnswer>;
  getAgentSession(sessionId: string): Promise<SessionAnswer>;
  getAgentSessionEvents(sessionId: string, opts?: EventsQuery): Promise<{ events: AgentEvent[] }>;
  registerAgentTool(sessionId: string, tool: Tool): Promise<{ tool: Tool }>;
  listAgentTools(sessionId: string): Promise<{ tools: Tool[] }>;
  agentSessionHeartbeat(sessionId: string): Promise<SessionAnswer>;
  /** {session: null} when no session has this client_id */
  reattachAgentSession(clientId: string): Promise<{ session: Session | null }>;
  stopAgentSession(sessionId: string, reason?: string): Promise<SessionAnswer>;
  pauseAgentSession(sessionId: string): Promise<SessionAnswer>;
  resumeAgentSession(sessionId: string): Promise<SessionAnswer>;
  cancelAgentSession(sessionId: string, reason?: string): Promise<SessionAnswer>;
  listAgentSessions(): Promise<{ sessions: Session[] }>;
  deleteAgentSession(sessionId: string): Promise<void>;

  // carryover
  run(sessionId: string, code: string, opts?: RunOptions): Promise<RunResult>;
  execute(code: string, opts?: { language?: string; timeout?: number }): Promise<RunResult>;
  runStream(sessionId: string, code: string, opts?: RunStreamOptions): Promise<RunResult>;
  fork(sessionId: string, opts?: { sessionId?: string; checkpointId?: string }): Promise<SessionAnswer>;
  getNotebook(sessionId: string): Promise<any>;
  runNotebook(sessionId: string, notebook: any, opts?: { continueOnError?: boolean }): Promise<{
    cells: { index: number; result?: RunResult; error?: any }[];
    ran: number;
    stopped_at?: number;
  }>;

  listFiles(sessionId: string): Promise<{ files: FileInfo[] }>;
  getFile(sessionId: string, path: string): Promise<Uint8Array>;
  getFile(sessionId: string, path: string, opts: { encoding: 'utf-8' }): Promise<string>;
  putFile(sessionId: string, path: string, content: string | Uint8Array | ArrayBuffer | Blob): Promise<{ file: FileInfo }>;
  deleteFile(sessionId: string, path: string): Promise<void>;

  listCheckpoints(sessionId: string): Promise<{ checkpoints: CheckpointInfo[] }>;
  restoreCheckpoint(sessionId: string, checkpointId: string): Promise<{ session: Session; restore: any }>;
  checkpoint(sessionId: string): Promise<{ checkpoint: CheckpointResult }>;
}

/** The StateSet SDK's class name: its examples run with only the import changed. */
export { Carryover as StateSetSandbox };
