/* The project's own single-precision matrix product, used by Gemm and
 * MatMul in place of BLAS.
 *
 * Why not BLAS: a fault campaign recomputes parts of a product (one row,
 * one column, a few rows gathered from a batch) and must get the very bits
 * the whole product gave on the golden pass. BLAS kernels round an element
 * differently depending on where it falls in their tiling (OpenBLAS
 * 0.3.21's Zen kernels reproduce a lone row at about half the positions of
 * a 64-row product), so every partial recomputation had to be verified
 * first, and most were refused. Here each element is a fixed function of
 * its row of op(A) and its column of op(B), whatever the shapes, strides,
 * blocking or CPU path: the plain in-order chain of fused multiply-adds,
 *
 *   s = 0;  for p = 0 .. K-1:  s = fma(a[p], b[p], s)
 *   y = accumulate ? fma(alpha, s, y) : alpha * s
 *
 * which is also the order BLAS microkernels (and so PyTorch's CPU Linear)
 * use within a block of K: under a fault that makes huge terms cancel,
 * results then stay close to PyTorch's.
 *
 * bf__sgemm_ref computes exactly that with scalar fmaf; bf__sgemm is the
 * same with AVX-512 or AVX2 when the CPU has it, and the reference otherwise. The
 * CPU paths differ in speed only; tests force each one with
 * bf__sgemm_level, and the Conv op takes the one bf__sgemm_best names when
 * its plan is built, which the environment variable BITFLIP_SIMD (ref,
 * avx2, avx512) lowers. */
#ifndef BF_SGEMM_H
#define BF_SGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "exec/op.h"

/* Y (m x n, row stride ldy) = alpha * op(A) op(B) (+ Y if accumulate),
 * row-major. op(A) is m x k: A is m x k (lda) or, transposed, k x m. op(B)
 * is k x n: B is k x n (ldb) or, transposed, n x k. */
void bf__sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
               int ldb, int accumulate, float *y, int ldy);
void bf__sgemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                   const float *b, int ldb, int accumulate, float *y, int ldy);
/* acc[r * cols + c] = fma(w[p], x[off[p] + r * ldx + c], acc[...]) for
 * p = 0 .. k-1 in order: the chain of a product whose B rows are windows
 * of x (a convolution's taps over zero-padded planes, computed without
 * writing the column matrix out), with the bits bf__sgemm gives the same
 * chain. */
void bf__fma_windows(int level, const float *w, const int64_t *off, int k, const float *x, int rows, int cols,
                     int64_t ldx, float *acc);
/* 1 when bf__sgemm runs the AVX2 kernel (or better): this CPU has it and
 * BITFLIP_SIMD does not ask for the reference (base/simd.h). */
int bf__sgemm_simd(void);

/* CPU paths, in order: the scalar reference, the 8-lane kernel and the
 * 16-lane one (base/simd.h's levels). */
enum { BF_SGEMM_REF, BF_SGEMM_AVX2, BF_SGEMM_AVX512 };
/* The highest path this CPU runs, lowered by BITFLIP_SIMD (base/simd.h):
 * AVX-512 or AVX2 where the CPU has it, lower if BITFLIP_SIMD asks. Reads
 * the environment: the Conv op asks once, when a plan is built. */
int bf__sgemm_best(void);
/* bf__sgemm through `level`'s kernel, or the best this CPU has below it
 * (bf__sgemm itself takes bf__sgemm_best's level). */
void bf__sgemm_level(int level, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, int accumulate, float *y, int ldy);

/* A product over many rows whose op(B) would be packed panel by panel
 * (B transposed, deeper than 256, or rows more than 1024 floats apart: a
 * transformer's weights) can have op(B) packed whole first, read once in
 * order (a row of B at a time; B transposed: 16 of its rows at a time),
 * into the caller's work: k-major panels of 16 columns, the last one
 * zero-padded, the same panels the kernel packs one by one otherwise. Per
 * panel, packing reads k rows of B 4 KiB or more apart, and with B out of
 * cache (the weights of a layer, read once a pass) each was a miss the
 * prefetchers do not follow across pages: 5.6% of a ViT-S/16 pass
 * (docs/BENCHMARKS.md, "ViT-S/16 against ONNX Runtime"). Only the order in
 * which memory is read changes, never an element's chain.
 * bf__sgemm_work_floats: the floats of work such a product takes (0: it
 * packs nothing, or more than BF_SGEMM_WORK_MAX floats, and takes none);
 * bf__sgemm_work: bf__sgemm_level with that work (NULL: none), then act
 * (NULL: none; op.h's bf__act without hswish) on each element while its
 * block is in registers, after the accumulate: cbias, res, lo and hi, map,
 * as bf__sgemm_colepi and bf__sgemm_bias order them (a Gemm's fused Relu
 * or Clip: the bits of the product followed by the activation). crow (NULL:
 * none; only with accumulate): the n values accumulated onto instead of
 * y's own, the same for every row, y = fma(alpha, s, crow[j]) (a Gemm's C
 * row, beta 1), y then written, never read. */
#define BF_SGEMM_WORK_MAX (1 << 20)   /* 4 MiB of floats: a ViT-S/16 MLP weight is 2.25 MiB */
size_t bf__sgemm_work_floats(int m, int n, int k, int trans_b, int ldb);
void bf__sgemm_work(int level, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                    int ldb, int accumulate, float *y, int ldy, float *work, const bf__act *act,
                    const float *crow);
/* bf__sgemm_work with op(B) already packed whole (NULL: as bf__sgemm_work),
 * as bf__sgemm_pack packs it, by a caller that keeps the panels between
 * products: a plan's golden weight (exec/wpack.h). b and ldb still say
 * where B is: a CPU path without the kernel computes from them. */
/* The largest op(B), in floats, a Gemm takes packed once from the model
 * where it is not packed whole into the scratch (B transposed over one or
 * two blocks of rows, or past BF_SGEMM_WORK_MAX): mobilenet_v2's and
 * resnet's classifiers at a small batch (1000 x 1280, 1.3 M floats),
 * whose B the kernel repacked panel by panel at every call. 16 MiB. */
#define BF_SGEMM_PACK_MAX (1 << 22)
void bf__sgemm_prepacked(int level, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, int accumulate, float *y, int ldy, float *work, const float *packed,
                         const bf__act *act, const float *crow);
/* op(B) (n columns, k deep) packed whole into out, k x 16 floats a panel of
 * 16 columns (the last zero-padded: bf__sgemm_pack_floats), the panels the
 * kernel packs at every call otherwise, the same floats. 0, out untouched,
 * where this CPU has no kernel (the products then never read it). */
int bf__sgemm_pack(int trans_b, int n, int k, const float *b, int ldb, float *out);
static inline size_t bf__sgemm_pack_floats(int n, int k) { return (size_t)k * (size_t)((n + 15) / 16) * 16; }

/* ATen's bmm_out_or_baddbmm_ (1.13): contraction x rows x columns below
 * this runs baddbmm_cpu_kernel's plain loop, else BLAS per matrix (Debian's
 * torch has no MKL batch gemm). MatMul (linalg.c) and Einsum (nn_einsum.c)
 * follow it. */
#define BF_BMM_PLAIN_MAX 400

/* Y (m x n, row stride ldy) = A B, row-major, each element the in-order
 * chain s = s + (float)(a[p] * b[p]) from 0, never fused: PyTorch's small
 * bmm (matmul_plain.c says when and why). level: base/simd.h's. */
void bf__smatmul_plain(int level, int m, int n, int k, const float *a, int lda, const float *b, int ldb, float *y,
                       int ldy);
/* s plus the k products a[p * sa] * b[p * sb] in order, each rounded, then
 * added (the loop above, one element, strided operands). */
float bf__sdot_plain(int64_t k, const float *a, int64_t sa, const float *b, int64_t sb, float s);

/* panel[p * 16 + j] = op(B)[p][j0 + j] for p < k, j < nr, and 0 for
 * nr <= j < 16: one k-major panel of op(B)'s columns j0 .. j0 + nr. */
typedef void (*bf__pack_fn)(const void *ctx, int j0, int nr, int k, float *panel);

/* Where op(B) comes from: a matrix (b, ldb, transposed or not), or, when
 * pack is set, the packer's panels (a convolution's windows, gathered
 * straight from its input instead of from a column matrix). */
typedef struct bf__gemm_b {
    const float *b;
    int ldb, trans;
    bf__pack_fn pack;
    const void *ctx;
    const float *packed;    /* set: op(B) packed whole, panel q at packed + q * k * 16 (sgemm.c) */
} bf__gemm_b;

/* Y = A B with bias[i] added to row i while the block is in registers:
 * y = (1 * s) + bias[i], the bits of the product followed by the addition,
 * then, if act is set, a residual Add if act->res is set (op.h: r + y or
 * y + r with r = act->res[i * ldy + j], the Add's operand order, an Add of
 * two NaNs keeping its A's), then the activation (op.h, bf__act_apply).
 * B plain (k x n, ldb). */
void bf__sgemm_bias(int level, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                    const float *bias, const bf__act *act, float *y, int ldy);
/* Y = A B (B plain, k x n, ldb) with a MatMul's fused steps while each
 * block is in registers or L1 (op.h, bf__act: act->cbias, cbias_a, res,
 * res_a, map): y = 1 * s, then the bias Add cbias[j] + y (cbias_a) or
 * y + cbias[j], rounded, an Add of two NaNs keeping its A's as the
 * residual's does, then the residual Add of res (laid out as y) the same
 * way, then act's lo and hi, then act->map over the block's rows just
 * stored (the Gelu step's kernel). Each element's product is its in-order chain, and
 * each later operation the step's own on the same float, so the bits are
 * the steps' one by one. work: as bf__sgemm_work's (NULL: none); packed:
 * as bf__sgemm_prepacked's. */
void bf__sgemm_colepi(int level, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                      const bf__act *act, float *y, int ldy, float *work, const float *packed);
/* Y = A op(B) + bias as bf__sgemm_bias, op(B)'s panels from `pack` (bias
 * may be NULL: nothing added; act NULL: no activation). 0, with y untouched, when this CPU has no
 * kernel or a panel deeper than 1024 found no memory: the caller computes
 * the product another way (the bits are the same). */
int bf__sgemm_packed(int level, int m, int n, int k, const float *a, int lda, bf__pack_fn pack, const void *ctx,
                     const float *bias, const bf__act *act, float *y, int ldy);
/* bf__sgemm_packed with y's columns in segments of seg, each jump floats
 * past the one before: column c of row i at y[i * ldy + c + (c / seg) *
 * jump], and act->res laid out the same way. A Conv's 1x1 product over
 * several images side by side (linalg_conv_pointwise.c) stores each image's
 * columns straight into its own planes: ldy the map's positions, seg the
 * same, jump (M - 1) maps. The same bits as bf__sgemm_packed's then moved
 * (a panel whose columns cross a segment's end runs its block into a tile
 * and moves the pieces). 0, y untouched, as bf__sgemm_packed's, and also on
 * the AVX-512 block (its panel pairs store a row's 32 columns as one run):
 * the caller then moves them itself. */
int bf__sgemm_packed_planes(int level, int m, int n, int k, const float *a, int lda, bf__pack_fn pack, const void *ctx,
                            const float *bias, const bf__act *act, float *y, int ldy, int64_t seg, int64_t jump);
/* The deepest panel kept on the stack: up to this k, bf__sgemm_packed
 * allocates nothing and so fails only where the CPU has no AVX2. */
#define BF_SGEMM_KSTACK 1024

#endif
