// The page's only link to the server: fetch with a bearer token, and the session websocket.
// The token comes from the URL once (/?token=..., as Jupyter does), is kept in sessionStorage and
// removed from the address bar so it does not end up in bookmarks, screenshots or the history.

const TOKEN_KEY = 'carryover.token';

export function initToken() {
  const url = new URL(location.href);
  const t = url.searchParams.get('token');
  if (t !== null) {
    sessionStorage.setItem(TOKEN_KEY, t);
    url.searchParams.delete('token');
    history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  }
  return getToken();
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  sessionStorage.setItem(TOKEN_KEY, t);
}

/** ApiError carries the server's {"error": {code, message, details}} (or a synthesized one). */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || `http_${status}`;
    this.details = details ?? null;
  }
}

const listeners = { unauthorized: new Set() };
export function onUnauthorized(fn) { listeners.unauthorized.add(fn); }

export function sessionPath(id, rest = '') {
  return `/api/sessions/${encodeURIComponent(id)}${rest}`;
}

/** filePath encodes a workspace path segment by segment (slashes kept). */
export function filePath(id, path) {
  return sessionPath(id, '/files/' + String(path).replace(/^\/+/, '').split('/').map(encodeURIComponent).join('/'));
}

/**
 * api calls the server. opts: {json: body as JSON, body: raw body, headers, raw: return the Response}.
 * Non-2xx answers throw ApiError; a network failure throws ApiError with code "network".
 */
export async function api(method, path, opts = {}) {
  const headers = { Accept: 'application/json', ...(opts.headers || {}) };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let body = opts.body;
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body, signal: opts.signal, cache: 'no-store' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `cannot reach the server (${method} ${path}): ${e.message}`);
  }
  if (!res.ok) {
    const text = await res.text().catch(() => '');
    let err;
    try {
      const j = JSON.parse(text);
      if (j && j.error) err = new ApiError(res.status, j.error.code, j.error.message, j.error.details);
    } catch { /* not JSON: fall through */ }
    if (!err) {
      err = new ApiError(res.status, `http_${res.status}`,
        `${method} ${path}: ${res.status} ${res.statusText}${text ? ' — ' + text.slice(0, 300) : ''}`);
    }
    if (res.status === 401) listeners.unauthorized.forEach((fn) => fn(err));
    throw err;
  }
  if (opts.raw) return res;
  if (res.status === 204) return null;
  const text = await res.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(res.status, 'bad_response', `${method} ${path}: the answer is not JSON: ${text.slice(0, 200)}`);
  }
}

/** A run's idempotency key (crypto.getRandomValues: randomUUID needs a secure context). */
function newKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return 'ui-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/**
 * SessionSocket keeps one websocket to /api/sessions/{id}/ws open, reconnecting with backoff.
 * onFrame(frame) gets every parsed frame; onState('connecting'|'open'|'closed', info) the link state.
 */
export class SessionSocket {
  constructor(sessionId, { onFrame, onState, onOpen }) {
    this.id = sessionId;
    this.onFrame = onFrame;
    this.onState = onState || (() => {});
    this.onOpen = onOpen || (() => {});
    this.ws = null;
    this.closed = false;
    this.delay = 500;
    this.everOpened = false;
    this.failures = 0;
    this.timer = null;
    // Run frames not yet ended, sent again (same id, same idempotency key) when the socket opens
    // again after a drop (a server's restart: 1001, 1006, 1012): the server answers with the first
    // attempt's frames, or the run's own if it is still going, and never runs the cell twice.
    this.inflight = new Map();
  }

  url() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${proto}//${location.host}${sessionPath(this.id, '/ws')}?token=${encodeURIComponent(getToken())}&comms=true`;
  }

  connect() {
    if (this.closed) return;
    this.onState('connecting');
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch (e) {
      this.onState('closed', { reason: e.message });
      this.retry();
      return;
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.everOpened = true;
      this.failures = 0;
      this.delay = 500;
      this.onState('open');
      for (const f of this.inflight.values()) ws.send(JSON.stringify(f));
      this.onOpen();
    };
    ws.onmessage = (ev) => {
      let frame;
      try {
        frame = JSON.parse(ev.data);
      } catch {
        frame = { type: 'notice', message: `unreadable frame from the server: ${String(ev.data).slice(0, 200)}` };
      }
      if (frame.type === 'error' || (frame.type === 'status' && frame.execution_state === 'idle')) this.inflight.delete(frame.id);
      this.onFrame(frame);
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (!opened) this.failures++;
      if (opened && [1001, 1006, 1012].includes(ev.code)) this.delay = 250; // a restart: back soon
      this.onState('closed', { code: ev.code, reason: ev.reason, opened, failures: this.failures });
      this.retry();
    };
  }

  retry() {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), this.delay);
    this.delay = Math.min(this.delay * 2, 8000);
  }

  get open() {
    return !!this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  send(obj) {
    if (!this.open) return false;
    if (obj.type === 'run') {
      obj = { ...obj, idempotency_key: obj.idempotency_key ?? newKey() };
      this.inflight.set(obj.id, obj);
    }
    this.ws.send(JSON.stringify(obj));
    return true;
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close();
    }
  }
}
