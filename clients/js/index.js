// carryover's Node client: the HTTP + websocket API of server/httpapi/openapi.json behind the
// method names of the StateSet Node SDK (createAgentSession, executeInAgentSession, ...) and a few
// of carryover's own (run, runStream, fork, files, checkpoints).
//
// Plain ES module with JSDoc types (index.d.ts is the typed surface); no dependencies: HTTP is
// the global fetch of Node >= 18, the websocket the global WebSocket (Node >= 22, Node 20/21 with
// --experimental-websocket, browsers, Deno, Bun) or a constructor handed in as `WebSocket` (for
// example the `ws` package's).
//
// Every method resolves to the API's JSON answer as is ({session}, {events}, the run answer, ...),
// so the field names are those of docs/api.md; a non-2xx answer rejects with a CarryoverError.

/** An API error answer (`{"error": {"code", "message", "details"}, "result"?}`), an error frame
 * of the websocket (status 0), or a failure to reach the server (code "connection_error",
 * status 0, the underlying error as `cause`). Branch on `code`, which is stable. */
export class CarryoverError extends Error {
  /**
   * @param {string} message
   * @param {{code?: string, status?: number, details?: Record<string, any> | null,
   *          result?: any, cause?: unknown}} [opts]
   */
  constructor(message, { code = 'internal', status = 0, details = null, result = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'CarryoverError';
    /** the API's error code: not_found, invalid_request, conflict, timeout, kernel_died, ... */
    this.code = code;
    /** the HTTP status; 0 for a websocket error frame or a connection failure */
    this.status = status;
    /** the error's details object, or null */
    this.details = details;
    /** the partial run or exec answer timeouts and kernel deaths carry, or null */
    this.result = result;
  }
}

const DEFAULT_URL = 'http://127.0.0.1:8080';

/** @param {string} s */
const seg = (s) => encodeURIComponent(s);

/**
 * The path of a workspace file in the files API: "notes.md" and "/workspace/notes.md" are the
 * same file; each segment is escaped.
 * @param {string} path
 */
function workspaceRel(path) {
  if (typeof path !== 'string') throw new TypeError('file path must be a string');
  let p = path;
  if (p === '/workspace' || p.startsWith('/workspace/')) p = p.slice('/workspace'.length);
  else if (p.startsWith('/')) {
    throw new CarryoverError(`path ${JSON.stringify(p)} is outside /workspace`, {
      code: 'invalid_request', details: { path },
    });
  }
  const parts = p.split('/').filter((x) => x !== '');
  if (!parts.length) throw new CarryoverError('empty file path', { code: 'invalid_request', details: { path } });
  // URLs resolve "." and ".." (also escaped) before the server sees them: refuse them here.
  if (parts.some((x) => x === '.' || x === '..')) {
    throw new CarryoverError(`path ${JSON.stringify(p)} has a "." or ".." segment`, {
      code: 'invalid_request', details: { path },
    });
  }
  return parts.map(seg).join('/');
}

/** Drops undefined values so that optional arguments are not sent. */
function compact(obj) {
  /** @type {Record<string, any>} */
  const out = {};
  for (const [k, v] of Object.entries(obj)) if (v !== undefined) out[k] = v;
  return out;
}

// ---- retries ---------------------------------------------------------------------------
// Calls ride out a server's restart or a rolling upgrade: a connection that fails, and the answers
// 421 (the session's node changed), 503 and 429 (after their Retry-After), are retried with backoff
// for up to `retrySeconds`. A call that may have reached the server is retried only when it may be
// repeated: GET, PUT, DELETE, or a run or exec, which carry an Idempotency-Key (one per call by
// default) so the server answers a retry with the first attempt's answer, never a second run.

/** Statuses that say the request was not served. */
const UNSERVED = new Set([421, 503, 429]);

/** A fresh idempotency key (what run and exec send when given none). */
/** Answers input() with the end of input: the kernel raises EOFError (a terminal's Ctrl-D). onInput
 * answering null or undefined means the same. */
export const INPUT_EOF = '\u0004';

export function newIdempotencyKey() {
  return `js-${globalThis.crypto.randomUUID()}`;
}

/** Seconds a Retry-After header asks for (0 when absent or unreadable). @param {string | null} v */
function retryAfterSeconds(v) {
  if (!v) return 0;
  const n = Number(v);
  if (Number.isFinite(n) && n >= 0) return n;
  const t = Date.parse(v);
  return Number.isFinite(t) ? Math.max(0, (t - Date.now()) / 1000) : 0;
}

/** @param {any} body @returns {boolean} a body to send as it is read: a web or Node stream, an async iterable */
function isStream(body) {
  return body != null && typeof body === 'object' && !(body instanceof Uint8Array) && !(body instanceof ArrayBuffer) &&
    (body instanceof ReadableStream || typeof body[Symbol.asyncIterator] === 'function');
}

/** Whether a fetch failure means nothing was sent (the connection was refused or not resolved). */
function unsent(err) {
  const code = err?.cause?.code ?? err?.code;
  return code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN';
}

/**
 * Whether fetch stopped waiting for the answer's headers by a clock of its own: Node's fetch (undici)
 * gives up after 300 s, shorter than a run may last (timeout_seconds up to the server's
 * run.max_timeout_seconds; its default, 300 s, ends just after fetch's). The server went on.
 */
function headersTimedOut(err) {
  return (err?.cause?.code ?? err?.code) === 'UND_ERR_HEADERS_TIMEOUT';
}

/** The retry clock of one call. */
class Backoff {
  /** @param {number} seconds */
  constructor(seconds) {
    this.deadline = Date.now() + seconds * 1000;
    this.attempt = 0;
  }

  /** Waits before another attempt (at least `floor` seconds); false when the time is spent. */
  async wait(floor = 0) {
    this.attempt += 1;
    const b = Math.min(3000, 100 * 2 ** (this.attempt - 1));
    const ms = Math.max(floor * 1000, b / 2 + Math.random() * b / 2);
    if (Date.now() + ms > this.deadline) return false;
    await new Promise((r) => setTimeout(r, ms));
    return true;
  }
}

let frameSeq = 0;
const newFrameID = () => `js-${Date.now().toString(36)}-${(++frameSeq).toString(36)}`;

export class Carryover {
  /**
   * @param {{baseUrl?: string, authToken?: string, fetch?: typeof fetch,
   *          WebSocket?: any, headers?: Record<string, string>, retrySeconds?: number}} [options]
   *   baseUrl defaults to $CARRYOVER_URL, then http://127.0.0.1:8080; authToken to
   *   $CARRYOVER_TOKEN. `WebSocket` replaces the global one for runStream (e.g. `ws`'s).
   *   retrySeconds (default 60; 0: never) bounds the retries of one call (see "retries" above).
   */
  constructor(options = {}) {
    const env = globalThis.process?.env ?? {};
    this.baseUrl = String(options.baseUrl ?? env.CARRYOVER_URL ?? DEFAULT_URL).replace(/\/+$/, '');
    this.authToken = options.authToken ?? env.CARRYOVER_TOKEN ?? '';
    this._fetch = options.fetch ?? globalThis.fetch;
    this._WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this._headers = options.headers ?? {};
    this.retrySeconds = options.retrySeconds ?? 60;
    if (typeof this._fetch !== 'function') throw new TypeError('carryover: no fetch (Node >= 18 has one)');
  }

  // ---- transport -------------------------------------------------------------------------

  /**
   * Sends one request and decodes the answer. The way to reach a route without a method here.
   * @param {string} method
   * @param {string} path relative to baseUrl, may carry a query
   * @param {{json?: any, body?: any, raw?: boolean, query?: Record<string, any>,
   *          headers?: Record<string, string>}} [opts]
   *   json: a JSON body; body: a raw body (string, Uint8Array, ArrayBuffer, Blob); raw: resolve
   *   to the answer's bytes (Uint8Array) instead of its JSON; headers: more request headers.
   * @returns {Promise<any>}
   */
  async request(method, path, { json, body, raw = false, stream = false, query, headers: extra } = {}) {
    let url = this.baseUrl + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) q.set(k, String(v));
      const s = q.toString();
      if (s) url += (url.includes('?') ? '&' : '?') + s;
    }
    /** @type {Record<string, string>} */
    const headers = { Accept: 'application/json', ...this._headers, ...extra };
    if (this.authToken) headers.Authorization = `Bearer ${this.authToken}`;
    if (json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(json);
    } else if (body !== undefined) {
      headers['Content-Type'] = 'application/octet-stream';
    }
    // A stream body is sent as it is read (fetch needs duplex 'half' for it) and cannot be sent twice.
    const once = isStream(body);
    if (once && !(body instanceof ReadableStream)) body = ReadableStream.from(body);
    const repeatable = !once && (['GET', 'HEAD', 'PUT', 'DELETE'].includes(method) || 'Idempotency-Key' in headers);
    const backoff = new Backoff(this.retrySeconds);
    let res;
    for (;;) {
      try {
        res = await this._fetch(url, once ? { method, headers, body, duplex: 'half' } : { method, headers, body });
      } catch (err) {
        // A keyed call (run, exec, execute) outlasting fetch's header clock is asked again at once
        // with its key, which waits for the same attempt at the server and gets its answer: not a
        // retry (the code runs once, the retry clock is not spent), so a run may last its timeout.
        if (!once && 'Idempotency-Key' in headers && headersTimedOut(err)) continue;
        if (!once && (unsent(err) || repeatable) && await backoff.wait()) continue;
        throw new CarryoverError(`carryover: ${method} ${path}: ${err?.cause?.message ?? err?.message ?? err}`, {
          code: 'connection_error', cause: err,
        });
      }
      // A 421 (the session moved) was already sent again at once, on a new connection, by fetch
      // itself (the Fetch standard's retry of a 421), so the backoff starts from the second.
      // A 429 is retried only when it says when to come back (capacity, rate_limited): a
      // quota_exceeded has no Retry-After, and waiting would not free the tenant's quota.
      const ra = res.headers.get('Retry-After');
      if (!once && UNSERVED.has(res.status) && (res.status !== 429 || ra) && await backoff.wait(retryAfterSeconds(ra))) {
        try { await res.arrayBuffer(); } catch { /* dropped */ }
        continue;
      }
      break;
    }
    if (!res.ok) throw await errorFrom(res, method, path);
    if (stream) return res.body;
    if (raw) return new Uint8Array(await res.arrayBuffer());
    if (res.status === 204) return undefined;
    const text = await res.text();
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new CarryoverError(`carryover: ${method} ${path}: answer is not JSON: ${text.slice(0, 200)}`, {
        code: 'internal', status: res.status, cause: err,
      });
    }
  }

  /** @param {string} id @param {string} [more] */
  _s(id, more) {
    if (typeof id !== 'string' || !id) throw new TypeError('session id must be a non-empty string');
    return `/api/sessions/${seg(id)}${more ? `/${more}` : ''}`;
  }

  // ---- the StateSet agent-session names ----------------------------------------------------

  /**
   * POST /api/sessions. Every field is optional: session_id, name, language, data, budget,
   * sandbox, rotation, client_id, start.
   * @param {Record<string, any>} [opts]
   * @returns {Promise<{session: any}>}
   */
  createAgentSession(opts = {}) {
    return this.request('POST', '/api/sessions', { json: opts });
  }

  /** POST /api/sessions/{id}/start. @param {string} sessionId */
  startAgentSession(sessionId) {
    return this.request('POST', this._s(sessionId, 'start'));
  }

  /**
   * POST /api/sessions/{id}/exec: a shell command (an argv array, or a string run by /bin/sh -c)
   * in the session's sandbox. Resolves to {stdout, stderr, exit_code, duration_ms}; a non-zero
   * exit code is an answer, not an error.
   * @param {string} sessionId
   * @param {{command: string | string[], working_dir?: string, env?: Record<string, string>,
   *          timeout_seconds?: number}} req
   */
  executeInAgentSession(sessionId, req) {
    const { idempotencyKey, idempotency_key: bodyKey, ...body } = req ?? {};
    return this.request('POST', this._s(sessionId, 'exec'), {
      json: body, headers: { 'Idempotency-Key': idempotencyKey ?? bodyKey ?? newIdempotencyKey() },
    });
  }

  /**
   * POST /api/sessions/{id}/files {path, content, encoding}. Content may be a string (utf-8) or
   * bytes (sent as base64).
   * @param {string} sessionId
   * @param {string} path "/workspace/notes.md" or "notes.md"
   * @param {string | Uint8Array | ArrayBuffer} content
   * @param {{encoding?: 'utf-8' | 'base64'}} [opts]
   * @returns {Promise<{file: {path: string, size: number, modified_at: string}}>}
   */
  writeAgentSessionFile(sessionId, path, content, { encoding } = {}) {
    if (typeof content !== 'string') {
      content = bytesToBase64(toBytes(content));
      encoding = 'base64';
    }
    return this.request('POST', this._s(sessionId, 'files'), { json: compact({ path, content, encoding }) });
  }

  /**
   * PATCH /api/sessions/{id}/context: the given keys (working_dir, env_vars, custom_state)
   * replace the old ones; applied to the live kernel.
   * @param {string} sessionId
   * @param {{working_dir?: string, env_vars?: Record<string, string>, custom_state?: any}} context
   */
  updateAgentContext(sessionId, context) {
    return this.request('PATCH', this._s(sessionId, 'context'), { json: context });
  }

  /** GET /api/sessions/{id}. @param {string} sessionId @returns {Promise<{session: any}>} */
  getAgentSession(sessionId) {
    return this.request('GET', this._s(sessionId));
  }

  /**
   * GET /api/sessions/{id}/events.
   * @param {string} sessionId
   * @param {{after_sequence?: number, before_sequence?: number, limit?: number, event_type?: string, order?: 'asc'|'desc'}} [opts]
   *   order 'desc': the newest first, the limit counted from them; before_sequence pages back
   * @returns {Promise<{events: any[]}>}
   */
  getAgentSessionEvents(sessionId, opts = {}) {
    return this.request('GET', this._s(sessionId, 'events'), { query: opts });
  }

  /**
   * POST /api/sessions/{id}/tools.
   * @param {string} sessionId
   * @param {{name: string, tool_type?: string, description?: string, input_schema?: any}} tool
   * @returns {Promise<{tool: any}>}
   */
  registerAgentTool(sessionId, tool) {
    return this.request('POST', this._s(sessionId, 'tools'), { json: tool });
  }

  /** GET /api/sessions/{id}/tools. @param {string} sessionId @returns {Promise<{tools: any[]}>} */
  listAgentTools(sessionId) {
    return this.request('GET', this._s(sessionId, 'tools'));
  }

  /** POST /api/sessions/{id}/heartbeat. @param {string} sessionId */
  agentSessionHeartbeat(sessionId) {
    return this.request('POST', this._s(sessionId, 'heartbeat'));
  }

  /**
   * POST /api/sessions/reattach. Resolves to {session: null} when no session has this client_id
   * (the API's 404), as the StateSet example's `if (existing)` expects; other errors reject.
   * @param {string} clientId
   * @returns {Promise<{session: any | null}>}
   */
  async reattachAgentSession(clientId) {
    try {
      return await this.request('POST', '/api/sessions/reattach', { json: { client_id: clientId } });
    } catch (err) {
      if (err instanceof CarryoverError && err.status === 404) return { session: null };
      throw err;
    }
  }

  /**
   * POST /api/sessions/{id}/stop: completed, with a final checkpoint.
   * @param {string} sessionId @param {string} [reason]
   */
  stopAgentSession(sessionId, reason) {
    return this.request('POST', this._s(sessionId, 'stop'), reason ? { json: { reason } } : {});
  }

  // Lifecycle moves the reference does not show, named in its style.

  /** POST /api/sessions/{id}/pause. @param {string} sessionId */
  pauseAgentSession(sessionId) {
    return this.request('POST', this._s(sessionId, 'pause'));
  }

  /** POST /api/sessions/{id}/resume. @param {string} sessionId */
  resumeAgentSession(sessionId) {
    return this.request('POST', this._s(sessionId, 'resume'));
  }

  /** POST /api/sessions/{id}/cancel. @param {string} sessionId @param {string} [reason] */
  cancelAgentSession(sessionId, reason) {
    return this.request('POST', this._s(sessionId, 'cancel'), reason ? { json: { reason } } : {});
  }

  /**
   * GET /api/sessions: every session of the token's tenant, oldest first; or, with limit, one page
   * (1..1000) and next_cursor when more remain: pass it as cursor for the next page. A cursor is a
   * place in the creation order, so sessions deleted or created between pages neither repeat one
   * nor skip one that existed throughout. newest: true lists the newest first.
   * @param {{limit?: number, cursor?: string, newest?: boolean}} [opts]
   * @returns {Promise<{sessions: any[], next_cursor?: string}>}
   */
  listAgentSessions({ limit, cursor, newest = false } = {}) {
    return this.request('GET', '/api/sessions', { query: { limit, cursor, order: newest ? 'desc' : undefined } });
  }

  /**
   * Every session of the token's tenant, fetched a page at a time (listAgentSessions with limit).
   * @param {{pageSize?: number, newest?: boolean}} [opts]
   * @returns {AsyncGenerator<any>}
   */
  async *iterAgentSessions({ pageSize = 100, newest = false } = {}) {
    let cursor;
    do {
      const page = await this.listAgentSessions({ limit: pageSize, cursor, newest });
      yield* page.sessions;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /** DELETE /api/sessions/{id}: kernel, checkpoints and files removed. @param {string} sessionId */
  deleteAgentSession(sessionId) {
    return this.request('DELETE', this._s(sessionId));
  }

  // ---- carryover: Python turns -------------------------------------------------------------

  /**
   * POST /api/sessions/{id}/run. Code that raises is an answer with status "error", not a
   * rejection; a timeout (504) or kernel death (502) rejects with a CarryoverError whose
   * `result` is the partial answer.
   * @param {string} sessionId
   * @param {string} code
   * @param {{updateData?: Record<string, any>, timeout?: number, env?: Record<string, string>,
   *          idempotencyKey?: string, stdin?: string}} [opts]
   *   timeout in seconds (the server's default when absent); idempotencyKey (default: a new one
   *   per call) makes retries, the call's own and yours with the same key, answer the first
   *   attempt's result instead of running the code again (a first attempt cut off before its
   *   answer was stored rejects with code run_interrupted); stdin is what the code's input()
   *   reads, a line per call, then EOFError (without it input()
   *   raises StdinNotImplementedError; runStream answers prompts as they come instead).
   */
  run(sessionId, code, { updateData, timeout, env, idempotencyKey, stdin } = {}) {
    return this.request('POST', this._s(sessionId, 'run'), {
      json: compact({ code, update_data: updateData, timeout_seconds: timeout, env, stdin }),
      headers: { 'Idempotency-Key': idempotencyKey ?? newIdempotencyKey() },
    });
  }

  /**
   * POST /api/execute: code in a throwaway session destroyed at once (no checkpoint), once:
   * idempotencyKey (default: a new one per call) makes the call's retries answer the first
   * attempt's result instead of running the code again.
   * stdin as run's.
   * @param {string} code @param {{language?: string, timeout?: number, idempotencyKey?: string, stdin?: string}} [opts]
   */
  execute(code, { language, timeout, idempotencyKey, stdin } = {}) {
    return this.request('POST', '/api/execute', {
      json: compact({ code, language, timeout_seconds: timeout, stdin }),
      headers: { 'Idempotency-Key': idempotencyKey ?? newIdempotencyKey() },
    });
  }

  /**
   * Runs code over the session's websocket, calling back as the kernel produces: onOutput for
   * every output item (streams, display data, execute_result, error) in order, onStdout and
   * onStderr with each stream's text as well, onStatus with busy/idle, onInput when the code calls
   * input() (its answer, or a promise of it, is sent back; null or undefined is the end of input:
   * input() raises EOFError; without onInput the run is interrupted). Resolves to the run answer once the turn, checkpoint included, is over. An
   * error frame (timeout, kernel_died, ...) rejects with a CarryoverError (status 0) carrying the
   * partial answer as `result`. Aborting `signal` interrupts the kernel.
   * @param {string} sessionId
   * @param {string} code
   * @param {{onStdout?: (text: string) => void, onStderr?: (text: string) => void,
   *          onOutput?: (output: any) => void, onStatus?: (state: string) => void,
   *          onInput?: (prompt: string, info: {password: boolean}) => string | Promise<string>,
   *          timeout?: number, signal?: AbortSignal, idempotencyKey?: string}} [opts]
   *   A websocket that drops mid-run is reconnected and the run sent again with the same
   *   idempotencyKey (default: a new one per call): it runs once; outputs printed while the
   *   connection was down reach the result, not the callbacks.
   */
  runStream(sessionId, code, opts = {}) {
    const { onStdout, onStderr, onOutput, onStatus, onInput, timeout, signal } = opts;
    const WS = this._WebSocket;
    if (typeof WS !== 'function') {
      return Promise.reject(new CarryoverError(
        'carryover: no WebSocket: use Node >= 22, run Node 20 with --experimental-websocket, or pass ' +
        "new Carryover({WebSocket}) (e.g. the 'ws' package's)", { code: 'websocket_unavailable' }));
    }
    const url = new URL(this.baseUrl + this._s(sessionId, 'ws'));
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    if (this.authToken) url.searchParams.set('token', this.authToken);
    const id = newFrameID();
    const key = opts.idempotencyKey ?? newIdempotencyKey();
    const backoff = new Backoff(this.retrySeconds);

    return new Promise((resolve, reject) => {
      let settled = false;
      let result = null;
      /** @type {any} */
      let ws = null;
      const send = (frame) => { try { ws.send(JSON.stringify(frame)); } catch { /* closing */ } };
      const onAbort = () => send({ type: 'interrupt' });
      const finish = (err, value) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        try { ws.close(); } catch { /* already closed */ }
        if (err) reject(err); else resolve(value);
      };
      const fail = (err) => finish(err);
      const call = (fn, ...args) => {
        if (!fn) return;
        try { fn(...args); } catch (err) { finish(err); }
      };
      // A websocket that drops mid-run (a server's restart: 1001, 1006, 1012) is opened again and
      // the run frame sent again with the same id and idempotency key: the server answers with the
      // first attempt's result, error and idle frames instead of running the code twice.
      const reconnect = async (why) => {
        if (settled) return;
        if (await backoff.wait()) { if (!settled) connect(); return; }
        fail(why);
      };

      const connect = () => {
        const sock = new WS(url.toString());
        ws = sock;
        let opened = false;
        let gone = false; // this socket's error or close was handled
        sock.onopen = () => {
          opened = true;
          if (signal?.aborted) { finish(new CarryoverError('carryover: runStream aborted', { code: 'aborted' })); return; }
          signal?.addEventListener('abort', onAbort, { once: true });
          send(compact({ type: 'run', id, code, timeout_seconds: timeout, idempotency_key: key }));
        };
        sock.onmessage = (ev) => {
          if (settled) return;
          let f;
          try {
            f = JSON.parse(typeof ev.data === 'string' ? ev.data : new TextDecoder().decode(ev.data));
          } catch (err) {
            fail(new CarryoverError('carryover: malformed websocket frame', { code: 'internal', cause: err }));
            return;
          }
          if (f.id !== id) return; // other runs of the session, events, notices
          switch (f.type) {
            case 'status':
              call(onStatus, f.execution_state);
              if (f.execution_state === 'idle' && result) finish(null, result);
              break;
            case 'output': {
              const o = f.output;
              if (o?.type === 'stream') call(o.name === 'stderr' ? onStderr : onStdout, o.text);
              call(onOutput, o);
              break;
            }
            case 'input_request':
              if (!onInput) { send({ type: 'interrupt' }); break; }
              Promise.resolve()
                .then(() => onInput(f.prompt ?? '', { password: !!f.password }))
                .then((value) => send({ type: 'input_reply', id, value: value == null ? INPUT_EOF : String(value) }), fail);
              break;
            case 'result':
              result = f.result;
              break;
            case 'error': {
              const e = f.error ?? {};
              if (e.code === 'not_owner') { // the session moved to another node mid-run
                gone = true;
                try { sock.close(); } catch { /* closed */ }
                reconnect(new CarryoverError(`carryover: ${e.code}: ${e.message}`, { code: e.code }));
                break;
              }
              fail(new CarryoverError(`carryover: ${e.code}: ${e.message}`, {
                code: e.code, details: e.details ?? null, result,
              }));
              break;
            }
          }
        };
        sock.onerror = (ev) => {
          if (settled || gone) return;
          gone = true;
          if (opened) {
            reconnect(new CarryoverError(`carryover: websocket error: ${ev?.message ?? 'connection failed'}`, { code: 'connection_error' }));
            return;
          }
          // A refused upgrade hides its status from WebSocket: ask over HTTP why (404, 401, ...);
          // that call rides out a restart itself, and a session that answers is dialled again.
          this.getAgentSession(sessionId).then(
            () => reconnect(new CarryoverError(`carryover: websocket to ${sessionId} refused: ${ev?.message ?? ''}`, { code: 'connection_error' })),
            fail);
        };
        sock.onclose = () => {
          if (settled || gone || !opened) return;
          gone = true;
          reconnect(new CarryoverError('carryover: websocket closed before the run ended', { code: 'connection_error', result }));
        };
      };
      connect();
    });
  }

  /**
   * POST /api/sessions/{id}/fork: new sessions holding the namespace and files of a checkpoint
   * of this one (default the latest, taken now when the kernel is live). With `count` (1..100)
   * that many children of the one checkpoint, all or none (named `sessionId-1` .. `-N` when
   * `sessionId` is given); the answer's `sessions` lists them all, `session` is the first.
   * @param {string} sessionId
   * @param {{sessionId?: string, checkpointId?: string, count?: number}} [opts] the new id (or
   * the children's prefix); the source checkpoint; how many children
   * @returns {Promise<{session: any, sessions?: any[]}>}
   */
  fork(sessionId, { sessionId: newId, checkpointId, count } = {}) {
    return this.request('POST', this._s(sessionId, 'fork'), {
      json: compact({ session_id: newId, checkpoint_id: checkpointId, count }),
    });
  }

  /**
   * GET /api/sessions/{id}/notebook: the session's history as an nbformat 4.5 notebook.
   * @param {string} sessionId
   * @returns {Promise<any>} the .ipynb document (JSON.stringify it to save it)
   */
  async getNotebook(sessionId) {
    const bytes = await this.request('GET', this._s(sessionId, 'notebook'), { raw: true });
    return JSON.parse(new TextDecoder().decode(bytes));
  }

  /**
   * POST /api/sessions/{id}/notebook: runs a notebook's code cells into the session in order,
   * stopping at the first failing cell unless continueOnError.
   * @param {string} sessionId
   * @param {any} notebook the .ipynb document (an object or its JSON text)
   * @param {{continueOnError?: boolean}} [opts]
   * @returns {Promise<{cells: {index: number, result?: any, error?: any}[], ran: number, stopped_at?: number}>}
   */
  runNotebook(sessionId, notebook, { continueOnError = false } = {}) {
    return this.request('POST', this._s(sessionId, 'notebook'), {
      json: typeof notebook === 'string' ? JSON.parse(notebook) : notebook,
      query: continueOnError ? { continue_on_error: 'true' } : undefined,
    });
  }

  /**
   * GET /api/sessions/{id}/export: the session's archive (its namespace, files, packages and
   * settings; docs/export-format.md), of a checkpoint or of its current state; with events: true,
   * its event log too (an archive of version 2). By default held in memory; with stream: true the
   * answer is a ReadableStream of the archive's bytes, read as they come (an archive of gigabytes
   * never in memory: pipe it to a file, e.g. with stream.Readable.fromWeb and fs.createWriteStream).
   * @param {string} sessionId
   * @param {{checkpointId?: string, events?: boolean, stream?: boolean}} [opts]
   * @returns {Promise<Uint8Array | ReadableStream<Uint8Array>>}
   */
  exportSession(sessionId, { checkpointId, events, stream = false } = {}) {
    return this.request('GET', this._s(sessionId, 'export'), {
      raw: true, stream, query: { checkpoint_id: checkpointId || undefined, events: events ? 'true' : undefined },
    });
  }

  /**
   * POST /api/sessions/import: a new session of this tenant from an archive of exportSession.
   * The archive may be bytes, or a stream sent as it is read (a ReadableStream, or any async
   * iterable of bytes such as fs.createReadStream(path)): the file is never held in memory.
   * A refused archive rejects with code invalid_request (payload_too_large for a limit) and
   * details.reason (truncated, corrupt, digest, path, ...).
   * @param {Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>} archive
   * @param {{sessionId?: string}} [opts]
   * @returns {Promise<any>} {session, checkpoint_id, source, chunks, chunks_present, bytes_written, events, warnings}
   */
  importSession(archive, { sessionId } = {}) {
    return this.request('POST', '/api/sessions/import', {
      body: archive, query: sessionId ? { session_id: sessionId } : undefined,
    });
  }

  // ---- files -------------------------------------------------------------------------------

  /** GET /api/sessions/{id}/files. @param {string} sessionId @returns {Promise<{files: any[]}>} */
  listFiles(sessionId) {
    return this.request('GET', this._s(sessionId, 'files'));
  }

  /**
   * GET /api/sessions/{id}/files/{path}: the bytes, or text with {encoding: 'utf-8'}.
   * @param {string} sessionId @param {string} path
   * @param {{encoding?: 'utf-8'}} [opts]
   * @returns {Promise<Uint8Array | string>}
   */
  async getFile(sessionId, path, { encoding } = {}) {
    const bytes = await this.request('GET', this._s(sessionId, `files/${workspaceRel(path)}`), { raw: true });
    return encoding ? new TextDecoder(encoding).decode(bytes) : bytes;
  }

  /**
   * PUT /api/sessions/{id}/files/{path} with the raw content (parents created).
   * @param {string} sessionId @param {string} path
   * @param {string | Uint8Array | ArrayBuffer | Blob} content
   * @returns {Promise<{file: {path: string, size: number, modified_at: string}}>}
   */
  async putFile(sessionId, path, content) {
    const body = typeof content === 'string' ? new TextEncoder().encode(content)
      : (typeof Blob !== 'undefined' && content instanceof Blob) ? content : toBytes(content);
    return this.request('PUT', this._s(sessionId, `files/${workspaceRel(path)}`), { body });
  }

  /** DELETE /api/sessions/{id}/files/{path}. @param {string} sessionId @param {string} path */
  async deleteFile(sessionId, path) {
    return this.request('DELETE', this._s(sessionId, `files/${workspaceRel(path)}`));
  }

  // ---- checkpoints -------------------------------------------------------------------------

  /** GET /api/sessions/{id}/checkpoints. @param {string} sessionId @returns {Promise<{checkpoints: any[]}>} */
  listCheckpoints(sessionId) {
    return this.request('GET', this._s(sessionId, 'checkpoints'));
  }

  /**
   * POST /api/sessions/{id}/checkpoints/{cid}/restore: namespace and files back to that turn.
   * @param {string} sessionId @param {string} checkpointId
   * @returns {Promise<{session: any, restore: any}>}
   */
  restoreCheckpoint(sessionId, checkpointId) {
    return this.request('POST', this._s(sessionId, `checkpoints/${seg(checkpointId)}/restore`));
  }

  /**
   * GET /api/sessions/{id}/usage: what the session has used since it was created (CPU seconds,
   * memory peak, stored bytes), every kernel it had counted. @param {string} sessionId
   * @returns {Promise<{usage: any}>}
   */
  getUsage(sessionId) {
    return this.request('GET', this._s(sessionId, 'usage'));
  }

  /** POST /api/sessions/{id}/checkpoint: take one now. @param {string} sessionId */
  checkpoint(sessionId) {
    return this.request('POST', this._s(sessionId, 'checkpoint'));
  }
}

/** The StateSet SDK's class name, so its examples run with only the import changed. */
export { Carryover as StateSetSandbox };

/** @param {Uint8Array | ArrayBuffer | ArrayBufferView} c */
function toBytes(c) {
  if (c instanceof Uint8Array) return c;
  if (c instanceof ArrayBuffer) return new Uint8Array(c);
  if (ArrayBuffer.isView(c)) return new Uint8Array(c.buffer, c.byteOffset, c.byteLength);
  throw new TypeError('content must be a string, Uint8Array, ArrayBuffer or Blob');
}

/** @param {Uint8Array} b */
function bytesToBase64(b) {
  if (typeof globalThis.Buffer === 'function') return globalThis.Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');
  let s = '';
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

/**
 * A CarryoverError from a non-2xx answer; a body that is not the API's error shape (a proxy's
 * page) still gives one, with the status and the start of the body.
 * @param {Response} res @param {string} method @param {string} path
 */
async function errorFrom(res, method, path) {
  let text = '';
  try { text = await res.text(); } catch { /* keep the status */ }
  let body;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  const e = body?.error;
  if (e && typeof e === 'object') {
    return new CarryoverError(`carryover: ${res.status} ${e.code}: ${e.message}`, {
      code: e.code, status: res.status, details: e.details ?? null, result: body.result ?? null,
    });
  }
  const code = res.status === 401 ? 'unauthorized' : res.status === 404 ? 'not_found' : 'internal';
  return new CarryoverError(`carryover: ${method} ${path}: ${res.status} ${res.statusText}${text ? `: ${text.slice(0, 200)}` : ''}`, {
    code, status: res.status,
  });
}
