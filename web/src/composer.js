// The new-cell box at the bottom of the session view: its editor, Run, the Python | $ Shell switch
// (the kind of the next cell: Python over the websocket, or a shell command through POST /exec) and
// the key hint, with the session's state banner above it.
import { Editor } from './editor.js';
import { h } from './util.js';
import { showError } from './ui.js';

/** Composer is a view's new-cell box; its editor is view.composer (panels insert code into it). */
export class Composer {
  constructor(view) {
    this.editor = new Editor({
      placeholder: 'Type Python here · Shift+Enter runs it · Tab completes',
      label: 'New cell',
      id: 'composer',
      onRun: () => view.runComposer(),
      onEscape: () => { this.editor.blur(); if (view.cells.length) view.select(view.cells[view.cells.length - 1], true); },
      complete: (c, p) => view.complete(c, p),
      onError: (err) => showError('Completion failed', err),
    });
    this.runBtn = h('button.btn.primary', { onclick: () => view.runComposer() }, '▶ Run');
    this.modeBtns = ['run', 'exec'].map((m) => h('button.mode-btn', {
      type: 'button', 'data-mode': m,
      title: m === 'run' ? 'New cells run Python in the kernel (p in command mode)' : 'New cells run a shell command in the workspace, /bin/sh -c (! in command mode)',
      onclick: () => { this.setMode(m); this.editor.focus(); },
    }, m === 'run' ? 'Python' : '$ Shell'));
    this.modeHint = h('span.hint');
    this.stateBanner = h('div.banner-slot');
    this.el = h('div.composer', this.stateBanner, h('div.composer-box', this.editor.el, h('div.composer-actions', this.runBtn,
      h('div.mode-toggle', { role: 'group', 'aria-label': 'Kind of the new cell' }, this.modeBtns), this.modeHint)));
    this.setMode('run');
  }

  /** setMode switches the box between Python code ('run') and a shell command ('exec'). */
  setMode(mode) {
    this.mode = mode === 'exec' ? 'exec' : 'run';
    const shell = this.mode === 'exec';
    for (const b of this.modeBtns) b.setAttribute('aria-pressed', String(b.dataset.mode === this.mode));
    this.editor.configure({
      plain: shell,
      placeholder: shell ? 'Type a shell command (/bin/sh -c in the workspace) · Shift+Enter runs it'
        : 'Type Python here · Shift+Enter runs it · Tab completes',
      label: shell ? 'New cell: shell command' : 'New cell',
    });
    this.el.dataset.mode = this.mode;
    this.runBtn.title = shell ? 'Run the shell command (Shift+Enter)' : 'Run (Shift+Enter)';
    this.modeHint.replaceChildren(h('kbd', 'Shift'), '+', h('kbd', 'Enter'), ' run · ',
      ...(shell ? [] : [h('kbd', 'Tab'), ' complete · ']), h('kbd', '?'), ' help');
  }
}
