#!/usr/bin/env node
// ONNX Runtime as a second reference for the quantized fixtures (ctest ort_quant): quant/ (int8) and
// nbits/ (int4 MatMulNBits).
//
//   node tests/conformance/ort_quant.js FIXTURES_DIR
//
// Runs, in ONNX Runtime (onnxruntime-node, CPU, graph optimizations off so that
// QDQ pairs run as written, not fused into integer kernels whose rounding may
// differ), every model of FIXTURES_DIR/quant/ golden and under each fault of its
// ref.json (the stored byte of an int8/uint8 initializer with one bit flipped,
// written into a copy of the model), and every op case FIXTURES_DIR/ops/quant_*,
// and compares with the committed references, which a numpy rendition of the
// ONNX spec computed: integer outputs bit for bit, float outputs within
// max(1e-5, 1e-4 |ref|) (the conformance tolerance: the float Convs and Gemms
// of a QDQ graph sum in another order). Exit 0: all match; 1: a mismatch;
// 77: onnxruntime-node is not installed (ctest reports the test as skipped).
//
// ONNX Runtime is a second reference only where its kernel is exact on the
// CPU at hand. Its x86 integer dot products take different paths by CPU:
// without VNNI, u8 x s8 products are summed in pairs into int16 with
// saturation (vpmaddubsw), which is not the exact sum the ONNX spec defines.
// So before comparing, probes (ort_probe.js) run each integer-product op
// (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv) in every type
// combination ONNX Runtime takes, on inputs whose products saturate such a
// pair, against the exact answer worked out here; a case holding an op whose
// probe came out inexact is left to the plain reference (the numpy rendition
// of the spec, which conformance_quant and ops_cases check bitflip against)
// and named with the reason. The numpy references stay the oracle on every
// machine; only how much ONNX Runtime confirms depends on the CPU.
//
// What was verified is recorded (tests/conformance/ort_verified.json, per mode:
// this CPU, `native`, and qemu's Haswell, `haswell`): each case's content hash
// (its model, reference and eval set, or an op case's model and io file) when
// ONNX Runtime last agreed with it, under a key hashing this script, the probes,
// ort_quant.sh and the pinned ONNX Runtime (bench/package-lock.json). ctest runs
// only the cases whose hash differs from the record's (`--stale` lists them;
// BF_ORT_ONLY names them to a run), all of them when the key differs; `make
// test-references` (BF_ORT_RECORD=1 in ort_quant.sh) re-runs every case and,
// when all agree, writes the record. Why: the same ONNX Runtime on the same
// committed bytes gives the same answer; re-running it in every make test (41
// CPU-s under qemu) re-checked ONNX Runtime, not the fixtures (tests/history/
// round21-h25-trims.md).
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const probe = require('./ort_probe.js');

function loadOrt() {
  const roots = [process.env.BF_ORT_MODULES, path.join(__dirname, '..', '..', 'bench', 'node_modules'),
                 ...(module.paths || [])].filter(Boolean);
  for (const r of roots) {
    try { return require(path.join(r, 'onnxruntime-node')); } catch (e) { /* next */ }
  }
  return null;
}

const DT = {
  F32: ['float32', Float32Array], I64: ['int64', BigInt64Array], I32: ['int32', Int32Array],
  I8: ['int8', Int8Array], U8: ['uint8', Uint8Array], BOOL: ['bool', Uint8Array],
};

function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  const hlen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8'));
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const dt = DT[info.dtype];
    const [a, b] = info.data_offsets;
    const bytes = new Uint8Array(b - a);
    bytes.set(buf.subarray(8 + hlen + a, 8 + hlen + b));
    out[name] = { type: dt[0], data: new dt[1](bytes.buffer, 0, (b - a) / dt[1].BYTES_PER_ELEMENT), shape: info.shape };
  }
  return out;
}

// --- the ONNX protobuf, just enough to find an initializer's raw_data bytes

function varint(buf, pos) {
  let v = 0, mul = 1, b;
  do { b = buf[pos++]; v += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
  return [v, pos];
}

// Calls fn(field, wireType, start, end) for each field of the message in buf[start, end).
function fields(buf, start, end, fn) {
  let pos = start;
  while (pos < end) {
    let key;
    [key, pos] = varint(buf, pos);
    const field = Math.floor(key / 8), wt = key & 7;
    if (wt === 0) { const at = pos; [, pos] = varint(buf, pos); fn(field, wt, at, pos); }   // a varint: [start, end)
    else if (wt === 1) { fn(field, wt, pos, pos + 8); pos += 8; }
    else if (wt === 5) { fn(field, wt, pos, pos + 4); pos += 4; }
    else if (wt === 2) { let len; [len, pos] = varint(buf, pos); fn(field, wt, pos, pos + len); pos += len; }
    else throw new Error(`unsupported wire type ${wt}`);
  }
}

// Offset in the model file of initializer `name`'s raw_data.
function rawDataOffset(buf, name) {
  let found = -1;
  fields(buf, 0, buf.length, (f, wt, s, e) => {
    if (f !== 7 || wt !== 2) return;                       // ModelProto.graph
    fields(buf, s, e, (g, gwt, gs, ge) => {
      if (g !== 5 || gwt !== 2) return;                    // GraphProto.initializer
      let tname = null, raw = -1;
      fields(buf, gs, ge, (t, twt, ts, te) => {
        if (t === 8) tname = buf.subarray(ts, te).toString('utf8');   // TensorProto.name
        if (t === 9) raw = ts;                                       // TensorProto.raw_data
      });
      if (tname === name) found = raw;
    });
  });
  return found;
}

// The integer products of a model's graph: [{op, types}] for each node whose op
// ort_probe.js probes, types 'u8xs8' etc. when both operands are initializers
// or graph inputs (their element types are in the file), null when one is
// computed by another node (then every type pair of the op must be exact).
const PROBED = { MatMulInteger: [0, 1], ConvInteger: [0, 1], QLinearMatMul: [0, 3], QLinearConv: [0, 3] };
const SHORT = { 2: 'u8', 3: 's8' };
function integerProducts(buf) {
  const types = new Map(), nodes = [];
  fields(buf, 0, buf.length, (f, wt, s, e) => {
    if (f !== 7 || wt !== 2) return;                       // ModelProto.graph
    fields(buf, s, e, (g, gwt, gs, ge) => {
      if (gwt !== 2) return;
      if (g === 1) {                                       // GraphProto.node: input (1), op_type (4)
        const n = { inputs: [], op: '' };
        fields(buf, gs, ge, (k, kwt, ks, ke) => {
          if (k === 1 && kwt === 2) n.inputs.push(buf.subarray(ks, ke).toString('utf8'));
          if (k === 4 && kwt === 2) n.op = buf.subarray(ks, ke).toString('utf8');
        });
        nodes.push(n);
      } else if (g === 5) {                                // GraphProto.initializer: data_type (2), name (8)
        let name = null, dt = 0;
        fields(buf, gs, ge, (t, twt, ts, te) => {
          if (t === 2 && twt === 0) dt = varint(buf, ts)[0];
          if (t === 8) name = buf.subarray(ts, te).toString('utf8');
        });
        if (name !== null) types.set(name, dt);
      } else if (g === 11) {                               // GraphProto.input: name (1), type.tensor_type.elem_type
        let name = null, dt = 0;
        fields(buf, gs, ge, (v, vwt, vs, ve) => {
          if (v === 1) name = buf.subarray(vs, ve).toString('utf8');
          if (v === 2 && vwt === 2) fields(buf, vs, ve, (tt, ttw, ts, te) => {
            if (tt === 1 && ttw === 2) fields(buf, ts, te, (el, elw, es) => { if (el === 1 && elw === 0) dt = varint(buf, es)[0]; });
          });
        });
        if (name !== null) types.set(name, dt);
      }
    });
  });
  return nodes.filter(n => PROBED[n.op]).map(n => {
    const [a, b] = PROBED[n.op].map(i => SHORT[types.get(n.inputs[i])]);
    return { op: n.op, types: a && b ? `${a}x${b}` : null };
  });
}

// Why ONNX Runtime cannot confirm this model here ('' when it can): one of its
// integer products is a type pair (or, types unknown, an op) whose probe was inexact.
function notExactHere(inexact, model) {
  const why = new Set();
  for (const { op, types } of integerProducts(model)) {
    for (const [key, detail] of inexact) {
      if (key === `${op} ${types}` || (types === null && key.startsWith(op + ' '))) why.add(`${key} (${detail})`);
    }
  }
  return why.size ? `ONNX Runtime's ${[...why].join('; ')} is not exact on this CPU` : '';
}

// --- what ONNX Runtime verified (the head comment)

// The cases this script compares, in its order: id (folder/name) and the files that make each.
function caseFiles(fixtures) {
  const out = [];
  for (const sub of ['quant', 'nbits']) {
    const dir = path.join(fixtures, sub);
    for (const name of fs.readdirSync(dir).filter(f => f.endsWith('.ref.json')).map(f => f.slice(0, -9)).sort()) {
      const ref = JSON.parse(fs.readFileSync(path.join(dir, name + '.ref.json'), 'utf8'));
      out.push({ id: `${sub}/${name}`, files: [`${name}.ref.json`, ref.model, `${name}.eval.safetensors`].map(f => path.join(dir, f)) });
    }
  }
  const ops = path.join(fixtures, 'ops');
  for (const name of fs.readdirSync(ops).filter(f => f.startsWith('quant_') && f.endsWith('.onnx')).map(f => f.slice(0, -5)).sort())
    out.push({ id: `ops/${name}`, files: [`${name}.onnx`, `${name}.io.safetensors`].map(f => path.join(ops, f)) });
  return out;
}

// sha256 over each file's name and bytes, in order
function filesHash(prefix, files) {
  const h = crypto.createHash('sha256');
  h.update(prefix);
  for (const f of files) h.update(`\0${path.basename(f)}\0`), h.update(fs.readFileSync(f));
  return h.digest('hex');
}
const caseHash = c => filesHash('', c.files);
const lockFile = path.join(__dirname, '..', '..', 'bench', 'package-lock.json');
// what decides a verdict besides the case's bytes: the comparison, the probes, the script
// that runs them (qemu's CPU) and the pinned ONNX Runtime
const verifierKey = mode => filesHash(mode, [__filename, path.join(__dirname, 'ort_probe.js'),
                                             path.join(__dirname, 'ort_quant.sh'), lockFile]);

function ortVersion() {
  try {
    return JSON.parse(fs.readFileSync(lockFile, 'utf8')).packages['node_modules/onnxruntime-node'].version;
  } catch (e) {
    return 'unknown';
  }
}

function readRecord(file) {
  try { return JSON.parse(fs.readFileSync(file, 'utf8')); } catch (e) { return {}; }
}

// The cases of `mode` whose bytes ONNX Runtime has not verified: all of them when the record
// has no entry for the mode or its key is another; else those whose hash differs or is missing.
function staleCases(fixtures, recordFile, mode) {
  const all = caseFiles(fixtures), rec = readRecord(recordFile)[mode];
  if (!rec) return { all, stale: all, why: `no record for ${mode} in ${recordFile}` };
  if (rec.key !== verifierKey(mode))
    return { all, stale: all, why: 'ort_quant.js, ort_probe.js, ort_quant.sh or the pinned ONNX Runtime changed since the record' };
  return { all, stale: all.filter(c => rec.cases[c.id] !== caseHash(c)), rec };
}

// `node ort_quant.js --stale FIXTURES RECORD MODE`: the ids to verify, one a line on stdout;
// what was found, on stderr
function printStale(fixtures, recordFile, mode) {
  const { all, stale, why, rec } = staleCases(fixtures, recordFile, mode);
  if (why) console.error(`ort_quant (${mode}): all ${all.length} cases to verify: ${why}`);
  else if (stale.length)
    console.error(`ort_quant (${mode}): ${stale.length} of ${all.length} cases differ from the bytes ONNX Runtime ` +
                  `${rec.onnxruntime} verified (${path.basename(recordFile)}): ${stale.map(c => c.id).join(', ')}`);
  else
    console.error(`ort_quant (${mode}): all ${all.length} cases (quant/, nbits/, ops/quant_*) are the bytes ONNX Runtime ` +
                  `${rec.onnxruntime} verified on ${rec.cpu} (${path.basename(recordFile)}, ${rec.verified}): not re-run ` +
                  '(make test-references re-runs them)');
  for (const c of stale) console.log(c.id);
}

// After a run of every case with no mismatch: the mode's entry of the record.
function writeRecord(fixtures, recordFile, mode, probes, left) {
  const rec = readRecord(recordFile);
  const cases = {};
  for (const c of caseFiles(fixtures)) cases[c.id] = caseHash(c);
  rec[mode] = {
    key: verifierKey(mode), onnxruntime: ortVersion(),
    cpu: mode === 'haswell' ? 'qemu-x86_64 -cpu Haswell (AVX2, no AVX-512 or VNNI)' : probe.cpuName(),
    verified: new Date().toISOString().slice(0, 10),
    probes: Object.fromEntries(probes.map(p => [`${p.op} ${p.types}`, p.verdict])),
    left_to_the_plain_reference: left, cases,
  };
  const sorted = Object.fromEntries(Object.keys(rec).sort().map(k => [k, rec[k]]));
  fs.writeFileSync(recordFile, JSON.stringify(sorted, null, 1) + '\n');
  console.log(`ort_quant: recorded ${Object.keys(cases).length} cases verified (${mode}) in ${recordFile}`);
}

// --- comparison

function compare(got, want, isInt) {
  // got: ORT tensor data; want: array of rows (JSON) or typed array
  const w = Array.isArray(want) ? want.flat().map(x => (x === 'NaN' ? NaN : x === 'Infinity' ? Infinity :
    x === '-Infinity' ? -Infinity : x)) : Array.from(want, Number);
  const g = Array.from(got, Number);
  if (g.length < w.length) return { bad: w.length, first: 'too few values' };
  let bad = 0, worst = 0, first = null;
  for (let i = 0; i < w.length; i++) {
    let r;
    if (isInt) r = g[i] === w[i] ? 0 : Infinity;
    else if (Number.isNaN(w[i]) || Number.isNaN(g[i]) || !Number.isFinite(w[i]) || !Number.isFinite(g[i]))
      r = (Number.isNaN(w[i]) && Number.isNaN(g[i])) || g[i] === w[i] ? 0 : Infinity;
    else r = Math.abs(g[i] - w[i]) / Math.max(1e-5, 1e-4 * Math.abs(w[i]));
    if (r > worst) worst = r;
    if (r > 1) { bad++; if (first === null) first = `at ${i}: got ${g[i]}, want ${w[i]}`; }
  }
  return { bad, worst, first };
}

async function runModel(ort, bytes, feeds) {
  const s = await ort.InferenceSession.create(bytes, { graphOptimizationLevel: 'disabled', intraOpNumThreads: 1, logSeverityLevel: 4,
                                                      interOpNumThreads: 1, executionMode: 'sequential' });
  const out = await s.run(feeds);
  if (s.release) await s.release();
  return out;
}

// The ops that compute each output row from their input's same row alone, in the forms
// these fixtures use them (a leading batch dimension; QuantizeLinear with a stored,
// per-tensor scale; Gemm with its activations as A, untransposed). A model of these
// ops alone gives a fault's first n_ref rows, the rows its reference holds, from a
// feed of the first n_ref samples as from the whole eval set; that is checked on
// the golden model and the CPU at hand, bit for bit, before the faults run so. Not
// among them: DynamicQuantizeLinear (qint_cnn_u8: its scale is the whole batch's
// range) and the DLRM's reshapes and concatenations; such a model's faults run on
// the whole eval set. Under qemu (ort_quant_avx2) the two real CNNs' fault runs
// were most of the test (16 samples each, 8 of them compared).
const PER_SAMPLE = new Set(['Conv', 'Relu', 'Add', 'Flatten', 'Gemm', 'GlobalAveragePool', 'MaxPool',
                            'QuantizeLinear', 'DequantizeLinear']);
function opTypes(buf) {
  const ops = new Set();
  fields(buf, 0, buf.length, (f, wt, s, e) => {
    if (f !== 7 || wt !== 2) return;                       // ModelProto.graph
    fields(buf, s, e, (g, gwt, gs, ge) => {
      if (g !== 1 || gwt !== 2) return;                    // GraphProto.node: op_type (4), domain (7)
      let op = '', domain = '';
      fields(buf, gs, ge, (k, kwt, ks, ke) => {
        if (k === 4 && kwt === 2) op = buf.subarray(ks, ke).toString('utf8');
        if (k === 7 && kwt === 2) domain = buf.subarray(ks, ke).toString('utf8');
      });
      ops.add(domain && domain !== 'ai.onnx' ? `${domain}.${op}` : op);
    });
  });
  return ops;
}

// only: the ids (folder/name) to compare, or null for every case
async function checkModels(ort, dir, inexact, left, only) {
  let failures = 0;
  const names = fs.readdirSync(dir).filter(f => f.endsWith('.ref.json')).map(f => f.slice(0, -9)).sort();
  for (const name of names) {
    if (only && !only.has(`${path.basename(dir)}/${name}`)) continue;
    const ref = JSON.parse(fs.readFileSync(path.join(dir, name + '.ref.json'), 'utf8'));
    const model = fs.readFileSync(path.join(dir, ref.model));
    const why = notExactHere(inexact, model);
    if (why) { console.log(`${name}: left to the plain reference: ${why}`); left.push(name); continue; }
    const ev = readSafetensors(path.join(dir, name + '.eval.safetensors'));
    const feeds = {};
    for (const i of ref.inputs) feeds[i] = new ort.Tensor(ev[i].type, ev[i].data, ev[i].shape);
    const out = await runModel(ort, model, feeds);
    let c = compare(out[ref.outputs[0]].data, ref.golden, false);
    console.log(`${name}: golden ${c.bad ? 'MISMATCH ' + c.first : `ok (worst ${c.worst.toExponential(2)} of tolerance)`}`);
    failures += c.bad > 0;
    const nRef = ref.n_ref_samples;
    // a classifier's outputs are rows [B, C]; a binary model's (DRS) one score per sample [B]
    const width = Array.isArray(ref.golden[0]) ? ref.golden[0].length : 1;
    // the faults' feeds: the first nRef samples where every op is per-sample (PER_SAMPLE)
    let faultFeeds = feeds;
    if ([...opTypes(model)].every(op => PER_SAMPLE.has(op)) && ref.inputs.every(i => ev[i].shape[0] > nRef)) {
      const first = {};
      for (const i of ref.inputs) {
        const per = ev[i].data.length / ev[i].shape[0];
        first[i] = new ort.Tensor(ev[i].type, ev[i].data.slice(0, nRef * per), [nRef, ...ev[i].shape.slice(1)]);
      }
      const g = out[ref.outputs[0]].data.slice(0, nRef * width), h = (await runModel(ort, model, first))[ref.outputs[0]].data;
      if (g.length === h.length && g.every((v, i) => Object.is(v, h[i]))) faultFeeds = first;
      console.log(`${name}: the first ${nRef} samples alone give the golden run's rows bit for bit: ` +
                  (faultFeeds === first ? `yes, so the faults run on them` : `no, so the faults run on all ${ev[ref.inputs[0]].shape[0]}`));
    }
    for (const [k, f] of ref.faults.entries()) {
      const off = rawDataOffset(model, f.param);
      if (off < 0) { console.log(`  fault ${k}: MISMATCH: no raw_data for '${f.param}'`); failures++; continue; }
      const m2 = Buffer.from(model);
      // a float32 record (nbits/: a MatMulNBits scale) flips a bit of its 4 little-endian bytes
      const f32 = f.dtype === 'float32', at = f32 ? off + 4 * f.index : off + f.index;
      const read = () => (f32 ? m2.readFloatLE(at) : f.dtype === 'int8' ? (m2[at] << 24) >> 24 : m2[at]);
      const stored = read();
      m2[at + (f32 ? f.bit >> 3 : 0)] ^= 1 << (f32 ? f.bit & 7 : f.bit);
      const flipped = read();
      if (stored !== (f32 ? Math.fround(f.old) : f.old) || flipped !== (f32 ? Math.fround(f.new) : f.new)) {
        console.log(`  fault ${k}: MISMATCH: stored ${stored} -> ${flipped}, the reference says ${f.old} -> ${f.new}`);
        failures++;
        continue;
      }
      const o = await runModel(ort, m2, faultFeeds);
      const rows = o[ref.outputs[0]].data.slice(0, nRef * width);
      c = compare(rows, f.outputs, false);
      console.log(`  fault ${k} ${f.param}[${f.index}] bit ${f.bit} (${f.old} -> ${f.new}): ` +
                  (c.bad ? 'MISMATCH ' + c.first : 'ok'));
      failures += c.bad > 0;
    }
  }
  return failures;
}

async function checkOpCases(ort, dir, inexact, left, compared, only) {
  let failures = 0;
  const names = fs.readdirSync(dir).filter(f => f.startsWith('quant_') && f.endsWith('.onnx')).map(f => f.slice(0, -5)).sort();
  for (const name of names) {
    if (only && !only.has(`ops/${name}`)) continue;
    const io = readSafetensors(path.join(dir, name + '.io.safetensors'));
    const feeds = {};
    for (const [k, v] of Object.entries(io)) if (k.startsWith('input:')) feeds[k.slice(6)] = new ort.Tensor(v.type, v.data, v.shape);
    const model = fs.readFileSync(path.join(dir, name + '.onnx'));
    const why = notExactHere(inexact, model);
    if (why) { console.log(`${name}: left to the plain reference: ${why}`); left.push(name); continue; }
    let out;
    try {
      out = await runModel(ort, model, feeds);
    } catch (e) {
      console.log(`${name}: ONNX Runtime cannot run it: ${String(e.message || e).split('\n')[0]}`);
      continue;   // ORT's own op coverage (not a disagreement about values)
    }
    const msgs = [];
    for (const [k, v] of Object.entries(io)) {
      if (!k.startsWith('output:')) continue;
      const c = compare(out[k.slice(7)].data, v.data, v.type !== 'float32');
      if (c.bad) msgs.push(`${k.slice(7)} MISMATCH ${c.first}`);
    }
    console.log(`${name}: ${msgs.length ? msgs.join('; ') : 'ok'}`);
    failures += msgs.length > 0;
    compared.push(name);
  }
  return failures;
}

// node ort_quant.js FIXTURES_DIR: every case, or those BF_ORT_ONLY names (ids one a line);
// BF_ORT_RECORD=FILE with BF_ORT_MODE=native|haswell: all of them, the record written when all agree.
// node ort_quant.js --stale FIXTURES_DIR RECORD MODE: the cases to verify (printStale).
async function main() {
  if (process.argv[2] === '--stale') {
    const [fx, recordFile, mode] = process.argv.slice(3);
    if (!mode) { console.error('usage: node ort_quant.js --stale FIXTURES_DIR RECORD native|haswell'); process.exit(2); }
    printStale(fx, recordFile, mode);
    return;
  }
  const fixtures = process.argv[2];
  if (!fixtures) { console.error('usage: node ort_quant.js FIXTURES_DIR'); process.exit(2); }
  const recordFile = process.env.BF_ORT_RECORD || '', mode = process.env.BF_ORT_MODE || 'native';
  const only = !recordFile && process.env.BF_ORT_ONLY ? new Set(process.env.BF_ORT_ONLY.split('\n').filter(Boolean)) : null;
  const ort = loadOrt();
  if (!ort) {
    console.log('SKIPPED: onnxruntime-node is not installed (cd bench && npm install --ignore-scripts)');
    process.exit(77);
  }
  // Which of ONNX Runtime's integer kernels are exact on this CPU.
  const probes = await probe.run(ort);
  const inexact = new Map();
  for (const p of probes) {
    console.log(`probe ${p.op} ${p.types}: ${p.verdict}`);
    if (p.verdict.startsWith('INEXACT')) inexact.set(`${p.op} ${p.types}`, p.detail);
  }
  const left = [], compared = [];
  // quant/: int8 models; nbits/: int4 weights as com.microsoft MatMulNBits (fp32 compute in both: ORT's
  // SQNBitGemm sums in its own order, so within the float tolerance, not bit for bit)
  const modelFailures = await checkModels(ort, path.join(fixtures, 'quant'), inexact, left, only) +
                        await checkModels(ort, path.join(fixtures, 'nbits'), inexact, left, only);
  const opFailures = await checkOpCases(ort, path.join(fixtures, 'ops'), inexact, left, compared, only);
  const failures = modelFailures + opFailures;
  console.log(`ort_quant: CPU ${probe.cpuName()}; ONNX Runtime's integer products exact here: ` +
              `${probes.filter(p => p.verdict === 'exact').map(p => p.op + ' ' + p.types).join(', ') || 'none'}`);
  if (left.length)
    console.log(`ort_quant: ${left.length} cases left to the plain reference (conformance_quant and ops_cases check ` +
                `bitflip against it), since ONNX Runtime's ${[...inexact.keys()].join(', ')} is not exact on this CPU: ` +
                left.join(', '));
  console.log(`ort_quant: compared with ONNX Runtime: ${only ? `the ${only.size} cases not verified before (above), ` +
              'those not left to the plain reference' : 'the quant models not listed above and ' + compared.length + ' op cases'}`);
  console.log(failures ? `ort_quant: ${failures} mismatches` : 'ort_quant: ONNX Runtime agrees with every reference it was compared on');
  if (!failures && recordFile) writeRecord(fixtures, recordFile, mode, probes, left);
  else if (!failures && only)
    console.log('ort_quant: verified, not recorded: `make test-references` re-runs every case and records them ' +
                '(tests/conformance/ort_verified.json), so that make test need not run them again');
  process.exit(failures ? 1 : 0);
}

main().catch(e => { console.error(e); process.exit(1); });
