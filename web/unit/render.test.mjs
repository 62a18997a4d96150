// Tests of the string-in, HTML-out renderers (no DOM needed): node --test unit/
import test from 'node:test';
import assert from 'node:assert/strict';
import { highlightPython } from '../static/js/highlight.js';
import { ansiToHtml, stripAnsi, applyControlChars } from '../static/js/ansi.js';
import { renderMarkdown, inline } from '../static/js/markdown.js';

const unescape = (s) => s.replace(/<[^>]*>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

test('highlighter keeps every character and escapes HTML', () => {
  const code = 'def f(x: int) -> str:\n    """doc\n    more"""\n    s = f"<b>{x}</b>"  # comment & more\n    return s if x > 0x1F else None\n@decorator\nclass C(Base): pass\n';
  const html = highlightPython(code);
  assert.equal(unescape(html), code);
  assert.ok(!/<b>/.test(html), 'user text must be escaped');
  assert.match(html, /<span class="tok-keyword">def<\/span> <span class="tok-def">f<\/span>/);
  assert.match(html, /<span class="tok-string">&quot;&quot;&quot;doc\n    more&quot;&quot;&quot;<\/span>/);
  assert.match(html, /<span class="tok-comment"># comment &amp; more<\/span>/);
  assert.match(html, /<span class="tok-number">0x1F<\/span>/);
  assert.match(html, /<span class="tok-const">None<\/span>/);
  assert.match(html, /<span class="tok-decorator">@decorator<\/span>/);
  assert.match(html, /<span class="tok-classname">C<\/span>/);
});

test('highlighter survives unterminated strings and odd input', () => {
  for (const code of ['x = "abc', "'''never closed\nstill", 'a = rb"\\x00"', '', '\n\n', 'π = 3.14j', '@', '`$?']) {
    assert.equal(unescape(highlightPython(code)), code);
  }
});

test('ansi colours, resets and 256/rgb colours', () => {
  const tb = '\x1b[0;31mZeroDivisionError\x1b[0m: division by zero \x1b[1;32mok\x1b[0m \x1b[38;5;208mo\x1b[48;2;1;2;3mx\x1b[0m <tag>';
  const html = ansiToHtml(tb);
  assert.match(html, /<span class="ansi-fg-1">ZeroDivisionError<\/span>: division by zero /);
  assert.match(html, /<span class="ansi-fg-10 ansi-bold">ok<\/span>/);
  assert.match(html, /style="color:rgb\(255,135,0\)"/);
  assert.match(html, /background-color:rgb\(1,2,3\)/);
  assert.match(html, /&lt;tag&gt;$/);
  assert.equal(stripAnsi(tb), 'ZeroDivisionError: division by zero ok ox <tag>');
  assert.equal(ansiToHtml('\x1b]0;title\x07plain\x1b[2K'), 'plain');
});

test('carriage returns overwrite the line like a terminal', () => {
  assert.equal(applyControlChars('10%\r50%\r100%\ndone\n'), '100%\ndone\n');
  assert.equal(applyControlChars('abcdef\rXY'), 'XYcdef');
  assert.equal(applyControlChars('ab\bc'), 'ac');
});

test('markdown blocks and inline', () => {
  const html = renderMarkdown('# Title\n\nSome **bold**, *it*, `a<b`, ~~no~~ and [link](https://x.org/?a=1&b=2).\n\n- one\n- two\n\n1. a\n2. b\n\n```python\nx = 1\n```\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n> quote\n\n---\n');
  assert.match(html, /<h1>Title<\/h1>/);
  assert.match(html, /<strong>bold<\/strong>/);
  assert.match(html, /<em>it<\/em>/);
  assert.match(html, /<code>a&lt;b<\/code>/);
  assert.match(html, /<del>no<\/del>/);
  assert.match(html, /<a href="https:\/\/x.org\/\?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">link<\/a>/);
  assert.match(html, /<ul>\n<li>one<\/li>\n<li>two<\/li>\n<\/ul>/);
  assert.match(html, /<ol>\n<li>a<\/li>/);
  assert.match(html, /<pre class="md-code"><code class="language-python">x <span class="tok-op">=<\/span> <span class="tok-number">1<\/span>/);
  assert.match(html, /<th>a<\/th><th align="right">b<\/th>/);
  assert.match(html, /<blockquote>\n<p>quote<\/p>\n<\/blockquote>/);
  assert.match(html, /<hr>/);
});

test('markdown never lets HTML or javascript: through', () => {
  const html = renderMarkdown('<script>alert(1)</script>\n\n[x](javascript:alert(1)) [y](JaVaScRiPt&#58;alert(1)) ![i](javascript:1) <img src=x onerror=alert(1)>');
  assert.ok(!/<script/i.test(html));
  assert.ok(!/<img src=x/i.test(html));
  assert.ok(!/href="javascript/i.test(html));
  assert.ok(!/src="javascript/i.test(html));
  assert.equal(inline('a_b_c snake_case_name'), 'a_b_c snake_case_name');
});
