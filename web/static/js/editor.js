// Code editor: a transparent <textarea> over a highlighted <pre>, both in one grid cell so the
// editor grows with its content. Python-aware keys (auto-indent, Tab/Shift+Tab, comment toggle) and
// Tab completion through the kernel, shown in a small popup list under the caret.

import { highlightPython } from './highlight.js';
import { h } from './util.js';

const INDENT = '    ';

// Jupyter counts cursor positions in Unicode code points; JS strings index UTF-16 units.
function toCodePoints(s, utf16) { return [...s.slice(0, utf16)].length; }
function toUtf16(s, cp) {
  let i = 0;
  for (let n = 0; n < cp && i < s.length; n++) i += s.codePointAt(i) > 0xffff ? 2 : 1;
  return i;
}

export class Editor {
  /**
   * opts: value, placeholder, label, onRun(mode: 'next'|'stay'), onEscape(), onChange(value),
   * complete(code, cursorPos) -> Promise<{matches, cursor_start, cursor_end, metadata}>, onError(err),
   * plain (no Python highlighting: shell commands)
   */
  constructor(opts = {}) {
    this.opts = opts;
    this.hl = h('pre.editor-hl', { 'aria-hidden': 'true' });
    this.ta = h('textarea.editor-input', {
      spellcheck: false, autocapitalize: 'off', autocomplete: 'off', wrap: 'off', rows: 1,
      placeholder: opts.placeholder || '', 'aria-label': opts.label || 'Python code',
    });
    this.ta.setAttribute('autocorrect', 'off');
    this.grid = h('div.editor-grid', this.hl, this.ta);
    this.el = h('div.editor', this.grid);
    this.popup = null;
    this.ta.value = opts.value || '';
    this.render();
    this.ta.addEventListener('input', () => {
      this.render();
      if (this.popup) this.refilter();
      opts.onChange?.(this.ta.value);
    });
    this.ta.addEventListener('keydown', (e) => this.onKey(e));
    this.ta.addEventListener('blur', () => setTimeout(() => {
      if (document.activeElement !== this.ta) this.closePopup();
    }, 150));
    this.ta.addEventListener('click', () => this.closePopup());
  }

  get value() { return this.ta.value; }
  set value(v) { this.ta.value = v; this.render(); }
  focus(atEnd) {
    this.ta.focus({ preventScroll: false });
    if (atEnd) this.ta.setSelectionRange(this.ta.value.length, this.ta.value.length);
  }

  render() {
    // the trailing newline gives an empty last line its height
    // plain: a shell command, shown without Python colouring
    const v = this.ta.value;
    this.hl.innerHTML = (this.opts.plain ? v.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' }[c])) : highlightPython(v)) + '\n';
  }

  /** insert replaces [start, end) with text, keeping the browser's undo history when it can. */
  insert(text, start = this.ta.selectionStart, end = this.ta.selectionEnd, select = false) {
    const ta = this.ta;
    ta.focus();
    ta.setSelectionRange(start, end);
    const ok = document.execCommand && document.execCommand('insertText', false, text);
    if (!ok || ta.value.slice(start, start + text.length) !== text) {
      ta.setRangeText(text, start, end, 'end');
      ta.dispatchEvent(new Event('input'));
    }
    if (select) ta.setSelectionRange(start, start + text.length);
  }

  lineRange() {
    const v = this.ta.value;
    const s = this.ta.selectionStart;
    let e = this.ta.selectionEnd;
    if (e > s && v[e - 1] === '\n') e--; // a selection ending at a line start excludes that line
    const ls = v.lastIndexOf('\n', s - 1) + 1;
    let le = v.indexOf('\n', e);
    if (le < 0) le = v.length;
    return [ls, le];
  }

  mapLines(fn) {
    const [ls, le] = this.lineRange();
    const block = this.ta.value.slice(ls, le);
    const out = block.split('\n').map(fn).join('\n');
    if (out !== block) this.insert(out, ls, le, true);
  }

  onKey(e) {
    const ta = this.ta;
    const mod = e.ctrlKey || e.metaKey;
    if (this.popup && this.popupKey(e)) return;
    if (e.key === 'Enter' && (e.shiftKey || mod) && !e.altKey) {
      e.preventDefault();
      this.closePopup();
      this.opts.onRun?.(e.shiftKey && !mod ? 'next' : 'stay');
      return;
    }
    if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      this.opts.onEscape?.();
      return;
    }
    if (e.key === 'Tab' && !mod && !e.altKey) {
      e.preventDefault();
      const s = ta.selectionStart;
      const v = ta.value;
      const ls = v.lastIndexOf('\n', s - 1) + 1;
      if (e.shiftKey) {
        this.mapLines((l) => l.replace(/^( {1,4}|\t)/, ''));
      } else if (ta.selectionEnd !== s && v.slice(s, ta.selectionEnd).includes('\n')) {
        this.mapLines((l) => (l.trim() ? INDENT + l : l));
      } else if (/^\s*$/.test(v.slice(ls, s))) {
        this.insert(' '.repeat(4 - ((s - ls) % 4)));
      } else {
        this.complete();
      }
      return;
    }
    if (e.key === 'Enter' && !e.altKey) {
      e.preventDefault();
      const s = ta.selectionStart;
      const v = ta.value;
      const ls = v.lastIndexOf('\n', s - 1) + 1;
      const before = v.slice(ls, s);
      let indent = /^[ \t]*/.exec(before)[0];
      const code = before.replace(/#.*$/, '').trimEnd();
      if (code.endsWith(':')) indent += INDENT;
      else if (/^\s*(return|pass|break|continue|raise)\b/.test(code) && indent.length >= 4) indent = indent.slice(4);
      this.insert('\n' + indent);
      return;
    }
    if (e.key === 'Backspace' && !mod && ta.selectionStart === ta.selectionEnd) {
      const s = ta.selectionStart;
      const v = ta.value;
      const ls = v.lastIndexOf('\n', s - 1) + 1;
      const before = v.slice(ls, s);
      if (before.length >= 4 && /^ +$/.test(before)) {
        e.preventDefault();
        const n = before.length % 4 || 4;
        this.insert('', s - n, s);
      }
      return;
    }
    if (mod && e.key === '/') {
      e.preventDefault();
      const [ls, le] = this.lineRange();
      const lines = ta.value.slice(ls, le).split('\n');
      const all = lines.filter((l) => l.trim()).every((l) => /^\s*#/.test(l));
      this.mapLines((l) => {
        if (!l.trim()) return l;
        return all ? l.replace(/^(\s*)# ?/, '$1') : l.replace(/^(\s*)/, '$1# ');
      });
    }
  }

  // ---- completion ----

  async complete() {
    if (!this.opts.complete) return;
    const code = this.ta.value;
    const pos = this.ta.selectionStart;
    let ans;
    try {
      ans = await this.opts.complete(code, toCodePoints(code, pos));
    } catch (err) {
      this.opts.onError?.(err);
      return;
    }
    if (this.ta.value !== code || this.ta.selectionStart !== pos) return; // typed meanwhile
    const matches = (ans && ans.matches) || [];
    if (!matches.length) { this.flash('no completions'); return; }
    const start = toUtf16(code, ans.cursor_start ?? toCodePoints(code, pos));
    const end = toUtf16(code, ans.cursor_end ?? toCodePoints(code, pos));
    const types = {};
    for (const t of ans.metadata?._jupyter_types_experimental || []) types[t.text] = t.type;
    if (matches.length === 1) { this.insert(matches[0], start, end); return; }
    // extend to the common prefix first, like a shell
    let prefix = matches[0];
    for (const m of matches) while (!m.startsWith(prefix)) prefix = prefix.slice(0, -1);
    const typed = code.slice(start, end);
    let endNow = end;
    if (prefix.length > typed.length && prefix.startsWith(typed)) {
      this.insert(prefix, start, end);
      endNow = start + prefix.length;
    }
    this.openPopup(matches, types, start, endNow);
  }

  flash(msg) {
    const tip = h('div.editor-tip', msg);
    this.el.append(tip);
    this.placeAtCaret(tip, this.ta.selectionStart);
    setTimeout(() => tip.remove(), 1200);
  }

  placeAtCaret(box, index) {
    const v = this.ta.value;
    const before = v.slice(0, index);
    const line = before.split('\n').length - 1;
    const col = index - (before.lastIndexOf('\n') + 1);
    const cs = getComputedStyle(this.ta);
    const lh = parseFloat(cs.lineHeight) || 18;
    const probe = h('span', { style: { font: cs.font, position: 'absolute', visibility: 'hidden', whiteSpace: 'pre' } }, 'M'.repeat(20));
    document.body.append(probe);
    const cw = probe.getBoundingClientRect().width / 20;
    probe.remove();
    const left = parseFloat(cs.paddingLeft) + col * cw - this.grid.parentElement.scrollLeft;
    const top = parseFloat(cs.paddingTop) + (line + 1) * lh;
    box.style.left = `${Math.max(0, Math.min(left, this.el.clientWidth - 120))}px`;
    box.style.top = `${top + 2}px`;
  }

  openPopup(matches, types, start, end) {
    this.closePopup();
    const list = h('ul.completions', { role: 'listbox', 'aria-label': 'Completions' });
    this.popup = { all: matches, types, start, list, items: [], sel: 0 };
    this.el.append(list);
    this.placeAtCaret(list, start);
    this.fill(matches);
    this.refilter();
  }

  fill(matches) {
    const p = this.popup;
    p.list.replaceChildren();
    p.items = matches.slice(0, 200);
    p.sel = 0;
    p.items.forEach((m, i) => {
      const li = h('li', {
        role: 'option',
        onmousedown: (e) => { e.preventDefault(); p.sel = i; this.accept(); },
      }, h('span.c-text', m), p.types[m] ? h('span.c-type', p.types[m]) : null);
      p.list.append(li);
    });
    if (matches.length > p.items.length) p.list.append(h('li.more', `… ${matches.length - p.items.length} more`));
    this.select(0);
  }

  refilter() {
    const p = this.popup;
    const cur = this.ta.selectionStart;
    if (cur < p.start) { this.closePopup(); return; }
    const typed = this.ta.value.slice(p.start, cur);
    if (/\s/.test(typed)) { this.closePopup(); return; }
    const left = p.all.filter((m) => m.startsWith(typed));
    if (!left.length) { this.closePopup(); return; }
    if (left.length !== p.items.length || left[0] !== p.items[0]) this.fill(left);
  }

  select(i) {
    const p = this.popup;
    if (!p.items.length) return;
    p.sel = (i + p.items.length) % p.items.length;
    p.list.querySelectorAll('li').forEach((li, k) => li.setAttribute('aria-selected', String(k === p.sel)));
    p.list.children[p.sel]?.scrollIntoView({ block: 'nearest' });
  }

  accept() {
    const p = this.popup;
    const text = p.items[p.sel];
    const cur = this.ta.selectionStart;
    this.closePopup();
    if (text != null) this.insert(text, p.start, Math.max(cur, p.start));
  }

  popupKey(e) {
    const p = this.popup;
    if (e.key === 'ArrowDown' || (e.key === 'Tab' && !e.shiftKey) || (e.ctrlKey && e.key === 'n')) { e.preventDefault(); this.select(p.sel + 1); return true; }
    if (e.key === 'ArrowUp' || (e.key === 'Tab' && e.shiftKey) || (e.ctrlKey && e.key === 'p')) { e.preventDefault(); this.select(p.sel - 1); return true; }
    if (e.key === 'Enter' && !e.shiftKey && !e.ctrlKey && !e.metaKey) { e.preventDefault(); this.accept(); return true; }
    if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); this.closePopup(); return true; }
    if (e.key === 'PageDown') { e.preventDefault(); this.select(p.sel + 8); return true; }
    if (e.key === 'PageUp') { e.preventDefault(); this.select(p.sel - 8); return true; }
    return false;
  }

  closePopup() {
    if (this.popup) {
      this.popup.list.remove();
      this.popup = null;
    }
  }
}
