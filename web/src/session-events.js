// The session view's answer to session events (the events panel lists them all): refreshes, the
// replay markers of a restore, budget notices, and what a kernel's death is told as: "restoring" at
// the death, "restored" only on the restore's own event, with what its report says.
import { replayNote, restoreSummary } from './checkpoints.js';
import { toast } from './ui.js';

/** SessionEvents turns a view's session events into refreshes, markers and toasts. */
export class SessionEvents {
  constructor(view) {
    this.view = view;
    this.restoring = null; // the death's toast, until the restore (or a kernel with nothing to restore)
  }

  /**
   * on takes one event of the session (a websocket "event" frame's). An old event (logged before
   * the page opened: a kernel that died an hour ago; Panels.isNews) refreshes what it touches but is
   * not announced: toasts and markers tell what happens while the page is open, a drop of its
   * socket included.
   */
  on(ev, old = false) {
    if (!ev) return;
    const v = this.view;
    const t = ev.event_type || '';
    if (/^(session_|sandbox_|rotation_|budget_|kernel_died|checkpoint_restored|checkpoint_created)/.test(t)) v.refreshSessionSoon();
    if (t === 'checkpoint_created' || t === 'checkpoint_restored') v.panels.refreshCheckpointsSoon();
    if (old) return;
    this.death(t, ev.payload);
    if (t === 'checkpoint_restored') {
      const n = replayNote(ev.payload);
      if (n && n.rebuilt) v.addMarker(n.rebuilt);
      if (n && n.missed) v.addMarker(n.missed);
    }
    if (t === 'budget_exceeded') toast('error', 'Budget exceeded', 'This session reached a budget limit.', ev.payload);
    if (t === 'budget_warning') toast('info', 'Budget warning', JSON.stringify(ev.payload || {}));
  }

  // death tells a kernel's death and its aftermath. The server follows kernel_died with a new kernel
  // (sandbox_created) and, when the session has a checkpoint, its restore (checkpoint_restored, the
  // restore report): only that event may say the session is restored.
  death(t, payload) {
    if (t === 'kernel_died') {
      this.restoring = toast('error', 'The kernel died', 'Restoring the session from its last checkpoint…', payload);
      return;
    }
    if (!this.restoring) return;
    if (t === 'checkpoint_restored') {
      this.settle();
      toast('info', 'The session was restored from its last checkpoint', restoreSummary(payload), payload);
    } else if (t === 'sandbox_created' && !this.view.session?.last_checkpoint) {
      this.settle();
      toast('info', 'A new kernel started', 'There was no checkpoint yet: it starts with no variables.');
    }
  }

  settle() {
    this.restoring.querySelector('.toast-msg').textContent = 'A new kernel took its place.';
    this.restoring = null;
  }
}
