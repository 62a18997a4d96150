// The session view's command-mode keys (focus outside an editor): the Jupyter-like single keys and
// two-key sequences listed under ? (web/README.md "Keyboard shortcuts").
import { isTyping } from './util.js';

/** commandKey handles a command-mode key of view; it returns true when it used the key. */
export function commandKey(view, e) {
  if (isTyping(e.target) || e.ctrlKey || e.metaKey || e.altKey) return false;
  const k = e.key;
  const seq = view.keySeq;
  view.keySeq = '';
  if ((k === 'i' || k === 'I') && (seq === 'i')) { view.interrupt(); return true; }
  if (k === 'i' || k === 'I') { view.keySeq = 'i'; return true; }
  if (k === '0' && seq === '0') { view.restart(); return true; }
  if (k === '0') { view.keySeq = '0'; return true; }
  if (k === 'g' && seq === 'g') { if (view.cells.length) view.select(view.cells[0], true); return true; }
  if (k === 'g') { view.keySeq = 'g'; return true; }
  if (k === 'G') { if (view.cells.length) view.select(view.cells[view.cells.length - 1], true); return true; }
  if (k === 'ArrowDown' || k === 'j') {
    if (view.selected && view.selected === view.cells[view.cells.length - 1] && k === 'ArrowDown') { view.composer.focus(); return true; }
    moveSelection(view, 1); return true;
  }
  if (k === 'ArrowUp' || k === 'k') { moveSelection(view, -1); return true; }
  if (k === 'Enter' && e.shiftKey && view.selected) { view.runCell(view.selected, 'stay'); return true; }
  if (k === 'Enter' && view.selected && e.target === view.selected.el) { view.selected.editor.focus(); return true; }
  if (k === 'n' || k === '/') { view.composer.focus(true); return true; }
  if (k === '!') { view.composerBox.setMode('exec'); view.composer.focus(true); return true; }
  if (k === 'p') { view.composerBox.setMode('run'); view.composer.focus(true); return true; }
  if (k === 'f') { view.panels?.show('files'); return true; }
  if (k === 'c') { view.panels?.show('checkpoints'); return true; }
  if (k === 'v') { view.panels?.show('variables'); return true; }
  if (k === 'd' && seq === 'd') { if (view.selected) view.deleteCell(view.selected); return true; }
  if (k === 'd') { view.keySeq = 'd'; return true; }
  if (k === 'o' && view.selected) { view.selected.toggleCollapse(); return true; }
  if (k === 'K' && view.selected) { view.moveCell(view.selected, -1); return true; }
  if (k === 'J' && view.selected) { view.moveCell(view.selected, 1); return true; }
  if (k === 'e') { view.panels?.show('events'); return true; }
  if (k === 's') { view.panels?.show('info'); return true; }
  return false;
}

/** moveSelection selects the cell delta places from the selected one (the first or last when none is). */
function moveSelection(view, delta) {
  const cells = view.cells;
  if (!cells.length) return;
  let i = cells.indexOf(view.selected);
  if (i < 0) i = delta > 0 ? -1 : cells.length;
  i = Math.max(0, Math.min(cells.length - 1, i + delta));
  view.select(cells[i], true);
}
