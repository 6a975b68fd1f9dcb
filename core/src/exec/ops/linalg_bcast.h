/* What linalg_conv_bcast.c (the schedule: row blocks, tiles, chunks of K,
 * the padding taps left out, the partial sums; and the AVX-512 blocks)
 * shares with linalg_conv_bcast8.c (the same blocks, epilogue and weight
 * packing on AVX2): the job both read, and the AVX2 half's entry points.
 * The two halves compute every output with the same chain and epilogue
 * (linalg_conv_bcast.c's head comment), so the same bits at either
 * level. */
#ifndef BF_LINALG_BCAST_H
#define BF_LINALG_BCAST_H

#include <stdint.h>

#include "linalg_window.h"

/* How far ahead (floats) the epilogue asks for the residual's and y's lines
 * of each channel it is on: 4 lines. Its 16 channel planes at a time are 32
 * streams (16 read, 16 written), more than the hardware's prefetchers
 * follow: the residual's loads (a value written a whole Conv earlier, in
 * memory) took 41% of bc_epi's samples and the stores another 16%. Hints
 * only, the same bits (a line past an array's end is never read: a
 * prefetch does not fault). resnet18 at batch 32 (docs/perf/conv/h33.md, h33-epi):
 * bc_epi's samples -28%, the pass's -1.1%; 128 and 256 measured the same */
#define BC_RESPF 64
#define BC_YPF 64

typedef struct bcast_job {
    const float *xp, *bias;
    const bf__act *act;      /* NULL: none; act->res laid out as y */
    float *y, *acc;
    const int32_t *off;      /* k term p's offset from a position's first float */
    const int32_t *pin;      /* position q's first float in the planes */
    const int32_t *pout;     /* position q's output index in channel 0 */
    int64_t kc, ksp, cg, osp;
    /* partial sums (op.h, bf__psum): the call's first position's
     * checkpoints, checkpoint k of row block r at k slab + r rstride,
     * taken after the input channels before ckat[k] (save); or the sums
     * of the channels before `from`, to resume from (load) */
    float *save;
    const int64_t *ckat;
    int64_t nck;
    const float *load;
    int64_t from, slab, rstride;
    /* the padding taps left out (bc_sched), where bf__conv_bcast found that
     * exact: the window, to tell each position's taps in the padding */
    int skip;
    const bf__window *win;
    int avx2;                /* the AVX2 half's blocks, epilogue and packing (else AVX-512's) */
    /* the AVX2 blocks' runs of one tap's channels: a channel's plane (floats
     * from one channel's input to the next's), the first k term of the last
     * block of 16 channels and that block's channels */
    int64_t plane, lastk, lastw;
    /* the positions a list (bf__cpos, the differential engine's), not every
     * position of the call's images in order: a position's own output row
     * and column then decide its padding taps (bc_plan_tile) and its
     * checkpoint row (bc_run); ipl: an image's output floats (m x osp), so
     * pout[q] / ipl is its image and pout[q] % ipl its place in the map */
    int sub;
    int64_t ipl;
} bcast_job;

#if defined(__x86_64__) && defined(__GNUC__)
/* linalg_conv_bcast8.c, called by bc_run as it calls its AVX-512 twins
 * (bc_dispatch, bc_dispatchm, bc_epi, bc_pack; the same layouts: sums
 * [q - t0][64]), but that a dispatch runs one slice of 16 channels: acc
 * its sums' first float, wb its weights [k][16] */
void bf__bc8_dispatch(const bcast_job *j, int np, const float *wb, const char *pf, const int32_t *rows, int64_t t0,
                      int64_t p0, int64_t p1, float *acc, int first);
void bf__bc8_dispatchm(const bcast_job *j, int np, const float *wb, const char *pf, const int32_t *rows, int64_t t0,
                       const int32_t *rg, int nrg, float *acc, int first);
void bf__bc8_epi(const bcast_job *j, int64_t r0, int nv, int64_t t0, int64_t t1);
void bf__bc8_pack(const bcast_job *j, const float *wt, int64_t nr, int64_t n, const int32_t *kmap, float *wb);
#endif

#endif
