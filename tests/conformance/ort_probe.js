// Which of ONNX Runtime's integer-product kernels are exact on this CPU
// (used by ort_quant.js; `node ort_probe.js` prints the verdicts alone).
//
// ONNX Runtime (MLAS) picks its x86 integer GEMM by CPU: with AVX-512 VNNI
// or AVX-VNNI, vpdpbusd adds four u8 x s8 products into int32, exactly;
// with AVX2 alone, vpmaddubsw first adds two of them into int16 with
// saturation, so 255 x 127 + 255 x 127 = 64770 becomes 32767. The ONNX spec
// defines the exact sum. Rather than guess from CPU flags which path a given
// ONNX Runtime build takes, each probe runs the op on inputs at the extremes
// of their types (255 for uint8, -128 for int8: every pair of products
// saturates an int16 for u8 x s8 and s8 x s8), where the exact answer is
// worked out here by hand arithmetic: a * b * K for the integer outputs, and
// zero_point +- 100 for the requantized ones (y_scale is chosen so that the
// exact sum maps to 100.3: no rounding tie). A probe whose answer differs is
// INEXACT; a type combination ONNX Runtime does not take is "refused" and
// proves nothing either way.
//
// The models are written here, a few protobuf fields by hand, so that the
// probes need no fixture files and no Python.
'use strict';

const fs = require('fs');

// --- the few protobuf fields an ONNX model needs
function varint(n) {
  const out = [];
  let v = BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return out;
}
const fInt = (field, n) => [...varint(field * 8), ...varint(n)];
const fBytes = (field, bytes) => [...varint(field * 8 + 2), ...varint(bytes.length), ...bytes];
const fStr = (field, s) => fBytes(field, [...Buffer.from(s, 'utf8')]);
const fMsg = (field, ...parts) => fBytes(field, parts.flat());

const TYPES = {
  u8: { onnx: 2, ort: 'uint8', Arr: Uint8Array, extreme: 255, zp: 128, lo: 0, hi: 255 },
  s8: { onnx: 3, ort: 'int8', Arr: Int8Array, extreme: -128, zp: 0, lo: -128, hi: 127 },
};
const FLOAT = 1, INT32 = 6;

// TensorProto: dims (1), data_type (2), name (8), raw_data (9)
function tensor(name, onnxType, dims, bytes) {
  return fMsg(5, ...dims.map(d => fInt(1, d)), fInt(2, onnxType), fStr(8, name), fBytes(9, [...bytes]));
}
// ValueInfoProto: name (1), type (2) { tensor_type (1) { elem_type (1), shape (2) { dim (1) { dim_value (1) } } } }
function valueInfo(field, name, onnxType, dims) {
  return fMsg(field, fStr(1, name),
              fMsg(2, fMsg(1, fInt(1, onnxType), fMsg(2, ...dims.map(d => fMsg(1, fInt(1, d)))))));
}
// NodeProto: input (1), output (2), op_type (4)
function node(op, inputs, outputs) {
  return fMsg(1, ...inputs.map(i => fStr(1, i)), ...outputs.map(o => fStr(2, o)), fStr(4, op));
}
// ModelProto: ir_version (1), graph (7), opset_import (8); GraphProto: node (1), name (2),
// initializer (5), input (11), output (12)
function model(nodes, inits, inputs, outputs) {
  return Buffer.from([...fInt(1, 7), ...fMsg(7, ...nodes, fStr(2, 'probe'), ...inits, ...inputs, ...outputs),
                      ...fMsg(8, fStr(1, ''), fInt(2, 13))]);
}

const filled = (t, n) => new t.Arr(n).fill(t.extreme);
const bytesOf = a => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const scalarF = (name, v) => tensor(name, FLOAT, [], bytesOf(new Float32Array([v])));
const scalarQ = (name, t, v) => tensor(name, t.onnx, [], bytesOf(new t.Arr([v])));

// One probe: the model, its input, and the exact value of every output element.
function build(op, ta, tb, shape) {
  const a = TYPES[ta], b = TYPES[tb];
  const conv = op.endsWith('Conv') || op === 'ConvInteger';
  const [m, k, n] = shape;   // MatMul: A [m, k] x B [k, n]; Conv: x [1, k/9, 3, 3], w [n, k/9, 3, 3]
  const aDims = conv ? [1, k / 9, 3, 3] : [m, k];
  const bDims = conv ? [n, k / 9, 3, 3] : [k, n];
  const yDims = conv ? [1, n, 1, 1] : [m, n];
  const acc = a.extreme * b.extreme * k;
  const init = [tensor('B', b.onnx, bDims, bytesOf(filled(b, bDims.reduce((x, y) => x * y))))];
  let inputs = ['A', 'B'], yType = INT32, exact = acc;
  if (op.startsWith('QLinear')) {
    // y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zp), with scales 1 and
    // y_scale = |acc| / 100.3: the exact sum lands on y_zp +- 100
    init.push(scalarF('sa', 1), scalarQ('za', a, 0), scalarF('sb', 1), scalarQ('zb', b, 0),
              scalarF('sy', Math.abs(acc) / 100.3), scalarQ('zy', a, a.zp));
    inputs = ['A', 'sa', 'za', 'B', 'sb', 'zb', 'sy', 'zy'];
    yType = a.onnx;
    exact = a.zp + Math.sign(acc) * 100;
  }
  const bytes = model([node(op, inputs, ['Y'])], init, [valueInfo(11, 'A', a.onnx, aDims)],
                      [valueInfo(12, 'Y', yType, yDims)]);
  return { bytes, aDims, aData: filled(a, aDims.reduce((x, y) => x * y)), aType: a.ort, exact };
}

const OPS = { MatMulInteger: [[4, 64, 16], [1, 64, 16]], QLinearMatMul: [[4, 64, 16], [1, 64, 16]],
              ConvInteger: [[1, 144, 8]], QLinearConv: [[1, 144, 8]] };

// [{op, types, verdict ('exact' | 'INEXACT: ...' | 'refused: ...'), detail}], one per op and type pair;
// an op and type pair is exact only if every shape it was probed at is.
async function run(ort) {
  const out = [];
  for (const [op, shapes] of Object.entries(OPS)) {
    for (const ta of Object.keys(TYPES)) {
      for (const tb of Object.keys(TYPES)) {
        let verdict = 'exact', detail = '';
        for (const shape of shapes) {
          const p = build(op, ta, tb, shape);
          let y;
          try {
            const s = await ort.InferenceSession.create(p.bytes, { graphOptimizationLevel: 'disabled', intraOpNumThreads: 1,
                                                                   interOpNumThreads: 1, logSeverityLevel: 4 });
            y = (await s.run({ A: new ort.Tensor(p.aType, p.aData, p.aDims) })).Y.data;
            if (s.release) await s.release();
          } catch (e) {
            verdict = `refused: ${String(e.message || e).split('\n')[0].slice(0, 120)}`;
            break;
          }
          const bad = Array.from(y, Number).findIndex(v => v !== p.exact);
          if (bad >= 0) {
            detail = `at [${shape}] y[${bad}] is ${Number(y[bad])}, the exact value ${p.exact}`;
            verdict = `INEXACT: ${detail}`;
            break;
          }
        }
        out.push({ op, types: `${ta}x${tb}`, verdict, detail });
      }
    }
  }
  return out;
}

// The CPU's name and the flags that decide MLAS's path, as /proc/cpuinfo gives them.
function cpuName() {
  try {
    const info = fs.readFileSync('/proc/cpuinfo', 'utf8');
    const name = (info.match(/^model name\s*:\s*(.*)$/m) || [])[1] || 'unknown';
    const flags = new Set(((info.match(/^flags\s*:\s*(.*)$/m) || [])[1] || '').split(/\s+/));
    const have = ['avx2', 'avx512f', 'avx512_vnni', 'avx_vnni'].filter(f => flags.has(f));
    return `${name} (${have.join(', ') || 'none of avx2, avx512f, avx512_vnni, avx_vnni'})`;
  } catch (e) {
    return 'unknown';
  }
}

module.exports = { run, build, cpuName };

if (require.main === module) {
  const path = require('path');
  const roots = [process.env.BF_ORT_MODULES, path.join(__dirname, '..', '..', 'bench', 'node_modules')].filter(Boolean);
  let ort = null;
  for (const r of roots) { try { ort = require(path.join(r, 'onnxruntime-node')); break; } catch (e) { /* next */ } }
  if (!ort) { console.log('onnxruntime-node is not installed'); process.exit(77); }
  run(ort).then(ps => { for (const p of ps) console.log(`${p.op} ${p.types}: ${p.verdict}`); });
}
