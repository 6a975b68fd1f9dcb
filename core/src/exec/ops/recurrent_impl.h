/* Shared by recurrent.c and recurrent_step.c (see its opening comment). */
#ifndef BF_RECURRENT_IMPL_H
#define BF_RECURRENT_IMPL_H

#include <stdint.h>

/* Floats of the panels bf__rnn_pack writes for an n x k matrix. */
int64_t bf__rnn_panels_size(int64_t n, int64_t k);
/* The transpose of r (n rows of k) as 16-column panels of k rows each,
 * zero past n: the layout bf__sgemm reads in place as B. */
void bf__rnn_pack(const float *r, int64_t n, int64_t k, float *dst);
/* y (m x n, row stride ldy) = h (m x k, rows of k) times r^T (r: n x k),
 * read from its panels (bf__rnn_pack), added onto y when accumulate:
 * bf__sgemm(0, 1, ..., r, ...)'s bits, on the product's `level` (chosen
 * when the plan was built: a step's small products do not read
 * BITFLIP_SIMD each). */
void bf__rnn_product(int level, const float *h, int m, int k, const float *r, const float *panels, int n,
                     int accumulate, float *y, int ldy);
/* One row of one LSTM step with the default activations and no clip,
 * peepholes or input_forget: s and sx the recurrent and input products
 * without bias (s is overwritten with the gates), rb and wb the biases
 * (4 x H each); h and c updated; level (sgemm.h's BF_SGEMM_*) picks the
 * copy: AVX-512's 16 lanes, AVX2's 8 or the plain one, the same bits. */
void bf__lstm_cell(int level, int64_t H, float *s, const float *rb, const float *sx, const float *wb, float *h,
                   float *c);
/* 1 when the CPU runs the AVX2 copies. */
int bf__rnn_avx2(void);

#endif
