// The XSS corpus of the chart renderers: vectors aimed at what Plotly and Vega draw as text or links
// (plotly.js's pseudo-HTML in titles, hover templates and annotations; Vega titles, tooltips and href
// channels), then a slice of our general corpus. Each string reaches the kernel as a JSON file.
import { corpus as ours } from './xss-corpus.mjs';

export const chartCorpus = [
  '<a href="javascript:window.__xss=1">click</a>',
  '<a href="javascript:alert(1)" target="_top">top</a>',
  '<a href="  JaVaScRiPt:window.__xss=2">spaced</a>',
  '<a href="data:text/html,<script>parent.__xss=3</script>">data</a>',
  '<b onmouseover="window.__xss=4">bold</b>',
  '<span style="x:expression(window.__xss=5)">css</span>',
  '<img src=x onerror="window.__xss=6">',
  '<svg><script>window.__xss=7</script></svg>',
  '%{x}<script>window.__xss=8</script>',
  '%{customdata[0]}<iframe src="javascript:window.__xss=9"></iframe>',
  '<br><sub><sup><i onclick=window.__xss=10>nested</i></sup></sub>',
  '{{constructor.constructor("window.__xss=11")()}}',
  '<a id="confirm" name="toasts" href="https://example.invalid/">clobber</a>',
  ...ours.slice(0, 20),
];
