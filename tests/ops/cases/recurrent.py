"""LSTM, GRU and RNN.

Two kinds of case:
- graphs torch.onnx.export wrote for nn.LSTM / nn.GRU / nn.RNN modules (one
  ONNX node per layer, with the exporter's Shape/Gather/Expand/Slice/
  Transpose/Reshape/Squeeze/Concat glue), compared with the module's own
  outputs: what a user's model computes;
- single nodes built with onnx.helper, for what the exporter never writes
  (sequence_lens, direction = reverse, layout = 1, omitted B and initial
  states, GRU linear_before_reset = 0, LSTM clip, input_forget and
  peepholes, RNN activations mixed per direction). Where PyTorch has the
  computation, the reference is a torch module holding the same weights
  (ONNX's gate order mapped back to PyTorch's); where it has not, `onnx_ref`
  below, a float64 numpy rendition of the ONNX operator spec, which is also
  checked against torch on every case torch computes.
"""
import io
import warnings

import numpy as np
import onnx
import torch
from onnx import helper

from opcase import Case, randf, rng

RTOL, ATOL = 1e-4, 1e-5   # 20 steps of float32 recurrences, two tanh implementations

# ONNX gate blocks in PyTorch's order: LSTM torch (i, f, g, o) -> ONNX (i, o, f, c);
# GRU torch (r, z, n) -> ONNX (z, r, h)
TORCH_BLOCKS = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}


# The activations of Operators.md's RNN/GRU/LSTM section; (takes alpha, takes beta, default alpha, default
# beta), defaults "the same as of corresponding ONNX operators"
ACTS = {
    "sigmoid": (0, 0, None, None), "tanh": (0, 0, None, None), "relu": (0, 0, None, None),
    "affine": (1, 1, 1.0, 0.0), "leakyrelu": (1, 0, 0.01, None), "thresholdedrelu": (1, 0, 1.0, None),
    "scaledtanh": (1, 1, None, None), "hardsigmoid": (1, 1, 0.2, 0.5), "elu": (1, 0, 1.0, None),
    "softsign": (0, 0, None, None), "softplus": (0, 0, None, None),
}


def _act(name, x, alpha=None, beta=None):
    name = name.lower()
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "tanh":
        return np.tanh(x)
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "affine":
        return alpha * x + beta
    if name == "leakyrelu":
        return np.where(x >= 0, x, alpha * x)
    if name == "thresholdedrelu":
        return np.where(x >= alpha, x, 0.0)
    if name == "scaledtanh":
        return alpha * np.tanh(beta * x)
    if name == "hardsigmoid":
        return np.minimum(np.maximum(alpha * x + beta, 0.0), 1.0)
    if name == "elu":
        return np.where(x >= 0, x, alpha * (np.exp(x) - 1.0))
    if name == "softsign":
        return x / (1.0 + np.abs(x))
    if name == "softplus":
        return np.log1p(np.exp(x))
    raise ValueError(name)


def _alpha_beta(acts, alphas, betas):
    """Each activation that takes an alpha (beta) consumes the next value of
    activation_alpha (activation_beta), in the order of the activations."""
    alphas, betas, out = list(alphas or []), list(betas or []), []
    for a in acts:
        ta, tb, da, db = ACTS[a.lower()]
        al = alphas.pop(0) if ta and alphas else da
        be = betas.pop(0) if tb and betas else db
        out.append((al, be))
    return out


def onnx_ref(kind, X, W, R, B=None, lens=None, h0=None, c0=None, P=None, direction="forward", acts=None,
             clip=None, input_forget=0, lbr=0, layout=0, alphas=None, betas=None):
    """The ONNX spec's equations (Operators.md, LSTM/GRU/RNN), in float64.
    Returns Y, Y_h (and Y_c for LSTM) in the node's layout."""
    X = X.astype(np.float64)
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, N, _ = X.shape
    D = 2 if direction == "bidirectional" else 1
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    H = R.shape[2]
    na = {"LSTM": 3, "GRU": 2, "RNN": 1}[kind]
    default = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}[kind]
    acts = acts or default * D
    lens = np.full(N, T) if lens is None else lens
    B = np.zeros((D, 2 * G * H)) if B is None else B.astype(np.float64)
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    Y = np.zeros((T, D, N, H))
    Yh = np.zeros((D, N, H))
    Yc = np.zeros((D, N, H))
    ab = _alpha_beta(acts, alphas, betas)
    for d in range(D):
        f = lambda v: _act(acts[d * na], cl(v), *ab[d * na])  # noqa: E731
        g = (lambda v: _act(acts[d * na + 1], cl(v), *ab[d * na + 1])) if na > 1 else None
        hh = (lambda v: _act(acts[d * na + 2], v, *ab[d * na + 2])) if na > 2 else None
        Wd, Rd = W[d].astype(np.float64), R[d].astype(np.float64)
        Wb, Rb = B[d, :G * H], B[d, G * H:]
        rev = direction == "reverse" or d == 1
        for n in range(N):
            h = np.zeros(H) if h0 is None else h0[d, n].astype(np.float64)
            c = np.zeros(H) if c0 is None else c0[d, n].astype(np.float64)
            L = int(lens[n])
            steps = range(L - 1, -1, -1) if rev else range(L)
            for t in steps:
                x = X[t, n]
                if kind == "RNN":
                    h = f(x @ Wd.T + h @ Rd.T + Wb + Rb)
                elif kind == "GRU":
                    gx = x @ Wd.T + Wb
                    z = f(gx[:H] + h @ Rd[:H].T + Rb[:H])
                    r = f(gx[H:2 * H] + h @ Rd[H:2 * H].T + Rb[H:2 * H])
                    if lbr:
                        ht = g(gx[2 * H:] + r * (h @ Rd[2 * H:].T + Rb[2 * H:]))
                    else:
                        ht = g(gx[2 * H:] + (r * h) @ Rd[2 * H:].T + Rb[2 * H:])
                    h = (1 - z) * ht + z * h
                else:
                    a = x @ Wd.T + h @ Rd.T + Wb + Rb
                    pi, po, pf = (np.zeros(H),) * 3 if P is None else np.split(P[d].astype(np.float64), 3)
                    i = f(a[:H] + pi * c)
                    fg = 1 - i if input_forget else f(a[2 * H:3 * H] + pf * c)
                    c = fg * c + i * g(a[3 * H:])
                    o = f(a[H:2 * H] + po * c)
                    h = o * hh(c)
                Y[t, d, n] = h
            if L > 0:  # an empty sequence: zero final states (ONNX Runtime's choice; the spec is silent)
                Yh[d, n] = h
                Yc[d, n] = c
    out = [Y, Yh, Yc] if kind == "LSTM" else [Y, Yh]
    if layout:
        out = [out[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in out[1:]]
    return [o.astype(np.float32) for o in out]


def onnx_weights(mod, kind, layer=0):
    """W, R, B of one layer of a torch module, in ONNX's layout and gate order."""
    D = 2 if mod.bidirectional else 1
    H = mod.hidden_size
    order = TORCH_BLOCKS[kind]

    def reorder(a):
        blocks = np.split(a, len(order), axis=0)
        return np.concatenate([blocks[k] for k in order], axis=0)
    W, R, B = [], [], []
    for d in range(D):
        sfx = "_l%d%s" % (layer, "_reverse" if d else "")
        p = {k: v.detach().numpy() for k, v in mod.named_parameters()}
        W.append(reorder(p["weight_ih" + sfx]))
        R.append(reorder(p["weight_hh" + sfx]))
        if mod.bias:
            B.append(np.concatenate([reorder(p["bias_ih" + sfx]), reorder(p["bias_hh" + sfx])]))
    assert W[0].shape[0] == len(order) * H
    return np.stack(W), np.stack(R), (np.stack(B) if B else None)


def module(kind, inp, hid, seed, **kw):
    torch.manual_seed(seed)
    m = getattr(torch.nn, kind)(inp, hid, **kw).eval()
    # larger weights than PyTorch's 1/sqrt(hidden) init, so that gates saturate somewhere
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(2.0)
    return m


def export(mod, args, in_names, out_names, opset, dynamic=None):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(mod, tuple(torch.from_numpy(a) for a in args), f, opset_version=opset, input_names=in_names,
                          output_names=out_names, dynamic_axes=dynamic, do_constant_folding=True)
    return onnx.load_from_string(f.getvalue())


def run(mod, *args):
    with torch.no_grad():
        return [t.numpy() for t in _flat(mod(*[torch.from_numpy(a) for a in args]))]


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in _flat(x)]
    return [o]


def check_ref(name, got, want):
    for g, w in zip(got, want):
        if not np.allclose(g, w, rtol=1e-4, atol=1e-5):
            raise SystemExit("recurrent.py: %s: the numpy ONNX reference disagrees with torch (%g)"
                             % (name, np.max(np.abs(g - w))))


class Wrap(torch.nn.Module):
    """Module(x[, h0]) -> (y, h_n[, c_n]) with the states as a tuple for LSTM."""

    def __init__(self, m, kind):
        super().__init__()
        self.m, self.kind = m, kind

    def forward(self, x, *states):
        if not states:
            y, s = self.m(x)
        elif self.kind == "LSTM":
            y, s = self.m(x, (states[0], states[1]))
        else:
            y, s = self.m(x, states[0])
        return (y,) + (tuple(s) if self.kind == "LSTM" else (s,))


def exported_cases():
    specs = [
        # name, kind, input, hidden, seq, batch, opset, kwargs, initial states given, dynamic batch
        ("lstm_export_2layer_bidir_op13", "LSTM", 4, 5, 20, 3, 13, dict(num_layers=2, bidirectional=True), False),
        ("lstm_export_batchfirst_h0_op14", "LSTM", 3, 7, 20, 3, 14, dict(num_layers=2, batch_first=True), True),
        ("lstm_export_seq1_batch1_op17", "LSTM", 4, 6, 1, 1, 17, dict(bidirectional=True), True),
        ("lstm_export_batchfirst_bidir_op16", "LSTM", 5, 13, 7, 3, 16,
         dict(num_layers=2, bidirectional=True, batch_first=True), False),
        ("gru_export_2layer_op13", "GRU", 4, 6, 20, 3, 13, dict(num_layers=2), False),
        ("gru_export_bidir_batchfirst_h0_op15", "GRU", 3, 5, 20, 3, 15,
         dict(bidirectional=True, batch_first=True), True),
        ("gru_export_seq1_batch1_op13", "GRU", 2, 3, 1, 1, 13, dict(num_layers=2, bidirectional=True), False),
        ("rnn_export_tanh_2layer_op13", "RNN", 4, 6, 20, 3, 13, dict(num_layers=2), False),
        ("rnn_export_relu_bidir_h0_op17", "RNN", 3, 9, 20, 1, 17,
         dict(num_layers=2, bidirectional=True, nonlinearity="relu"), True),
    ]
    for k, (name, kind, inp, hid, seq, batch, opset, kw, with_h0, ) in enumerate(specs):
        mod = module(kind, inp, hid, 100 + k, **kw)
        bf = kw.get("batch_first", False)
        D = 2 if kw.get("bidirectional") else 1
        L = kw.get("num_layers", 1)
        x = randf(200 + k, *((batch, seq, inp) if bf else (seq, batch, inp)), lo=-2, hi=2)
        args, names = [x], ["x"]
        if with_h0:
            args.append(randf(300 + k, L * D, batch, hid))
            names.append("h0")
            if kind == "LSTM":
                args.append(randf(400 + k, L * D, batch, hid))
                names.append("c0")
        outs = ["y", "h_n"] + (["c_n"] if kind == "LSTM" else [])
        w = Wrap(mod, kind)
        want = run(w, *args)
        dyn = {"x": {0: "batch"}} if bf else None
        model = export(w, args, names, outs, opset, dyn)
        # the numpy spec reference agrees with torch on layer 0 (weights mapped through the gate order)
        W, R, B = onnx_weights(mod, kind)
        X0 = x.transpose(1, 0, 2) if bf else x
        h0 = args[1][:D] if with_h0 else None
        c0 = args[2][:D] if with_h0 and kind == "LSTM" else None
        acts = ["Relu"] * D if kw.get("nonlinearity") == "relu" else None
        ref = onnx_ref(kind, X0, W, R, B, h0=h0, c0=c0, acts=acts,
                       direction="bidirectional" if D == 2 else "forward", lbr=1)
        if L == 1:
            y = ref[0].transpose(0, 2, 1, 3).reshape(seq, batch, D * hid)
            check_ref(name, [y.transpose(1, 0, 2) if bf else y] + ref[1:], want)
        else:
            check_ref(name, [ref[1]], [want[1][:D]])
        yield Case(name, None, dict(zip(names, args)), dict(zip(outs, want)), opset=opset, model=model,
                   rtol=RTOL, atol=ATOL)

    # NaN and Inf in the input: the state of that sequence turns NaN from that step on
    mod = module("LSTM", 3, 6, 150)
    x = randf(250, 6, 3, 3)
    x[2, 1, 0] = np.nan
    x[4, 2, 1] = np.inf
    w = Wrap(mod, "LSTM")
    want = run(w, x)
    yield Case("lstm_export_nan_inf_op13", None, {"x": x}, dict(zip(["y", "h_n", "c_n"], want)), opset=13,
               model=export(w, [x], ["x"], ["y", "h_n", "c_n"], 13), rtol=RTOL, atol=ATOL)


def per_sequence_torch(mod, kind, x, lens, h0=None, c0=None, reverse_only=False):
    """Torch's outputs for each sequence cut to its length, zero-padded the
    ONNX way: Y [T, D, N, H], Y_h (and Y_c) at each sequence's last step.
    reverse_only: the module is a forward one run over the flipped sequence
    (direction = reverse)."""
    T, N, _ = x.shape
    H = mod.hidden_size
    D = 1 if reverse_only else (2 if mod.bidirectional else 1)
    Y = np.zeros((T, D, N, H), np.float32)
    Yh = np.zeros((D, N, H), np.float32)
    Yc = np.zeros((D, N, H), np.float32)
    for n in range(N):
        L = int(lens[n])
        xs = x[:L, n:n + 1]
        if reverse_only:
            xs = xs[::-1].copy()
        args = [xs]
        if h0 is not None:
            args.append(h0[:, n:n + 1].copy())
            if kind == "LSTM":
                args.append(c0[:, n:n + 1].copy())
        out = run(Wrap(mod, kind), *args)
        y = out[0][:, 0].reshape(L, D, H)
        if reverse_only:
            y = y[::-1]
        Y[:L, :, n] = y
        Yh[:, n] = out[1][:, 0]
        if kind == "LSTM":
            Yc[:, n] = out[2][:, 0]
    return [Y, Yh, Yc] if kind == "LSTM" else [Y, Yh]


def node(kind, name, inputs, outputs, **attrs):
    return helper.make_node(kind, inputs, outputs, name=name, **attrs)


def node_case(name, kind, feeds, node_inputs, outs, want, opset=13, ref="torch", **attrs):
    """One node; every input but X is an initializer (as in an exported graph)."""
    consts = [k for k in feeds if k != "x"]
    return Case(name, kind, feeds, dict(zip(outs, want)), attrs=attrs, opset=opset, ref=ref, rtol=RTOL, atol=ATOL,
                consts=consts, node_inputs=node_inputs)


def node_cases():
    # sequence_lens with both directions, initial states given; lengths 6, 2, 1, 4
    T, N, I, H = 6, 4, 3, 5
    lens = np.array([6, 2, 1, 4], np.int32)
    for kind in ("LSTM", "GRU", "RNN"):
        mod = module(kind, I, H, 500, bidirectional=True)
        W, R, B = onnx_weights(mod, kind)
        x = randf(501, T, N, I, lo=-2, hi=2)
        h0, c0 = randf(502, 2, N, H), randf(503, 2, N, H)
        want = per_sequence_torch(mod, kind, x, lens, h0, c0 if kind == "LSTM" else None)
        check_ref(kind + " seqlens", onnx_ref(kind, x, W, R, B, lens, h0, c0 if kind == "LSTM" else None,
                                              direction="bidirectional", lbr=1), want)
        feeds = {"x": x, "W": W, "R": R, "B": B, "lens": lens, "h0": h0}
        ins = ["x", "W", "R", "B", "lens", "h0"]
        outs = ["y", "y_h"]
        if kind == "LSTM":
            feeds["c0"] = c0
            ins.append("c0")
            outs.append("y_c")
        extra = {"linear_before_reset": 1} if kind == "GRU" else {}
        yield node_case(kind.lower() + "_seqlens_bidir", kind, feeds, ins, outs, want, direction="bidirectional",
                        hidden_size=H, **extra)

    # direction = reverse with sequence_lens, h0 omitted (torch: a forward module over the flipped sequence)
    for kind in ("LSTM", "GRU"):
        mod = module(kind, 4, 7, 510)
        W, R, B = onnx_weights(mod, kind)
        x = randf(511, 5, 3, 4, lo=-2, hi=2)
        lens = np.array([3, 5, 1], np.int32)
        want = per_sequence_torch(mod, kind, x, lens, reverse_only=True)
        outs = ["y", "y_h"] + (["y_c"] if kind == "LSTM" else [])
        extra = {"linear_before_reset": 1} if kind == "GRU" else {}
        yield node_case(kind.lower() + "_reverse_seqlens", kind, {"x": x, "W": W, "R": R, "B": B, "lens": lens},
                        ["x", "W", "R", "B", "lens"], outs, want, direction="reverse", **extra)

    # B, sequence_lens and initial states omitted, Y_h/Y_c not asked for; only Y
    mod = module("LSTM", 4, 6, 520, bias=False)
    W, R, _ = onnx_weights(mod, "LSTM")
    x = randf(521, 20, 3, 4, lo=-2, hi=2)
    want = run(Wrap(mod, "LSTM"), x)
    yield node_case("lstm_no_bias_no_states", "LSTM", {"x": x, "W": W, "R": R}, ["x", "W", "R"], ["y"],
                    [want[0].reshape(20, 3, 1, 6).transpose(0, 2, 1, 3)], hidden_size=6)
    # only Y_h asked for, Y omitted (empty output name)
    mod = module("GRU", 4, 6, 525)
    W, R, B = onnx_weights(mod, "GRU")
    x = randf(526, 7, 3, 4, lo=-2, hi=2)
    want = run(Wrap(mod, "GRU"), x)
    yield Case("gru_only_y_h", "GRU", {"x": x, "W": W, "R": R, "B": B}, {"y_h": want[1]},
               attrs={"linear_before_reset": 1, "hidden_size": 6}, rtol=RTOL, atol=ATOL, consts=["W", "R", "B"],
               nodes=[node("GRU", "gru_only_y_h", ["x", "W", "R", "B"], ["", "y_h"], linear_before_reset=1,
                           hidden_size=6)])

    # layout = 1 (opset 14): batch-major X, states and outputs; torch batch_first
    for kind, op in (("LSTM", 14), ("GRU", 17), ("RNN", 15)):
        mod = module(kind, 3, 5, 530, bidirectional=True, batch_first=True)
        W, R, B = onnx_weights(mod, kind)
        x = randf(531, 3, 20, 3, lo=-2, hi=2)
        h0 = randf(532, 2, 3, 5)
        c0 = randf(533, 2, 3, 5)
        args = [x, h0] + ([c0] if kind == "LSTM" else [])
        got = run(Wrap(mod, kind), *args)
        want = [got[0].reshape(3, 20, 2, 5)] + [s.transpose(1, 0, 2).copy() for s in got[1:]]
        feeds = {"x": x, "W": W, "R": R, "B": B, "h0": h0.transpose(1, 0, 2).copy()}
        ins = ["x", "W", "R", "B", "", "h0"]
        outs = ["y", "y_h"]
        if kind == "LSTM":
            feeds["c0"] = c0.transpose(1, 0, 2).copy()
            ins.append("c0")
            outs.append("y_c")
        check_ref(kind + " layout", onnx_ref(kind, x, W, R, B, None, feeds["h0"], feeds.get("c0"),
                                             direction="bidirectional", lbr=1, layout=1), want)
        extra = {"linear_before_reset": 1} if kind == "GRU" else {}
        yield node_case(kind.lower() + "_layout1_bidir_op%d" % op, kind, feeds, ins, outs, want, opset=op,
                        direction="bidirectional", layout=1, **extra)

    # ---- what PyTorch has no module for: the numpy spec reference ----
    g = rng(540)
    T, N, I, H = 20, 3, 4, 6
    x = randf(541, T, N, I, lo=-2, hi=2)

    def wrb(kind, D, seed):
        G = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
        return (randf(seed, D, G * H, I), randf(seed + 1, D, G * H, H), randf(seed + 2, D, 2 * G * H, lo=-0.5, hi=0.5))

    # GRU linear_before_reset = 0 (the ONNX default; PyTorch's GRU is 1), both directions, with h0
    W, R, B = wrb("GRU", 2, 550)
    h0 = randf(553, 2, N, H)
    want = onnx_ref("GRU", x, W, R, B, h0=h0, direction="bidirectional", lbr=0)
    yield node_case("gru_lbr0_bidir", "GRU", {"x": x, "W": W, "R": R, "B": B, "h0": h0},
                    ["x", "W", "R", "B", "", "h0"], ["y", "y_h"], want, ref="numpy", direction="bidirectional")
    # ... with sequence_lens too, one of them empty
    lens = np.array([20, 0, 1], np.int32)
    want = onnx_ref("GRU", x, W[:1], R[:1], B[:1], lens=lens, h0=h0[:1], lbr=0)
    yield node_case("gru_lbr0_seqlens", "GRU",
                    {"x": x, "W": W[:1], "R": R[:1], "B": B[:1], "lens": lens, "h0": h0[:1]},
                    ["x", "W", "R", "B", "lens", "h0"], ["y", "y_h"], want, ref="numpy", linear_before_reset=0)

    # LSTM clip (bounds every gate's input), input_forget (f = 1 - i), peepholes P
    W, R, B = wrb("LSTM", 2, 560)
    W *= 3  # gate inputs well past the clip
    want = onnx_ref("LSTM", x, W, R, B, direction="bidirectional", clip=1.5)
    yield node_case("lstm_clip_bidir", "LSTM", {"x": x, "W": W, "R": R, "B": B}, ["x", "W", "R", "B"],
                    ["y", "y_h", "y_c"], want, ref="numpy", direction="bidirectional", clip=1.5)
    W, R, B = wrb("LSTM", 1, 570)
    want = onnx_ref("LSTM", x, W, R, B, input_forget=1)
    yield node_case("lstm_input_forget", "LSTM", {"x": x, "W": W, "R": R, "B": B}, ["x", "W", "R", "B"],
                    ["y", "y_h", "y_c"], want, ref="numpy", input_forget=1)
    P = randf(575, 1, 3 * H)
    h0, c0 = randf(576, 1, N, H), randf(577, 1, N, H)
    lens = np.array([4, 20, 11], np.int32)
    want = onnx_ref("LSTM", x, W, R, B, lens=lens, h0=h0, c0=c0, P=P)
    yield node_case("lstm_peepholes_seqlens", "LSTM",
                    {"x": x, "W": W, "R": R, "B": B, "lens": lens, "h0": h0, "c0": c0, "P": P},
                    ["x", "W", "R", "B", "lens", "h0", "c0", "P"], ["y", "y_h", "y_c"], want, ref="numpy")
    # activations given explicitly, other than the defaults (LSTM: f = Relu is legal ONNX)
    acts = ["Sigmoid", "Relu", "Tanh"]
    want = onnx_ref("LSTM", x, W, R, B, acts=acts)
    yield node_case("lstm_activations_attr", "LSTM", {"x": x, "W": W, "R": R, "B": B}, ["x", "W", "R", "B"],
                    ["y", "y_h", "y_c"], want, ref="numpy", activations=acts)
    # RNN: Relu forward, Tanh reverse; int64 sequence_lens (ONNX says int32; accepted too)
    W, R, B = wrb("RNN", 2, 580)
    lens = np.array([7, 20, 3], np.int64)
    want = onnx_ref("RNN", x, W, R, B, lens=lens, direction="bidirectional", acts=["Relu", "Tanh"])
    yield node_case("rnn_relu_tanh_bidir_seqlens_i64", "RNN", {"x": x, "W": W, "R": R, "B": B, "lens": lens},
                    ["x", "W", "R", "B", "lens"], ["y", "y_h"], want, ref="numpy", direction="bidirectional",
                    activations=["Relu", "Tanh"])

    # the other activations ONNX lists, with activation_alpha / activation_beta consumed in order by
    # those that take them, and their operators' defaults once the lists run out
    W, R, B = wrb("LSTM", 2, 590)
    acts = ["HardSigmoid", "ScaledTanh", "Softsign", "Sigmoid", "Elu", "Softplus"]
    alphas, betas = [0.3, 1.7, 0.6], [0.45, 0.8]   # HardSigmoid, ScaledTanh, Elu; HardSigmoid, ScaledTanh
    want = onnx_ref("LSTM", x, W, R, B, direction="bidirectional", acts=acts, alphas=alphas, betas=betas)
    yield node_case("lstm_activations_alpha_beta", "LSTM", {"x": x, "W": W, "R": R, "B": B}, ["x", "W", "R", "B"],
                    ["y", "y_h", "y_c"], want, ref="numpy", direction="bidirectional", activations=acts,
                    activation_alpha=alphas, activation_beta=betas)
    W, R, B = wrb("GRU", 2, 595)
    acts = ["HardSigmoid", "LeakyRelu", "Sigmoid", "Elu"]     # every alpha and beta from the defaults
    want = onnx_ref("GRU", x, W, R, B, direction="bidirectional", acts=acts, lbr=1)
    yield node_case("gru_activations_defaults", "GRU", {"x": x, "W": W, "R": R, "B": B}, ["x", "W", "R", "B"],
                    ["y", "y_h"], want, ref="numpy", direction="bidirectional", activations=acts,
                    linear_before_reset=1)
    W, R, B = wrb("RNN", 2, 597)
    acts = ["Affine", "ThresholdedRelu"]
    want = onnx_ref("RNN", x, W * 0.5, R * 0.5, B, direction="bidirectional", acts=acts, alphas=[0.7, 0.2],
                    betas=[0.1])
    yield node_case("rnn_affine_thresholdedrelu", "RNN", {"x": x, "W": W * 0.5, "R": R * 0.5, "B": B},
                    ["x", "W", "R", "B"], ["y", "y_h"], want, ref="numpy", direction="bidirectional",
                    activations=acts, activation_alpha=[0.7, 0.2], activation_beta=[0.1])
    del g


def cases():
    yield from exported_cases()
    yield from node_cases()
