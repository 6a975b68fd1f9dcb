"""The DRS zoo: DLRM, DCN-v2, DeepFM, Wide&Deep and FM over Criteo's 13 dense and 26
categorical features (PyTorch).

Every model takes dense float32 [B, 13] and sparse int64 [B, 26] (row per table) and
returns the click probability [B].  Tables are nn.Embedding (exported as Gather) named
by feature, `<part>.C1.weight` .. `<part>.C26.weight`, so a campaign selects one table
by its PyTorch name; Wide&Deep's wide part is one nn.EmbeddingBag over all 26 fields
(exported as a Loop that bitflip runs as bf.EmbeddingBag, docs/OPS.md), as in the
fixtures of tests/fixtures/make_real_models.py.  The MLP widths follow the papers'
Criteo configurations, narrowed so that training takes minutes on 2 cores: the tables,
not the MLPs, hold the parameters, as in production recommenders.
"""
import torch
from torch import nn

from criteo import DENSE, TABLE_NAMES


class Tables(nn.ModuleDict):
    """One nn.Embedding per categorical feature, named C1 .. C26; [B, 26] -> [B, 26, dim]."""

    def __init__(self, rows, dim):
        super().__init__({n: nn.Embedding(r, dim, sparse=True) for n, r in zip(TABLE_NAMES, rows)})
        for e in self.values():
            # DLRM's initialisation: U(-1/sqrt(rows), 1/sqrt(rows)); a row no training
            # sample reads stays near 0 and adds little to a score
            nn.init.uniform_(e.weight, -(e.num_embeddings ** -0.5), e.num_embeddings ** -0.5)

    def forward(self, sparse):
        return torch.stack([e(sparse[:, i]) for i, e in enumerate(self.values())], 1)


def mlp(sizes, last_act=True):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if last_act or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """Naumov et al.: bottom MLP on dense, pairwise dot products of the 27 vectors, top MLP."""

    def __init__(self, rows, dim=16):
        super().__init__()
        self.bot = mlp([DENSE, 128, 64, dim])
        self.emb = Tables(rows, dim)
        n = len(rows) + 1
        li, lj = torch.tril_indices(n, n, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.top = mlp([dim + n * (n - 1) // 2, 256, 64, 1], last_act=False)

    def forward(self, dense, sparse):
        x = self.bot(dense)
        t = torch.cat([x.unsqueeze(1), self.emb(sparse)], 1)
        z = torch.bmm(t, t.transpose(1, 2))
        return torch.sigmoid(self.top(torch.cat([x, z[:, self.li, self.lj]], 1))).squeeze(1)


class DCNv2(nn.Module):
    """Wang et al. (DCN-V2), parallel: full-rank cross layers x0 * (W x + b) + x beside a deep MLP."""

    def __init__(self, rows, dim=16, cross=2):
        super().__init__()
        self.emb = Tables(rows, dim)
        d = DENSE + dim * len(rows)
        self.cross = nn.ModuleList([nn.Linear(d, d) for _ in range(cross)])
        for c in self.cross:
            nn.init.zeros_(c.weight)   # start as the identity map; crossing is learned
        self.deep = mlp([d, 256, 128])
        self.out = nn.Linear(d + 128, 1)

    def forward(self, dense, sparse):
        x0 = torch.cat([dense, self.emb(sparse).flatten(1)], 1)
        x = x0
        for c in self.cross:
            x = x0 * c(x) + x
        return torch.sigmoid(self.out(torch.cat([x, self.deep(x0)], 1))).squeeze(1)


def fm_pairs(v):
    """Rendle's pairwise term 0.5 (|sum v|^2 - sum |v|^2) over fields: [B, F, k] -> [B]."""
    return 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1)


class FM(nn.Module):
    """Rendle's factorization machine: bias, linear terms (dense weights, a 1-wide table
    per field) and factorized pairwise interactions."""

    def __init__(self, rows, dim=16):
        super().__init__()
        self.first = Tables(rows, 1)
        self.second = Tables(rows, dim)
        self.dense_lin = nn.Linear(DENSE, 1)

    def forward(self, dense, sparse):
        z = self.dense_lin(dense).squeeze(1) + self.first(sparse).sum((1, 2)) + \
            fm_pairs(self.second(sparse))
        return torch.sigmoid(z)


class DeepFM(nn.Module):
    """Guo et al.: FM and a deep MLP sharing the second-order embeddings."""

    def __init__(self, rows, dim=16):
        super().__init__()
        self.first = Tables(rows, 1)
        self.second = Tables(rows, dim)
        self.dense_lin = nn.Linear(DENSE, 1)
        self.deep = mlp([DENSE + dim * len(rows), 256, 128, 1], last_act=False)

    def forward(self, dense, sparse):
        v = self.second(sparse)
        fm = self.dense_lin(dense).squeeze(1) + self.first(sparse).sum((1, 2)) + fm_pairs(v)
        deep = self.deep(torch.cat([dense, v.flatten(1)], 1)).squeeze(1)
        return torch.sigmoid(fm + deep)


class WideDeep(nn.Module):
    """Cheng et al.: a wide linear model (one weight per id of every field, one
    EmbeddingBag over the concatenated vocabularies) plus a deep MLP over embeddings."""

    def __init__(self, rows, dim=16):
        super().__init__()
        self.wide = nn.EmbeddingBag(sum(rows), 1, mode="sum", sparse=True)
        nn.init.zeros_(self.wide.weight)
        self.register_buffer("offs", torch.tensor([0] + list(rows[:-1])).cumsum(0), persistent=False)
        self.wide_dense = nn.Linear(DENSE, 1)
        self.emb = Tables(rows, dim)
        self.deep = mlp([DENSE + dim * len(rows), 256, 128, 1], last_act=False)

    def forward(self, dense, sparse):
        wide = self.wide(sparse + self.offs).squeeze(1) + self.wide_dense(dense).squeeze(1)
        deep = self.deep(torch.cat([dense, self.emb(sparse).flatten(1)], 1)).squeeze(1)
        return torch.sigmoid(wide + deep)


# SparseAdam's learning rate for each model's tables, by the name of the part that holds
# them ("emb", "first", "second", "wide"; any other part: DEFAULT_TABLE_LR).  One pass at
# 0.01 suits the models whose MLPs weigh what the tables return (DLRM, DCN-v2, Wide&Deep:
# golden AUC 0.79).  Where the tables' rows go straight into the logit, the 16-wide
# pairwise factors overfit the rows that few samples read: at 0.01 FM reached 0.750 and
# DeepFM 0.764 (a second pass made FM worse, 0.755), against the teacher's 0.819.  Slower
# factors fix it (measured 2026-11-26, 2M samples, cap 200,000; docs/STUDY.md).
DEFAULT_TABLE_LR = 0.01
TABLE_LR = {
    "fm": {"first": 0.01, "second": 0.001},
    "deepfm": {"first": 0.01, "second": 0.001},
}


def table_lr(name, part):
    """The tables' learning rate for model NAME's part PART (see TABLE_LR)."""
    return TABLE_LR.get(name, {}).get(part, DEFAULT_TABLE_LR)


ZOO = {"dlrm": DLRM, "dcn_v2": DCNv2, "deepfm": DeepFM, "wide_deep": WideDeep, "fm": FM}
