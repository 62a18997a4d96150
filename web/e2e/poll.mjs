// pollEvery makes page.waitForFunction poll its predicate every ms milliseconds unless a call says
// otherwise. Playwright's default polls on every animation frame: a renderer drawing 60 frames a
// second for as long as a test waits (a run of 16 s, a checkpoint), and a predicate reading
// innerText lays the page out at each of them. Measured on the UI test's page: a third of a core
// during its waits, against ~1% at 100 ms. Each wait here is for a state that stays once reached
// (a run's end, a count of cells, the address), which a poll every 100 ms sees as well.
export function pollEvery(page, ms = 100) {
  const wait = page.waitForFunction.bind(page);
  page.waitForFunction = (fn, arg, opts = {}) => wait(fn, arg, { polling: ms, ...opts });
  return page;
}
