// css.js: what the CSS sanitizer keeps of an output's <style>, and what it removes.
import test from 'node:test';
import assert from 'node:assert/strict';
import { sanitizeCSS } from '../src/css.js';

test('Styler rules are kept, renamed into the output namespace and scoped to its box', () => {
  assert.equal(sanitizeCSS('#T_a_row0_col0 { background-color: #440154; color: #f1f1f1; } .col0:hover{color:red}', 'o7'),
    '[data-ns="o7"] #o7-T_a_row0_col0{background-color:#440154;color:#f1f1f1}[data-ns="o7"] .user-col0:hover{color:red}');
  assert.equal(sanitizeCSS('td{width:10em;background:linear-gradient(90deg, #d65f5f 45.0%, transparent 45.0%)}', 'o1'),
    '[data-ns="o1"] td{width:10em;background:linear-gradient(90deg,#d65f5f 45.0%,transparent 45.0%)}');
  assert.equal(sanitizeCSS('[id="T_x"],[class~=b],:is(#a,.b)>:not(#c){color:red}', 'o2'),
    '[data-ns="o2"] [id="o2-T_x"],[data-ns="o2"] [class~="user-b"],[data-ns="o2"] :is(#o2-a,.user-b)>:not(#o2-c){color:red}');
  assert.equal(sanitizeCSS('rect{fill:url(#grad)}', 'o3'), '[data-ns="o3"] rect{fill:url(#o3-grad)}');
  assert.equal(sanitizeCSS('@media (min-width:1px){p{color:blue;background:url(//e.invalid/m)}}', 'o4'),
    '@media (min-width:1px){[data-ns="o4"] p{color:blue}}');
});

test('what can fetch or run is removed', () => {
  const gone = [
    'input[value^="a"]{background:url(https://e.invalid/a)}',
    '@import url(https://e.invalid/x.css);', '@import "y.css";',
    '@font-face{font-family:x;src:url(https://e.invalid/f.woff)}',
    '*{background-image:image-set("https://e.invalid/i.png" 1x)}',
    '*{background-image:-webkit-image-set("https://e.invalid/i.png" 1x)}',
    'p{background:\\75 rl(https://e.invalid/e)}', 'p{background:u\\rl(https://e.invalid/e)}',
    ':root{--u:url(https://e.invalid/v)}', 'p{background:var(--u)}',
    'x{width:expression(window.__xss=1)}', 'a{behavior:url(x.htc)}', 'a{-moz-binding:url(x.xml#y)}', 'b{\\62 ehavior:url(x)}',
    '@namespace x url(https://e.invalid/ns);', '@keyframes spin{from{color:red}}', '@supports (background:url(x)){p{color:red}}',
    'p{color:red;& b{color:blue}}'.replace('color:red;', ''), 'p{cursor:url(https://e.invalid/c.cur),auto}',
    'p{list-style:url(https://e.invalid/l.png)}', 'p{content:url(https://e.invalid/c.png)}',
  ];
  for (const css of gone) assert.equal(sanitizeCSS(css, 'o9'), '', css);
  assert.throws(() => sanitizeCSS('p{}', 'x y'), /namespace/);
});
