// Turns for the isolated chart frames (isolated.js). Each frame loads and compiles plotly.js
// (~4.7 MB) for itself, as an opaque origin shares nothing with the page, and the browser compiles
// them one after another: with every frame's time limit running from the start, the last of 39
// charts in a cell (or of 13 on a busy machine) passed it while only waiting behind the others, and
// said "did not answer". Frames draw a few at a time, in the order they were asked for; a frame's
// time limit starts with its turn.

/**
 * turns gives out at most `limit` turns at a time. take(start, wanted) queues a taker: once a turn
 * is free and wanted() is still true (the frame is on the page), start(release) runs; release()
 * gives the turn back (once; later calls do nothing). A taker no longer wanted is dropped unstarted.
 * @param {number} limit
 */
export function turns(limit) {
  let active = 0;
  /** @type {{start: (release: () => void) => void, wanted: () => boolean}[]} */
  const waiting = [];
  const next = () => {
    while (active < limit && waiting.length) {
      const w = /** @type {{start: (release: () => void) => void, wanted: () => boolean}} */ (waiting.shift());
      if (!w.wanted()) continue;
      active += 1;
      let given = false;
      const release = () => {
        if (given) return;
        given = true;
        active -= 1;
        next();
      };
      w.start(release);
    }
  };
  return {
    /** @param {(release: () => void) => void} start @param {() => boolean} [wanted] */
    take(start, wanted = () => true) {
      waiting.push({ start, wanted });
      next();
    },
    get active() { return active; },
    get waiting() { return waiting.length; },
  };
}

/** How many frames draw at once: half the machine's cores, 2 to 4 (a frame's compile is one core). */
export function frameLimit(cores) {
  return Math.max(2, Math.min(4, Math.floor((cores || 2) / 2)));
}
