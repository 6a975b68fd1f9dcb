/* What diffshared.c builds once per campaign and diffexec.c reads in every
 * trial (see diff.h). */
#ifndef BF_DIFF_IMPL_H
#define BF_DIFF_IMPL_H

#include "diff.h"

#define RANK_MAX_COLS 8        /* a rank-k update beyond this runs the product */

typedef struct emb_index {     /* an embedding table: row -> the batches reading it */
    int64_t rows, row_elems;
    int64_t *off;              /* rows + 1 */
    int32_t *batch;
} emb_index;

struct bf__dx_shared {
    const bf_model *m;
    bf__gcache *gc;
    int64_t samples, batch, n_batches, out_cols;
    const float *golden;
    int out_val;
    size_t n_steps;
    int *first_use, *last_use;   /* per value: first and last step reading it; -1 none */
    int *pc_off, *pc_step;       /* per parameter: the steps reading it */
    emb_index *emb;              /* per parameter; rows 0 when not an embedding table */
    int *colw[2];                /* per step, full and tail plan: Gemm column block, 0 none */
    int *roww[2];                /* per step, full and tail plan: Gemm row chunk, 0 none */
    size_t scratch_floats;
    int max_n;                   /* widest Gemm output */
};

/* A value computed at run time (a graph input or a step output). */
static inline int bf__runtime(const bf_plan *p, int v) { return v >= 0 && p->val_step[v] != BF__VAL_NOT_RUN; }

bf_status bf__dx_oom(bf_error *err);

#endif
