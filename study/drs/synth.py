"""A synthetic Criteo-shaped click log with a planted teacher (numpy only).

Why synthetic: Criteo's logs are 11 GB (Kaggle) to 1 TB (Terabyte) behind a licence
click-through, and this machine has no internet; a model trained on a log of the same
shape exercises the same fault surface (26 tables of Criteo's sizes, Zipf-skewed row
reads, 13 log-scaled dense features).  What differs from the real data is said in
docs/STUDY.md.

The log, for a seed and the tables' row counts rows[0..25]:

* ids: table t's row for a sample is rank k (0-based) with probability proportional to
  (k + 1)^-zipf over rows[t] ranks, then mapped through a fixed random permutation of
  the rows (hot rows are scattered over the table, as hashed ids are).
* dense: raw integer I_i = floor(exp(N(mu_i, sd_i))) - 1 (mu_i in [0, 4], sd_i in
  [0.5, 1.5]), missing (0) with probability 0.1; the feature is x_i = log(I_i + 1),
  DLRM's transform.
* the teacher's logit, for the sample's rows r_t:

      z = b0 + sum_i a_i (x_i - m_i) + sum_t w_t[r_t] + 0.5 (|sum_t v_t[r_t]|^2 - sum_t |v_t[r_t]|^2)

  with a_i ~ N(0, 0.3^2), m_i = mu_i (centring), w_t[r] ~ N(0, s_t^2) with s_t ~
  U(0.1, 0.6) per table (tables differ in how much they matter), v_t[r] ~ N(0, (0.25 /
  sqrt(k))^2 I_k) with k = 4 (pairwise interactions, the term FM, DeepFM and DLRM's dot
  products model), and everything times `scale`; b0 puts the click rate near Criteo
  Kaggle's 0.26.
* label ~ Bernoulli(sigmoid(z)).

`scale` sets the Bayes AUC (the teacher's own AUC on its labels); its default is chosen
so the teacher scores about 0.81 and trained students 0.78..0.80 (docs/STUDY.md).  The
teacher's parameters are saved (teacher.npz) so that tests recompute z independently.
"""
import numpy as np

from criteo import DENSE, TABLES

LATENT = 4
CTR = 0.26


class Teacher:
    def __init__(self, rows, seed, zipf=1.1, scale=1.0):
        self.rows = list(rows)
        self.zipf = float(zipf)
        self.scale = float(scale)
        rng = np.random.default_rng([seed, 0x7EAC])
        self.mu = rng.uniform(0.0, 4.0, DENSE)
        self.sd = rng.uniform(0.5, 1.5, DENSE)
        self.a = rng.normal(0.0, 0.3, DENSE)
        self.s = rng.uniform(0.1, 0.6, TABLES)
        self.w = [rng.normal(0.0, self.s[t], r).astype(np.float32) for t, r in enumerate(self.rows)]
        self.v = [rng.normal(0.0, 0.25 / np.sqrt(LATENT), (r, LATENT)).astype(np.float32)
                  for r in self.rows]
        self.perm = [rng.permutation(r) for r in self.rows]
        # the Zipf CDF over ranks, per table (float64: 10M-row tables keep their tail)
        self.cdf = []
        for r in self.rows:
            p = np.arange(1, r + 1, dtype=np.float64) ** -self.zipf
            c = np.cumsum(p)
            self.cdf.append(c / c[-1])
        self.b0 = 0.0
        # b0: the click rate near CTR on a calibration draw
        x, ids = self.draw_features(np.random.default_rng([seed, 0xB0]), 20000)
        z = self.logit(x, ids)
        lo, hi = -10.0, 10.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if np.mean(1 / (1 + np.exp(-(z + mid)))) < CTR:
                lo = mid
            else:
                hi = mid
        self.b0 = (lo + hi) / 2

    def draw_features(self, rng, n):
        raw = np.floor(np.exp(rng.normal(self.mu, self.sd, (n, DENSE)))) - 1
        raw[rng.random((n, DENSE)) < 0.1] = 0
        x = np.log(np.maximum(raw, 0) + 1).astype(np.float32)
        ids = np.empty((n, TABLES), dtype=np.int64)
        for t in range(TABLES):
            rank = np.searchsorted(self.cdf[t], rng.random(n), side="right")
            rank = np.minimum(rank, self.rows[t] - 1)
            ids[:, t] = self.perm[t][rank]
        return x, ids

    def logit(self, x, ids):
        z = (x.astype(np.float64) - self.mu) @ self.a
        vs = np.zeros((len(x), LATENT))
        vv = np.zeros(len(x))
        for t in range(TABLES):
            z += self.w[t][ids[:, t]]
            v = self.v[t][ids[:, t]].astype(np.float64)
            vs += v
            vv += (v * v).sum(1)
        z += 0.5 * ((vs * vs).sum(1) - vv)
        return self.scale * z + self.b0

    def draw(self, seed, n, chunk=262144):
        """(dense float32 [n,13], sparse int64 [n,26], labels float32 [n], logit [n])."""
        rng = np.random.default_rng([seed, 0x10C])
        xs, ids, ys, zs = [], [], [], []
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            x, i = self.draw_features(rng, m)
            z = self.logit(x, i)
            y = (rng.random(m) < 1 / (1 + np.exp(-z))).astype(np.float32)
            xs.append(x), ids.append(i), ys.append(y), zs.append(z)
        return np.concatenate(xs), np.concatenate(ids), np.concatenate(ys), np.concatenate(zs)

    def save(self, path):
        np.savez(path, rows=np.array(self.rows), zipf=self.zipf, scale=self.scale,
                 mu=self.mu, sd=self.sd, a=self.a, s=self.s, b0=self.b0,
                 w=np.concatenate(self.w), v=np.concatenate(self.v))


def auc(labels, scores):
    """AUC-ROC by the rank-sum (Mann-Whitney) formula, ties averaged."""
    labels = np.asarray(labels) > 0.5
    order = np.argsort(scores, kind="mergesort")
    s = np.asarray(scores)[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    r = np.empty(len(s))
    r[order] = ranks
    npos = labels.sum()
    nneg = len(labels) - npos
    return float((r[labels].sum() - npos * (npos + 1) / 2) / (npos * nneg))
