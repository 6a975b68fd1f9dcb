#!/usr/bin/env node
// ONNX Runtime peer of `bitflip eval` (onnxruntime-node, CPU execution provider).
//
//   node bench/ort_eval.js MODEL.onnx DATA.safetensors --threads N --batch B --repeat R
//        [--warmup K] [--ref NAME.ref.json] [--json] [--profile PREFIX] [--cpu-runs FILE]
//
// Reads the eval set (safetensors) itself, runs the model in batches of B (0 = whole set)
// with intraOpNumThreads=N, interOpNumThreads=1, graphOptimizationLevel 'all', sequential
// execution; the first warm-up pass is checked against the `golden` outputs of --ref (default:
// NAME.ref.json beside the model, if present; exits 3 on mismatch). Then best of R full passes.
// Prints one JSON object shaped like `bitflip eval --json`. --profile PREFIX: ONNX Runtime's own
// profiler on (PREFIX_<date>.json, Chrome trace format: each node's kernel time per run, warm-up
// passes included), to set beside `bitflip-bench-steps` (docs/BENCHMARKS.md, h13-mbv2).
// --cpu-runs FILE: each session.run's process CPU (user + system, and user, microseconds) and
// wall time, in run order (warm-up included and marked, as the profile's model_run events), as JSON: the profiler's
// times are wall, which a loaded host stretches; bench/node_table.py scales each node's share
// of its run by that run's CPU (docs/perf/conv.md, h21-eval).
'use strict';

const fs = require('fs');
const path = require('path');

function usage(msg) {
  if (msg) process.stderr.write(`ort_eval: ${msg}\n`);
  process.stderr.write('usage: node ort_eval.js MODEL.onnx DATA.safetensors --threads N --batch B ' +
                       '--repeat R [--warmup K] [--ref REF.json | --no-check] [--json] [--profile PREFIX] [--cpu-runs FILE]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { threads: 1, batch: 256, repeat: 10, warmup: 2, ref: null, check: true, profile: null, cpuRuns: null, pos: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v)) usage(`${k} needs an integer`);
      return v;
    };
    if (k === '--threads') a.threads = num();
    else if (k === '--batch') a.batch = num();
    else if (k === '--repeat') a.repeat = num();
    else if (k === '--warmup') a.warmup = num();
    else if (k === '--ref') a.ref = argv[++i];
    else if (k === '--no-check') a.check = false;
    else if (k === '--profile') a.profile = argv[++i];
    else if (k === '--cpu-runs') a.cpuRuns = argv[++i];
    else if (k === '--json') { /* output is JSON anyway */ }
    else if (k.startsWith('--')) usage(`unknown option ${k}`);
    else a.pos.push(k);
  }
  if (a.pos.length !== 2) usage('need MODEL.onnx and DATA.safetensors');
  return a;
}

const DTYPES = {
  F32: ['float32', Float32Array], F64: ['float64', Float64Array], I64: ['int64', BigInt64Array],
  I32: ['int32', Int32Array], I16: ['int16', Int16Array], I8: ['int8', Int8Array],
  U8: ['uint8', Uint8Array], BOOL: ['bool', Uint8Array],
};

// {name: {type, data (typed array, own aligned buffer), shape}}
function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  const hlen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8'));
  const base = 8 + hlen;
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const dt = DTYPES[info.dtype];
    if (!dt) throw new Error(`${file}: tensor ${name}: unsupported dtype ${info.dtype}`);
    const [a, b] = info.data_offsets;
    const bytes = new Uint8Array(b - a);       // copy: guarantees alignment for the typed view
    bytes.set(buf.subarray(base + a, base + b));
    out[name] = { type: dt[0], data: new dt[1](bytes.buffer, 0, (b - a) / dt[1].BYTES_PER_ELEMENT),
                  shape: info.shape };
  }
  return out;
}

function rocAuc(labels, scores) {
  const n = scores.length;
  const idx = Array.from({ length: n }, (_, i) => i).sort((i, j) => scores[i] - scores[j]);
  let nPos = 0;
  for (let i = 0; i < n; i++) if (labels[i] > 0.5) nPos++;
  const nNeg = n - nPos;
  if (nPos === 0 || nNeg === 0) return NaN;
  let rankSumPos = 0;
  for (let i = 0; i < n;) {
    let j = i + 1;
    while (j < n && scores[idx[j]] === scores[idx[i]]) j++;
    const r = 0.5 * (i + j - 1) + 1;
    for (let k = i; k < j; k++) if (labels[idx[k]] > 0.5) rankSumPos += r;
    i = j;
  }
  return (rankSumPos - nPos * (nPos + 1) / 2) / (nPos * nNeg);
}

const LOGLOSS_EPS = 1e-7;
function logloss(labels, probs) {
  let s = 0;
  for (let i = 0; i < probs.length; i++) {
    const p = Math.min(Math.max(probs[i], LOGLOSS_EPS), 1 - LOGLOSS_EPS);
    const y = Number(labels[i]);
    s += y * Math.log(p) + (1 - y) * Math.log(1 - p);
  }
  return -s / probs.length;
}

function accuracy(labels, logits, n, width) {
  let hit = 0;
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let c = 1; c < width; c++) if (logits[i * width + c] > logits[i * width + best]) best = c;
    if (BigInt(best) === BigInt(labels[i])) hit++;
  }
  return hit / n;
}

function jsonNum(v) {
  if (typeof v === 'string') return { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity }[v];
  return v;
}

function compareGolden(out, golden, rtol = 1e-4, atol = 1e-5) {
  const flat = golden.flat().map(jsonNum);
  if (flat.length !== out.length) return { ok: false, err: Infinity, why: `size ${out.length} != ${flat.length}` };
  let maxErr = 0, ok = true, worst = -1;
  for (let i = 0; i < flat.length; i++) {
    const g = flat[i], o = out[i];
    if (!Number.isFinite(g) || !Number.isFinite(o)) {
      if (!(Object.is(g, o) || (Number.isNaN(g) && Number.isNaN(o)))) { ok = false; worst = i; maxErr = Infinity; }
      continue;
    }
    const d = Math.abs(o - g);
    if (d > maxErr) { maxErr = d; worst = i; }
    if (!(d <= atol || d <= rtol * Math.abs(g))) ok = false;
  }
  return { ok, err: maxErr, worst };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const [modelPath, dataPath] = a.pos;
  const modelName = path.basename(modelPath).replace(/\.onnx$/, '');

  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    process.stderr.write(`ort_eval: cannot load onnxruntime-node (run 'npm ci --ignore-scripts' in bench/): ${e.message}\n`);
    process.exit(4);
  }

  const data = readSafetensors(dataPath);
  const labels = data.labels;
  if (!labels) throw new Error(`${dataPath}: no 'labels' tensor`);
  const task = labels.type === 'int64' || labels.type === 'int32' ? 'classification' : 'binary';

  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    ...(a.profile ? { enableProfiling: true, profileFilePrefix: a.profile } : {}),
  });
  const inputNames = session.inputNames;
  const outputName = session.outputNames[0];
  for (const nm of inputNames) if (!data[nm]) throw new Error(`${dataPath}: no tensor for graph input '${nm}'`);
  const n = data[inputNames[0]].shape[0];
  const batch = a.batch <= 0 ? n : Math.min(a.batch, n);
  const rowSize = {};
  for (const nm of inputNames) rowSize[nm] = data[nm].shape.slice(1).reduce((x, y) => x * y, 1);

  // Input tensors for each batch are views into the eval set (no copies), built once.
  const feeds = [];
  for (let s = 0; s < n; s += batch) {
    const e = Math.min(n, s + batch);
    const feed = {};
    for (const nm of inputNames) {
      const t = data[nm];
      feed[nm] = new ort.Tensor(t.type, t.data.subarray(s * rowSize[nm], e * rowSize[nm]),
                                [e - s, ...t.shape.slice(1)]);
    }
    feeds.push([s, feed]);
  }

  let out = null, width = 0;
  const cpuRuns = [];
  let warm = true;   // the warm-up passes' runs are marked: their first touches are not a run's cost
  async function onePass() {
    for (const [s, feed] of feeds) {
      const c0 = a.cpuRuns ? process.cpuUsage() : null;
      const w0 = process.hrtime.bigint();
      const r = await session.run(feed, [outputName]);
      if (c0) {
        const c = process.cpuUsage(c0);
        cpuRuns.push({ cpu_us: c.user + c.system, user_us: c.user, warmup: warm,
                       wall_us: Number(process.hrtime.bigint() - w0) / 1e3 });
      }
      const o = r[outputName];
      if (out === null) {
        width = o.dims.slice(1).reduce((x, y) => x * y, 1);
        out = new Float32Array(n * width);
      }
      out.set(o.data, s * width);
    }
  }

  await onePass();
  const refPath = a.ref || path.join(path.dirname(modelPath), `${modelName}.ref.json`);
  const check = {};
  if (a.check && fs.existsSync(refPath)) {
    const ref = JSON.parse(fs.readFileSync(refPath, 'utf8'));
    const c = compareGolden(out, ref.golden);
    check.golden_ok = c.ok;
    check.golden_max_abs_err = c.err;
    if (!c.ok) {
      process.stderr.write(`ort_eval: ${modelName}: outputs do NOT match ${refPath} golden ` +
                           `(max abs err ${c.err} at flat index ${c.worst}${c.why ? ', ' + c.why : ''})\n`);
      process.exit(3);
    }
  }
  for (let i = 1; i < a.warmup; i++) await onePass();
  warm = false;
  const times = [];
  for (let i = 0; i < Math.max(1, a.repeat); i++) {
    const t0 = process.hrtime.bigint();
    await onePass();
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }

  const result = { model: modelName, samples: n, task };
  if (task === 'classification') {
    result.accuracy = accuracy(labels.data, out, n, width);
  } else {
    result.auc = rocAuc(labels.data, out);
    result.logloss = logloss(labels.data, out);
  }
  const best = Math.min(...times);
  const sorted = [...times].sort((x, y) => x - y);
  Object.assign(result, {
    batch, threads: a.threads, seconds: best, samples_per_s: n / best, peer: 'ort',
    ort_version: ort.env.versions ? ort.env.versions.node : undefined, repeat: times.length,
    seconds_median: sorted[Math.floor(sorted.length / 2)],
  }, check);
  process.stdout.write(JSON.stringify(result) + '\n');
  if (a.profile) session.endProfiling();
  if (a.cpuRuns) fs.writeFileSync(a.cpuRuns, JSON.stringify(cpuRuns) + '\n');
  await session.release();
}

main().catch((e) => {
  process.stderr.write(`ort_eval: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
