// Types of @carryover/client (index.js). The API's types (Schemas, at the end of this file) are
// generated from server/httpapi/openapi.json by tools/gen-types.mjs; the methods below name them,
// so every method resolves to the API's JSON answer as the spec describes it.
// `go test ./clients/js/` checks that the generated part is up to date and that the file compiles.

type A = Schemas.Answers;
type B = Schemas.Bodies;

/** Answers input() with the end of input: the kernel raises EOFError. */
export declare const INPUT_EOF: string;

export type SessionState = Schemas.Session['state'];
export type Budget = Schemas.Budget;
export type BudgetConsumed = Schemas.BudgetConsumed;
/** The sandbox a session asks for at create (CreateRequest.sandbox). */
export type SandboxConfig = Schemas.SandboxRequest;
export type Sandbox = Schemas.Sandbox;
export type AgentContext = Schemas.AgentContext;
/** The body of updateAgentContext: the keys given replace the session's. */
export type ContextRequest = Schemas.ContextRequest;
export type CheckpointRef = Schemas.CheckpointRef;
export type Session = Schemas.Session;
export type CreateAgentSessionOptions = Schemas.CreateRequest;
export type SessionAnswer = Schemas.SessionAnswer;
export type ExecRequest = Schemas.ExecRequest;
export type ExecResult = Schemas.ExecResult;
export type FileInfo = Schemas.FileInfo;
export type AgentEvent = Schemas.Event;
export type Tool = Schemas.Tool;
export type Output = Schemas.Output;
export type VarSkip = Schemas.VarSkip;
export type CheckpointResult = Schemas.CheckpointResult;
export type RunResult = Schemas.RunResult;
export type CheckpointInfo = Schemas.CheckpointSummary;
export type Usage = Schemas.Usage;
export type RestoreResult = Schemas.RestoreResult;
export type NotebookRun = Schemas.NotebookRun;
export type ErrorObject = Schemas.ErrorObject;

export interface EventsQuery {
  after_sequence?: number;
  /** only events with a lower sequence number: pages back from the end with order "desc" */
  before_sequence?: number;
  limit?: number;
  event_type?: string;
  /** "desc": the newest first, the limit counted from them */
  order?: "asc" | "desc";
}

export interface RunOptions {
  /** merged into the session's data after the run */
  updateData?: Record<string, any>;
  /** seconds; the server's default when absent */
  timeout?: number;
  env?: Record<string, string>;
  /** the call's Idempotency-Key (default: a new one per call): a retry with it never runs the code twice */
  idempotencyKey?: string;
  /** what the code's input() reads, a line per call, then EOFError */
  stdin?: string;
}

export interface RunStreamOptions {
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** every output item, in the kernel's order (streams included) */
  onOutput?: (output: Output) => void;
  onStatus?: (state: Schemas.WSStatusFrame['execution_state']) => void;
  /** answers input(); null or undefined (or INPUT_EOF) is the end of input: input() raises
   * EOFError; without onInput an input() interrupts the run */
  onInput?: (prompt: string, info: { password: boolean }) => string | null | undefined | Promise<string | null | undefined>;
  /** seconds */
  timeout?: number;
  /** aborting interrupts the kernel */
  signal?: AbortSignal;
  /** the run frame's idempotency key (default: a new one per call), sent again on a reconnect */
  idempotencyKey?: string;
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
  /** how long one call retries connection failures and 421/503/429 answers, in seconds (default 60; 0: never) */
  retrySeconds?: number;
}

/** a fresh idempotency key (what run, exec and runStream send when given none) */
export declare function newIdempotencyKey(): string;

export declare class CarryoverError extends Error {
  constructor(message: string, opts?: { code?: string; status?: number; details?: Record<string, any> | null; result?: any; cause?: unknown });
  name: 'CarryoverError';
  /** the API's code (Schemas.ErrorObject['code']: not_found, invalid_request, unauthorized, conflict,
   * session_paused, session_closed, budget_exceeded, payload_too_large, timeout, kernel_died,
   * not_owner, internal); client side: connection_error, websocket_unavailable, aborted */
  code: ErrorObject['code'] | 'connection_error' | 'websocket_unavailable' | 'aborted' | (string & {});
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

  readonly retrySeconds: number;

  request(method: string, path: string, opts?: { json?: any; body?: any; raw?: boolean; query?: Record<string, any>; headers?: Record<string, string> }): Promise<any>;

  // StateSet agent-session names
  createAgentSession(opts?: B['POST /api/sessions']): Promise<A['POST /api/sessions']>;
  startAgentSession(sessionId: string): Promise<A['POST /api/sessions/{id}/start']>;
  executeInAgentSession(sessionId: string, req: B['POST /api/sessions/{id}/exec'] & { idempotencyKey?: string }): Promise<A['POST /api/sessions/{id}/exec']>;
  writeAgentSessionFile(sessionId: string, path: string, content: string | Uint8Array | ArrayBuffer, opts?: { encoding?: 'utf-8' | 'base64' }): Promise<A['POST /api/sessions/{id}/files']>;
  updateAgentContext(sessionId: string, context: B['PATCH /api/sessions/{id}/context']): Promise<A['PATCH /api/sessions/{id}/context']>;
  getAgentSession(sessionId: string): Promise<A['GET /api/sessions/{id}']>;
  getAgentSessionEvents(sessionId: string, opts?: EventsQuery): Promise<A['GET /api/sessions/{id}/events']>;
  registerAgentTool(sessionId: string, tool: B['POST /api/sessions/{id}/tools']): Promise<A['POST /api/sessions/{id}/tools']>;
  listAgentTools(sessionId: string): Promise<A['GET /api/sessions/{id}/tools']>;
  agentSessionHeartbeat(sessionId: string): Promise<A['POST /api/sessions/{id}/heartbeat']>;
  /** {session: null} when no session has this client_id (the API answers 404) */
  reattachAgentSession(clientId: string): Promise<{ session: Session | null }>;
  stopAgentSession(sessionId: string, reason?: string): Promise<A['POST /api/sessions/{id}/stop']>;
  pauseAgentSession(sessionId: string): Promise<A['POST /api/sessions/{id}/pause']>;
  resumeAgentSession(sessionId: string): Promise<A['POST /api/sessions/{id}/resume']>;
  cancelAgentSession(sessionId: string, reason?: string): Promise<A['POST /api/sessions/{id}/cancel']>;
  /** every session; with limit, one page and next_cursor when more remain (pass it as cursor) */
  listAgentSessions(opts?: { limit?: number; cursor?: string; newest?: boolean }): Promise<A['GET /api/sessions']>;
  /** every session, fetched a page at a time */
  iterAgentSessions(opts?: { pageSize?: number; newest?: boolean }): AsyncGenerator<Session>;
  deleteAgentSession(sessionId: string): Promise<void>;

  // carryover
  run(sessionId: string, code: string, opts?: RunOptions): Promise<A['POST /api/sessions/{id}/run']>;
  execute(code: string, opts?: { language?: B['POST /api/execute']['language']; timeout?: number; idempotencyKey?: string; stdin?: string }): Promise<A['POST /api/execute']>;
  runStream(sessionId: string, code: string, opts?: RunStreamOptions): Promise<Schemas.WSResultFrame['result']>;
  fork(sessionId: string, opts?: { sessionId?: string; checkpointId?: string; count?: number }): Promise<A['POST /api/sessions/{id}/fork']>;
  /** the .ipynb (nbformat 4.5), parsed */
  getNotebook(sessionId: string): Promise<any>;
  runNotebook(sessionId: string, notebook: any, opts?: { continueOnError?: boolean }): Promise<A['POST /api/sessions/{id}/notebook']>;
  /** the archive (docs/export-format.md), in memory */
  exportSession(sessionId: string, opts?: { checkpointId?: string; events?: boolean; stream?: false }): Promise<Uint8Array>;
  exportSession(sessionId: string, opts: { checkpointId?: string; events?: boolean; stream: true }): Promise<ReadableStream<Uint8Array>>;
  importSession(archive: Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>, opts?: { sessionId?: string }): Promise<A['POST /api/sessions/import']>;

  listFiles(sessionId: string): Promise<A['GET /api/sessions/{id}/files']>;
  getFile(sessionId: string, path: string): Promise<Uint8Array>;
  getFile(sessionId: string, path: string, opts: { encoding: 'utf-8' }): Promise<string>;
  putFile(sessionId: string, path: string, content: string | Uint8Array | ArrayBuffer | Blob): Promise<A['PUT /api/sessions/{id}/files/{path}']>;
  deleteFile(sessionId: string, path: string): Promise<void>;

  listCheckpoints(sessionId: string): Promise<A['GET /api/sessions/{id}/checkpoints']>;
  restoreCheckpoint(sessionId: string, checkpointId: string): Promise<A['POST /api/sessions/{id}/checkpoints/{cid}/restore']>;
  checkpoint(sessionId: string): Promise<A['POST /api/sessions/{id}/checkpoint']>;
  getUsage(sessionId: string): Promise<A['GET /api/sessions/{id}/usage']>;
}

/** The StateSet SDK's class name: its examples run with only the import changed. */
export { Carryover as StateSetSandbox };

// ---- GENERATED from server/httpapi/openapi.json by tools/gen-types.mjs: do not edit ----

/** The API's types, as server/httpapi/openapi.json describes them. */
export declare namespace Schemas {
  /** extension. An API key as listed: never its secret. */
  export interface APIKey {
    /** `key_` and 16 hex digits */
    id: string;
    tenant: string;
    name?: string;
    /** what the key may do; scopes nest (read < run < tenant < admin), docs/tenants.md */
    scope: "read" | "run" | "tenant" | "admin";
    /** the secret's first 12 characters (`cok_` and 8 more), to tell keys apart */
    prefix: string;
    created_at: string;
    expires_at?: string;
    /** updated at most once a minute per node */
    last_used_at?: string;
  }

  /** extension. A key just created, with its secret (shown this once). */
  export interface CreatedKey {
    /** `key_` and 16 hex digits */
    id: string;
    tenant: string;
    name?: string;
    /** what the key may do; scopes nest (read < run < tenant < admin), docs/tenants.md */
    scope: "read" | "run" | "tenant" | "admin";
    /** the secret's first 12 characters (`cok_` and 8 more), to tell keys apart */
    prefix: string;
    created_at: string;
    expires_at?: string;
    /** updated at most once a minute per node */
    last_used_at?: string;
    /** `cok_` and 43 base64url characters (256 random bits): send it as `Authorization: Bearer <secret>` */
    secret: string;
  }

  /** extension. */
  export interface CreateKeyRequest {
    /** the tenant whose sessions the key works on (1-128 characters) */
    tenant: string;
    scope: "read" | "run" | "tenant" | "admin";
    /** a label (at most 200 characters) */
    name?: string;
    /** refused from then on; absent: never expires */
    expires_at?: string;
  }

  export interface ErrorObject {
    /**
     * Machine-readable error code. HTTP status of each code (server/httpapi/errors.go statusOf):
     *
     * | code | HTTP | when |
     * |---|---|---|
     * | invalid_request | 400 | malformed JSON, wrong types, bad ids, bad paths (`..`, absolute outside the workspace) |
     * | unauthorized | 401 | no or wrong token; a websocket Origin that is not allowed |
     * | not_found | 404 | unknown session / file / checkpoint / endpoint (also for sessions of another token's tenant) |
     * | conflict | 409 | session id already exists; action not allowed in the current state |
     * | session_paused | 409 | run/exec on a paused session |
     * | session_closed | 409 | run/exec on a completed, failed or cancelled session |
     * | budget_exceeded | 402 | a budget limit is reached; details say which |
     * | payload_too_large | 413 | body or file over the configured limit, or a file upload over the room left on the session's workspace disk (details `size_bytes`, `free_bytes`, `disk_bytes`, `free_files`) |
     * | timeout | 504 | the run exceeded timeout_seconds (the kernel was interrupted; state kept); the answer adds `result` |
     * | kernel_died | 502 | the kernel died during the run (session restored from its last checkpoint); the answer adds `result` |
     * | not_owner | 421 | cluster only: the session is served by another node and this request could not reach it (already forwarded once, or the owner died or paused mid-request); details `owner_node`, `owner_addr`; retry once, any node. A run whose session moved while it ran adds `result` (its effects were not saved) |
     * | forbidden | 403 | the token or API key is valid but its scope does not allow the request (a read key running code); details `scope`, `required_scope` |
     * | quota_exceeded | 429 | a tenant quota is used up; details `quota` (sessions, live_kernels, stored_bytes, cpu_seconds), `limit`, `use` |
     * | rate_limited | 429 | the credential is over its request rate; header `Retry-After`; details `limit`, `burst`, `retry_after_seconds` |
     * | idempotency_key_reused | 422 | the Idempotency-Key was first used with another request (another body, or run vs exec) |
     * | run_interrupted | 409 | the first attempt with this Idempotency-Key was cut off (its server stopped or lost the session) before its answer was stored: the cell may have run, so it is not run again; details `idempotency_key`, `reserved_at` |
     * | capacity | 429 | the node holds all the live kernels it can (capacity.max_live_kernels) and every one stayed busy for the queue time (capacity.queue_seconds), or the queue is full, or a kernel did not start within kernel.startup_timeout_seconds (an overloaded node); in a cluster, also a new session no node has room for (at once), or one sent to a node that has no room or did not answer; header `Retry-After`; details `reason` (busy, queue_full, start_timeout, cluster_full, unreachable), `live`, `capacity`, `queued` (cluster_full: summed over the live nodes, with `nodes`), `retry_after_seconds`. Retry after Retry-After |
     * | internal | 500 | anything else; never a Go panic trace |
     */
    code: "invalid_request" | "unauthorized" | "not_found" | "conflict" | "session_paused" | "session_closed" | "budget_exceeded" | "payload_too_large" | "timeout" | "kernel_died" | "not_owner" | "forbidden" | "quota_exceeded" | "rate_limited" | "idempotency_key_reused" | "run_interrupted" | "capacity" | "internal";
    /** Human-readable message. */
    message: string;
    /** Structured details, e.g. `field`, `path`, `session_id`, `limit`, `state`; `quota`, `limit`, `use` of a `quota_exceeded`. */
    details?: Record<string, any>;
  }

  /** Every error answer: `{"error": {"code", "message", "details"}}`, plus `result` for a run that timed out or whose kernel died. */
  export interface Error {
    error: ErrorObject;
    /** The partial run answer; only with codes `timeout`, `kernel_died` and `not_owner` of a run. */
    result?: RunResult;
  }

  /** Budget limits; zero or absent means no limit. */
  export interface Budget {
    cost_cap_cents?: number;
    iteration_limit?: number;
    duration_limit_seconds?: number;
  }

  export interface BudgetConsumed {
    cost_cents: number;
    iterations: number;
    duration_seconds: number;
    /** extension: what cost_cents is computed from */
    cpu_seconds?: number;
    /** extension */
    memory_gib_hours?: number;
  }

  export interface Sandbox {
    id?: string;
    status: "none" | "starting" | "live" | "hibernated";
    cpus?: string;
    memory?: string;
    /** The workspace disk's size asked for at create (absent: the server's sandbox.disk) */
    disk?: string;
    timeout_seconds?: number;
    network: boolean;
    started_at?: string;
    /** The egress allowlist of a session created with network {"allow": [...]}: its only way out is the server's filtering HTTP(S) proxy. */
    network_allow?: string[];
    /** "rw" when the session may change its tenant's skills at /skills (absent: read-only) */
    skills?: "rw";
  }

  export interface SandboxRequest {
    cpus?: string;
    memory?: string;
    /** Size of the session's workspace disk (a loop-mounted ext4 image; writes past it fail with ENOSPC), at least 8Mi and at most the server's sandbox.max_disk; absent: sandbox.disk. Refused (400) when the server gives workspaces no disk of their own. */
    disk?: string;
    timeout_seconds?: number | null;
    /** true: the host's network; false: none; {"allow": [...]}: only these destinations ("host" for ports 80 and 443, "host:port", "*.domain"), through the server's filtering HTTP(S) proxy (HTTP_PROXY and HTTPS_PROXY are set in the sandbox). Loopback, private and link-local addresses are refused unless an entry without a wildcard names the host. */
    network?: boolean | {
      allow: string[];
    } | null;
    /** "rw" lets the session change its tenant's skills at /skills; "ro" (the default) shows them read-only */
    skills?: "ro" | "rw";
  }

  export interface AgentContext {
    working_dir: string;
    env_vars: Record<string, string>;
    custom_state: Record<string, any>;
  }

  export interface Rotation {
    pre_rotate_buffer_seconds?: number;
  }

  export interface CheckpointRef {
    id: string;
    turn: number;
    created_at: string;
  }

  export interface Session {
    id: string;
    name: string;
    /** a kernelspec name; `python` is the default Python kernel */
    language: string;
    state: "pending" | "running" | "paused" | "rotating" | "completed" | "failed" | "cancelled";
    sandbox: Sandbox;
    data: Record<string, any>;
    agent_context: AgentContext;
    budget: Budget;
    budget_consumed: BudgetConsumed;
    rotation: Rotation;
    client_id?: string;
    /** extension: the token's tenant (`default` for auth.token) */
    tenant?: string;
    /** extension: in a cluster (store.driver postgres), the node serving the session; absent on a single node */
    owner_node?: string;
    last_checkpoint: CheckpointRef | null;
    /** extension */
    execution_count?: number;
    /** extension */
    stop_reason?: string;
    running_since?: string;
    created_at: string;
    updated_at: string;
    last_activity: string;
  }

  /** Every field is optional; an empty body is allowed. */
  export interface CreateRequest {
    /** generated when absent */
    session_id?: string;
    name?: string;
    language?: string;
    data?: Record<string, any> | null;
    budget?: Budget | null;
    sandbox?: SandboxRequest | null;
    rotation?: Rotation | null;
    client_id?: string;
    /** start the kernel at once */
    start?: boolean;
  }

  /** Given keys replace; applied to the live kernel (cwd, os.environ) and kept across rotations. */
  export interface ContextRequest {
    working_dir?: string | null;
    env_vars?: Record<string, string>;
    custom_state?: Record<string, any>;
  }

  export interface RunRequest {
    code: string;
    update_data?: Record<string, any> | null;
    timeout_seconds?: number | null;
    env?: Record<string, string>;
    /** extension: exactly-once under retries, as the Idempotency-Key header (which wins when both are sent and must then be equal); see api.md "Idempotency keys" */
    idempotency_key?: string;
    /** extension: the text the cell's input() reads, a line per call (the last line counts without its newline); past its end input() raises EOFError. Without it, input() raises StdinNotImplementedError (POST /run has nobody to ask) */
    stdin?: string;
  }

  export interface ExecuteRequest {
    language?: "" | "python" | "python3";
    code: string;
    timeout_seconds?: number | null;
    /** extension: what the code's input() reads, as RunRequest's stdin */
    stdin?: string;
  }

  export interface RunError {
    ename: string;
    evalue: string;
    traceback?: string[] | null;
  }

  /** One kernel output, as Jupyter's iopub messages give it. */
  export type Output = {
    type: "stream";
    name: "stdout" | "stderr";
    text: string;
  } | {
    type: "display_data";
    /** MIME type -> content (base64 for binary types, text or JSON otherwise) */
    data: Record<string, any>;
    metadata?: Record<string, any>;
    transient?: Record<string, any>;
  } | {
    type: "update_display_data";
    /** MIME type -> content (base64 for binary types, text or JSON otherwise) */
    data: Record<string, any>;
    metadata?: Record<string, any>;
    transient?: Record<string, any>;
  } | {
    type: "execute_result";
    /** MIME type -> content (base64 for binary types, text or JSON otherwise) */
    data: Record<string, any>;
    metadata?: Record<string, any>;
    execution_count?: number;
  } | {
    type: "error";
    ename: string;
    evalue: string;
    traceback?: string[];
  } | {
    type: "clear_output";
    wait?: boolean;
  };

  export interface VarSkip {
    name: string;
    type: string;
    reason: string;
  }

  /** A skipped variable a restore rebuilt by replaying the turns that made it. */
  export interface Recomputed {
    name: string;
    /** the turn that bound it, as the session numbers turns (its execution_count) */
    turn: number;
    /** every turn replayed to rebuild it (execution_count numbers) */
    turns: number[];
    ms: number;
    /** what of the rebuilt value matched the fingerprint the checkpoint saved of it ("type, shape, dtype, requires_grad, grad_fn, data" for a tensor; "type, code, finished, at, locals" for a generator; a tensor or array over 4 MiB without "data"); absent when the checkpoint holds no fingerprint of it. A rebuilt value that does not match is not bound: it is in not_replayed ("rebuilt output differs from the saved one: shape (2, 1) vs (1, 1)", rebuilt then saved) */
    verified?: string;
  }

  /** extension: what a restore did (a kernel's death or a wake restored the last checkpoint, or a checkpoint was restored), told once in the answer of the run after it. */
  export interface RestoreReport {
    checkpoint_id: string;
    turn: number;
    /** skipped variables replay rebuilt */
    recomputed: Recomputed[];
    /** skipped variables replay could not rebuild, each with why */
    not_replayed: VarSkip[];
    /** what the restored checkpoint could not save */
    skipped: VarSkip[];
    /** variables that failed to load */
    failed: VarSkip[];
    /** a wake keeps the workspace on disk as the live copy: workspace files that differ from the checkpoint restored (changed, added or deleted since it, e.g. by a turn never answered because the server died), kept as they are and named here */
    files_ahead?: string[];
  }

  export interface FileSkip {
    path: string;
    reason: string;
  }

  export interface CheckpointResult {
    id: string;
    turn: number;
    saved: string[] | null;
    unchanged: number;
    skipped: VarSkip[] | null;
    files_saved: number;
    files_skipped: FileSkip[] | null;
    bytes_written: number;
    duration_ms: number;
    timings?: {
      detect_ms?: number;
      serialize_ms?: number;
      write_ms?: number;
      files_ms?: number;
      /** How changes in large numpy buffers were found: dirty-page tracking, every chunk hashed, or both. */
      dirty_mode?: "uffd" | "hash" | "mixed";
      /** Why some large buffers were hashed whole instead of tracked. */
      dirty_fallback?: string;
      /** Pickled size of the large lists and dicts of records saved in slices. */
      sliced_bytes?: number;
      /** The part of sliced_bytes this checkpoint pickled again (the changed slices). */
      sliced_repickled_bytes?: number;
      /** Large containers this checkpoint pickled whole, and why (an item not JSON-like, nested too deep, an object in it twice). */
      unsliced?: VarSkip[];
    };
    created_at?: string;
  }

  /** A run's answer; `status: error` when the code raised (HTTP 200). POST /api/execute gives the same shape without `checkpoint`. */
  export interface RunResult {
    /** absent for POST /api/execute */
    session_id?: string;
    execution_count: number;
    status: "ok" | "error" | "aborted";
    stdout: string;
    stderr: string;
    result: string | null;
    outputs: Output[] | null;
    error: RunError | null;
    duration_ms: number;
    /** extension: output over run.max_output_bytes */
    output_dropped_bytes?: number;
    checkpoint?: CheckpointResult;
    /** extension: the checkpoint failed (the run itself succeeded) */
    checkpoint_error?: string;
    /** extension: the turn ran but its record could not be saved */
    record_error?: string;
    /** extension: the report of the restore since the last answer (this run's own, when its kernel had died or the session was asleep): what replay rebuilt and what it could not; also in that checkpoint_restored event */
    restore?: RestoreReport;
    /** background processes (a server, a subprocess.Popen) that ended when the session's previous kernel was stopped on purpose (rotation, hibernation, stop) or died since the last answer (this one's included); also in that sandbox_terminated or kernel_died event's payload. After a death they are named from the last sample of the kernel's processes (taken at a turn's end, at most once a second) */
    processes_ended?: {
      /** the pid the session saw (its sandbox's pid namespace) */
      pid: number;
      command: string;
    }[];
  }

  export interface ExecRequest {
    command: string[] | string;
    working_dir?: string;
    env?: Record<string, string>;
    timeout_seconds?: number | null;
    /** extension: exactly-once under retries, as the Idempotency-Key header (which wins when both are sent and must then be equal); see api.md "Idempotency keys" */
    idempotency_key?: string;
  }

  export interface ExecResult {
    stdout: string;
    stderr: string;
    exit_code: number;
    duration_ms: number;
    /** extension */
    timed_out?: boolean;
    /** extension: the command was killed by an interrupt of the session (POST .../interrupt, or its delete) */
    interrupted?: boolean;
    /** extension */
    stdout_dropped_bytes?: number;
    /** extension */
    stderr_dropped_bytes?: number;
    /** extension: the output's exact bytes, base64, when they are not UTF-8 (stdout then holds U+FFFD for each byte it cannot carry); absent for text */
    stdout_base64?: string;
    /** extension: as stdout_base64, of stderr */
    stderr_base64?: string;
    /** extension */
    record_error?: string;
  }

  export interface CompleteRequest {
    code: string;
    cursor_pos?: number | null;
  }

  export interface CompleteReply {
    matches: string[] | null;
    cursor_start: number;
    cursor_end: number;
    metadata?: Record<string, any> | null;
  }

  export interface Event {
    sequence_number: number;
    /** At least: session_started, session_paused, session_resumed, session_completed, session_failed, session_cancelled, session_hibernated, session_forked, sandbox_created, sandbox_terminated, sandbox_limit_exceeded, rotation_started, rotation_completed, rotation_failed, exec_started, exec_completed, budget_warning, budget_exceeded, checkpoint_created, checkpoint_restored, checkpoint_failed, tool_registered, heartbeat, kernel_died, variables_skipped, kernel_restarted. */
    event_type: string;
    /** event-specific JSON */
    payload: any;
    created_at: string;
  }

  export interface Execution {
    session_id: string;
    execution_count: number;
    kind: "run" | "exec";
    /** the code, or the command */
    code: string;
    status: string;
    /** the full /run or /exec answer */
    result: RunResult | ExecResult | null;
    started_at: string;
    duration_ms: number;
  }

  export interface Tool {
    name: string;
    /** default `custom` */
    tool_type?: string;
    description?: string;
    /** a JSON Schema of the tool's input */
    input_schema?: any;
    readonly created_at?: string;
  }

  /** extension: what one session has used since it was created; every kernel it had counts (a restart or a wake after hibernation adds to the figures, never resets them) */
  export interface Usage {
    session_id: string;
    /** user+system CPU of its kernels and shell commands (budget_consumed.cpu_seconds) */
    cpu_seconds: number;
    /** its kernels' resident memory integrated over time (budget_consumed.memory_gib_hours) */
    memory_gib_hours: number;
    /** the largest resident memory any kernel of the session was sampled at (once a second while live, and after each turn) */
    memory_peak_bytes: number;
    /** the live kernel's resident memory at its last sample; 0 without a live kernel */
    memory_bytes: number;
    /** what its kept checkpoints wrote to the store (namespaces, workspace files, manifests; after deduplication and compression): what the stored_bytes quota adds up */
    stored_bytes: number;
    /** how many checkpoints are kept */
    checkpoints: number;
    /** the sandbox status: none, starting, live or hibernated */
    sandbox: string;
  }

  export interface CheckpointSummary {
    id: string;
    turn: number;
    created_at: string;
    variables: string[] | null;
    files: number;
    bytes: number;
  }

  export interface RestoreResult {
    checkpoint_id: string;
    turn: number;
    restored: string[] | null;
    failed: VarSkip[] | null;
    skipped: VarSkip[] | null;
    /** Skipped variables rebuilt on this restore by replaying the turns that made them (persistence.replay). */
    recomputed?: Recomputed[] | null;
    /** Skipped variables replay could not rebuild, each with why ("not replayed: turn 7 is not safe to run again: it writes files"). */
    not_replayed?: VarSkip[] | null;
    files: number;
    cwd: string;
    duration_ms: number;
    timings?: {
      read_ms?: number;
      load_ms?: number;
      /** The part of load_ms that waited for chunks: into a new kernel (a wake, a fork's first run) the load runs while the chunks are read. */
      wait_ms?: number;
      files_ms?: number;
      /** Bytes of large buffers mapped at once and filled in the background after the restore returned (a thread touching a page not filled yet waits for it); not in read_ms. */
      lazy_bytes?: number;
      /** Why large buffers that could have been restored lazily were read eagerly instead. */
      lazy_off?: string;
      /** Bytes of large buffers mapped copy-on-write from the node's one copy of them, which other kernels restoring the same bytes (a fork's children) map too (persistence.shared_buffers). */
      shared_bytes?: number;
      /** Why large buffers that could have been mapped from a shared copy were not. */
      shared_off?: string;
    };
    groups?: {
      n?: string[];
      ms?: number;
    }[];
  }

  export interface FileInfo {
    /** relative to /workspace */
    path: string;
    size: number;
    modified_at: string;
  }

  /** StateSet's writeAgentSessionFile shape. */
  export interface FileWriteRequest {
    /** `notes.md` or `/workspace/notes.md` */
    path: string;
    content: string;
    encoding?: "" | "utf-8" | "utf8" | "base64";
  }

  /** `data` merges into the session's data. */
  export interface PatchSessionRequest {
    data: Record<string, any>;
  }

  /** Optional body of stop and cancel. */
  export interface ReasonRequest {
    reason?: string;
  }

  export interface ReattachRequest {
    client_id: string;
  }

  export interface SessionAnswer {
    session: Session;
  }

  export interface Health {
    status: "ok";
  }

  export interface Ready {
    status: "ready" | "not_ready";
    reason?: string;
  }

  export interface WSClientRunFrame {
    type: "run";
    /** the client's run id; generated when absent */
    id?: string;
    code: string;
    timeout_seconds?: number | null;
    /** extension: exactly-once under retries, a run frame sent again with the same key (after a reconnect) gets the first one's result, error and idle frames instead of a second run; see api.md "Idempotency keys" */
    idempotency_key?: string;
  }

  export interface WSClientInputReplyFrame {
    type: "input_reply";
    id: string;
    value: string;
  }

  export interface WSClientInterruptFrame {
    type: "interrupt";
    id?: string;
  }

  export interface WSClientSubscribeEventsFrame {
    type: "subscribe_events";
    after_sequence?: number;
  }

  export interface WSClientPingFrame {
    type: "ping";
    id?: string;
  }

  export interface WSStatusFrame {
    type: "status";
    id: string;
    execution_state: "busy" | "idle";
    /** with busy */
    code?: string;
  }

  export interface WSOutputFrame {
    type: "output";
    id: string;
    output: Output;
  }

  export interface WSInputRequestFrame {
    type: "input_request";
    id: string;
    prompt: string;
    password: boolean;
  }

  export interface WSResultFrame {
    type: "result";
    id: string;
    result: RunResult;
  }

  export interface WSEventFrame {
    type: "event";
    event: Event;
    /** true for an event logged before this subscribe_events (sent from the store); absent for a live one */
    backlog?: boolean;
  }

  export interface WSErrorFrame {
    type: "error";
    /** empty when not about one run */
    id: string;
    error: ErrorObject;
  }

  export interface WSRunningFrame {
    type: "running";
    id: string;
    code: string;
    execution_count?: number | null;
    outputs: Output[] | null;
    input_request?: WSInputRequestFrame;
  }

  export interface WSNoticeFrame {
    type: "notice";
    message?: string;
    dropped: number;
  }

  /** extension: a comm message (Jupyter widgets) to the session's live kernel; not a turn, does not wait for a running cell. A refusal is an error frame whose id is msg_id (conflict: no live kernel). */
  export interface WSClientCommFrame {
    type: "comm";
    msg_type: "comm_open" | "comm_msg" | "comm_close";
    /** the client's id for the message (the kernel's outputs and comm_idle name it as parent_msg_id); default: one is made */
    msg_id?: string;
    /** the Jupyter comm message's content */
    content: {
      comm_id: string;
      data?: Record<string, any>;
      /** comm_open only */
      target_name?: string;
      target_module?: string | null;
    };
    metadata?: Record<string, any>;
    /** the message's binary parts, base64 */
    buffers?: string[];
  }

  /** extension: a comm message from the session's kernel (every client gets it) */
  export interface WSCommFrame {
    type: "comm";
    msg_type: "comm_open" | "comm_msg" | "comm_close";
    msg_id: string;
    parent_msg_id?: string;
    /** the Jupyter comm message's content */
    content: {
      comm_id: string;
      data?: Record<string, any>;
      /** comm_open only */
      target_name?: string;
      target_module?: string | null;
    };
    metadata?: Record<string, any>;
    /** the message's binary parts, base64 */
    buffers?: string[];
  }

  /** extension: an output an ipywidgets Output widget captured (with out:, interact), sent instead of the cell's output frame and not in the turn's record */
  export interface WSCommOutputFrame {
    type: "comm_output";
    /** the Output widget's model */
    comm_id: string;
    /** the message whose handling made it */
    parent_msg_id: string;
    output: Output;
  }

  /** extension: the kernel finished handling a client's comm_msg */
  export interface WSCommIdleFrame {
    type: "comm_idle";
    parent_msg_id: string;
  }

  /** extension: the session has a new kernel (wake, restart after a death, rotation): comms and widgets drawn before it are gone (widget state is not checkpointed) */
  export interface WSCommResetFrame {
    type: "comm_reset";
    message: string;
  }

  export interface WSPongFrame {
    type: "pong";
    id: string;
  }

  /** A client -> server text frame. */
  export type WSClientFrame = WSClientRunFrame | WSClientInputReplyFrame | WSClientInterruptFrame | WSClientSubscribeEventsFrame | WSClientPingFrame;

  /** A server -> client text frame. */
  export type WSServerFrame = WSStatusFrame | WSOutputFrame | WSInputRequestFrame | WSResultFrame | WSEventFrame | WSErrorFrame | WSRunningFrame | WSNoticeFrame | WSPongFrame;

  /** What running a notebook's code cells did, in order. */
  export interface NotebookRun {
    cells: {
      /** the cell's index among the notebook's cells */
      index: number;
      result?: RunResult;
      error?: ErrorObject;
    }[];
    /** cells that ran */
    ran: number;
    /** the index of the cell that stopped the run (absent when every cell ran) */
    stopped_at?: number;
  }

  /** extension: one name of the namespace, for the UI's variable inspector */
  export interface VariableInfo {
    name: string;
    type?: string;
    shape?: number[];
    length?: number;
    /** size in memory: nbytes, pandas memory_usage (deep up to 200,000 rows) or sys.getsizeof (shallow) */
    bytes?: number;
    /** in the latest checkpoint; skipped by it (see reason); defined after it */
    state: "saved" | "skipped" | "unsaved";
    reason?: string;
  }

  /** one page of the data viewer */
  export interface RowsPage {
    name: string;
    /** the variable's type, module-qualified */
    type: string;
    columns: {
      name: string;
      dtype: string;
    }[];
    total_rows: number;
    /** rows after the search */
    matched_rows: number;
    offset: number;
    limit: number;
    /** the rows' index labels */
    index: any[];
    rows: any[][];
  }

  export interface Variables {
    variables: VariableInfo[];
    /** read from the idle kernel by one silent user expression (no execution count, no history); false: from the latest checkpoint (no shapes or sizes) */
    live: boolean;
    checkpoint_id?: string;
    /** why the answer is not live */
    note?: string;
  }

  /** This node's load (GET /api/status, docs/capacity.md). */
  export interface NodeStatus {
    /** cluster only */
    node_id?: string;
    capacity: {
      /** live kernels this node holds at most; 0: no limit */
      max_live_kernels: number;
      /** configured, or derived from the memory budget */
      source: "config" | "derived";
      /** kernels held now (sessions' and /api/execute's) */
      live_kernels: number;
      /** turns waiting for a slot now */
      queued: number;
      /** turns that had to wait, since start */
      queued_total: number;
      queue_seconds: number;
      memory_budget_bytes: number;
      /** a live kernel's memory estimate */
      kernel_bytes: number;
    };
    sessions: {
      total: number;
      /** holding a kernel */
      live: number;
      /** running without a kernel; the next turn wakes it */
      hibernated: number;
      /** running a turn */
      busy: number;
    };
    memory: {
      /** what the live kernels cost at their last sample: each one's resident memory, less the node's shared buffer copies it maps, which are counted once (docs/capacity.md#memory-pressure) */
      kernel_bytes: number;
      /** MemAvailable or the cgroup's room; -1: unknown */
      available_bytes: number;
      /** /proc/pressure/memory full avg10; -1: no PSI */
      psi_full_avg10: number;
    };
    pool: {
      idle: number;
      starting: number;
      /** what the pool refills to now */
      target: number;
      size: number;
      max_size: number;
      claims: number;
      /** claims that found no warm kernel */
      misses: number;
      /** times the target grew */
      grown: number;
    };
    /** extension: the warm template kernels are forked from (pool.templates; docs/capacity.md#kernel-templates); absent when kernels are not forked on this node */
    templates?: {
      /** templates warm now */
      live: number;
      /** the warm template's resident memory; 0 without one */
      rss_bytes: number;
      /** its proportional share of the pages it shares with its children */
      pss_bytes: number;
      /** its private memory: what it costs at rest beside its children */
      uss_bytes: number;
      /** kernels forked from a template since start */
      forks: number;
      /** kernels started cold instead: not forkable (an import-time env variable, fresh), no template warm in time, or a failed fork */
      cold_fallbacks: number;
      /** templates started again after one exited */
      restarts: number;
      /** sandbox only: boxes kept ready for forked kernels (pool.spare_boxes) */
      spare_boxes?: {
        ready: number;
        /** pool.spare_boxes */
        want: number;
        /** launches that took a ready box */
        served: number;
        /** launches that could have taken one and found none ready */
        missed: number;
      };
    };
    /** hibernations since start by reason: capacity, memory, idle, requested */
    evictions: Record<string, number>;
    /** 429 capacity answers since start by reason: busy, queue_full, start_timeout */
    refusals: Record<string, number>;
    /** cluster only: every live node's load (this node's included) as this node last read it from the shared store, at most one heartbeat old; placement weighs it when this node has no free slot (docs/capacity.md). Nodes of an older build, which publish no load, are left out */
    cluster?: {
      node_id: string;
      live_kernels: number;
      /** 0: no limit */
      max_live_kernels: number;
      queued: number;
      /** live kernels whose session runs no turn: what the node may hibernate to make room */
      idle_kernels: number;
    }[];
    /** the room on data_dir's filesystem: a full data dir fails every checkpoint (turns answer checkpoint_error and keep their live state), so level warns before it is full (warn: below twice doctor's minimum free space or a tenth of the filesystem; fail: below the minimum, 1 GiB) */
    disk?: {
      dir: string;
      free_bytes: number;
      total_bytes: number;
      level: "ok" | "warn" | "fail";
      warning?: string;
      /** the measure failed (level fail) */
      error?: string;
    };
  }

  /** extension: one checkpoint's content, for the UI's checkpoint diff */
  export interface CheckpointDetail {
    id: string;
    turn: number;
    created_at: string;
    variables: {
      name: string;
      type?: string;
      kind: "imp" | "def" | "data";
      /** content reference: equal in two checkpoints exactly when the value is the same */
      ref?: string;
      /** serialized size of the variable's restore group (names sharing objects are one group) */
      bytes: number;
    }[];
    skipped: VarSkip[];
    files: {
      path: string;
      size: number;
      ref: string;
      modified_at: string;
    }[];
    files_skipped: FileSkip[];
  }

  export interface ImportResult {
    session: Session;
    /** the new session's checkpoint (a new id; the archive's is in source) */
    checkpoint_id: string;
    /** where the archive was made */
    source: {
      session_id?: string;
      checkpoint_id?: string;
      turn?: number;
      checkpoint_created_at?: string;
      workspace?: string;
      manifest_format?: number;
    };
    /** chunks in the archive */
    chunks: number;
    /** chunks the store already held: verified, not written again */
    chunks_present: number;
    /** stored bytes newly written (what the stored_bytes quota counts) */
    bytes_written: number;
    /** events of the source's log appended to the new session's log (0 when the archive carries none) */
    events: number;
    /** settings this server could not apply, each named */
    warnings: string[];
  }

  /** The JSON answer (2xx) of each operation. */
  export interface Answers {
    "POST /api/admin/keys": CreatedKey;
    "GET /api/admin/keys": {
      keys: APIKey[];
    };
    "GET /healthz": Health;
    "GET /readyz": Ready;
    "GET /api/openapi.json": Record<string, any>;
    "POST /api/sessions": SessionAnswer;
    "GET /api/sessions": {
      sessions: Session[];
      /** where the next page starts (only when more remain) */
      next_cursor?: string;
    };
    "POST /api/sessions/reattach": SessionAnswer;
    "GET /api/sessions/{id}": SessionAnswer;
    "PATCH /api/sessions/{id}": SessionAnswer;
    "PATCH /api/sessions/{id}/context": SessionAnswer;
    "POST /api/sessions/{id}/start": SessionAnswer;
    "POST /api/sessions/{id}/pause": SessionAnswer;
    "POST /api/sessions/{id}/resume": SessionAnswer;
    "POST /api/sessions/{id}/heartbeat": SessionAnswer;
    "POST /api/sessions/{id}/restart": SessionAnswer;
    "POST /api/sessions/{id}/rotate": SessionAnswer;
    "POST /api/sessions/{id}/hibernate": SessionAnswer;
    "POST /api/sessions/{id}/interrupt": SessionAnswer;
    "POST /api/sessions/{id}/stop": SessionAnswer;
    "POST /api/sessions/{id}/cancel": SessionAnswer;
    "POST /api/sessions/{id}/run": RunResult;
    "POST /api/sessions/{id}/exec": ExecResult;
    "POST /api/sessions/{id}/complete": CompleteReply;
    "POST /api/execute": RunResult;
    "GET /api/sessions/{id}/events": {
      events: Event[];
    };
    "GET /api/sessions/{id}/executions": {
      executions: Execution[];
    };
    "GET /api/sessions/{id}/tools": {
      tools: Tool[];
    };
    "POST /api/sessions/{id}/tools": {
      tool: Tool;
    };
    "GET /api/sessions/{id}/usage": {
      usage: Usage;
    };
    "GET /api/sessions/{id}/checkpoints": {
      checkpoints: CheckpointSummary[];
    };
    "POST /api/sessions/{id}/checkpoint": {
      checkpoint: CheckpointResult;
    };
    "POST /api/sessions/{id}/checkpoints/{cid}/restore": {
      session: Session;
      restore: RestoreResult;
    };
    "GET /api/sessions/{id}/files": {
      files: FileInfo[];
    };
    "POST /api/sessions/{id}/files": {
      file: FileInfo;
    };
    "PUT /api/sessions/{id}/files/{path}": {
      file: FileInfo;
    };
    "POST /api/sessions/{id}/fork": {
      session: Session;
      /** every child, in order (session is the first) */
      sessions?: Session[];
    };
    "POST /api/sessions/import": ImportResult;
    "POST /api/sessions/{id}/notebook": NotebookRun;
    "GET /api/sessions/{id}/variables": Variables;
    "GET /api/sessions/{id}/variables/{name}/rows": RowsPage;
    "GET /api/sessions/{id}/checkpoints/{cid}": {
      checkpoint: CheckpointDetail;
    };
    "GET /api/status": NodeStatus;
    "GET /api/skills": {
      skills: FileInfo[];
    };
    "PUT /api/skills/{path}": {
      skill: FileInfo;
    };
  }

  /** The JSON request body of each operation that takes one. */
  export interface Bodies {
    "POST /api/admin/keys": CreateKeyRequest;
    "POST /api/sessions": CreateRequest;
    "POST /api/sessions/reattach": ReattachRequest;
    "PATCH /api/sessions/{id}": PatchSessionRequest;
    "PATCH /api/sessions/{id}/context": ContextRequest;
    "POST /api/sessions/{id}/stop": ReasonRequest;
    "POST /api/sessions/{id}/cancel": ReasonRequest;
    "POST /api/sessions/{id}/run": RunRequest;
    "POST /api/sessions/{id}/exec": ExecRequest;
    "POST /api/sessions/{id}/complete": CompleteRequest;
    "POST /api/execute": ExecuteRequest;
    "POST /api/sessions/{id}/tools": Tool;
    "POST /api/sessions/{id}/files": FileWriteRequest;
    "POST /api/sessions/{id}/fork": {
      /** the new session's id (generated when absent) */
      session_id?: string;
      /** the checkpoint to fork from (default: the latest, taken now when the session has a live kernel) */
      checkpoint_id?: string;
      /** how many children to make from that one checkpoint (default 1), all or none: with session_id and a count above 1 they are named session_id-1 .. session_id-N; the tenant's sessions quota must hold them all (else 429 quota_exceeded and none is made) */
      count?: number;
    };
    "POST /api/sessions/{id}/notebook": {
      nbformat: 4;
      cells: Record<string, any>[];
    };
  }
}

// ---- END GENERATED ----
