"""ReduceSum and ReduceMean of float32 in PyTorch's summation order
(core/src/exec/ops/elementwise_reduce.c, torch_sum): torch.sum and
torch.mean accumulate in float in ATen's cascade (SumKernel.cpp), so with
values near +-3e38 a partial sum overflows to Inf even where the exact sum
is finite, and which outputs do depends on the order. Each case feeds such
values (plus Inf and NaN in some) in a shape that takes one of ATen's paths:
a contiguous row (vectorised with a scalar tail, below 8 scalar, long enough
for the cascade's levels), a middle axis over blocks of 32 columns, of 8,
scalar tail columns, fewer than 8 columns (4-column blocks), and runs of
adjacent axes. Reference: torch.sum / torch.mean of the same contiguous
tensor (each under 32768 elements: one thread, no split)."""
import numpy as np
import torch

from opcase import Case, rng


def huge(seed, *shape, frac=0.3, specials=False):
    r = rng(seed)
    x = r.uniform(-3, 3, size=shape).astype(np.float32)
    big = r.random(shape) < frac
    x[big] = r.uniform(-3.4e38, 3.4e38, size=int(big.sum())).astype(np.float32)
    if specials:
        flat = x.reshape(-1)
        flat[[3, 50, 77]] = [np.inf, -np.inf, np.nan]
    return x


def red(name, op, x, axes, keepdims=1, opset=13, axes_input=False):
    fn = torch.mean if op == "ReduceMean" else torch.sum
    attrs = {"keepdims": keepdims}
    inputs = {"x": x}
    if axes_input:
        inputs["axes"] = np.array(axes, np.int64)
    else:
        attrs["axes"] = list(axes)
    y = fn(torch.from_numpy(x), dim=tuple(axes), keepdim=bool(keepdims)).numpy()
    return Case(name, op, inputs, {"y": y}, attrs=attrs, opset=opset, consts={"axes"}, rtol=1e-5, atol=1e-6,
                check=opset <= 17)


def cases():
    # mean pooling of [batch, seq, dim]: the middle axis, 32-column blocks
    yield red("rorder_mean_seq_32cols", "ReduceMean", huge(1, 64, 12, 32), [1], keepdims=0)
    # 8-column blocks and scalar tail columns (20 = 8 + 8 + 4)
    yield red("rorder_mean_seq_20cols", "ReduceMean", huge(2, 8, 12, 20, specials=True), [-2])
    # fewer than 8 columns: 4-column blocks and a tail; 70 rows: cascade levels
    yield red("rorder_sum_seq_5cols", "ReduceSum", huge(3, 6, 70, 5), [1], opset=13, axes_input=True)
    yield red("rorder_sum_seq_40x70", "ReduceSum", huge(4, 2, 70, 44), [1], keepdims=0, opset=13, axes_input=True)
    # contiguous rows: vectors and a tail, fewer than 8, long rows (cascade levels)
    yield red("rorder_mean_row_37", "ReduceMean", huge(5, 16, 37, specials=True), [-1])
    yield red("rorder_sum_row_5", "ReduceSum", huge(6, 10, 5), [-1], opset=13, axes_input=True)
    yield red("rorder_mean_row_300", "ReduceMean", huge(7, 4, 300), [1], keepdims=0)
    yield red("rorder_sum_row_5000", "ReduceSum", huge(8, 2, 5000, frac=0.05), [-1], opset=13, axes_input=True)
    # a run of adjacent axes is one row; opset 18's axes input
    yield red("rorder_mean_last2", "ReduceMean", huge(9, 2, 3, 40), [1, 2], opset=18, axes_input=True)
    yield red("rorder_mean_mid2", "ReduceMean", huge(10, 3, 4, 5, 16), [1, 2], keepdims=0)
    # ordinary values: the same as before to float rounding
    yield red("rorder_mean_plain", "ReduceMean", rng(11).normal(size=(5, 7, 33)).astype(np.float32), [1])
