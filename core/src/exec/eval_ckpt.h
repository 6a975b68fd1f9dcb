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

/* What passes ran from checkpoints, for --stats: the golden time (ns) of
 * the steps run, the samples ended early, the steps skipped (their faults
 * could not reach them); the Convs run on one output channel
 * (exec/ckpt_chan.c), of them those with their fused epilogue, those whose
 * channel (or a step following it on) came back golden and ended the run,
 * and the steps after them that followed the channel on; the samples the
 * detection tail's check ended (exec/ckpt_tail.c). One evaluator's
 * (bf__evaluator_ckpt_counts) or several summed field by field
 * (bf__ckpt_counts_add). */
typedef struct bf__ckpt_counts {
    int64_t work, early, skipped;
    int64_t chan, chan_fused, chan_stop, chan_follow;
    int64_t tail_stop;
} bf__ckpt_counts;
void bf__ckpt_counts_add(bf__ckpt_counts *to, const bf__ckpt_counts *from);

typedef struct bf__eval_ckpt {
    const bf__ckpt *ck;       /* what passes resume from (NULL: each sample in full) */
    bf__ckpt *rec;            /* what the next pass records (then detached) */
    bf__ckpt_trial *tr;       /* what the next pass's faults reach (cleared after it) */
    const float *out;         /* golden outputs [samples x out_cols] of a sample that ends early */
    const bf__ragged *gold;   /* an image-major sweep's: the golden per-sample outputs, kept so far (NULL: the
                               * evaluator's laid-out base, bf__evaluator_ragged_base) */
    bf__ragged *rag_to;       /* an image-major trial's run: its slots and rows take the outputs, not the */
    float *out_to;            /* evaluator's (NULL: the evaluator's; set and cleared by bf__evaluator_imaj) */
    float *tail_y;            /* the tail check's scores (bf__ckpt_tail_scratch), this evaluator's alone: */
    size_t tail_cap;          /* its thread's, whoever's trial state it runs */
    /* bf__ckpt_counts' fields, each added to by the evaluator's workers at once */
    atomic_llong work, early, skipped;
    atomic_llong chan, chan_fused, chan_stop, chan_follow;
    atomic_llong tail_stop;
} bf__eval_ckpt;
/* the counts so far; k added to them (another evaluator's, or a run's) */
bf__ckpt_counts bf__eval_ckpt_counts(const bf__eval_ckpt *e);
void bf__eval_ckpt_add(bf__eval_ckpt *e, const bf__ckpt_counts *k);

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
