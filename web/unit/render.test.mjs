// Tests of the string-in, HTML-out renderers (no DOM needed): node --test unit/
import test from 'node:test';
import assert from 'node:assert/strict';
import { highlightPython } from '../src/highlight.js';
import { ansiToHtml, stripAnsi, applyControlChars } from '../src/ansi.js';
import { renderMarkdown } from '../src/markdown.js';
import { RendererRegistry, latexSource } from '../src/renderers.js';
import { toCodePoints, toUtf16 } from '../src/editor.js';

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

test('markdown (marked, GFM) blocks and inline', () => {
  const html = renderMarkdown('# Title\n\nSome **bold**, *it*, `a<b`, ~~no~~ and [link](https://x.org/?a=1&b=2).\n\n- one\n- two\n\n1. a\n2. b\n\n```python\nx = 1\n```\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n> quote\n\n---\n');
  assert.match(html, /<h1>Title<\/h1>/);
  assert.match(html, /<strong>bold<\/strong>/);
  assert.match(html, /<em>it<\/em>/);
  assert.match(html, /<code>a&lt;b<\/code>/);
  assert.match(html, /<del>no<\/del>/);
  assert.match(html, /<a href="https:\/\/x.org\/\?a=1&amp;b=2">link<\/a>/);
  assert.match(html, /<li>one<\/li>/);
  assert.match(html, /<ol>\n<li>a<\/li>/);
  assert.match(html, /<code class="language-python">x = 1\n<\/code>/);
  assert.match(html, /<th align="right">b<\/th>/);
  assert.match(html, /<blockquote>\n<p>quote<\/p>\n<\/blockquote>/);
  assert.match(html, /<hr>/);
});

test('math in markdown becomes placeholders the sanitizer keeps (KaTeX fills them in)', () => {
  const html = renderMarkdown('Euler: $e^{i\\pi} + 1 = 0$, costs $5 and $6.\n\n$$\n\\int_0^1 x\\,dx < 1\n$$\n');
  assert.match(html, /<span class="math-inline">e\^\{i\\pi\} \+ 1 = 0<\/span>/);
  assert.match(html, /costs \$5 and \$6/, 'dollar amounts are not math');
  assert.match(html, /<div class="math-display">\\int_0\^1 x\\,dx &lt; 1<\/div>/);
});

test('renderer registry: rank decides, unsafe renderers are never picked for untrusted data', () => {
  const r = new RendererRegistry();
  const el = (t) => ({ t, dataset: {} });
  r.add({ mimeTypes: ['text/plain'], rank: 100, render: () => el('plain') });
  r.add({ mimeTypes: ['text/html'], rank: 10, render: () => el('html') });
  r.add({ mimeTypes: ['application/javascript'], rank: 0, safe: false, render: () => el('js') });
  r.add({ mimeTypes: [/^application\/vnd\.vegalite\.v\d\+json$/], rank: 5, render: () => el('vega') });
  assert.equal(r.pick({ 'text/plain': 'x', 'text/html': '<b>' }).mime, 'text/html');
  assert.equal(r.pick({ 'text/plain': 'x', 'application/javascript': 'alert(1)' }).mime, 'text/plain');
  assert.equal(r.pick({ 'application/javascript': 'alert(1)' }), null);
  assert.equal(r.pick({ 'application/javascript': 'alert(1)' }, true).mime, 'application/javascript');
  assert.equal(r.pick({ 'text/plain': 'x', 'application/vnd.vegalite.v5+json': {} }).mime, 'application/vnd.vegalite.v5+json');
  assert.throws(() => r.add({ render: () => null }));
  assert.equal(latexSource('$$x^2$$'), 'x^2');
  assert.equal(latexSource('\\[ a \\]'), 'a');
  assert.equal(latexSource('$a$'), 'a');
});

test('kernel positions are code points, editor positions UTF-16 units', () => {
  const s = 'a😀b = 1';
  assert.equal(toCodePoints(s, 4), 3);
  assert.equal(toUtf16(s, 3), 4);
});

test('checkpoint diff: added, changed (content or type), removed; files by content', async () => {
  const { checkpointDiff } = await import('../src/inspector.js');
  const a = { variables: [{ name: 'x', type: 'list', ref: 'r1' }, { name: 'same', type: 'int', ref: 's' }, { name: 'gone', type: 'str', ref: 'g' }, { name: 't', type: 'int', ref: 't' }],
    files: [{ path: 'a.txt', ref: 'f1', size: 3 }, { path: 'old.txt', ref: 'o', size: 1 }] };
  const b = { variables: [{ name: 'x', type: 'list', ref: 'r2' }, { name: 'same', type: 'int', ref: 's' }, { name: 'new', type: 'dict', ref: 'n' }, { name: 't', type: 'float', ref: 't' }],
    files: [{ path: 'a.txt', ref: 'f2', size: 4 }, { path: 'b.txt', ref: 'b', size: 2 }] };
  const d = checkpointDiff(a, b);
  assert.deepEqual(d.variables.added.map((v) => v.name), ['new']);
  assert.deepEqual(d.variables.changed.map((v) => v.name), ['t', 'x']);
  assert.deepEqual(d.variables.removed.map((v) => v.name), ['gone']);
  assert.equal(d.variables.changed.find((v) => v.name === 't').before.type, 'int');
  assert.deepEqual(d.files.added.map((f) => f.path), ['b.txt']);
  assert.deepEqual(d.files.changed.map((f) => f.path), ['a.txt']);
  assert.deepEqual(d.files.removed.map((f) => f.path), ['old.txt']);
});
