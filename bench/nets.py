"""Hand-written PyTorch modules equivalent to the benchmarked ONNX graphs.

Parameter names equal the ONNX initializer names, so a state_dict can be built straight from
the initializers (see state_dict_from_onnx) and loaded with strict=True.
"""
import torch
from torch import nn


class DigitsMLP(nn.Module):
    """digits_mlp.onnx: Gemm(64->128) Relu Gemm(128->64) Relu Gemm(64->10)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                 nn.Linear(64, 10))

    def forward(self, input):
        return self.net(input)


class DigitsCNN(nn.Module):
    """digits_cnn.onnx: Conv(1->8,3x3,pad1) Relu Conv(8->16,3x3,pad1) Relu MaxPool(2) Flatten Gemm."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, input):
        x = torch.relu(self.c1(input))
        x = torch.relu(self.c2(x))
        x = self.pool(x)
        return self.fc(torch.flatten(x, 1))


class DLRM(nn.Module):
    """DLRM as in dlrm_small.onnx: bottom MLP on the dense features, one embedding table per
    sparse feature (a bag of `sparse.shape[2]` indices, summed), pairwise dot interaction of
    the [bottom, emb_0..emb_{T-1}] vectors (strict lower triangle), top MLP, sigmoid.

    Inputs: dense [B, n_dense] float32, sparse [B, T, bag] int64. Output prob [B, 1].

    `interaction` picks how the pairwise dots are computed (same function either way):
    "matmul" (default; what the ONNX graphs hold: MatMul(T, T^T) then gather the lower
    triangle) or "pairs" (elementwise product of the 36 needed pairs, summed). The latter is a
    benchmark-only variant: Debian's PyTorch 1.13 has no MKL, and its CPU bmm then loops over
    the batch, calling BLAS once per sample, which makes "matmul" slow."""

    interaction = "matmul"

    def __init__(self, rows, dim=16, n_dense=13, bot_hidden=(64,), top_hidden=(64, 32)):
        super().__init__()
        self.config = dict(rows=list(rows), dim=dim, n_dense=n_dense,
                           bot_hidden=list(bot_hidden), top_hidden=list(top_hidden))
        self.emb = nn.ModuleList(nn.Embedding(r, dim) for r in rows)
        layers, d = [], n_dense
        for h in list(bot_hidden) + [dim]:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        self.bot = nn.Sequential(*layers)
        n = len(rows) + 1
        li, lj = torch.tril_indices(n, n, -1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        layers, d = [], dim + n * (n - 1) // 2
        for h in top_hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, 1))
        self.top = nn.Sequential(*layers)

    def forward(self, dense, sparse):
        x = self.bot(dense)
        embs = [self.emb[t](sparse[:, t]).sum(1) for t in range(len(self.emb))]
        t = torch.stack([x] + embs, dim=1)            # [B, T+1, dim]
        if self.interaction == "pairs":
            inter = (t[:, self.li] * t[:, self.lj]).sum(-1)  # [B, (T+1)T/2]
        else:
            z = torch.matmul(t, t.transpose(1, 2))    # [B, T+1, T+1]
            inter = z[:, self.li, self.lj]            # [B, (T+1)T/2]
        return torch.sigmoid(self.top(torch.cat([x, inter], dim=1)))


# The conformance models, by name: constructor and graph input names (in forward's order).
CONFORMANCE = {
    "digits_mlp": (DigitsMLP, ["input"]),
    "digits_cnn": (DigitsCNN, ["input"]),
    "dlrm_small": (lambda: DLRM(rows=[1000, 500, 300, 200, 100, 50, 20, 10], dim=16,
                                bot_hidden=(64,), top_hidden=(64, 32)), ["dense", "sparse"]),
}


def state_dict_from_onnx(path):
    """{initializer name: torch tensor} of an ONNX model file."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    return {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in m.graph.initializer}


def graph_input_names(path):
    import onnx
    m = onnx.load(path)
    inits = {t.name for t in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits]
