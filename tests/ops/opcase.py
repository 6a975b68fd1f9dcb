"""Writing op cases for bitflip-opcheck (tests/ops/README.md).

A case is one ONNX graph (usually one node) plus its inputs and the outputs a
reference computed for them: PyTorch where PyTorch has the op (what users'
models compute), else a plain numpy rendition of the ONNX spec written here.
Family modules in tests/ops/cases/ define `cases()` yielding Case objects;
make_cases.py writes them all.
"""
import json
import os
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_ST_DTYPE = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.int32): "I32",
             np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8"}
_ONNX_DTYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
               np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL,
               np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}


class Case:
    """One node `op` (or the nodes given) over named inputs.

    inputs:   ordered dict name -> numpy array ('' keys are not allowed; an
              omitted optional input is None in `node_inputs`)
    outputs:  ordered dict name -> expected numpy array
    attrs:    node attributes (onnx.helper.make_node keywords)
    consts:   input names to store as initializers instead of graph inputs
              (inputs whose dim 0 differs from the first graph input's become
              initializers anyway: a plan has one batch)
    nodes:    a list of onnx NodeProto to use instead of the single node
    check:    run onnx.checker (False for ops newer than the installed onnx
              knows, e.g. Gelu of opset 20 under onnx 1.12)
    model:    a whole ModelProto (a torch.onnx.export of a module) instead of
              nodes: `inputs` feed its graph inputs, `outputs` name its graph
              outputs; a graph input whose dim 0 differs from the first's
              (an LSTM's h0 [layers, batch, hidden] beside a time-first x) is
              made an initializer holding its value, as above
    """

    def __init__(self, name, op, inputs, outputs, attrs=None, opset=13, ref="torch", rtol=1e-5, atol=1e-6,
                 consts=(), node_inputs=None, nodes=None, check=True, model=None):
        self.name, self.op, self.inputs, self.outputs = name, op, dict(inputs), dict(outputs)
        self.attrs, self.opset, self.ref = dict(attrs or {}), opset, ref
        self.rtol, self.atol, self.consts = rtol, atol, set(consts)
        self.node_inputs = node_inputs
        self.nodes = nodes
        self.check = check
        self.model = model


def _value_info(name, arr):
    return helper.make_tensor_value_info(name, _ONNX_DTYPE[arr.dtype], list(arr.shape))


# Not the Python package's writer (clients/python): that one writes eval sets, and stores
# bool and int8 widened to the types eval sets take; an op case's inputs and outputs keep
# their ONNX types (BOOL, I8), which opcheck.c compares exactly.
def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, off = [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr).reshape(np.shape(arr))   # ascontiguousarray makes 0-d arrays 1-d
        b = arr.tobytes()
        header[name] = {"dtype": _ST_DTYPE[arr.dtype], "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def _write_model(case, out_dir, blas=None):
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    g = model.graph
    first, keep = None, []
    for vi in g.input:
        arr = case.inputs[vi.name]
        if first is not None and (arr.ndim == 0 or arr.shape[0] != first.shape[0]):
            g.initializer.append(numpy_helper.from_array(arr, vi.name))
            continue
        if first is None:
            first = arr
        keep.append(vi)
    del g.input[:]
    g.input.extend(keep)
    assert [o.name for o in g.output] == list(case.outputs), (case.name, [o.name for o in g.output])
    onnx.checker.check_model(model)
    with open(os.path.join(out_dir, case.name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())
    tensors = {"input:" + vi.name: case.inputs[vi.name] for vi in keep}
    for n, a in case.outputs.items():
        tensors["output:" + n] = a
    write_safetensors(os.path.join(out_dir, case.name + ".io.safetensors"), tensors,
                      {"rtol": case.rtol, "atol": case.atol, "ref": case.ref, **({"blas": blas} if blas else {})})


def write(case, out_dir, blas=None):
    """Writes case into out_dir; blas (tests/fixtures/refjson.py's blas()): the BLAS the
    references were computed on, recorded in the metadata as "blas"."""
    if case.model is not None:
        return _write_model(case, out_dir, blas)
    for k, v in list(case.inputs.items()) + list(case.outputs.items()):
        if v.dtype not in _ST_DTYPE:
            raise ValueError(f"{case.name}: {k} has dtype {v.dtype}; use float32/int64/int32/bool/uint8/int8")
    names = list(case.inputs)
    graph_inputs, inits = [], []
    first = None
    for n in names:
        arr = case.inputs[n]
        as_input = n not in case.consts
        if as_input and first is not None and arr.ndim > 0 and first.ndim > 0 and arr.shape[0] != first.shape[0]:
            as_input = False
        if as_input and first is not None and (arr.ndim == 0) != (first.ndim == 0):
            as_input = False
        if as_input:
            graph_inputs.append(_value_info(n, arr))
            if first is None:
                first = arr
        else:
            inits.append(numpy_helper.from_array(arr, n))
    if not graph_inputs:
        # a graph needs an input to feed: a dummy one, read by nothing
        dummy = np.zeros([1], np.float32)
        graph_inputs.append(_value_info("unused_input", dummy))
        case.inputs = {"unused_input": dummy, **case.inputs}
    if case.nodes is None:
        node_in = case.node_inputs if case.node_inputs is not None else names
        nodes = [helper.make_node(case.op, [x or "" for x in node_in], list(case.outputs), name=case.name,
                                  **case.attrs)]
    else:
        nodes = case.nodes
    graph = helper.make_graph(nodes, case.name, graph_inputs,
                              [_value_info(n, a) for n, a in case.outputs.items()], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)],
                              producer_name="bitflip tests/ops")
    model.ir_version = 7 if case.opset <= 15 else 8
    if case.check:
        onnx.checker.check_model(model)
    with open(os.path.join(out_dir, case.name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())
    tensors = {}
    for inp in graph_inputs:
        tensors["input:" + inp.name] = case.inputs[inp.name]
    for n, a in case.outputs.items():
        tensors["output:" + n] = a
    write_safetensors(os.path.join(out_dir, case.name + ".io.safetensors"), tensors,
                      {"rtol": case.rtol, "atol": case.atol, "ref": case.ref, **({"blas": blas} if blas else {})})


def rng(seed):
    return np.random.default_rng(seed)


def randf(seed, *shape, lo=-1.0, hi=1.0):
    return rng(seed).uniform(lo, hi, size=shape).astype(np.float32)
