// An allowlist HTML sanitizer (in the spirit of DOMPurify) for kernel outputs: text/html (pandas
// tables), rendered Markdown. The input is parsed into an inert document (no script runs, no image
// loads), walked, and every element or attribute not on the lists is removed. The cleaned nodes
// themselves are returned (never re-serialized and re-parsed), which avoids mutation-XSS tricks.
// The page's Content-Security-Policy (script-src 'self') is the second line of defence.

const HTML_TAGS = new Set(('a abbr address article aside b bdi bdo big blockquote br caption center cite code col ' +
  'colgroup dd del details dfn div dl dt em figcaption figure font footer h1 h2 h3 h4 h5 h6 header hr i img ins ' +
  'kbd label li main mark nav ol p pre q rp rt ruby s samp section small span strike strong sub summary sup table ' +
  'tbody td tfoot th thead time tr tt u ul var wbr').split(' '));

const SVG_TAGS = new Set(('svg g path circle ellipse line polyline polygon rect text tspan textpath defs title desc ' +
  'lineargradient radialgradient stop clippath mask marker pattern symbol use').split(' '));

// Removed together with everything inside them.
const DROP = new Set(('script style iframe frame frameset object embed applet noscript noembed template link meta ' +
  'base head form input button select textarea option optgroup dialog portal math foreignobject ' +
  'animate animatemotion animatetransform set handler audio video source track canvas param xmp plaintext noframes').split(' '));

const HTML_ATTRS = new Set(('class title lang dir align valign width height colspan rowspan scope headers abbr ' +
  'border cellpadding cellspacing start reversed type alt open datetime cite color face size span nowrap bgcolor ' +
  'summary role aria-label aria-hidden aria-describedby').split(' '));

const SVG_ATTRS = new Set(('viewbox xmlns version width height x y x1 y1 x2 y2 cx cy r rx ry dx dy d points ' +
  'transform fill stroke stroke-width stroke-linecap stroke-linejoin stroke-dasharray stroke-dashoffset ' +
  'stroke-miterlimit stroke-opacity fill-opacity fill-rule clip-rule opacity font-size font-family font-weight ' +
  'font-style text-anchor dominant-baseline alignment-baseline baseline-shift letter-spacing offset stop-color ' +
  'stop-opacity gradientunits gradienttransform spreadmethod fx fy preserveaspectratio clip-path clippathunits mask ' +
  'marker-start marker-mid marker-end markerwidth markerheight refx refy orient markerunits patternunits ' +
  'patterncontentunits patterntransform visibility display class id href xlink:href vector-effect paint-order ' +
  'shape-rendering text-rendering image-rendering color textlength lengthadjust role aria-label').split(' '));

const CSS_PROPS = new Set(('color background-color text-align vertical-align font-weight font-style font-size ' +
  'font-family font-variant text-decoration text-transform white-space word-break overflow-wrap line-height ' +
  'letter-spacing border border-top border-right border-bottom border-left border-color border-style border-width ' +
  'border-collapse border-spacing border-radius padding padding-top padding-right padding-bottom padding-left margin ' +
  'margin-top margin-right margin-bottom margin-left width height min-width max-width min-height max-height display ' +
  'opacity list-style-type caption-side table-layout empty-cells fill stroke stroke-width').split(' '));

const BAD_CSS = /url\s*\(|expression\s*\(|javascript:|@import|behavior\s*:|-moz-binding|\\/i;
const URL_SCHEME = /^([a-z][a-z0-9+.-]*):/i;

function cleanUrl(v, forImage) {
  const s = String(v).replace(/[\u0000-\u0020\u007f-\u009f]/g, '');
  const m = URL_SCHEME.exec(s);
  if (!m) return s.startsWith('//') ? null : s; // relative (protocol-relative would load off-site)
  const scheme = m[1].toLowerCase();
  if (scheme === 'http' || scheme === 'https') return s;
  if (!forImage && scheme === 'mailto') return s;
  if (forImage && /^data:image\/(png|jpe?g|gif|webp|bmp|svg\+xml)[;,]/i.test(s)) return s;
  if (forImage && scheme === 'blob') return s;
  return null;
}

/** cleanStyle keeps only allowlisted CSS declarations without URLs or escapes. */
export function cleanStyle(v) {
  const out = [];
  for (const decl of String(v).split(';')) {
    const i = decl.indexOf(':');
    if (i < 0) continue;
    const prop = decl.slice(0, i).trim().toLowerCase();
    const val = decl.slice(i + 1).trim();
    if (!CSS_PROPS.has(prop) || BAD_CSS.test(val) || /[<>]/.test(val)) continue;
    out.push(`${prop}: ${val}`);
  }
  return out.join('; ');
}

function cleanElement(el, inSvg) {
  const tag = el.localName.toLowerCase();
  const svg = inSvg || tag === 'svg';
  for (const attr of Array.from(el.attributes)) {
    const name = attr.name.toLowerCase();
    let keep = false;
    let value = attr.value;
    if (name.startsWith('on') || name === 'srcdoc' || name === 'formaction') keep = false;
    else if (name === 'style') {
      value = cleanStyle(value);
      keep = value !== '';
    } else if (name === 'href' || name === 'xlink:href') {
      if (svg) {
        keep = value.trim().startsWith('#'); // <use href="#id"> only: no external documents
      } else if (tag === 'a') {
        value = cleanUrl(value, false);
        keep = value !== null;
      }
    } else if (name === 'src') {
      if (tag === 'img') {
        value = cleanUrl(value, true);
        keep = value !== null;
      }
    } else if (name === 'id') {
      keep = svg; // ids inside SVG (gradients, clip paths); HTML ids could clobber the page's DOM
      if (keep) value = value.replace(/[^\w.-]/g, '');
    } else if (name === 'clip-path' || name === 'mask' || name === 'fill' || name === 'stroke' || name.startsWith('marker-')) {
      keep = svg && (!/url\s*\(/i.test(value) || /^url\(\s*#[\w.-]+\s*\)$/i.test(value.trim()));
    } else if (name.startsWith('data-')) {
      keep = false;
    } else {
      keep = svg ? SVG_ATTRS.has(name) : HTML_ATTRS.has(name);
    }
    if (!keep) el.removeAttribute(attr.name);
    else if (value !== attr.value) el.setAttribute(attr.name, value);
  }
  if (tag === 'a' && el.hasAttribute('href')) {
    el.setAttribute('target', '_blank');
    el.setAttribute('rel', 'noopener noreferrer');
  }
  if (tag === 'img') {
    el.setAttribute('loading', 'lazy');
    el.setAttribute('referrerpolicy', 'no-referrer');
  }
}

function walk(parent, inSvg) {
  for (const node of Array.from(parent.childNodes)) {
    if (node.nodeType === Node.TEXT_NODE) continue;
    if (node.nodeType !== Node.ELEMENT_NODE) { node.remove(); continue; } // comments, PIs, CDATA
    const tag = node.localName.toLowerCase();
    const svg = inSvg || tag === 'svg';
    if (DROP.has(tag)) { node.remove(); continue; }
    const allowed = svg ? SVG_TAGS.has(tag) : HTML_TAGS.has(tag);
    if (!allowed) {
      // unknown but harmless-looking wrapper: keep its (cleaned) children, drop the tag
      walk(node, svg);
      node.replaceWith(...Array.from(node.childNodes));
      continue;
    }
    cleanElement(node, svg);
    walk(node, svg);
  }
}

/** sanitize parses html and returns a DocumentFragment holding only allowed markup. */
export function sanitize(html) {
  // DOMParser gives a document with no browsing context: nothing in it loads or runs, and (unlike a
  // <template> of this page) its on* attributes are not even checked against the page's CSP.
  // Renaming on* attributes before parsing only keeps Chromium from logging a CSP violation for each
  // one (they would be blocked anyway); the walk below removes every on* and data-* attribute.
  const pre = String(html).replace(/<[a-zA-Z][^>]*>/g, (tag) => tag.replace(/(\s|\/)on([a-z]+\s*=)/gi, '$1data-x-on$2'));
  const doc = new DOMParser().parseFromString(`<!doctype html><html><head></head><body>${pre}</body></html>`, 'text/html');
  walk(doc.body, false);
  const frag = document.createDocumentFragment();
  for (const n of Array.from(doc.body.childNodes)) frag.append(document.importNode(n, true));
  return frag;
}

/** sanitizeToString is for tests: the cleaned markup as a string. */
export function sanitizeToString(html) {
  const d = document.createElement('div');
  d.append(sanitize(html));
  return d.innerHTML;
}
