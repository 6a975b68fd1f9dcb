#!/usr/bin/env node
// ONNX Runtime peer for detectors and segmenters (onnxruntime-node, CPU execution provider).
//
//   node bench/ort_vision.js MODEL.onnx DATA.safetensors --threads N [--batch B] [--repeat R]
//        [--warmup K] [--samples S] [--dump OUT.json]
//
// The graph's first input is fed from the eval set's tensor of the same name. A graph whose
// input has one dim fewer than that tensor (a detector exported by bitflip.export: one image
// [3, H, W] per call) runs the images one per call; otherwise batches of B (0 = the whole
// set). intraOpNumThreads=N, interOpNumThreads=1, graphOptimizationLevel 'all', sequential.
// --samples S: the first S images only. After K warm-up passes (default 1), R timed passes
// (default 3); prints one JSON object: samples, seconds (best pass), samples_per_s, per_call,
// batch, threads. --dump writes every output of every image of the first pass:
// [{"NAME": {"dims": [...], "data": [...]}, ...}, ...] (one object per image; a batched
// graph's outputs are split along dim 0), which bench/zoo_check.py compares with PyTorch's
// and bitflip's.
'use strict';

const fs = require('fs');

function usage(msg) {
  if (msg) process.stderr.write(`ort_vision: ${msg}\n`);
  process.stderr.write('usage: node ort_vision.js MODEL.onnx DATA.safetensors --threads N [--batch B] [--repeat R] ' +
                       '[--warmup K] [--samples S] [--dump OUT.json]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { threads: 1, batch: 0, repeat: 3, warmup: 1, samples: 0, dump: null, pos: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 0) usage(`${k} needs a whole number`);
      return v;
    };
    if (k === '--threads') a.threads = num();
    else if (k === '--batch') a.batch = num();
    else if (k === '--repeat') a.repeat = num();
    else if (k === '--warmup') a.warmup = num();
    else if (k === '--samples') a.samples = num();
    else if (k === '--dump') a.dump = argv[++i];
    else if (k === '--json') { /* output is JSON anyway */ }
    else if (k.startsWith('--')) usage(`unknown option ${k}`);
    else a.pos.push(k);
  }
  if (a.pos.length !== 2) usage('need MODEL.onnx and DATA.safetensors');
  return a;
}

const DTYPES = {
  F32: ['float32', Float32Array], I64: ['int64', BigInt64Array], I32: ['int32', Int32Array],
  U8: ['uint8', Uint8Array], BOOL: ['bool', Uint8Array],
};

function readTensor(file, want) {
  const buf = fs.readFileSync(file);
  const hlen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8'));
  const info = header[want];
  if (!info) throw new Error(`${file}: no tensor '${want}' (the graph's input)`);
  const dt = DTYPES[info.dtype];
  if (!dt) throw new Error(`${file}: tensor ${want}: unsupported dtype ${info.dtype}`);
  const [s, e] = info.data_offsets;
  const bytes = new Uint8Array(e - s);
  bytes.set(buf.subarray(8 + hlen + s, 8 + hlen + e));
  return { type: dt[0], data: new dt[1](bytes.buffer, 0, (e - s) / dt[1].BYTES_PER_ELEMENT), shape: info.shape };
}

function plain(t) {
  const data = t.type === 'int64' ? Array.from(t.data, Number) : Array.from(t.data);
  return { dims: t.dims.map(Number), data };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const [modelPath, dataPath] = a.pos;
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    process.stderr.write(`ort_vision: cannot load onnxruntime-node (run 'npm ci --ignore-scripts' in bench/): ${e.message}\n`);
    process.exit(4);
  }
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential',
  });
  const inName = session.inputNames[0];
  const x = readTensor(dataPath, inName);
  const n = a.samples ? Math.min(a.samples, x.shape[0]) : x.shape[0];
  const row = x.shape.slice(1).reduce((p, q) => p * q, 1);
  // the graph's input rank, from the model file's declared input: ORT's node API does not
  // expose it, so run one image first and fall back to batches if the rank is refused
  let perImage = true;
  const feedsFor = (oneImage) => {
    const feeds = [];
    const b = oneImage ? 1 : (a.batch <= 0 ? n : Math.min(a.batch, n));
    for (let s = 0; s < n; s += b) {
      const e = Math.min(n, s + b);
      const shape = oneImage ? x.shape.slice(1) : [e - s, ...x.shape.slice(1)];
      feeds.push([s, e, { [inName]: new ort.Tensor(x.type, x.data.subarray(s * row, e * row), shape) }]);
    }
    return feeds;
  };
  let feeds = feedsFor(true);
  try {
    await session.run(feeds[0][2]);
  } catch (e) {
    perImage = false;
    feeds = feedsFor(false);
  }
  const dump = a.dump ? [] : null;
  async function pass(keep) {
    for (const [s, e, feed] of feeds) {
      const r = await session.run(feed);
      if (!keep) continue;
      for (let i = s; i < e; i++) {
        const o = {};
        for (const name of session.outputNames) {
          const t = r[name];
          // one image per call, or a batch of one (a plain export's [1, 3, H, W] input): the
          // outputs whole, whatever their first dim (a detector's K rows)
          if (perImage || e - s === 1) { o[name] = plain(t); continue; }
          const per = t.dims.slice(1).reduce((p, q) => p * q, 1);
          const part = t.data.subarray((i - s) * per, (i - s + 1) * per);
          o[name] = plain({ type: t.type, data: part, dims: [1, ...t.dims.slice(1)] });
        }
        dump.push(o);
      }
    }
  }
  await pass(dump !== null);
  if (dump) fs.writeFileSync(a.dump, JSON.stringify(dump));
  for (let i = 1; i < a.warmup; i++) await pass(false);
  const times = [];
  for (let i = 0; i < a.repeat; i++) {
    const t0 = process.hrtime.bigint();
    await pass(false);
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const best = times.length ? Math.min(...times) : NaN;
  process.stdout.write(JSON.stringify({
    model: modelPath, samples: n, per_call: perImage ? 'image' : 'batch', batch: perImage ? 1 : feeds[0][1] - feeds[0][0],
    threads: a.threads, seconds: best, samples_per_s: n / best, repeat: times.length, peer: 'ort',
  }) + '\n');
  await session.release();
}

main().catch((e) => {
  process.stderr.write(`ort_vision: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
