// The code editor: CodeMirror 6 (Python language, bracket matching, search, undo history, multiple
// cursors, IME and screen-reader support come with it), plus what is ours: the notebook keys
// (Shift+Enter, Ctrl+Enter, Esc), completion through the kernel (POST /complete) and inspect-on-hover
// (the same endpoint: the type and signature IPython reports for the word under the pointer).
//
// A cell from the history shows its code as highlighted static text and becomes a CodeMirror view on
// first focus or click: creating thousands of views would make a long history slow to open.

import { EditorView, keymap, placeholder, drawSelection, highlightActiveLine, highlightSpecialChars, rectangularSelection,
  crosshairCursor, dropCursor, hoverTooltip, tooltips } from '@codemirror/view';
import { EditorState, Compartment, Prec } from '@codemirror/state';
import { defaultKeymap, history, historyKeymap, indentMore, indentLess, toggleComment } from '@codemirror/commands';
import { python } from '@codemirror/lang-python';
import { syntaxHighlighting, HighlightStyle, bracketMatching, indentOnInput, indentUnit } from '@codemirror/language';
import { tags as t } from '@lezer/highlight';
import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap, startCompletion, acceptCompletion,
  completionStatus } from '@codemirror/autocomplete';
import { search, searchKeymap, highlightSelectionMatches } from '@codemirror/search';
import { highlightPython } from './highlight.js';
import { h, escapeHtml } from './util.js';

// Jupyter counts cursor positions in Unicode code points; JS strings index UTF-16 units.
export function toCodePoints(s, utf16) { return [...s.slice(0, utf16)].length; }
export function toUtf16(s, cp) {
  let i = 0;
  for (let n = 0; n < cp && i < s.length; n++) i += s.codePointAt(i) > 0xffff ? 2 : 1;
  return i;
}

// CodeMirror's tokens get the classes of our own highlighter (app.css colours them, light and dark).
const HIGHLIGHT = HighlightStyle.define([
  { tag: [t.keyword, t.controlKeyword, t.definitionKeyword, t.moduleKeyword, t.operatorKeyword], class: 'tok-keyword' },
  { tag: [t.bool, t.null, t.atom], class: 'tok-const' },
  { tag: [t.string, t.special(t.string), t.regexp], class: 'tok-string' },
  { tag: [t.comment, t.lineComment, t.blockComment], class: 'tok-comment' },
  { tag: [t.number, t.integer, t.float], class: 'tok-number' },
  { tag: [t.standard(t.variableName), t.special(t.variableName)], class: 'tok-builtin' },
  { tag: [t.function(t.definition(t.variableName)), t.function(t.variableName)], class: 'tok-def' },
  { tag: [t.definition(t.className), t.className], class: 'tok-classname' },
  { tag: [t.meta, t.annotation], class: 'tok-decorator' },
  { tag: t.self, class: 'tok-self' },
  { tag: [t.operator, t.compareOperator, t.arithmeticOperator], class: 'tok-op' },
]);

const CM_TYPES = { function: 'function', class: 'class', module: 'namespace', keyword: 'keyword', instance: 'variable',
  statement: 'variable', param: 'variable', property: 'property', path: 'text' };

export class Editor {
  /**
   * opts: value, placeholder, label, id (of the editable element), onRun(mode: 'next'|'stay'),
   * onEscape(), onChange(value), complete(code, cursorPos) -> Promise<{matches, cursor_start,
   * cursor_end, metadata}>, onError(err), plain (a shell command: no Python), lazy (static until focused)
   */
  constructor(opts = {}) {
    this.opts = opts;
    this.el = h('div.editor');
    this.el._editor = this;
    this.view = null;
    this._value = opts.value || '';
    this.lang = new Compartment();
    this.ph = new Compartment();
    this.attrs = new Compartment();
    if (opts.lazy) this.renderStatic();
    else this.mount();
  }

  renderStatic() {
    const pre = h('pre.editor-static', { tabindex: 0, role: 'textbox', 'aria-readonly': 'false', 'aria-multiline': 'true',
      'aria-label': this.opts.label || 'Python code', title: 'Click or press Enter to edit' });
    pre.innerHTML = (this.opts.plain ? escapeHtml(this._value) : highlightPython(this._value)) + '\n';
    const activate = (e) => { if (!this.view) { e?.preventDefault?.(); this.mount(); this.focus(); } };
    pre.addEventListener('focus', activate);
    pre.addEventListener('mousedown', activate);
    this.el.replaceChildren(pre);
  }

  contentAttrs() {
    const a = { 'aria-label': this.opts.label || 'Python code', spellcheck: 'false', autocapitalize: 'off', autocorrect: 'off' };
    if (this.opts.id) a.id = this.opts.id;
    return EditorView.contentAttributes.of(a);
  }

  mount() {
    if (this.view) return;
    const run = (mode) => () => { this.opts.onRun?.(mode); return true; };
    const tab = (view) => {
      if (completionStatus(view.state) === 'active') return acceptCompletion(view);
      const sel = view.state.selection.main;
      const line = view.state.doc.lineAt(sel.head);
      const before = line.text.slice(0, sel.head - line.from);
      if (!sel.empty || /^\s*$/.test(before) || !this.opts.complete || this.opts.plain) return indentMore(view);
      return startCompletion(view);
    };
    const state = EditorState.create({
      doc: this._value,
      extensions: [
        Prec.highest(keymap.of([
          { key: 'Shift-Enter', run: run('next') },
          { key: 'Mod-Enter', run: run('stay') },
          { key: 'Tab', run: tab, shift: indentLess },
        ])),
        highlightSpecialChars(), history(), drawSelection(), dropCursor(), EditorState.allowMultipleSelections.of(true),
        indentOnInput(), bracketMatching(), closeBrackets(), rectangularSelection(), crosshairCursor(),
        highlightActiveLine(), highlightSelectionMatches(), search({ top: true }),
        syntaxHighlighting(HIGHLIGHT),
        indentUnit.of('    '),
        autocompletion({ override: [(ctx) => this.kernelCompletions(ctx)], activateOnTyping: false, icons: false }),
        hoverTooltip((view, pos) => this.inspect(view, pos), { hoverTime: 400 }),
        // tooltips live on <body>, above the cell boxes (and never clipped by a scrolling composer)
        tooltips({ parent: document.body }),
        keymap.of([
          ...closeBracketsKeymap, ...completionKeymap,
          { key: 'Escape', run: () => { this.opts.onEscape?.(); return true; } },
          { key: 'Mod-/', run: toggleComment },
          ...searchKeymap, ...historyKeymap, ...defaultKeymap,
        ]),
        this.lang.of(this.opts.plain ? [] : python()),
        this.ph.of(this.opts.placeholder ? placeholder(this.opts.placeholder) : []),
        this.attrs.of(this.contentAttrs()),
        EditorView.updateListener.of((u) => { if (u.docChanged) this.opts.onChange?.(this.value); }),
      ],
    });
    this.view = new EditorView({ state });
    this.el.replaceChildren(this.view.dom);
  }

  get value() { return this.view ? this.view.state.doc.toString() : this._value; }
  set value(v) {
    this._value = v;
    if (this.view) this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: v } });
    else this.renderStatic();
  }

  focus(atEnd) {
    this.mount();
    this.view.focus();
    if (atEnd) this.view.dispatch({ selection: { anchor: this.view.state.doc.length }, scrollIntoView: true });
  }

  blur() { this.view?.contentDOM.blur(); }
  closePopup() { /* the completion list closes with the editor's focus */ }

  /** configure switches Python/plain, the placeholder and the accessible label (the composer's mode). */
  configure({ plain, placeholder: text, label }) {
    this.opts.plain = plain;
    if (text != null) this.opts.placeholder = text;
    if (label != null) this.opts.label = label;
    if (!this.view) { this.renderStatic(); return; }
    this.view.dispatch({ effects: [
      this.lang.reconfigure(plain ? [] : python()),
      this.ph.reconfigure(this.opts.placeholder ? placeholder(this.opts.placeholder) : []),
      this.attrs.reconfigure(this.contentAttrs()),
    ] });
  }

  // ---- the kernel: completion and inspection ----

  async kernelCompletions(ctx) {
    if (!this.opts.complete || this.opts.plain) return null;
    const word = ctx.matchBefore(/[\w.]*/);
    if (!ctx.explicit && (!word || word.from === word.to)) return null;
    const code = ctx.state.doc.toString();
    let ans;
    try {
      ans = await this.opts.complete(code, toCodePoints(code, ctx.pos));
    } catch (err) {
      this.opts.onError?.(err);
      return null;
    }
    if (ctx.aborted) return null;
    const matches = (ans && ans.matches) || [];
    if (!matches.length) return null;
    const from = toUtf16(code, ans.cursor_start ?? toCodePoints(code, ctx.pos));
    const to = toUtf16(code, ans.cursor_end ?? toCodePoints(code, ctx.pos));
    const types = {};
    for (const t of ans.metadata?._jupyter_types_experimental || []) types[t.text] = t;
    if (matches.length === 1 && ctx.view) {
      // one answer: insert it at once, as a shell does
      const view = ctx.view;
      queueMicrotask(() => view.dispatch({ changes: { from, to, insert: matches[0] }, selection: { anchor: from + matches[0].length } }));
      return null;
    }
    return {
      from, to,
      options: matches.slice(0, 500).map((m) => ({ label: m, type: CM_TYPES[types[m]?.type] || 'variable', detail: types[m]?.type || undefined })),
      filter: true,
    };
  }

  /** inspect shows what the kernel knows of the name under the pointer (type, signature). */
  async inspect(view, pos) {
    if (!this.opts.complete || this.opts.plain) return null;
    const word = wordAt(view.state, pos);
    if (!word) return null;
    const code = view.state.doc.toString();
    let ans;
    try {
      ans = await this.opts.complete(code, toCodePoints(code, word.to));
    } catch {
      return null;
    }
    const name = word.text.split('.').pop();
    const t = (ans?.metadata?._jupyter_types_experimental || []).find((x) => x.text === name);
    if (!t) return null;
    return {
      pos: word.from, end: word.to, above: true,
      create: () => {
        const dom = h('div.cm-inspect', { 'data-testid': 'inspect' }, h('b', word.text), h('span.muted', ` ${t.type || ''}`),
          t.signature ? h('code.sig', t.signature) : null);
        return { dom };
      },
    };
  }
}

function wordAt(state, pos) {
  const line = state.doc.lineAt(pos);
  const text = line.text;
  let s = pos - line.from;
  let e = s;
  while (s > 0 && /[\w.]/.test(text[s - 1])) s--;
  while (e < text.length && /\w/.test(text[e])) e++;
  if (s === e || !/[A-Za-z_]/.test(text[s] || '')) return null;
  return { from: line.from + s, to: line.from + e, text: text.slice(s, e) };
}
