#!/usr/bin/python3
"""Models exported as users export them, run through bitflip: the export matrix of docs/OPS.md,
"Exports as users write them".

  /usr/bin/python3 bench/user_exports.py [--bin build] [--only a,b] [--out bench/out/user_exports]
        [--trials 15] [--keep-going] [--table]

Every other check of the zoo exports through bitflip.export at opset 13 with static shapes. Here
each model is exported with plain torch.onnx.export (torch 1.13) at opsets 11, 12, 14, 16 and 17,
with the options users pass: dynamic_axes on the batch (and the sequence of a language model),
do_constant_folding=False, training=TrainingMode.PRESERVE on a module in eval mode,
keep_initializers_as_inputs=True, fp16 weights (model.half(), where PyTorch's CPU kernels run it),
static shapes traced at batch 1. Per case, into --out:

  NAME.onnx, NAME.eval.safetensors, NAME.ref.json   the shared conformance format
      (/work/shared/conformance/README.md): PyTorch's golden outputs and, for a few single-bit
      flips of initializers that are PyTorch parameters by name (no folding renamed them),
      PyTorch's outputs under the flip;
  then  bitflip info NAME.onnx, bitflip-conformance --only NAME (golden, faults, the campaign
      path), bitflip run --local (a short campaign, --trials trials) and records each step's
      outcome. The detector (SSDlite through bitflip.export, one image per call) is compared
      detection by detection with bench/visionlib.compare_det instead of a ref.json.

Prints a table (markdown) of every case and step; exit status 1 when a step failed.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, HERE)

import refjson  # noqa: E402
from make_user_exports import to_fp16  # noqa: E402  (tests/fixtures: the fp16 conversion both write)

N_EVAL = 8


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------

def tv(name, **kw):
    import torchvision.models as M
    return getattr(M, name)(weights=None, **kw)


def vit32():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                             num_classes=10)


def lraspp():
    from torchvision.models import segmentation as S
    return S.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3)


class GPT(object):
    """A GPT-style decoder in plain PyTorch: token and position embeddings, pre-LN blocks whose
    attention is written out (q k^T / sqrt(d), a causal mask sliced from a buffer, softmax, @ v),
    a GELU MLP, the LM head tied to the token embedding."""

    @staticmethod
    def make(vocab=48, ctx=32, d=32, heads=2, layers=2):
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
                self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
                self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)).view(1, 1, ctx, ctx))

            def forward(self, x):
                b, t, c = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
                q = q.view(b, t, heads, c // heads).transpose(1, 2)
                k = k.view(b, t, heads, c // heads).transpose(1, 2)
                v = v.view(b, t, heads, c // heads).transpose(1, 2)
                att = (q @ k.transpose(-2, -1)) * (1.0 / (c // heads) ** 0.5)
                att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
                att = torch.softmax(att, dim=-1)
                y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
                x = x + self.proj(y)
                return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
                self.blocks = nn.ModuleList([Block() for _ in range(layers)])
                self.ln_f = nn.LayerNorm(d)
                self.head = nn.Linear(d, vocab, bias=False)
                self.head.weight = self.wte.weight

            def forward(self, idx):
                t = idx.shape[1]
                pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
                x = self.wte(idx) + self.wpe(pos)
                for blk in self.blocks:
                    x = blk(x)
                return self.head(self.ln_f(x))

        return Model()


def rnn_classifier(kind):
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(30, 16)
            self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(16, 24, num_layers=2, batch_first=True,
                                                                bidirectional=True)
            self.fc = nn.Linear(48, 5)

        def forward(self, ids):
            y, _ = self.rnn(self.emb(ids))
            return self.fc(y[:, -1])
    return M()


def dlrm():
    import torch
    from torch import nn

    class M(nn.Module):
        """Dense MLP, three EmbeddingBag tables (2-D index input: fixed-size bags, sum and mean),
        dot-product interactions (bmm, triu indices), top MLP, a probability per sample."""

        def __init__(self):
            super().__init__()
            self.bot = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU())
            self.emb = nn.ModuleList([nn.EmbeddingBag(n, 8, mode=m) for n, m in ((20, "sum"), (30, "mean"), (10, "max"))])
            self.top = nn.Sequential(nn.Linear(8 + 6, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, dense, s0, s1, s2):
            x = self.bot(dense)
            e = [t(s) for t, s in zip(self.emb, (s0, s1, s2))]
            z = torch.stack([x] + e, dim=1)
            zz = torch.bmm(z, z.transpose(1, 2))
            i, j = torch.triu_indices(4, 4, offset=1)
            inter = zz[:, i, j]
            return torch.sigmoid(self.top(torch.cat([x, inter], dim=1))).squeeze(1)
    return M()


def dlrm_inputs(n, rng):
    """dense [n, 4], and per table [n, L] indices (bags of L = 3, 2, 4)."""
    import torch
    out = [torch.from_numpy(rng.standard_normal((n, 4)).astype(np.float32))]
    for size, ln in ((20, 3), (30, 2), (10, 4)):
        out.append(torch.from_numpy(rng.integers(0, size, (n, ln)).astype(np.int64)))
    return tuple(out)


# --------------------------------------------------------------------------
# the matrix
# --------------------------------------------------------------------------

def img(n, size):
    import torch
    return torch.from_numpy(np.random.default_rng(n * 7 + size).standard_normal((n, 3, size, size)).astype(np.float32))


DYN_IMG = {"input": {0: "batch"}, "logits": {0: "batch"}}


def C(name, build, size, opset, **kw):
    """A classifier case: input [N, 3, size, size], output logits."""
    return dict(name=name, build=build, kind="vision", size=size, opset=opset, **kw)


CASES = [
    C("resnet18_o11_dyn", lambda: tv("resnet18"), 64, 11, dynamic=True),
    C("resnet18_o14_preserve", lambda: tv("resnet18"), 64, 14, training="preserve"),
    C("resnet18_o12_nofold_static", lambda: tv("resnet18"), 64, 12, fold=False, static_batch=1),
    C("mobilenet_v3_small_o12_nofold", lambda: tv("mobilenet_v3_small"), 64, 12, fold=False, dynamic=True),
    C("mobilenet_v3_small_o17_keepinit", lambda: tv("mobilenet_v3_small"), 64, 17, keep_init=True),
    C("squeezenet_o11_static", lambda: tv("squeezenet1_1"), 64, 11, static_batch=1),
    C("squeezenet_o16_keepinit_dyn", lambda: tv("squeezenet1_1"), 64, 16, keep_init=True, dynamic=True),
    C("shufflenet_o16_keepinit_dyn", lambda: tv("shufflenet_v2_x0_5"), 64, 16, keep_init=True, dynamic=True),
    C("shufflenet_o11_preserve", lambda: tv("shufflenet_v2_x0_5"), 64, 11, training="preserve"),
    C("efficientnet_b0_o17_dyn_nofold", lambda: tv("efficientnet_b0"), 64, 17, dynamic=True, fold=False),
    C("efficientnet_b0_o12_preserve", lambda: tv("efficientnet_b0"), 64, 12, training="preserve", dynamic=True),
    C("regnet_x_400mf_o11_preserve", lambda: tv("regnet_x_400mf"), 64, 11, training="preserve"),
    C("regnet_x_400mf_o16_dyn", lambda: tv("regnet_x_400mf"), 64, 16, dynamic=True),
    C("convnext_tiny_o17_dyn", lambda: tv("convnext_tiny"), 32, 17, dynamic=True, n=4),
    C("convnext_tiny_o12_nofold", lambda: tv("convnext_tiny"), 32, 12, fold=False, n=4),
    C("vit32_o16_dyn", vit32, 32, 16, dynamic=True),
    C("mobilenet_v2_o11_noname", lambda: tv("mobilenet_v2"), 64, 11, noname=True, static_batch=1),
    C("mnasnet0_5_o13_dynlist", lambda: tv("mnasnet0_5"), 64, 13, dynamic=True, dyn_list=True),
    C("densenet121_o12_preserve_dyn", lambda: tv("densenet121"), 32, 12, training="preserve", dynamic=True, n=4),
    C("googlenet_o14_dyn", lambda: tv("googlenet", aux_logits=False, init_weights=True), 64, 14, dynamic=True,
      n=4),
    C("vit32_o11_keepinit", vit32, 32, 11, keep_init=True),
    C("vit32_o17_preserve_nofold", vit32, 32, 17, training="preserve", fold=False, dynamic=True),
    dict(name="lraspp_o16_dyn", build=lraspp, kind="seg", size=64, opset=16, dynamic=True, n=4),
    dict(name="lraspp_o11_static", build=lraspp, kind="seg", size=64, opset=11, static_batch=1, n=4),
    dict(name="lraspp_o13_dynhw", build=lraspp, kind="seg", size=64, opset=13, dynamic=True, dyn_hw=True, n=4),
    C("resnet18_o13_dynhw", lambda: tv("resnet18"), 64, 13, dynamic=True, dyn_hw=True),
    dict(name="ssdlite320_o17_bitflip_export", build=None, kind="det", size=320, opset=17, n=2),
    dict(name="gpt_o14_dyn", build=GPT.make, kind="lm", opset=14, dynamic=True, fold=False),
    dict(name="gpt_o17_dyn", build=GPT.make, kind="lm", opset=17, dynamic=True),
    dict(name="gpt_o12_keepinit", build=GPT.make, kind="lm", opset=12, dynamic=True, keep_init=True),
    dict(name="gpt_o16_fp16", build=GPT.make, kind="lm", opset=16, dynamic=True, half=True),
    dict(name="lstm_o11_dyn", build=lambda: rnn_classifier("lstm"), kind="seq", opset=11, dynamic=True),
    dict(name="gru_o14_keepinit_nofold", build=lambda: rnn_classifier("gru"), kind="seq", opset=14, dynamic=True,
         keep_init=True, fold=False),
    dict(name="lstm_o17_static", build=lambda: rnn_classifier("lstm"), kind="seq", opset=17, static_batch=1),
    dict(name="dlrm_o11_dyn", build=dlrm, kind="dlrm", opset=11, dynamic=True),
    dict(name="dlrm_o16_keepinit", build=dlrm, kind="dlrm", opset=16, dynamic=True, keep_init=True),
    dict(name="dlrm_o17_nofold", build=dlrm, kind="dlrm", opset=17, dynamic=True, fold=False),
    dict(name="mlp_o14_fp16", build=None, kind="mlp", opset=14, dynamic=True, half=True),
]


def mlp():
    from torch import nn
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))


# --------------------------------------------------------------------------
# per case: inputs, export, references
# --------------------------------------------------------------------------

def inputs_of(case, model, n):
    """(eval inputs tuple of torch tensors, input names, output names, dynamic axes, labels-maker)"""
    import torch
    rng = np.random.default_rng(1)
    k = case["kind"]
    if k in ("vision", "seg"):
        x = img(n, case["size"])
        out = "logits" if k == "vision" else "out"
        if case.get("dyn_hw"):   # any image size: height and width dynamic too
            return (x,), ["input"], [out], {"input": {0: "batch", 2: "height", 3: "width"},
                                            out: {0: "batch"} if k == "vision" else {0: "batch", 2: "height", 3: "width"}}
        return (x,), ["input"], [out], {"input": {0: "batch"}, out: {0: "batch"}}
    if k == "lm":
        ids = torch.from_numpy(rng.integers(0, 48, (n, 16)).astype(np.int64))
        return (ids,), ["input_ids"], ["logits"], {"input_ids": {0: "batch", 1: "sequence"},
                                                  "logits": {0: "batch", 1: "sequence"}}
    if k == "seq":
        ids = torch.from_numpy(rng.integers(0, 30, (n, 12)).astype(np.int64))
        return (ids,), ["ids"], ["logits"], {"ids": {0: "batch"}, "logits": {0: "batch"}}
    if k == "mlp":
        x = torch.from_numpy(rng.standard_normal((n, 12)).astype(np.float32))
        return (x,), ["x"], ["logits"], {"x": {0: "batch"}, "logits": {0: "batch"}}
    if k == "dlrm":
        names = ["dense", "s0", "s1", "s2"]
        return dlrm_inputs(n, rng), names, ["prob"], {**{nm: {0: "batch"} for nm in names}, "prob": {0: "batch"}}
    raise ValueError(k)


def export(case, model, args, in_names, out_names, dyn, path):
    import torch
    kw = dict(opset_version=case["opset"], do_constant_folding=case.get("fold", True),
              keep_initializers_as_inputs=case.get("keep_init", False))
    if not case.get("noname"):   # else the exporter's own names ("input.1", "495")
        kw.update(input_names=in_names, output_names=out_names)
    if case.get("dynamic"):
        # dynamic_axes as a dict of names or, as many users write it, a list of axes
        kw["dynamic_axes"] = {k: list(v) for k, v in dyn.items()} if case.get("dyn_list") else dyn
    if case.get("training") == "preserve":
        kw["training"] = torch.onnx.TrainingMode.PRESERVE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, **kw)


def auc(scores, labels):
    s, y = np.asarray(scores, np.float64), np.asarray(labels) > 0.5
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    ss = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and ss[j + 1] == ss[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    npos, nneg = y.sum(), (~y).sum()
    return float((ranks[y].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def param_faults(onnx_path, model, rng, k=4):
    """Up to k (onnx name, torch name, index, bit) flips of float32 initializers that are PyTorch
    parameters or buffers by name and shape (folded or transposed ones are not)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(onnx_path)
    sd = dict(model.named_parameters())
    sd.update({n: b for n, b in model.named_buffers() if b.dtype.is_floating_point})
    # a parameter tied to another (a GPT's head and token embedding) is one tensor in PyTorch, and
    # the exporter may write it twice (the head's a transposed copy): a flip of one is not PyTorch's
    seen = {}
    for mod in model.modules():
        for q in mod._parameters.values():
            if q is not None:
                seen[id(q)] = seen.get(id(q), 0) + 1
    cands = []
    for t in m.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT or t.name not in sd:
            continue
        a = numpy_helper.to_array(t)
        p = sd[t.name]
        if tuple(a.shape) != tuple(p.shape) or a.size < 2 or seen.get(id(p), 1) > 1:
            continue
        if not np.array_equal(a.reshape(-1).view(np.uint32), p.detach().reshape(-1).numpy().view(np.uint32)):
            continue
        # torch 1.13 merges parameters of equal values into one initializer (LayerNorm weights
        # all 1): a flip there is a flip in every one of them, which one PyTorch flip is not
        bits = p.detach().reshape(-1).numpy().view(np.uint32)
        if any(q is not p and tuple(q.shape) == tuple(p.shape) and q.dtype == p.dtype and
               np.array_equal(q.detach().reshape(-1).numpy().view(np.uint32), bits) for q in sd.values()):
            continue
        cands.append((t.name, a.size))
    if not cands:
        return []
    out = []
    bits = [30, 31, 26, 22, 29]
    pick = rng.permutation(len(cands))[:k]
    for j, ci in enumerate(pick):
        name, size = cands[ci]
        out.append((name, name, int(rng.integers(0, size)), bits[j % len(bits)]))
    return out


def forward(model, case, args):
    import torch
    with torch.no_grad():
        y = model(*args)
    if isinstance(y, dict):
        y = y["out"]
    return y.float().numpy()


def make_det(case, out, bindir):
    """SSDlite through bitflip.export (its wrapper: one image [3, H, W] per call, outputs boxes,
    labels, scores), at the case's opset; PyTorch's detections saved beside it."""
    import visionlib as V
    import bitflip
    import torch
    m, task = V.build("ssdlite320", case["size"])
    x, tg = V.draw_set(case.get("n", 2), case["size"], 21, task)
    stem = os.path.join(out, case["name"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bitflip.export(m, torch.from_numpy(x[0]), stem + ".onnx", eval_inputs=x, labels=tg, verbose=False,
                       opset=case["opset"], bin=os.path.join(bindir, "bitflip"))
    outs = V.torch_outputs(m, task, x)
    with open(stem + ".torch.json", "w") as f:
        json.dump([[v.tolist() for v in o] for o in outs], f)
    return {"export": "ok", "detections": [len(o[2]) for o in outs]}


def check_det(case, out, bindir, trials):
    import visionlib as V
    stem = os.path.join(out, case["name"])
    row = {}
    rc, txt, _ = run([os.path.join(bindir, "bitflip"), "info", stem + ".onnx"])
    row["info"] = "ok" if rc == 0 else "FAIL: " + tail(txt)
    rc, txt, secs = run([os.path.join(bindir, "bitflip"), "eval", stem + ".onnx", stem + ".eval.safetensors",
                         "--threads", "1", "--outputs", stem + ".bitflip.json"])
    if rc != 0:
        row["conformance"] = "FAIL: " + tail(txt)
    else:
        names = ["boxes", "labels", "scores"]
        b = V.from_bitflip(json.load(open(stem + ".bitflip.json")), "detection", names)
        t = [tuple(np.array(v, np.int64 if k == 1 else np.float32).reshape(-1, 4) if k == 0 else
                   np.array(v, np.int64 if k == 1 else np.float32) for k, v in enumerate(o))
             for o in json.load(open(stem + ".torch.json"))]
        res = [V.compare_det(tt, bb) for tt, bb in zip(t, b)]
        ok = all(r["ok"] or r["same_set"] for r in res)
        row["conformance"] = ("ok (detections %s, same as PyTorch)" % [r["count"][0] for r in res] if ok else
                              "FAIL: " + next(r["why"] for r in res if not r["ok"]))
    row["conformance_s"] = round(secs, 1)
    row.update(campaign_step(stem, bindir, trials))
    return row


def make_case(case, out, bindir):
    """Writes NAME.onnx, .eval.safetensors, .ref.json; returns a dict of notes."""
    import torch
    if case["kind"] == "det":
        return make_det(case, out, bindir)
    from bitflip.safetensors import write_safetensors
    torch.manual_seed(0)
    name = case["name"]
    stem = os.path.join(out, name)
    n = case.get("n", N_EVAL)
    notes = {}
    if case["kind"] == "mlp":
        model = mlp()
    else:
        model = case["build"]()
    model.eval()
    args, in_names, out_names, dyn = inputs_of(case, model, n)
    ref_model = model
    if case.get("half"):
        # PyTorch 1.13 has no fp16 Linear or Conv on the CPU ("addmm_impl_cpu_" not implemented for
        # 'Half'), so model.half() cannot be traced here: an fp16 model is what a GPU export, or
        # onnxconverter-common's convert_float_to_float16 of the fp32 export, writes (to_fp16 below).
        # The reference is the fp32 module holding the same fp16-rounded weights.
        with torch.no_grad():
            for q in model.parameters():
                q.copy_(q.half().float())
    args_exp = args
    ex = args_exp
    if case.get("static_batch"):
        ex = tuple(a[:case["static_batch"]] for a in args_exp)
    export(case, model, ex, in_names, out_names, dyn, stem + ".onnx")
    if case.get("half"):
        to_fp16(stem + ".onnx")
    notes["export"] = "ok"
    if case.get("noname"):
        import onnx
        g = onnx.load(stem + ".onnx", load_external_data=False).graph
        inits = {t.name for t in g.initializer}
        in_names = [i.name for i in g.input if i.name not in inits]
        out_names = [o.name for o in g.output]
        notes["names"] = "%s -> %s" % (in_names, out_names)

    # eval set and golden
    golden = forward(ref_model, case, args)
    feed = {nm: a.numpy() for nm, a in zip(in_names, args)}
    ref = {"model": name + ".onnx", "inputs": in_names, "outputs": out_names[:1]}
    rng = np.random.default_rng(3)
    if case["kind"] in ("vision", "seq", "mlp"):
        labels = golden.argmax(1).astype(np.int64)
        labels[::3] = (labels[::3] + 1) % golden.shape[1]
        ref.update(task="classification", golden_accuracy=float((golden.argmax(1) == labels).mean()))
    elif case["kind"] == "seg":
        labels = golden.argmax(1).astype(np.int64)
        labels[:, ::5, :] = 255
        ref.update(task="segmentation")
    elif case["kind"] == "lm":
        ids = args[0].numpy()
        labels = np.full(ids.shape, -100, np.int64)
        labels[:, :-1] = ids[:, 1:]
        lg = golden.astype(np.float64)
        lse = np.log(np.exp(lg - lg.max(-1, keepdims=True)).sum(-1)) + lg.max(-1)
        m = labels != -100
        nll = (lse - np.take_along_axis(lg, np.where(m, labels, 0)[..., None], -1)[..., 0])[m]
        ref.update(task="language_model", golden_perplexity=float(np.exp(nll.mean())),
                   golden_token_accuracy=float((golden.argmax(-1) == labels)[m].mean()))
    elif case["kind"] == "dlrm":
        labels = (rng.random(n) < 0.5).astype(np.float32)
        labels[:2] = [0, 1]
        ref.update(task="binary", golden_auc=auc(golden, labels))
    feed["labels"] = labels
    write_safetensors(stem + ".eval.safetensors", feed)
    ref["golden"] = refjson.jrows(golden) if golden.ndim > 1 else [refjson.jnum(v) for v in golden]
    faults = []
    if not case.get("half"):
        params = dict(ref_model.named_parameters())
        params.update(dict(ref_model.named_buffers()))
        for oname, tname, idx, bit in param_faults(stem + ".onnx", ref_model, rng):
            old = params[tname].detach().reshape(-1)[idx].item()
            with refjson.param_flipped(params, tname, idx, bit):
                new = params[tname].detach().reshape(-1)[idx].item()
                y = forward(ref_model, case, args)
            faults.append({"param": oname, "torch_param": tname, "index": idx, "bit": bit,
                           "old": refjson.jnum(old), "new": refjson.jnum(new),
                           "outputs": refjson.jrows(y) if y.ndim > 1 else [[refjson.jnum(v)] for v in y]})
    ref["faults"] = faults
    notes["faults"] = len(faults)
    with open(stem + ".ref.json", "w") as f:
        json.dump(ref, f)
    return notes


# --------------------------------------------------------------------------
# running bitflip
# --------------------------------------------------------------------------

def run(cmd, timeout=600):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.time() - t0
    except subprocess.TimeoutExpired:
        return -1, "timeout", time.time() - t0


def tail(s, n=3):
    lines = [x for x in s.strip().splitlines() if x.strip()]
    return " / ".join(lines[-n:])[:300]


def check_case(case, out, bindir, trials):
    name = case["name"]
    stem = os.path.join(out, name)
    row = {"name": name, "opset": case["opset"]}
    rc, txt, _ = run([os.path.join(bindir, "bitflip"), "info", stem + ".onnx"])
    row["info"] = "ok" if rc == 0 else "FAIL: " + tail(txt)
    rc, txt, secs = run([os.path.join(bindir, "tests", "bitflip-conformance"), "--only", name, out])
    row["conformance"] = "ok" if rc == 0 else "FAIL: " + tail("\n".join(
        x for x in txt.splitlines() if "MISMATCH" in x or "FAIL" in x or "load" in x or "run" in x) or txt)
    # a flip to ~1e37 whose outputs differ only past 1e20, by a few 1e-4: the rounding of sums that
    # cancel (PyTorch's own outputs at another batch size differ as much); said as such
    mism = [x for x in txt.splitlines() if "MISMATCH: " in x and "got " in x]
    if rc != 0 and mism and all(abs(float(x.split("want ")[1].split()[0].rstrip(","))) > 1e20 for x in mism):
        row["conformance"] = "rounding: " + mism[0].split("MISMATCH: ")[1][:120]
    row["conformance_s"] = round(secs, 1)
    if case.get("half") and rc != 0:
        # the fp16 graph's own constants are fp16 (GELU's sqrt(2) is 1.4140625), PyTorch's fp32: the
        # golden outputs are compared again to 1e-3 of 1 + |ref| (bitflip computes what the file says)
        rc2, txt2, _ = run([os.path.join(bindir, "bitflip"), "eval", stem + ".onnx", stem + ".eval.safetensors",
                            "--outputs", stem + ".bitflip.json"])
        if rc2 == 0:
            got = np.array(json.load(open(stem + ".bitflip.json")), np.float64).reshape(-1)
            want = np.array(json.load(open(stem + ".ref.json"))["golden"], np.float64).reshape(-1)
            d = np.abs(got - want) / (1 + np.abs(want)) if got.shape == want.shape else np.array([np.inf])
            if d.max() <= 1e-3:
                row["conformance"] = "ok to %.1e (|diff| / (1 + |ref|): the graph's constants are fp16)" % d.max()
    row.update(campaign_step(stem, bindir, trials))
    return row


def campaign_step(stem, bindir, trials):
    stem = os.path.abspath(stem)
    spec = {"model": stem + ".onnx", "dataset": stem + ".eval.safetensors", "seed": 1, "trials": trials,
            "faults": {"model": "bitflip", "bits": 1}}
    with open(stem + ".spec.json", "w") as f:
        json.dump(spec, f)
    rc, txt, secs = run([os.path.join(bindir, "bitflip"), "run", "--local", stem + ".spec.json", "--threads", "1"])
    return {"campaign": "ok" if rc == 0 else "FAIL: " + tail(txt), "campaign_s": round(secs, 1),
            "campaign_out": tail(txt, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "user_exports"))
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--no-make", action="store_true", help="reuse the files in --out")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    rows = []
    for case in CASES:
        if only and case["name"] not in only:
            continue
        print("==", case["name"], file=sys.stderr, flush=True)
        row = {"name": case["name"], "opset": case["opset"]}
        if not a.no_make:
            try:
                row.update(make_case(case, a.out, a.bin))
            except Exception as e:  # noqa: BLE001
                row["export"] = "FAIL: " + (str(e).splitlines() or ["?"])[0][:200]
                traceback.print_exc()
                rows.append(row)
                continue
        row.update((check_det if case["kind"] == "det" else check_case)(case, a.out, a.bin, a.trials))
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    with open(os.path.join(a.out, "rows.json"), "w") as f:
        json.dump(rows, f, indent=1)
    bad = 0
    print("| case | opset | export | info | conformance | campaign |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cells = [r.get(k, "-") for k in ("export", "info", "conformance", "campaign")]
        bad += any(str(c).startswith("FAIL") for c in cells)
        print(f"| {r['name']} | {r['opset']} | " + " | ".join(str(c) for c in cells) + " |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
