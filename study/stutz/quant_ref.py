"""Fixed-point quantization and bit errors in numpy, written from Stutz et al.,
"Bit Error Robustness for Energy-Efficient DNN Accelerators" (MLSys 2021),
Section 4.1, independently of bitflip's C code (core/src/base/repr.c). The
tests compare bitflip against this; the study uses it to put the same
corrupted weights into PyTorch.

Per layer (or per output channel), m bits:

  symmetric ("int<m>"):   Delta = q_max / (2^(m-1) - 1), q_max = max |w| (or
                          w_max with weight clipping); q = round(w / Delta) in
                          [-(2^(m-1) - 1), 2^(m-1) - 1], stored as m-bit two's
                          complement; w~ = q * Delta.
  asymmetric ("uint<m>"): Delta = (q_max - q_min) / (2^m - 1), q_min = min w,
                          q_max = max w (or -w_max, w_max); u = round((w -
                          q_min) / Delta) in [0, 2^m - 1], an m-bit unsigned
                          integer; w~ = u * Delta + q_min.

round is round-half-to-even (np.round); everything in float32, as stored.
A random bit error flips each of the m stored bits with probability p.
"""
import numpy as np

F = np.float32


def parse(repr_name):
    """'int4' -> (4, False); 'uint3' -> (3, True)."""
    uns = repr_name.startswith("uint")
    m = int(repr_name[4:] if uns else repr_name[3:])
    assert 2 <= m <= 8, repr_name
    return m, uns


def params(w, repr_name, per_channel=False, w_max=0.0):
    """(scale, lo) per element, float32 arrays of w's shape."""
    m, uns = parse(repr_name)
    w = np.asarray(w, dtype=F)
    groups = w.reshape(w.shape[0] if per_channel and w.ndim > 0 else 1, -1)
    scale = np.empty(groups.shape[0], dtype=F)
    lo = np.zeros(groups.shape[0], dtype=F)
    for g, row in enumerate(groups):
        if w_max > 0:
            mn, mx, ab = F(-w_max), F(w_max), F(w_max)
        else:
            mn, mx, ab = row.min(), row.max(), np.abs(row).max()
        s = F(mx - mn) / F(2 ** m - 1) if uns else F(ab) / F(2 ** (m - 1) - 1)
        scale[g] = s if (np.isfinite(s) and s > 0) else F(1)
        lo[g] = mn if uns else F(0)
    per = groups.shape[1]
    return np.repeat(scale, per).reshape(w.shape), np.repeat(lo, per).reshape(w.shape)


def encode(w, scale, lo, repr_name):
    """The stored m-bit codes (uint32)."""
    m, uns = parse(repr_name)
    w = np.asarray(w, dtype=F)
    if uns:
        x = np.clip(((w - lo) / scale).astype(F), 0, 2 ** m - 1)
    else:
        qmax = 2 ** (m - 1) - 1
        x = np.clip((w / scale).astype(F), -qmax, qmax)
    q = np.round(x).astype(np.int64)
    return (q & (2 ** m - 1)).astype(np.uint32)


def decode(code, scale, lo, repr_name):
    m, uns = parse(repr_name)
    code = np.asarray(code, dtype=np.int64) & (2 ** m - 1)
    if uns:
        return (code.astype(F) * scale).astype(F) + lo
    q = np.where(code & (1 << (m - 1)), code - (1 << m), code)
    return q.astype(F) * scale


def quantize(w, repr_name, per_channel=False, w_max=0.0):
    s, lo = params(w, repr_name, per_channel, w_max)
    return decode(encode(w, s, lo, repr_name), s, lo, repr_name)


def apply_cells(code, kinds, m):
    """Per stored bit (codes' bits in memory order: element-major, bit 0
    first), kinds[j] = -1 healthy, 0 flip, 1 stuck-at-0, 2 stuck-at-1."""
    code = np.asarray(code, dtype=np.int64).copy()
    k = np.asarray(kinds).reshape(-1, m)
    for b in range(m):
        bit = 1 << b
        code = np.where(k[:, b] == 0, code ^ bit, code)
        code = np.where(k[:, b] == 1, code & ~bit, code)
        code = np.where(k[:, b] == 2, code | bit, code)
    return code.astype(np.uint32)
