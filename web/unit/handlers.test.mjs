// renameHandlers (src/handlers.js): every on* attribute the HTML parser would see is renamed, whatever
// the tag's shape, and text outside tags is left alone.
import test from 'node:test';
import assert from 'node:assert/strict';
import { renameHandlers as r } from '../src/handlers.js';

test('handlers with and without values, in any case and after any separator', () => {
  assert.equal(r('<img src=x onerror=alert(1)>'), '<img src=x data-x-onerror=alert(1)>');
  assert.equal(r('<svg/onload=alert(1)>'), '<svg/data-x-onload=alert(1)>');
  assert.equal(r('<p ONCLICK = "x">'), '<p data-x-ONCLICK = "x">');
  assert.equal(r('<a href="x"onclick=y>'), '<a href="x"data-x-onclick=y>');
  // blns: a handler with no value, then an attribute named '"'
  assert.equal(r(`<img src onerror /" '"= alt=javascript:alert(1)//">`), `<img src data-x-onerror /" '"= alt=javascript:alert(1)//">`);
  assert.equal(r('<p onclick>x</p>'), '<p data-x-onclick>x</p>');
});

test('a > inside a quoted value does not end the tag', () => {
  assert.equal(r('<a title=">" onclick=x>t</a>'), '<a title=">" data-x-onclick=x>t</a>');
  assert.equal(r(`<a title='>' onclick=x>`), `<a title='>' data-x-onclick=x>`);
});

test('comments, raw text and CDATA end where the parser ends them; both readings are renamed', () => {
  assert.equal(r('<!--><img onerror>-->'), '<!--><img data-x-onerror>-->');
  assert.equal(r('<!-- x --!><img onerror>'), '<!-- x --!><img data-x-onerror>');
  // HTML reads <style> as raw text (the img is a tag), SVG as an element (onerror is in a value): both renamed
  assert.equal(r('<style><a title="</style><img onerror>">'), '<style><a title="</style><img data-x-onerror>">');
  assert.equal(r('<svg><style><a title="</style>" onclick=x>'), '<svg><style><a title="</style>" data-x-onclick=x>');
  assert.equal(r('<svg><![CDATA[><img onerror>]]>'), '<svg><![CDATA[><img data-x-onerror>]]>');
});

test('text is left alone', () => {
  for (const s of ['once upon a time, online', 'a < b and onclick=1 > 0', '`<b>` onload', 'x <= y on', '']) assert.equal(r(s), s);
});
