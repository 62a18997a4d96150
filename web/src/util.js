// Small DOM and formatting helpers shared by the views.

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** escapeHtml makes text safe to put inside HTML text or a quoted attribute. */
export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ESC[c]);
}

/**
 * h builds an element: h('button.btn.small', {title: 'x', onclick: fn}, 'text', child...).
 * Attributes starting with "on" become listeners; `dataset`, `style` objects and booleans are handled.
 * Children are nodes or strings (strings become text nodes: never parsed as HTML).
 */
export function h(tag, attrs, ...children) {
  const [name, ...classes] = tag.split('.');
  const el = document.createElement(name || 'div');
  if (classes.length) el.className = classes.join(' ');
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (k === 'class') el.className += (el.className ? ' ' : '') + v;
    else if (v === true) el.setAttribute(k, '');
    else if (k in el && typeof el[k] !== 'object' && !k.includes('-')) el[k] = v;
    else el.setAttribute(k, v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** formatBytes: 1234 -> "1.2 KB". */
export function formatBytes(n) {
  if (n == null || isNaN(n)) return '';
  n = Number(n);
  if (n < 1000) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let i = -1;
  do { n /= 1000; i++; } while (n >= 1000 && i < units.length - 1);
  return `${n < 10 ? n.toFixed(1) : Math.round(n)} ${units[i]}`;
}

/** formatMs: 3.1 -> "3 ms", 1530 -> "1.53 s", 95000 -> "1 min 35 s". */
export function formatMs(ms) {
  if (ms == null || isNaN(ms)) return '';
  ms = Number(ms);
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(2) : s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** formatSeconds: seconds as a short duration. */
export function formatSeconds(s) {
  return s == null ? '' : formatMs(Number(s) * 1000);
}

/** relTime: RFC 3339 string -> "3 min ago" (absolute time in the title of the caller). */
export function relTime(iso) {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (isNaN(t)) return String(iso);
  const d = (Date.now() - t) / 1000;
  if (d < 5) return 'just now';
  if (d < 60) return `${Math.round(d)} s ago`;
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400) return `${Math.round(d / 3600)} h ago`;
  return new Date(t).toLocaleDateString();
}

/** localTime: RFC 3339 -> locale string, for titles. */
export function localTime(iso) {
  const t = Date.parse(iso);
  return isNaN(t) ? String(iso || '') : new Date(t).toLocaleString();
}

/** isTyping reports whether keyboard focus is in a text field (so single-key shortcuts stay off). */
export function isTyping(target) {
  const t = target || document.activeElement;
  if (!t || t === document.body) return false;
  if (t.isContentEditable) return true;
  const tag = t.tagName;
  if (tag === 'TEXTAREA' || tag === 'SELECT') return true;
  if (tag === 'INPUT') return !['button', 'checkbox', 'radio', 'submit', 'reset', 'file'].includes(t.type);
  return false;
}

/** newId returns a short random id for websocket runs ("c" + 10 chars). */
export function newId() {
  const a = new Uint8Array(8);
  crypto.getRandomValues(a);
  return 'c' + Array.from(a, (b) => b.toString(36).padStart(2, '0')).join('').slice(0, 10);
}

/** fill replaces el's children; like h(), it skips null/false and flattens arrays. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const ICONS = {
  download: 'M8 2v8m0 0L4.5 6.5M8 10l3.5-3.5M3 13h10',
  trash: 'M3 4h10M6.5 4V2.5h3V4M4.5 4l.7 9.5h5.6l.7-9.5M7 6.5v5M9 6.5v5',
  insert: 'M3 3h6M3 6h6M3 9h4M12 4v7m0 0l-2.5-2.5M12 11l2.5-2.5',
  copy: 'M5.5 5.5h7v7h-7zM3.5 10.5v-7h7',
  refresh: 'M13 8a5 5 0 1 1-1.5-3.6M13 2.5V5h-2.5',
};

/** icon returns a small stroked SVG icon (fonts may lack symbol glyphs, SVG always renders). */
export function icon(name) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('class', 'icon');
  svg.setAttribute('aria-hidden', 'true');
  const p = document.createElementNS(NS, 'path');
  p.setAttribute('d', ICONS[name] || '');
  svg.append(p);
  return svg;
}
