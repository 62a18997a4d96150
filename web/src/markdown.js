// Markdown (text/markdown outputs) with marked (GFM: tables, task lists, strikethrough, autolinks) and
// math with KaTeX: $inline$, $$display$$, \(inline\) and \[display\]. marked turns Markdown into an HTML
// string that may carry raw HTML from the output, so the string goes through the sanitizer; math and
// fenced Python code leave marked as placeholders (class math-inline / math-display / language-python)
// that survive sanitizing and are filled in afterwards by KaTeX and our highlighter, whose output is
// trusted (KaTeX runs with trust: false, so \href, \url and \includegraphics are refused).
import { Marked } from 'marked';
import { escapeHtml } from './util.js';
import { highlightPython } from './highlight.js';

const blockMath = {
  name: 'mathBlock',
  level: 'block',
  start: (src) => src.match(/\$\$|\\\[/)?.index,
  tokenizer(src) {
    const m = /^\$\$([\s\S]+?)\$\$[^\S\n]*(?:\n|$)/.exec(src) || /^\\\[([\s\S]+?)\\\][^\S\n]*(?:\n|$)/.exec(src);
    if (m) return { type: 'mathBlock', raw: m[0], text: m[1].trim() };
    return undefined;
  },
  renderer: (t) => `<div class="math-display">${escapeHtml(t.text)}</div>\n`,
};

const inlineMath = {
  name: 'mathInline',
  level: 'inline',
  start: (src) => src.match(/\$|\\\(/)?.index,
  tokenizer(src) {
    // $x$ needs a non-space right after the opening and right before the closing $ (so "$5 and $6" is text)
    const m = /^\$\$([^$]+?)\$\$/.exec(src) || /^\$(?!\s)((?:\\\$|[^$\n])+?)(?<!\s)\$(?!\d)/.exec(src) || /^\\\(([\s\S]+?)\\\)/.exec(src);
    if (m) return { type: 'mathInline', raw: m[0], text: m[1], display: m[0].startsWith('$$') };
    return undefined;
  },
  renderer: (t) => `<span class="${t.display ? 'math-display' : 'math-inline'}">${escapeHtml(t.text)}</span>`,
};

const marked = new Marked({ gfm: true, breaks: false, async: false });
marked.use({ extensions: [blockMath, inlineMath] });

/** renderMarkdown returns the HTML string of src (NOT sanitized: pass it through sanitize()). */
export function renderMarkdown(src) {
  return marked.parse(String(src ?? ''));
}

/** PLACEHOLDERS are the classes the sanitizer must keep for fillPlaceholders. */
export const PLACEHOLDERS = /^(math-inline|math-display|language-python|language-py)$/;

const KATEX = { throwOnError: false, trust: false, strict: 'ignore', maxSize: 50, maxExpand: 1000, output: 'htmlAndMathml' };

let katexP = null; // KaTeX (a quarter of the bundle) loads with the first math, not with the page

/**
 * renderMath draws TeX into el with KaTeX (errors are shown in place, in red, not thrown). The TeX
 * source shows until KaTeX has loaded; el.dataset.math is "done" once drawn, and a bubbling "mathdrawn"
 * event is sent from el then.
 */
export function renderMath(tex, el, displayMode) {
  el.textContent = tex;
  el.dataset.math = 'pending';
  katexP ||= import('katex').then((m) => m.default);
  return katexP.then((katex) => {
    katex.render(tex, el, { ...KATEX, displayMode });
    el.dataset.math = 'done';
    // the drawn math is wider than its source, often without its box changing size: tell the page
    el.dispatchEvent(new Event('mathdrawn', { bubbles: true }));
  }, (err) => { el.dataset.math = 'failed'; el.title = `math not drawn: ${err.message}`; });
}

/** fillPlaceholders renders the math and the Python code blocks of a sanitized Markdown fragment. */
export function fillPlaceholders(root) {
  for (const el of root.querySelectorAll('.math-inline, .math-display')) renderMath(el.textContent, el, el.classList.contains('math-display'));
  for (const el of root.querySelectorAll('code.language-python, code.language-py')) el.innerHTML = highlightPython(el.textContent);
}
