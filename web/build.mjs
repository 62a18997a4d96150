// Bundles the UI (src/*.js and its npm packages) into static/dist/ with esbuild: one ES module
// (app.js), one stylesheet (app.css: KaTeX's) and the KaTeX fonts. The bundle is committed so that
// `go build` alone embeds a working UI; web_test.go rebuilds it into a temporary folder and fails when
// the committed files differ from the sources (run `make web-bundle` or `node build.mjs` after edits).
//
//   node build.mjs [outdir]     (default: static/dist)
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(process.argv[2] || path.join(here, 'static', 'dist'));

fs.rmSync(outdir, { recursive: true, force: true }); // no stale chunk may stay behind
await esbuild.build({
  absWorkingDir: here,
  // sandbox: the isolated chart frame's code (static/sandbox.html); it shares plotly.js's chunk
  entryPoints: { app: 'src/main.js', sandbox: 'src/sandbox.js' },
  bundle: true,
  format: 'esm',
  splitting: true, // KaTeX is a chunk of its own, loaded when the first math is drawn
  chunkNames: 'chunk-[hash]',
  target: ['chrome110', 'firefox110', 'safari16'],
  minify: true,
  legalComments: 'linked',
  outdir,
  assetNames: 'fonts/[name]',
  // browsers that run this bundle all read woff2: the .woff and .ttf fallbacks are left out
  loader: { '.woff2': 'file', '.woff': 'empty', '.ttf': 'empty' },
  logLevel: 'warning',
  metafile: false,
});
// esbuild puts the CSS of every chunk into app.css (the page's one stylesheet) and also writes a copy
// beside each lazily loaded chunk that imports CSS (the widget manager's), which nothing loads
for (const f of fs.readdirSync(outdir)) if (/^chunk-.*\.css$/.test(f)) fs.rmSync(path.join(outdir, f));
