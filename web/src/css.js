// The CSS sanitizer of outputs: the <style> a library emits for its own output (pandas' Styler:
// colours, bars, highlights, number formats through CSS) is kept, but only what can neither fetch nor
// run anything, and only for the output it came with. Parsed by css-tree (a maintained, spec-following
// CSS parser with a selector AST; postcss would leave selectors as strings for a second parser), never
// by regular expressions: escapes (`\75 rl(`), comments and strings are the tokenizer's business.
//
// What is removed: every at-rule but @media and @supports (so @import, @font-face and its outside
// fonts, @namespace, @keyframes that would rename the page's animations, @layer, @property); every
// declaration whose value holds url() (but url(#id), rewritten into the output's namespace),
// image-set(), expression() or any function not on a list of harmless ones, or that did not parse
// (a Raw value: css-tree's fallback for what it could not read); custom properties (their values are
// not parsed, and var() would carry a url() anywhere); behavior and -moz-binding; nested rules.
//
// What is rewritten: selectors into the output's id namespace (#x -> #o12-x, .c -> .user-c, as the
// HTML sanitizer renames ids and classes; [id=...] and [class~=...] too), and each selector scoped
// under its output's box, [data-ns="o12"] ... , so a rule can reach neither the page nor another output.
import parse from 'css-tree/parser';
import generate from 'css-tree/generator';
import walk from 'css-tree/walker';

const KEEP_AT = new Set(['media', 'supports']);
const BAD_PROPS = new Set(['behavior', '-moz-binding', 'src']);
// Functions that compute a value from their arguments and can load nothing.
const SAFE_FUNCS = new Set(['rgb', 'rgba', 'hsl', 'hsla', 'hwb', 'lab', 'lch', 'oklab', 'oklch', 'color', 'color-mix',
  'calc', 'min', 'max', 'clamp', 'linear-gradient', 'radial-gradient', 'conic-gradient', 'repeating-linear-gradient',
  'repeating-radial-gradient', 'repeating-conic-gradient', 'translate', 'translatex', 'translatey', 'rotate', 'scale',
  'scalex', 'scaley', 'skew', 'skewx', 'skewy', 'matrix', 'cubic-bezier', 'steps', 'blur', 'brightness', 'contrast',
  'drop-shadow', 'grayscale', 'hue-rotate', 'invert', 'opacity', 'saturate', 'sepia', 'minmax', 'repeat',
  'fit-content', 'counter', 'counters', 'attr']);

/** valueIsSafe says whether a declaration's value can load or run nothing (rewriting url(#id) in place). */
function valueIsSafe(value, ns) {
  let safe = value.type === 'Value';
  walk(value, (n) => {
    if (n.type === 'Raw') safe = false;
    else if (n.type === 'Function' && !SAFE_FUNCS.has(n.name.toLowerCase())) safe = false;
    else if (n.type === 'Url') {
      if (/^#[\w-]+$/.test(n.value)) n.value = `#${ns}-${n.value.slice(1)}`;
      else safe = false;
    }
  });
  return safe;
}

/** renameSelector rewrites ids and classes into the output's namespace; false drops the rule. */
function renameSelector(list, ns) {
  let ok = list.type === 'SelectorList';
  walk(list, (n) => {
    if (n.type === 'IdSelector') n.name = `${ns}-${n.name}`;
    else if (n.type === 'ClassSelector') n.name = `user-${n.name}`;
    else if (n.type === 'NestingSelector' || n.type === 'Raw') ok = false;
    else if (n.type === 'AttributeSelector' && n.value) {
      const attr = n.name.name.toLowerCase();
      const v = n.value.type === 'String' ? n.value.value : n.value.name;
      if (attr === 'id' || attr === 'name' || attr === 'for') n.value = { type: 'String', value: `${ns}-${v}` };
      else if (attr === 'class' && ['=', '~=', '^=', '|='].includes(n.matcher)) n.value = { type: 'String', value: `user-${v}` };
    }
  });
  return ok;
}

function cleanRule(rule, ns) {
  if (!renameSelector(rule.prelude, ns)) return false;
  const scoped = [];
  rule.prelude.children.forEach((sel) => scoped.push(`[data-ns="${ns}"] ${generate(sel)}`));
  rule.prelude = { type: 'Raw', value: scoped.join(',') };
  const drop = [];
  rule.block.children.forEach((d, item) => {
    const prop = d.type === 'Declaration' ? d.property.toLowerCase() : '';
    if (!prop || prop.startsWith('--') || prop.includes('\\') || BAD_PROPS.has(prop) || !valueIsSafe(d.value, ns)) drop.push(item);
  });
  for (const item of drop) rule.block.children.remove(item);
  return !rule.block.children.isEmpty;
}

function cleanList(list, ns) {
  const drop = [];
  list.forEach((node, item) => {
    if (node.type === 'Rule') { if (!cleanRule(node, ns)) drop.push(item); return; }
    if (node.type === 'Atrule' && KEEP_AT.has(node.name.toLowerCase()) && node.block && !hasUrl(node.prelude)) {
      cleanList(node.block.children, ns);
      return;
    }
    drop.push(item);
  });
  for (const item of drop) list.remove(item);
}

function hasUrl(prelude) {
  let found = false;
  if (prelude) walk(prelude, (n) => { if (n.type === 'Url' || n.type === 'Function' || n.type === 'Raw') found = true; });
  return found;
}

/**
 * sanitizeCSS returns the safe part of a style sheet's text, scoped to the output whose namespace is
 * ns (its box carries data-ns="<ns>"), or '' when nothing is left.
 */
export function sanitizeCSS(text, ns) {
  if (!/^o\d+$/.test(ns)) throw new Error('sanitizeCSS: not an output namespace');
  const ast = parse(String(text), { context: 'stylesheet', parseValue: true, parseRulePrelude: true, onParseError() {} });
  cleanList(ast.children, ns);
  return generate(ast);
}
