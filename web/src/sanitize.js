// The sanitizer of kernel outputs (text/html, rendered Markdown): DOMPurify, configured strictly, plus
// one rule of ours, a per-output namespace.
//
// Why DOMPurify and not our own allowlist walker: it is maintained against a public corpus of mutation-
// XSS and DOM-clobbering payloads, it checks every node it visits for clobbered properties (a
// <form><input name=localName> made the old walker throw), and it returns the cleaned nodes as a
// fragment (never re-parsed). What DOMPurify cannot know is which ids and classes belong to this page:
//
// - every id and name in an output is rewritten to "<ns>-<value>" (ns unique per output), and every
//   reference to one (href="#x", url(#x), for=, aria-labelledby=, usemap=...) with it, so an output can
//   neither take over document.getElementById('confirm') nor window.token, yet its own SVG gradients,
//   anchors and labels keep working;
// - every class becomes "user-<class>" (except the few a caller allows, e.g. math placeholders), so
//   the page's own CSS (.overlay, .toast, ...) never styles output markup;
// - the box an output is drawn in has `contain: layout paint` (app.css): nothing in it, not even
//   position:fixed, paints outside it;
// - a <style> (pandas' Styler) is taken out before DOMPurify drops it, cleaned by css.js (nothing that
//   fetches or runs; selectors renamed into the namespace and scoped under [data-ns="<ns>"], which the
//   caller sets on the output's box) and put back as a <style> of ours at the top of the fragment.
import DOMPurify from 'dompurify';
import { renameHandlers } from './handlers.js';
import { sanitizeCSS } from './css.js';

let seq = 0;
/** newNamespace returns a fresh prefix for one output's ids ("o12"). */
export function newNamespace() { return `o${++seq}`; }

// Attributes whose value is a space-separated list of ids.
const IDREFS = new Set(['for', 'headers', 'aria-labelledby', 'aria-describedby', 'aria-controls', 'aria-owns',
  'aria-activedescendant', 'aria-details', 'aria-errormessage', 'aria-flowto', 'list', 'form', 'itemref']);
// Attributes that may hold url(#id) (SVG paint servers, clips, masks, markers, filters) or CSS.
const URL_REFS = new Set(['fill', 'stroke', 'clip-path', 'mask', 'marker-start', 'marker-mid', 'marker-end', 'filter', 'style']);

const FORBID_TAGS = ['style', 'form', 'input', 'button', 'select', 'textarea', 'option', 'optgroup', 'iframe', 'frame',
  'frameset', 'object', 'embed', 'applet', 'base', 'link', 'meta', 'dialog', 'template', 'portal', 'foreignObject',
  'math', 'audio', 'video', 'source', 'track', 'canvas', 'noscript', 'animate', 'animateMotion', 'animateTransform', 'set',
  'image', 'feImage'];
const FORBID_ATTR = ['formaction', 'action', 'srcset', 'ping', 'background', 'popover', 'popovertarget', 'autofocus',
  'tabindex', 'accesskey', 'contenteditable', 'draggable'];

let purifier = null; // made on first use (a DOM is needed; node unit tests import this module without one)
let current = null; // {ns, keep, styles} of the sanitize() call in progress (DOMPurify is synchronous)

const nsId = (v) => `${current.ns}-${v}`;
const safeSrc = (v) => /^(data:image\/(png|jpe?g|gif|webp|svg\+xml)[;,]|blob:)/i.test(v.trim());
const safeHref = (v) => /^(https?:|mailto:|#)/i.test(v.trim());

function onAttribute(node, ev) {
  if (!current) return;
  const name = ev.attrName;
  let v = ev.attrValue;
  if (name === 'id' || name === 'name') v = nsId(v);
  else if (IDREFS.has(name)) v = v.split(/\s+/).filter(Boolean).map(nsId).join(' ');
  else if (name === 'class') v = v.split(/\s+/).filter(Boolean).map((c) => (current.keep?.test(c) ? c : `user-${c}`)).join(' ');
  else if (name === 'usemap') v = v.startsWith('#') ? `#${nsId(v.slice(1))}` : '';
  else if (name === 'href' || name === 'xlink:href') {
    if (v.trim().startsWith('#')) v = `#${nsId(v.trim().slice(1))}`;
    else if (node.namespaceURI !== 'http://www.w3.org/1999/xhtml' || !safeHref(v)) v = null; // SVG <use>/<a> only inside the output
  } else if (name === 'src') {
    if (!safeSrc(v)) v = null; // the page may only load from itself (CSP); remote images would only fail
  }
  if (v != null && URL_REFS.has(name)) {
    // url(#x) -> url(#ns-x); any other url() (remote, javascript:, data:) is removed
    v = v.replace(/url\(\s*(['"]?)\s*#([^'")\s]+)\1\s*\)/gi, (_, q, id) => `url(#${nsId(id)})`)
      .replace(/url\(\s*(['"]?)(?!#)[^)]*\1\s*\)/gi, 'none');
    if (name === 'style') v = v.replace(/expression\s*\(|@import|behavior\s*:|-moz-binding/gi, '');
  }
  if (v == null) ev.keepAttr = false;
  else ev.attrValue = v;
}

function afterAttributes(node) {
  if (!current) return;
  // an output's image without a text alternative still gets one (screen readers announce it)
  if (node.localName === 'img' && !node.hasAttribute('alt')) node.setAttribute('alt', 'image in the output (no description)');
  if (node.localName === 'a' && node.hasAttribute('href') && !node.getAttribute('href').startsWith('#')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
}

// onElement keeps the text of each <style> (HTML or SVG) for css.js; DOMPurify then removes the element
// and its text (style is forbidden here and among the elements whose content is never kept).
function onElement(node, ev) {
  if (current && ev.tagName === 'style') current.styles.push(node.textContent || '');
}

// headStyles returns the text of the <style> elements HTML parsing puts into <head> (those before any
// body content, as in Styler's output), which DOMPurify never walks (it sanitizes the body). A parse
// of its own in an inert document; DOMPurify's FORCE_BODY would walk them too, but it moves a leading
// <base> into the body, where Chromium checks (and reports) it against the page's base-uri.
function headStyles(html) {
  if (!/<style/i.test(html)) return [];
  const doc = new DOMParser().parseFromString(html, 'text/html');
  return [...doc.head.querySelectorAll('style')].map((s) => s.textContent || '');
}

function getPurifier() {
  if (!purifier) {
    purifier = DOMPurify(window);
    purifier.addHook('uponSanitizeElement', onElement);
    purifier.addHook('uponSanitizeAttribute', onAttribute);
    purifier.addHook('afterSanitizeAttributes', afterAttributes);
  }
  return purifier;
}

const CONFIG = {
  USE_PROFILES: { html: true, svg: true, svgFilters: true }, // no MathML (an mXSS vector; KaTeX draws math)
  FORBID_TAGS,
  FORBID_ATTR,
  ADD_ATTR: ['target'],
  ALLOW_DATA_ATTR: false,
  ALLOW_UNKNOWN_PROTOCOLS: false,
  SANITIZE_DOM: true, // and on top of it our namespace: ids never equal a document or form property
  KEEP_CONTENT: true,
  WHOLE_DOCUMENT: false,
  RETURN_DOM_FRAGMENT: true,
  RETURN_DOM_IMPORT: true,
};

/**
 * sanitize returns a DocumentFragment (of this document) holding only safe markup.
 * opts.ns: the output's namespace (newNamespace()); opts.keepClasses: a RegExp of classes kept as they
 * are (placeholders that trusted renderers fill in afterwards).
 */
export function sanitize(html, opts = {}) {
  const ns = opts.ns || newNamespace();
  current = { ns, keep: opts.keepClasses || null, styles: [] };
  try {
    // Chromium reports a CSP violation (script-src-attr) for every on* attribute even in DOMPurify's
    // inert document; renaming them first keeps those reports meaningful (handlers.js says why and how)
    const clean = renameHandlers(html);
    const frag = getPurifier().sanitize(clean, CONFIG);
    const css = [...headStyles(clean), ...current.styles].map((t) => sanitizeCSS(t, ns)).filter(Boolean).join('\n');
    if (css) {
      const style = document.createElement('style');
      style.textContent = css; // text of a node made here: never parsed as markup
      frag.prepend(style);
    }
    return frag;
  } finally {
    current = null;
  }
}

/** removed lists what the last sanitize() call dropped (for tests and diagnostics). */
export function removed() { return getPurifier().removed; }

/** sanitizeToString is for tests: the cleaned markup as a string. */
export function sanitizeToString(html, opts) {
  const d = document.createElement('div');
  d.append(sanitize(html, opts));
  return d.innerHTML;
}
