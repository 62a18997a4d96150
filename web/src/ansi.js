// ANSI SGR escape sequences (colours, bold, ...) to HTML, for tracebacks and coloured stdout.
// Other escape sequences (cursor moves, OSC titles) are dropped. The 16 base colours are classes
// (ansi-fg-N / ansi-bg-N, tuned for a light page in app.css); 256-colour and RGB use inline styles.

import { escapeHtml } from './util.js';

function color256(n) {
  if (n < 16) return null;
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `rgb(${v},${v},${v})`;
  }
  n -= 16;
  const steps = [0, 95, 135, 175, 215, 255];
  return `rgb(${steps[Math.floor(n / 36)]},${steps[Math.floor(n / 6) % 6]},${steps[n % 6]})`;
}

// ESC [ params final | ESC ] ... BEL/ST | other two-character escapes | a lone ESC
const SEQ = /\x1b\[([0-9;:?]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?/g;

/** ansiToHtml converts text with ANSI escapes to safe HTML. */
export function ansiToHtml(text) {
  const st = { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false, strike: false };
  let out = '';
  let last = 0;
  const emit = (chunk) => {
    if (!chunk) return;
    const cls = [];
    const style = [];
    let fg = st.fg;
    let bg = st.bg;
    if (st.inverse) [fg, bg] = [bg ?? { n: 15, def: true }, fg ?? { n: 0, def: true }];
    if (fg) {
      if (fg.n != null) cls.push(`ansi-fg-${st.bold && fg.n < 8 && !fg.def ? fg.n + 8 : fg.n}`);
      else style.push(`color:${fg.css}`);
    }
    if (bg) {
      if (bg.n != null) cls.push(`ansi-bg-${bg.n}`);
      else style.push(`background-color:${bg.css}`);
    }
    if (st.bold) cls.push('ansi-bold');
    if (st.dim) cls.push('ansi-dim');
    if (st.italic) cls.push('ansi-italic');
    if (st.underline) cls.push('ansi-underline');
    if (st.strike) cls.push('ansi-strike');
    const body = escapeHtml(chunk);
    if (!cls.length && !style.length) out += body;
    else out += `<span${cls.length ? ` class="${cls.join(' ')}"` : ''}${style.length ? ` style="${style.join(';')}"` : ''}>${body}</span>`;
  };
  SEQ.lastIndex = 0;
  let m;
  while ((m = SEQ.exec(text))) {
    emit(text.slice(last, m.index));
    last = SEQ.lastIndex;
    if (m[2] !== 'm' || m[1] === undefined) continue;
    const p = m[1] === '' ? [0] : m[1].split(/[;:]/).map((x) => (x === '' ? 0 : Number(x)));
    for (let i = 0; i < p.length; i++) {
      const c = p[i];
      if (c === 0) Object.assign(st, { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false, strike: false });
      else if (c === 1) st.bold = true;
      else if (c === 2) st.dim = true;
      else if (c === 3) st.italic = true;
      else if (c === 4) st.underline = true;
      else if (c === 7) st.inverse = true;
      else if (c === 9) st.strike = true;
      else if (c === 22) { st.bold = false; st.dim = false; }
      else if (c === 23) st.italic = false;
      else if (c === 24) st.underline = false;
      else if (c === 27) st.inverse = false;
      else if (c === 29) st.strike = false;
      else if (c >= 30 && c <= 37) st.fg = { n: c - 30 };
      else if (c >= 90 && c <= 97) st.fg = { n: c - 90 + 8 };
      else if (c === 39) st.fg = null;
      else if (c >= 40 && c <= 47) st.bg = { n: c - 40 };
      else if (c >= 100 && c <= 107) st.bg = { n: c - 100 + 8 };
      else if (c === 49) st.bg = null;
      else if (c === 38 || c === 48) {
        let col = null;
        if (p[i + 1] === 5 && p[i + 2] != null) {
          const n = p[i + 2];
          col = n < 16 ? { n } : { css: color256(n) };
          i += 2;
        } else if (p[i + 1] === 2 && p[i + 4] != null) {
          const [r, g, b] = p.slice(i + 2, i + 5).map((v) => Math.max(0, Math.min(255, v | 0)));
          col = { css: `rgb(${r},${g},${b})` };
          i += 4;
        }
        if (col) st[c === 38 ? 'fg' : 'bg'] = col;
      }
    }
  }
  emit(text.slice(last));
  return out;
}

/** stripAnsi removes escape sequences (for plain-text copies and tests). */
export function stripAnsi(text) {
  return String(text).replace(SEQ, '');
}

/**
 * applyControlChars applies carriage returns and backspaces the way a terminal shows them:
 * "10%\r50%\r100%\n" -> "100%\n". Used for progress bars in streams.
 */
export function applyControlChars(text) {
  if (!/[\r\b]/.test(text)) return text;
  return text.split('\n').map((line) => {
    if (line.includes('\b')) {
      let s = '';
      for (const ch of line) s = ch === '\b' ? s.slice(0, -1) : s + ch;
      line = s;
    }
    if (!line.includes('\r')) return line;
    const parts = line.split('\r');
    // Each part overwrites the start of the line; a trailing "\r" alone keeps what was there.
    let cur = '';
    for (const part of parts) cur = part + cur.slice(part.length);
    return cur;
  }).join('\n');
}
