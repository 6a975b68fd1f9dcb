"""The DRS study end to end in Python (docs/PYTHON.md, docs/MITIGATIONS.md).

A DLRM-style recommendation model (embedding tables for the sparse features, a
bottom MLP for the dense ones, DLRM's dot interaction, a top MLP, a click
probability out) is trained for a few seconds on synthetic clicks drawn from a
known logistic model, so that its AUC means something. It is exported with
bitflip.export (names kept, checked against PyTorch), then a bit-error-rate sweep
over every weight runs with no protection, activation clipping, selective bit
protection (sign and exponent) and ABFT, paired on the same faults. Out come the
tables and drs_auc_vs_ber.png: AUC against the bit error rate per protection, with
95% bands, beside what each protection recovers.

    python3 examples/python/drs_study.py [--server URL]   # a few minutes on 2 cores

(bitflipd runs paired mitigation comparisons locally only for now, so --server
runs the unprotected sweep there and the comparison here.)
"""
import argparse

import torch
from torch import nn

import bitflip

TABLES = [1000, 400, 200, 50]     # rows of each embedding table
DIM = 8                           # embedding width = bottom MLP output
DENSE = 13                        # dense features, as in the Criteo data DLRM was made for


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.ModuleList(nn.Embedding(n, DIM) for n in TABLES)
        self.bot = nn.Sequential(nn.Linear(DENSE, 32), nn.ReLU(), nn.Linear(32, DIM), nn.ReLU())
        n = len(TABLES) + 1
        self.top = nn.Sequential(nn.Linear(DIM + n * n, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, dense, sparse):
        x = self.bot(dense)
        t = torch.stack([x] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], dim=1)   # [B, n, DIM]
        z = torch.bmm(t, t.transpose(1, 2)).flatten(1)                                    # every pair's dot
        return torch.sigmoid(self.top(torch.cat([x, z], dim=1))).squeeze(1)


def clicks(n, g, truth):
    """Synthetic impressions: a click is a coin with a logistic probability of the
    dense features and a per-id effect of each sparse feature."""
    dense = torch.randn(n, DENSE, generator=g)
    sparse = torch.stack([torch.randint(0, k, (n,), generator=g) for k in TABLES], dim=1)
    logit = dense @ truth["w"] + sum(truth["ids"][i][sparse[:, i]] for i in range(len(TABLES))) - 1.0
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return dense, sparse, y


def train(model, data, epochs=4):
    dense, sparse, y = data
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(epochs):
        for i in range(0, len(y), 256):
            opt.zero_grad()
            p = model(dense[i:i + 256], sparse[i:i + 256])
            nn.functional.binary_cross_entropy(p, y[i:i + 256]).backward()
            opt.step()
    model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", help="also run the unprotected sweep on this bitflipd")
    ap.add_argument("--token", help="its bearer token")
    ap.add_argument("--repeats", type=int, default=30, help="draws per bit error rate (default 30)")
    ap.add_argument("--samples", type=int, default=2048, help="eval samples (default 2048)")
    args = ap.parse_args()

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    truth = {"w": torch.randn(DENSE, generator=g) * 0.5,
             "ids": [torch.randn(k, generator=g) for k in TABLES]}
    model = DLRM()
    train(model, clicks(20000, g, truth))
    dense, sparse, y = clicks(args.samples, g, truth)
    bitflip.export(model, (dense[:1], sparse[:1]), "dlrm.onnx", input_names=["dense", "sparse"],
                   output_names=["click"], eval_inputs=(dense, sparse), labels=y)

    spec = {"model": "dlrm.onnx", "dataset": "dlrm.eval.safetensors", "seed": 7,
            "faults": {"target": "weights", "model": "ber", "rates": [1e-6, 1e-5, 1e-4, 1e-3],
                       "repeats": args.repeats},
            "metrics": ["auc", "logloss"],
            "mitigations": ["clip", "sbp", "abft"]}
    result = bitflip.run(spec)
    print(f"golden AUC {result.golden['auc']:.4f} on {result.golden['samples']} samples")
    cols = ["name", "rate", "auc_mean", "auc_lo", "auc_hi", "critical_rate", "due_rate", "recovery"]
    print(result.to_pandas("mitigation_rates")[cols].to_string(index=False))
    print(result.to_pandas("mitigations")[["name", "recovery", "recovery_lo", "recovery_hi", "time_ratio",
                                            "storage_overhead"]].to_string(index=False))
    if args.server:
        unprotected = dict(spec)
        del unprotected["mitigations"]
        remote = bitflip.run(unprotected, server=args.server, token=args.token, progress=True)
        print("on the daemon, unprotected:")
        print(remote.to_pandas("rates")[["rate", "auc_mean", "auc_lo", "auc_hi"]].to_string(index=False))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    bitflip.plot.metric_vs_ber(result, "auc", ax=a)
    a.set_title("DLRM: AUC under weight bit errors, per protection")
    bitflip.plot.mitigation_recovery(result, ax=b)
    fig.tight_layout()
    fig.savefig("drs_auc_vs_ber.png", dpi=120)
    print("wrote drs_auc_vs_ber.png")


if __name__ == "__main__":
    main()
