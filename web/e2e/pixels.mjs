// What a person sees of a chart, measured on a screenshot: the box the chart was drawn in and where
// the pixels of its marks' colour lie in it (their spread over the plot), never a count of DOM nodes.
// A small PNG reader (8-bit RGB/RGBA, not interlaced: what chromium's screenshots are) keeps the test
// free of an image library.
import zlib from 'node:zlib';

/** decodePNG returns {width, height, px(x, y) -> [r, g, b]} of a PNG buffer. */
export function decodePNG(buf) {
  let pos = 8;
  let width = 0; let height = 0; let channels = 0;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString('latin1', pos + 4, pos + 8);
    const body = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0); height = body.readUInt32BE(4);
      if (body[8] !== 8 || body[12] !== 0) throw new Error('pixels: only 8-bit, non-interlaced PNGs');
      channels = { 2: 3, 6: 4 }[body[9]];
      if (!channels) throw new Error(`pixels: colour type ${body[9]} not read`);
    } else if (type === 'IDAT') idat.push(body);
    pos += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? out[y * stride + i - channels] : 0;
      const b = y > 0 ? out[(y - 1) * stride + i] : 0;
      const c = y > 0 && i >= channels ? out[(y - 1) * stride + i - channels] : 0;
      let v = line[i];
      if (f === 1) v += a;
      else if (f === 2) v += b;
      else if (f === 3) v += (a + b) >> 1;
      else if (f === 4) { const p = a + b - c; const pa = Math.abs(p - a); const pb = Math.abs(p - b); const pc = Math.abs(p - c); v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c; }
      out[y * stride + i] = v & 255;
    }
  }
  return { width, height, px: (x, y) => [...out.subarray(y * stride + x * channels, y * stride + x * channels + 3)] };
}

/**
 * markSpread finds the pixels of a chart's marks in a PNG, the coloured ones (axes, grid, labels and
 * backgrounds are grey, white or a pale tint; Plotly's and Vega's default marks are saturated blues),
 * and returns how many there are and the share of the image's width and height their bounding box spans.
 */
export function markSpread(png, minChroma = 60) {
  const img = decodePNG(png);
  let n = 0; let x0 = Infinity; let x1 = -1; let y0 = Infinity; let y1 = -1;
  for (let y = 0; y < img.height; y++) {
    for (let x = 0; x < img.width; x++) {
      const [pr, pg, pb] = img.px(x, y);
      if (Math.max(pr, pg, pb) - Math.min(pr, pg, pb) < minChroma) continue;
      n++; x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
  }
  return { pixels: n, width: img.width, height: img.height,
    spreadX: n ? (x1 - x0 + 1) / img.width : 0, spreadY: n ? (y1 - y0 + 1) / img.height : 0 };
}
