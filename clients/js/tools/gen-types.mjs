#!/usr/bin/env node
// gen-types writes the API's types into index.d.ts, between the two GENERATED marker lines, from
// server/httpapi/openapi.json: every component schema as an interface or type of the `Schemas`
// namespace, and `Schemas.Answers` / `Schemas.Bodies`, the JSON answer (2xx) and JSON request
// body of each operation ("GET /api/sessions"). The hand-written part of index.d.ts (the methods)
// names these types, so the typings cannot drift from the spec: the spec's tests
// (server/httpapi/openapi_*_test.go) check it against the server's real answers.
//
//   node tools/gen-types.mjs          rewrite index.d.ts
//   node tools/gen-types.mjs --check  exit 1 when index.d.ts is not what the spec gives
//
// No dependencies: it handles the JSON Schema the spec uses ($ref, anyOf, oneOf, const, enum,
// type (a list too), properties, required, additionalProperties, items, description).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const jsDir = join(here, '..');
const specPath = join(jsDir, '..', '..', 'server', 'httpapi', 'openapi.json');
const dtsPath = join(jsDir, 'index.d.ts');
const BEGIN = '// ---- GENERATED from server/httpapi/openapi.json by tools/gen-types.mjs: do not edit ----';
const END = '// ---- END GENERATED ----';

const spec = JSON.parse(readFileSync(specPath, 'utf8'));

const ident = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (k) => (ident.test(k) ? k : JSON.stringify(k));

function doc(text, indent) {
  if (!text) return '';
  const lines = String(text).replace(/\*\//g, '*\\/').split('\n');
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} *${l ? ' ' + l : ''}`).join('\n')}\n${indent} */\n`;
}

function union(parts) {
  const seen = [...new Set(parts)];
  return seen.length === 1 ? seen[0] : seen.join(' | ');
}

// ts returns the TypeScript type of a schema; indent is the indentation of the line it is on.
function ts(s, indent) {
  if (s === true || s === undefined || s === null) return 'any';
  if (s === false) return 'never';
  if (s.$ref) {
    const name = s.$ref.replace('#/components/schemas/', '');
    if (!spec.components.schemas[name]) throw new Error(`unknown $ref ${s.$ref}`);
    return name;
  }
  if (s.anyOf || s.oneOf) return union((s.anyOf || s.oneOf).map((a) => paren(ts(a, indent))));
  if ('const' in s) return JSON.stringify(s.const);
  if (s.enum) return union(s.enum.map((v) => JSON.stringify(v)));
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (types.length === 0) return s.properties ? object(s, indent) : 'any';
  return union(types.map((t) => {
    switch (t) {
      case 'string': return 'string';
      case 'integer': case 'number': return 'number';
      case 'boolean': return 'boolean';
      case 'null': return 'null';
      case 'array': return `${paren(ts(s.items, indent))}[]`;
      case 'object': return object(s, indent);
      default: throw new Error(`unknown type ${t}`);
    }
  }));
}

function paren(t) {
  return /[|&]/.test(t) && !/^\{[\s\S]*\}$/.test(t) ? `(${t})` : t;
}

function object(s, indent) {
  const props = s.properties || {};
  const names = Object.keys(props);
  const ap = s.additionalProperties;
  if (names.length === 0) {
    if (ap === false) return 'Record<string, never>';
    return `Record<string, ${ap && ap !== true ? ts(ap, indent) : 'any'}>`;
  }
  const req = new Set(s.required || []);
  const inner = indent + '  ';
  let out = '{\n';
  for (const n of names) {
    const p = props[n];
    out += doc(p.description, inner);
    out += `${inner}${p.readOnly ? 'readonly ' : ''}${key(n)}${req.has(n) ? '' : '?'}: ${ts(p, inner)};\n`;
  }
  if (ap !== undefined && ap !== false) out += `${inner}[key: string]: any;\n`;
  return out + indent + '}';
}

function jsonSchema(x) {
  return x && x.content && x.content['application/json'] && x.content['application/json'].schema;
}

function generate() {
  const ind = '  ';
  let out = `${BEGIN}\n\n`;
  out += '/** The API\'s types, as server/httpapi/openapi.json describes them. */\n';
  out += 'export declare namespace Schemas {\n';
  for (const [name, s] of Object.entries(spec.components.schemas)) {
    out += doc(s.description, ind);
    const t = ts(s, ind);
    const isObject = !s.anyOf && !s.oneOf && s.properties && (s.type === 'object' || s.type === undefined);
    if (isObject) out += `${ind}export interface ${name} ${t}\n\n`;
    else out += `${ind}export type ${name} = ${t};\n\n`;
  }
  const answers = [];
  const bodies = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (method === 'parameters') continue;
      const k = `${method.toUpperCase()} ${path}`;
      const body = jsonSchema(op.requestBody);
      if (body) bodies.push(`${ind}${ind}${JSON.stringify(k)}: ${ts(body, ind + ind)};\n`);
      const ok = Object.entries(op.responses || {}).find(([st, r]) => st.startsWith('2') && jsonSchema(r));
      if (ok) answers.push(`${ind}${ind}${JSON.stringify(k)}: ${ts(jsonSchema(ok[1]), ind + ind)};\n`);
    }
  }
  out += `${ind}/** The JSON answer (2xx) of each operation. */\n`;
  out += `${ind}export interface Answers {\n${answers.join('')}${ind}}\n\n`;
  out += `${ind}/** The JSON request body of each operation that takes one. */\n`;
  out += `${ind}export interface Bodies {\n${bodies.join('')}${ind}}\n`;
  out += '}\n\n' + END;
  return out;
}

const current = readFileSync(dtsPath, 'utf8');
const b = current.indexOf(BEGIN);
const e = current.indexOf(END);
if (b < 0 || e < b) {
  console.error(`index.d.ts has no "${BEGIN}" ... "${END}" section`);
  process.exit(2);
}
const want = current.slice(0, b) + generate() + current.slice(e + END.length);
if (process.argv.includes('--check')) {
  if (want !== current) {
    const a = current.split('\n');
    const w = want.split('\n');
    let i = 0;
    while (i < a.length && a[i] === w[i]) i++;
    console.error(`index.d.ts is not what server/httpapi/openapi.json gives; run: node clients/js/tools/gen-types.mjs\n` +
      `first difference at line ${i + 1}:\n  committed: ${a[i]}\n  generated: ${w[i]}`);
    process.exit(1);
  }
} else if (want !== current) {
  writeFileSync(dtsPath, want);
  console.log('index.d.ts updated');
}
