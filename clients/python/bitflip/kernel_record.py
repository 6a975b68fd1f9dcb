"""The record of which PyTorch kernels ran where, that ``bitflip.export``
writes into the ONNX file (metadata_props ``bitflip.kernels``).

torch.onnx.export (opsets below 17/18) writes nn.LayerNorm as ReduceMean,
Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add: node for node what a
LayerNorm written out by hand exports to. PyTorch ran the first as one
kernel and the second op by op, and under a fault that makes a value huge
they overflow differently (docs/NUMERICS.md). bitflip fuses such patterns
back into one op; with this record it fuses exactly those PyTorch ran as one
kernel. The record comes from tracing the model: every call of a kernel that
an exported pattern stands for (aten::layer_norm, group_norm, gelu,
hardswish), with the module scope that called it, which is the prefix of the
ONNX node names the exporter gives that module's nodes.

Format (docs/FORMATS.md): ``bitflip.kernels 1``, then per call
``KERNEL<tab>SCOPE<tab>MODULE``: ``layer_norm\t/encoder/layers.0/norm1\tnn.LayerNorm``.
"""
import warnings

KEY = "bitflip.kernels"
HEADER = "bitflip.kernels 1"
KERNELS = {"aten::layer_norm": "layer_norm", "aten::group_norm": "group_norm", "aten::gelu": "gelu",
           "aten::hardswish": "hardswish"}


def _module_type(mod):
    cls = type(mod)
    if cls.__module__.startswith("torch.nn."):
        return "nn." + cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


def _scope(model, scope_name):
    """The ONNX node-name prefix and the module type for a traced node's
    scopeName: '__module.layers.0/__module.layers.0.ln' -> ('/layers.0/ln', ...).
    Each segment is the full dotted path; ONNX names use the attribute names."""
    paths = [s[len("__module."):] if s.startswith("__module.") else s for s in scope_name.split("/")] \
        if scope_name else []
    rels, parent = [], ""
    for p in paths:
        rels.append(p[len(parent) + 1:] if parent and p.startswith(parent + ".") else p)
        parent = p
    try:
        mod = model.get_submodule(paths[-1]) if paths else model
        kind = _module_type(mod)
    except AttributeError:
        kind = "?"
    return "".join("/" + r for r in rels), kind


def kernel_calls(torch, model, example):
    """[(kernel, onnx scope, module type)] per fusable kernel call of
    model(*example), in call order; None if the model cannot be traced."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tr = torch.jit.trace(model, example, check_trace=False, strict=False)
        nodes = list(tr.inlined_graph.nodes())
    except Exception:  # noqa: BLE001 - tracing raises anything; then no record (bitflip fuses by pattern)
        return None
    calls = []
    for n in nodes:
        k = KERNELS.get(n.kind())
        if k:
            scope, kind = _scope(model, n.scopeName())
            calls.append((k, scope, kind))
    return calls


def record_text(calls):
    clean = [tuple(str(f).replace("\t", " ").replace("\n", " ") for f in c) for c in calls]
    return "\n".join([HEADER] + ["\t".join(c) for c in clean]) + "\n"


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num, data):
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def append_record(path, text):
    """Appends metadata_props {KEY: text} to the ONNX file at path: protobuf
    merges a field appended to a message, so the file need not be parsed
    (nor its external data loaded). ModelProto.metadata_props is field 14."""
    entry = _field(1, KEY.encode()) + _field(2, text.encode())
    with open(path, "ab") as f:
        f.write(_field(14, entry))
