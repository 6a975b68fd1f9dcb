/* The outputs of a one-sample graph whose size is data (a detector's boxes,
 * labels and scores: K rows, K a different number per image), kept per
 * sample while a pass runs and laid end to end, in eval order, when it
 * ends (bf_eval_result.ragged). Used by eval.c only. */
#ifndef BF_EVAL_RAGGED_H
#define BF_EVAL_RAGGED_H

#include "bitflip/eval.h"

typedef struct bf__ragged {
    size_t n_out;
    int64_t samples;
    /* per (output k, sample s), at k * samples + s: its elements as float,
     * how many, room, and its rows (dim 0; 1 for a scalar). A pass's workers
     * each write the slots of their own samples only. */
    float **buf;
    int64_t *len, *cap, *rows;
    /* the laid-out result: per output its offsets [samples + 1] and data */
    bf_ragged_output *view;
    int64_t *offsets;         /* n_out x (samples + 1) */
    float **flat;
    int64_t *flat_cap;
} bf__ragged;

/* Tables for the model's graph outputs and `samples` samples; nothing is
 * allocated per sample yet. */
bf_status bf__ragged_init(bf__ragged *r, const bf_model *m, int64_t samples, bf_error *err);
void bf__ragged_free(bf__ragged *r);
/* Sample s's value of graph output k: its elements converted to float
 * (int64 class ids and bools exactly, integers past 2^24 rounded). Grows
 * the slot when the value is larger than any before it. */
bf_status bf__ragged_put(bf__ragged *r, size_t k, int64_t s, const bf_tensor *t, bf_error *err);
/* The pass's outputs laid out (r->view), after checking that each output's
 * rows have one length across the samples that have rows. */
bf_status bf__ragged_lay_out(bf__ragged *r, bf_error *err);
/* Copies another store's slot (sample s of every output) into this one:
 * for a pass that recomputes one sample and takes the others from a base. */
bf_status bf__ragged_copy_sample(bf__ragged *r, const bf_ragged_output *base, int64_t s, bf_error *err);
/* Sample s's slots of another store (not laid out) into this one's, as its
 * own put them: an image-major sweep's image that took the golden outputs. */
bf_status bf__ragged_copy_slot(bf__ragged *r, const bf__ragged *src, int64_t s, bf_error *err);



/* An owned copy of a pass's per-sample outputs (a campaign's golden ones,
 * a trial's held until its turn to be reported), reusing its room. */
typedef struct bf__ragcopy {
    size_t n;                 /* outputs */
    int64_t samples;
    bf_ragged_output *view;   /* n, pointing into off and data */
    int64_t *off;             /* n x (samples + 1) */
    float *data;              /* every output's elements end to end */
    size_t off_cap, data_cap, view_cap;
} bf__ragcopy;

bf_status bf__ragcopy_set(bf__ragcopy *c, const bf_ragged_output *src, size_t n, int64_t samples, bf_error *err);
void bf__ragcopy_free(bf__ragcopy *c);
/* 1: sample s has the same rows and the same bits in every output of a and
 * b (NaNs compared by their bits too). */
int bf__ragged_sample_same(const bf_ragged_output *a, const bf_ragged_output *b, size_t n, int64_t s);
/* 1: some output of sample s holds a NaN or an infinity. */
int bf__ragged_sample_nonfinite(const bf_ragged_output *a, size_t n, int64_t s);
#endif
