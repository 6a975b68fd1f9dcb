/* Shared by row mode's files (diffrows.c says what row mode is):
 * diffrows_step.c runs one step on a sub-plan's rows, diffrows_check.c
 * makes and checks the sub-plans, diffrows.c runs a batch's or a trial's
 * reached rows. The rest of the diff engine calls row mode through
 * diff_impl.h only. */
#ifndef BF_DIFFROWS_IMPL_H
#define BF_DIFFROWS_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "diff/diff_impl.h"

#define BF__CONCAT_MAX 16        /* inputs of a Concat that bf__rows_concat takes */

/* The axis that holds the sample in value v (-1: none). */
int bf__rows_axis(const bf_plan *full, const bf_plan *sub, int v);
/* Value v is the same tensor in sub-plan sp as in the batch's plan. */
int bf__rows_same_in_sub(const bf__dx *dx, const bf_plan *sp, int v);
/* Points sp's value v at the campaign's parameter-only copy (or the
 * worker's faulty view); 0 when v is no such value. */
int bf__rows_pv_point(bf__dx *dx, bf_plan *sp, int v);
/* The rows of batch b: the batch, or fewer in the last one. */
int64_t bf__rows_of(const bf__dx_shared *sh, int64_t b);
/* The golden rows of samples sel[0..n) into sp's value v; 0 when a golden
 * value is not at hand. */
int bf__rows_gather(bf__dx *dx, bf_plan *sp, int v, const int64_t *sel, int n, bf_error *err, bf_status *st);
/* Row i of v in sp equals the golden row of sample sel[i], every i < n. */
int bf__rows_golden(const bf__dx *dx, const bf_plan *sp, int v, const int64_t *sel, int n);
/* Step i as a Concat over golden rows with the changed inputs written
 * over them; 0 when it is no such Concat (nothing written). */
int bf__rows_concat(bf__dx *dx, bf_plan *sp, size_t i, const int64_t *sel, int r, bf_error *err, bf_status *st);
/* Runs step i on the sub-plan's rows (its inputs in place). */
bf_status bf__rows_run(bf__dx *dx, bf_plan *sp, int64_t b, const int64_t *sel, size_t i, bf_error *err);
/* The sub-plans made and checked on the golden model, once. */
bf_status bf__rows_ensure(bf__dx *dx, const bf__dx_weight *w, size_t n_w, bf_error *err);

/* A sample's slice of a value is a few dozen bytes: copied and compared
 * inline, in 16-byte pieces, rather than by a libc call each (row mode
 * makes thousands a trial). Larger ones go to libc. */
static inline void bf__rows_copy(void *dst, const void *src, size_t n)
{
    if (n > 256) {
        memcpy(dst, src, n);
        return;
    }
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (; n >= 16; n -= 16, d += 16, s += 16) memcpy(d, s, 16);
    for (; n >= 4; n -= 4, d += 4, s += 4) memcpy(d, s, 4);
    for (; n > 0; n--) *d++ = *s++;
}

static inline int bf__rows_same(const void *a, const void *b, size_t n)
{
    if (n > 256) return memcmp(a, b, n) == 0;
    const unsigned char *x = a, *y = b;
    uint64_t diff = 0;
    /* a cache line at a time, stopping at the first that differs: the
     * golden side is rarely in cache, and a changed row differs early */
    for (; n >= 64; n -= 64, x += 64, y += 64) {
        for (int q = 0; q < 64; q += 8) {
            uint64_t u, v;
            memcpy(&u, x + q, 8);
            memcpy(&v, y + q, 8);
            diff |= u ^ v;
        }
        if (diff) return 0;
    }
    for (; n >= 8; n -= 8, x += 8, y += 8) {
        uint64_t u, v;
        memcpy(&u, x, 8);
        memcpy(&v, y, 8);
        diff |= u ^ v;
    }
    for (; n > 0; n--) diff |= (uint64_t)(*x++ ^ *y++);
    return diff == 0;
}


#endif
