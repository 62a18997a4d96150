// A small Markdown renderer (CommonMark-ish subset + GFM tables, fences, strikethrough).
// All text is escaped: raw HTML in Markdown shows as text. The caller still passes the result
// through the sanitizer, so a bug here cannot inject script.

import { escapeHtml } from './util.js';
import { highlightPython } from './highlight.js';

const SAFE_URL = /^(?:https?:|mailto:|#|\/|\.{0,2}\/|[^:]*$)/i;

function safeUrl(u) {
  const clean = u.replace(/[\u0000-\u0020\u007f]/g, '');
  // entity tricks (javascript&#58;...) are not decoded in an href, but refuse them anyway
  return SAFE_URL.test(clean) && !/&(#|colon;|tab;|newline;)/i.test(clean) ? clean : null;
}

/** inline renders one paragraph's worth of inline Markdown. */
export function inline(src) {
  const slots = [];
  const keep = (html) => `\u0000${slots.push(html) - 1}\u0000`;
  let s = src.replace(/\u0000/g, '');
  // code spans first: their content is literal
  s = s.replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (_, __, code) => keep(`<code>${escapeHtml(code.trim() || code)}</code>`));
  // backslash escapes
  s = s.replace(/\\([\\`*_{}\[\]()#+\-.!|~<>])/g, (_, c) => keep(escapeHtml(c)));
  // autolinks <https://...>
  s = s.replace(/<((?:https?:\/\/|mailto:)[^\s<>]+)>/gi, (_, u) => {
    const url = safeUrl(u);
    return url ? keep(`<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${escapeHtml(u)}</a>`) : _;
  });
  s = escapeHtml(s);
  // images and links: [text](url "title"); url and title are already escaped
  s = s.replace(/(!?)\[([^\]]*)\]\(\s*([^\s)]+)(?:\s+&quot;([^"]*?)&quot;)?\s*\)/g, (all, bang, text, url, title) => {
    const raw = url.replace(/&amp;/g, '&');
    const ok = safeUrl(raw);
    if (!ok) return text;
    const t = title ? ` title="${title}"` : '';
    if (bang) return keep(`<img src="${escapeHtml(ok)}" alt="${text}"${t}>`);
    return `<a href="${escapeHtml(ok)}" target="_blank" rel="noopener noreferrer"${t}>${text}</a>`;
  });
  // bare URLs
  s = s.replace(/(^|[\s(])(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g, (_, pre, u) =>
    `${pre}<a href="${u}" target="_blank" rel="noopener noreferrer">${u}</a>`);
  s = s.replace(/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, '<strong>$2</strong>');
  s = s.replace(/(^|[^\w*])\*(?=\S)([\s\S]*?\S)\*(?!\*)/g, '$1<em>$2</em>');
  s = s.replace(/(^|[^\w_])_(?=\S)([\s\S]*?\S)_(?![\w_])/g, '$1<em>$2</em>');
  s = s.replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>');
  // hard line breaks: two spaces or a backslash before a newline
  s = s.replace(/(?: {2,}|\\)\n/g, '<br>\n');
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => slots[Number(i)]);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)[^\n]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const HR = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const LIST = /^( {0,3})([-*+]|\d{1,9}[.)])(\s+|$)(.*)$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$/;

function splitRow(line) {
  let l = line.trim();
  if (l.startsWith('|')) l = l.slice(1);
  if (l.endsWith('|') && !l.endsWith('\\|')) l = l.slice(0, -1);
  return l.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

function isBlockStart(line, next) {
  return FENCE.test(line) || HEADING.test(line) || HR.test(line) || QUOTE.test(line) || LIST.test(line) ||
    (line.includes('|') && next !== undefined && TABLE_SEP.test(next) && next.includes('-'));
}

/** renderMarkdown returns HTML for a Markdown document. */
export function renderMarkdown(src) {
  const lines = String(src).replace(/\r\n?/g, '\n').replace(/\t/g, '    ').split('\n');
  return blocks(lines);
}

function blocks(lines) {
  let out = '';
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) { i++; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const lang = m[2].toLowerCase();
      const body = [];
      i++;
      while (i < lines.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[i])) body.push(lines[i++]);
      i++;
      const code = body.join('\n');
      const html = ['python', 'py', 'python3', 'ipython', ''].includes(lang) && lang ? highlightPython(code) : escapeHtml(code);
      out += `<pre class="md-code"><code${lang ? ` class="language-${escapeHtml(lang)}"` : ''}>${html}</code></pre>\n`;
      continue;
    }
    if ((m = HEADING.exec(line))) {
      const n = m[1].length;
      out += `<h${n}>${inline(m[2] || '')}</h${n}>\n`;
      i++;
      continue;
    }
    if (HR.test(line)) { out += '<hr>\n'; i++; continue; }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i++; }
      out += `<blockquote>\n${blocks(body)}</blockquote>\n`;
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const head = splitRow(line);
      const aligns = splitRow(lines[i + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : ''));
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].includes('|') && !/^\s*$/.test(lines[i])) rows.push(splitRow(lines[i++]));
      const cell = (tag, c, k) => `<${tag}${aligns[k] ? ` align="${aligns[k]}"` : ''}>${inline(c)}</${tag}>`;
      out += '<table>\n<thead><tr>' + head.map((c, k) => cell('th', c, k)).join('') + '</tr></thead>\n<tbody>\n' +
        rows.map((r) => '<tr>' + head.map((_, k) => cell('td', r[k] ?? '', k)).join('') + '</tr>').join('\n') + '\n</tbody></table>\n';
      continue;
    }
    if ((m = LIST.exec(line))) {
      const ordered = /\d/.test(m[2]);
      const start = ordered ? parseInt(m[2], 10) : 1;
      const items = [];
      let loose = false;
      while (i < lines.length) {
        const lm = LIST.exec(lines[i]);
        if (!lm || /\d/.test(lm[2]) !== ordered) break;
        const indent = lm[1].length + lm[2].length + Math.min(lm[3].length || 1, 4);
        const body = [lm[4]];
        i++;
        while (i < lines.length) {
          const l = lines[i];
          if (/^\s*$/.test(l)) {
            // a blank line continues the item only if indented content follows
            if (i + 1 < lines.length && lines[i + 1].search(/\S/) >= indent) { body.push(''); loose = true; i++; continue; }
            break;
          }
          const ind = l.search(/\S/);
          if (ind >= indent) { body.push(l.slice(indent)); i++; continue; }
          if (LIST.test(l) || isBlockStart(l)) break;
          body.push(l.trim()); // lazy continuation
          i++;
        }
        items.push(body);
        const nx = i + 1 < lines.length && /^\s*$/.test(lines[i]) ? LIST.exec(lines[i + 1]) : null;
        if (nx && /\d/.test(nx[2]) === ordered) { loose = true; i++; }
      }
      const tag = ordered ? 'ol' : 'ul';
      out += `<${tag}${ordered && start !== 1 ? ` start="${start}"` : ''}>\n`;
      for (const body of items) {
        const task = /^\[([ xX])\]\s+/.exec(body[0]);
        if (task) body[0] = body[0].slice(task[0].length);
        let html = loose || body.length > 1 ? blocks(body) : inline(body[0]);
        if (!loose && body.length > 1) html = html.replace(/^<p>([\s\S]*?)<\/p>\n/, '$1\n');
        const box = task ? `<span class="md-task">${task[1] === ' ' ? '&#9744;' : '&#9745;'}</span> ` : '';
        out += `<li>${box}${html}</li>\n`;
      }
      out += `</${tag}>\n`;
      continue;
    }
    if (/^ {4}/.test(line)) {
      const body = [];
      while (i < lines.length && (/^ {4}/.test(lines[i]) || /^\s*$/.test(lines[i]))) body.push(lines[i++].slice(4));
      while (body.length && body[body.length - 1] === '') body.pop();
      out += `<pre class="md-code"><code>${escapeHtml(body.join('\n'))}</code></pre>\n`;
      continue;
    }
    const para = [line.trim()];
    i++;
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !isBlockStart(lines[i], lines[i + 1])) {
      // setext headings
      if (/^ {0,3}=+\s*$/.test(lines[i]) || /^ {0,3}-+\s*$/.test(lines[i])) break;
      para.push(lines[i++].trim());
    }
    if (i < lines.length && /^ {0,3}(=+|-+)\s*$/.test(lines[i])) {
      const n = lines[i].trim()[0] === '=' ? 1 : 2;
      out += `<h${n}>${inline(para.join('\n'))}</h${n}>\n`;
      i++;
      continue;
    }
    out += `<p>${inline(para.join('\n'))}</p>\n`;
  }
  return out;
}
