"""Decoder-only language models as users export them from plain PyTorch 1.13
(torch.onnx.export, opsets 14 to 17, dynamic batch and sequence axes),
compared with the modules' own outputs (issue 30):

- torch.repeat_interleave on an axis of no static size: the exporter writes a
  Loop over sequences (SplitToSequence, SequenceEmpty, Loop, SequenceAt,
  SequenceInsert, ConcatFromSequence), which bitflip runs as one
  bf.RepeatInterleave (core/src/exec/fuse_seq.c); on a static axis an
  unrolled form whose Reshape, read by the ONNX spec, gives another shape
  than PyTorch once a later axis is dynamic. Both at every opset, fed
  shapes other than the traced ones;
- the models of tests/fixtures/lm_models.py, small: GPT-2 (LayerNorm, tanh
  GELU, learned positions, tied embeddings), Llama (RMSNorm, RoPE rotate-half
  and interleaved, SwiGLU, grouped-query attention by repeat_interleave and by
  expand+reshape, causal masks from triu, tril and a registered buffer,
  masked_fill and additive), Mixtral-style MoE with the dense scatter
  dispatch (TopK, softmax over the k logits, ScatterElements); each with a
  KV cache (past keys/values fed, concatenated along the sequence axis),
  past length 0 and 3, at a sequence length other than the traced one.

Not here: the MoE dispatch by nonzero/index_add (`dispatch="index"`), whose
NonZero output's shape is data: bitflip runs exactly the exported form with
static shapes (core/src/exec/fuse_moe.c, docs/OPS.md "MoE dispatch by index"),
checked by conformance_lm (lm_moe_index_tril_op17) and tests/unit/test_moe_index.c.
"""
import io
import os
import sys
import warnings

import onnx
import torch

from opcase import Case

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures"))
import lm_models as L  # noqa: E402


class RI(torch.nn.Module):
    def __init__(self, reps, dim):
        super().__init__()
        self.reps, self.dim = reps, dim

    def forward(self, k):
        return torch.repeat_interleave(k, self.reps, dim=self.dim)


def export(mod, args, in_names, out_names, opset, dynamic):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(mod, tuple(args), f, opset_version=opset, input_names=in_names, output_names=out_names,
                          dynamic_axes=dynamic)
    return onnx.load_from_string(f.getvalue())


def ri_cases():
    g = torch.Generator().manual_seed(11)
    trace = torch.randn(2, 2, 5, 4, generator=g)
    dyn = {"k": {0: "batch", 1: "heads", 2: "seq"}}
    for opset in L.OPSETS:
        for name, reps, dim, feed in (("scalar", 2, 1, (2, 3, 7, 4)), ("tensor", torch.tensor([1, 3]), 1, (3, 2, 6, 4)),
                                      ("dim2", 3, 2, (2, 2, 4, 4))):
            mod = RI(reps, dim)
            model = export(mod, [trace], ["k"], ["y"], opset, dyn)
            assert any(n.op_type == "Loop" for n in model.graph.node), name
            k = torch.randn(*feed, generator=g)
            yield Case(f"lm_repeat_interleave_{name}_loop_op{opset}", "RepeatInterleave", {"k": k.numpy()},
                       {"y": mod(k).numpy()}, model=model)
        # the static-axis form, seq dynamic
        mod = RI(2, 1)
        model = export(mod, [trace], ["k"], ["y"], opset, {"k": {0: "batch", 2: "seq"}})
        assert not any(n.op_type == "Loop" for n in model.graph.node)
        k = torch.randn(3, 2, 3, 4, generator=g)
        yield Case(f"lm_repeat_interleave_static_op{opset}", "RepeatInterleave", {"k": k.numpy()},
                   {"y": mod(k).numpy()}, model=model)


SMALL = dict(vocab=16, d=8, n_layer=1, n_head=4, max_pos=12)
LLAMA = dict(SMALL, n_kv_head=2, hidden=12)
MODELS = {
    "gpt2": lambda kv: L.GPT2LM(**SMALL, kv_cache=kv),
    "llama_ri_triu": lambda kv: L.LlamaLM(**LLAMA, kv_cache=kv),
    "llama_expand_interleaved_tril": lambda kv: L.LlamaLM(**LLAMA, rope="interleaved", gqa="expand", mask="tril",
                                                          mask_apply="additive", kv_cache=kv),
    "llama_buffer": lambda kv: L.LlamaLM(**LLAMA, mask="buffer", kv_cache=kv),
    "moe_scatter": lambda kv: L.MoELM(**LLAMA, n_experts=3, dispatch="scatter", kv_cache=kv),
}


def lm_case(name, make, kv, opset, past_len):
    torch.manual_seed(5)
    model = make(kv).eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        L.export_lm(model, f, opset=opset)
    onnx_model = onnx.load_from_string(f.getvalue())
    ins, outs = L.io_names(model)
    ex = L.example_inputs(model, batch=2, seq=4, past_len=max(past_len, 1), seed=9)   # not the traced 2 x 5
    if kv and past_len == 0:
        ex = (ex[0],) + model.empty_past(2)
    with torch.no_grad():
        y = model(*ex)
    y = y if isinstance(y, tuple) else (y,)
    return Case(name, "LM", {k: v.numpy() for k, v in zip(ins, ex)}, {k: v.numpy() for k, v in zip(outs, y)},
                model=onnx_model, rtol=1e-5, atol=1e-5)


# (model, KV cache, opset, past length): every model plain and with a cache
# (past 0 and 3 between them), the opsets spread so that each of 14..17 runs
# several models (GPT-2's LayerNorm is one op from 17; the Llama with
# repeat_interleave, issue 30's case, at 14 and 17)
LM_CASES = (
    ("gpt2", False, 14, 0), ("gpt2", True, 17, 3),
    ("llama_ri_triu", False, 14, 0), ("llama_ri_triu", False, 17, 0), ("llama_ri_triu", True, 15, 0),
    ("llama_expand_interleaved_tril", False, 17, 0), ("llama_expand_interleaved_tril", True, 14, 3),
    ("llama_buffer", False, 16, 0), ("llama_buffer", True, 16, 3),
    ("moe_scatter", False, 16, 0), ("moe_scatter", True, 17, 0),
)


def cases():
    yield from ri_cases()
    for name, kv, opset, past in LM_CASES:
        label = f"lm_{name}_kv_past{past}_op{opset}" if kv else f"lm_{name}_op{opset}"
        yield lm_case(label, MODELS[name], kv, opset, past)
