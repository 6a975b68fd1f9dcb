/* Shared by chain mode's files (diffchain.c says what chain mode is):
 * diffchain_setup.c finds the chains and makes the buffers,
 * diffchain_link.c computes each link of a chain on a trial's changed
 * rows, diffchain.c runs a trial's chain and its witness. The rest of the
 * diff engine calls chain mode through diff_impl.h only. */
#ifndef BF_DIFFCHAIN_IMPL_H
#define BF_DIFFCHAIN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "diff/diff_impl.h"

#define BF__CHAIN_ROWS 64                  /* rows per exact product */
#define BF__CHAIN_MAX_FLOATS (1 << 24)     /* per buffer: the eval set times the widest value */
#define BF__COLUMN_COPY_FLOATS (1 << 22)   /* column-major copies of chain-start Gemms' values, in all */
#define BF__WITNESSES 3                    /* samples tried exactly before the whole chain is */
#define BF__UPDATE_MAX_COLS 64             /* a Gemm input changed in more columns: exact rows */
/* A sample whose outputs an update moved by this much (relative) is all
 * but sure to move when computed exactly (an update rounds by a few ulps
 * of the terms): the witness scan takes the first such one instead of
 * ranking every changed sample. Should it not move after all, the other
 * candidates, then the exact rerun, still decide. */
#define BF__WITNESS_CLEAR 0x1p-14

/* The changed rows of a value: rows ascending, each with its `ncol` changed
 * columns col[] (the others golden), or its whole row (ncol 0). */
typedef struct bf__cval {
    int64_t n;
    int64_t *row;
    float *v;
    int ncol;
    int *col;                    /* ascending */
    int width;
} bf__cval;

/* Golden row r of value v (width floats). The cache keeps a value's batches
 * one after the other, so its rows are contiguous over the whole eval set,
 * as a graph input's are in the dataset: chain_rows has row 0 of each. */
static inline const float *bf__chain_gold_row(const bf__dx_shared *sh, int v, int64_t r, int64_t width)
{
    return sh->chain_rows[v] + r * width;
}

/* One trial's (or one witness's) run down a chain. */
typedef struct bf__chain_pass {
    bf__dx *dx;
    const bf__dx_weight *w;      /* the trial's fault */
    float *v[3];                 /* three buffers of changed rows (a witness: two) */
    int64_t *row[3];
    int *col[3];
    int exact;                   /* no updates: every step computed exactly */
    int approx;                  /* an update was used */
} bf__chain_pass;

/* diffchain_link.c: the chain's first link, the corrupted step. Gemm step
 * k's output column j (kk: the row of B that changed; -1 for C) or Conv
 * step k's changed channel, for every sample (only < 0) or sample `only`,
 * into x. *relu_done: the ReLU that reads the Gemm's column was applied
 * too. */
void bf__chain_faulty_column(bf__chain_pass *ps, size_t k, int j, int kk, int64_t only, bf__cval *x,
                             int *relu_done);
void bf__chain_faulty_conv(bf__chain_pass *ps, size_t k, int64_t only, bf__cval *x);
/* diffchain_link.c: link i of a chain on the changed rows x: 1 if its
 * output went to y, 0 if it stayed in x. */
int bf__chain_link(bf__chain_pass *ps, int i, bf__cval *x, bf__cval *y);
/* diffchain_link.c: linear segment L from Gemm link i (difflinear.c) on x's
 * changed rows: the rows it takes into y, the others left in x. */
void bf__chain_linear_link(bf__chain_pass *ps, const bf__lin *L, int i, bf__cval *x, bf__cval *y);
/* diffchain_link.c: row t of x as a whole input row of value v, into a. */
void bf__chain_input_row(const bf__dx_shared *sh, int v, const bf__cval *x, int64_t t, float *a);

#endif
