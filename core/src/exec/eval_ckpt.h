/* The checkpoint part of an evaluator (eval_ckpt.c): a one-sample graph's
 * pass resuming each sample from the golden pass's checkpoints (exec/ckpt.h)
 * with the steps its faults cannot reach skipped, or recording them, and
 * what the passes re-ran. docs/ENGINE.md, "One image per call". */
#ifndef BF_EVAL_CKPT_H
#define BF_EVAL_CKPT_H

#include <stdatomic.h>

#include "bitflip/plan.h"
#include "exec/ckpt.h"
#include "exec/eval_ragged.h"

typedef struct bf__eval_ckpt {
    const bf__ckpt *ck;       /* what passes resume from (NULL: each sample in full) */
    bf__ckpt *rec;            /* what the next pass records (then detached) */
    bf__ckpt_trial *tr;       /* what the next pass's faults reach (cleared after it) */
    const float *out;         /* golden outputs [samples x out_cols] of a sample that ends early */
    const bf__ragged *gold;   /* an image-major sweep's: the golden per-sample outputs, kept so far (NULL: the
                               * evaluator's laid-out base, bf__evaluator_ragged_base) */
    atomic_llong work, early, skipped;   /* golden ns of the steps run; samples ended early; steps skipped */
    atomic_llong chan;                   /* steps run on one channel (ckpt_chan.c) */
    atomic_llong chan_fused, chan_stop;  /* of them, with their fused epilogue; ending the run golden */
    atomic_llong chan_follow;            /* steps after them following the channel on */
    atomic_llong tail_stop;              /* samples the detection tail's check ended (ckpt_tail.c) */
} bf__eval_ckpt;

/* Sets what the passes resume from (ck; usable 0 when the evaluator's
 * plans or outputs cannot take them: each sample then runs in full) or
 * record (rec), and the golden outputs. */
bf_status bf__eval_ckpt_set(bf__eval_ckpt *e, const bf__ckpt *ck, bf__ckpt *rec, const float *golden_out, int usable,
                            bf_error *err);
/* Sample s on plan (its inputs fed, the pass's faults set): recorded,
 * resumed, or run in full. *golden: the checkpoints showed the rest golden
 * (take e->out's and the golden per-sample outputs). */
bf_status bf__eval_ckpt_run(bf__eval_ckpt *e, bf_plan *plan, int64_t s, int *golden, bf_error *err);
/* 1 when the next sample's pass resumes past every step reading value v
 * (a graph input it then need not feed: SSDlite320's image, 1.2 MB an
 * image of each trial, read by its first step alone) */
int bf__eval_ckpt_skips_value(const bf__eval_ckpt *e, int64_t v);
/* after a pass: the faults' reach was that pass's */
void bf__eval_ckpt_pass_done(bf__eval_ckpt *e);
void bf__eval_ckpt_free(bf__eval_ckpt *e);

#endif
