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
 * same with AVX2 when the CPU has it, and the reference otherwise. */
#ifndef BF_SGEMM_H
#define BF_SGEMM_H

#include <stdint.h>

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
void bf__fma_windows(const float *w, const int64_t *off, int k, const float *x, int rows, int cols, int64_t ldx,
                     float *acc);
/* 1 when bf__sgemm runs the AVX2 kernel on this CPU. */
int bf__sgemm_simd(void);

#endif
