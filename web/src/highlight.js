// A small Python syntax highlighter: text in, HTML (spans with tok-* classes) out.
// It scans the whole text once, so triple-quoted strings spanning lines are coloured right.

import { escapeHtml } from './util.js';

const KEYWORDS = new Set(('False None True and as assert async await break class continue def del elif else ' +
  'except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield').split(' '));
const SOFT_KEYWORDS = new Set(['match', 'case', 'type', '_']);
const BUILTINS = new Set(('abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod ' +
  'compile complex delattr dict dir divmod enumerate eval exec filter float format frozenset getattr globals ' +
  'hasattr hash help hex id input int isinstance issubclass iter len list locals map max memoryview min next ' +
  'object oct open ord pow print property range repr reversed round set setattr slice sorted staticmethod str ' +
  'sum super tuple type vars zip __import__ __name__ __file__ display ' +
  'Exception BaseException ValueError TypeError KeyError IndexError AttributeError RuntimeError ' +
  'StopIteration ZeroDivisionError ImportError ModuleNotFoundError NameError OSError FileNotFoundError ' +
  'NotImplementedError AssertionError KeyboardInterrupt NotImplemented Ellipsis').split(' '));

// One sticky regex; each alternative is a capture group, tried in order at the current position.
const TOKEN = new RegExp([
  /(#[^\n]*)/.source, // 1 comment
  // 2 string: optional prefix, then triple or single quoted (an unterminated one runs to the end
  // of the text for triple quotes, to the end of the line otherwise)
  /((?:[rRbBuUfF]{1,2})?(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:[^"\\\n]|\\[\s\S])*"?|'(?:[^'\\\n]|\\[\s\S])*'?))/.source,
  /((?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?)[jJ]?)/.source, // 3 number
  /(@[\p{L}_][\p{L}\p{N}_.]*)/.source, // 4 decorator (or matmul followed by a name: rare enough)
  /([\p{L}_][\p{L}\p{N}_]*)/.source, // 5 identifier
  /(\s+)/.source, // 6 whitespace
  /([-+*/%=<>!&|^~:]+|->)/.source, // 7 operator
  /([\s\S])/.source, // 8 anything else
].join('|'), 'uy');

/** highlightPython returns HTML for code; every character of code is kept, in order. */
export function highlightPython(code) {
  let out = '';
  let pos = 0;
  let pending = null; // 'def' or 'class': colour the next identifier as a name
  let lineStart = true; // only whitespace since the last newline
  TOKEN.lastIndex = 0;
  while (pos < code.length) {
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(code);
    if (!m) break; // cannot happen: the last alternative matches any character
    const text = m[0];
    pos += text.length;
    let cls = null;
    if (m[1] !== undefined) cls = 'comment';
    else if (m[2] !== undefined) cls = 'string';
    else if (m[3] !== undefined) cls = 'number';
    else if (m[4] !== undefined) cls = lineStart ? 'decorator' : null;
    else if (m[5] !== undefined) {
      if (pending) { cls = pending === 'def' ? 'def' : 'classname'; pending = null; }
      else if (KEYWORDS.has(text)) {
        cls = text === 'True' || text === 'False' || text === 'None' ? 'const' : 'keyword';
        if (text === 'def' || text === 'class') pending = text;
      } else if (SOFT_KEYWORDS.has(text) && lineStart && text !== '_' && /^\s+[^\s=.(,:)]/.test(code.slice(pos, pos + 3))) cls = 'keyword';
      else if (text === 'self' || text === 'cls') cls = 'self';
      else if (BUILTINS.has(text)) cls = 'builtin';
    } else if (m[7] !== undefined) cls = 'op';
    if (m[6] === undefined) lineStart = false;
    if (m[6] !== undefined && text.includes('\n')) lineStart = true;
    if (m[6] === undefined && m[5] === undefined) pending = null;
    out += cls ? `<span class="tok-${cls}">${escapeHtml(text)}</span>` : escapeHtml(text);
  }
  return out;
}
