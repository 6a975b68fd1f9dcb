/* Checkpoints of a one-sample graph's golden pass: at a few step
 * boundaries ("cuts"), every value computed before the cut and read after
 * it, per sample. A trial whose faults first touch step `lo` restores the
 * last cut at or before lo and runs the plan from there; past the last step
 * a fault touches (`hi`), a cut whose values came back bit-identical to the
 * golden ones ends the sample (what follows is golden). The differential
 * engine of batched graphs (diff/) slices values by the batch and re-runs
 * steps of fixed shapes; a detector's graph takes one image per call and
 * ends in steps whose shapes are data, so it gets this instead: the steps a
 * trial runs are the plan's own, on the plan's own values, so its outputs
 * are the full run's bit for bit. docs/ENGINE.md, "One image per call". */
#ifndef BF_EXEC_CKPT_H
#define BF_EXEC_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/plan.h"

typedef struct bf__ckpt bf__ckpt;

/* Chooses the cuts of plan p (a one-sample plan of the model the trials
 * run; fusion and buffer sharing may differ between plans) for `samples`
 * samples within `budget` bytes, for about `trials` trials (a cut is
 * worth its recording only if they save more than it costs; 0: unknown,
 * as many as the budget holds): step_cost[i] is step i's golden time;
 * param_mass[q] and value_mass[v] (either may be NULL) the share of trials
 * whose faults land in parameter q or value v. Cuts lie at or before the
 * first dynamic step and never inside a Conv + activation pair. When no cut
 * fits, *out holds none (every run starts at step 0). */
struct bf__ckpt_trial;
typedef bf_status (*bf__ckpt_drawn)(void *user, const bf__ckpt *ck, struct bf__ckpt_trial *tr, bf_error *err);
/* What the campaign knows besides the costs; all zero (or opts NULL): the
 * defaults.
 * - drawn, user: when the campaign's trials are known before its golden
 *   pass, the store holds, of what the choice kept, only the values those
 *   trials put back (a skipped step's, a one-channel Conv's and the steps
 *   following its channel), so the golden pass records and pages in no
 *   more. drawn(user, ck, tr, err) runs each trial's begin, faults and end
 *   on tr; the runs of those trials are the same as with the whole store.
 *   Without memory for the marks, the whole store. NULL: the whole store.
 * - byte_s: a recorded byte priced at byte_s seconds instead of
 *   BF__CKPT_BYTE_SECONDS (ckpt_impl.h; <= 0: that): the campaign's choice
 *   where fresh pages measure dear (campaign_ckpt.c).
 * - huge: the checkpoints' block in 2 MiB pages (bf__ckpt_host_pages
 *   chose them; the same bytes either way).
 * - slots: blocks held, sample s's values in block s % slots (0: one a
 *   sample): an image-major sweep (campaign_imaj.c) records a block of
 *   images and runs every trial on them before the next, so a block an
 *   image of it (B a worker) serves; the cuts and the store are chosen as
 *   for every sample.
 * - slot_bytes: with slots > 0, the blocks held are m x slots for the
 *   largest m >= 1 whose blocks fit in slot_bytes (0: m = 1): an
 *   image-major sweep's blocks of m images a thread, chosen once a
 *   sample's bytes are known (bf__ckpt_slot_mult gives m back). */
typedef struct bf__ckpt_opts {
    bf__ckpt_drawn drawn;
    void *user;
    double byte_s;
    int huge;
    int64_t slots;
    uint64_t slot_bytes;
} bf__ckpt_opts;
bf_status bf__ckpt_create(const bf_plan *p, int64_t samples, int64_t trials, const double *step_cost,
                          const double *param_mass, const double *value_mass, size_t budget, const bf__ckpt_opts *opts,
                          bf__ckpt **out, bf_error *err);
/* m of bf__ckpt_opts.slot_bytes (1 when it was 0 or no slots were asked for) */
int64_t bf__ckpt_slot_mult(const bf__ckpt *ck);
/* the price the checkpoints were chosen at, seconds a byte */
double bf__ckpt_byte_price(const bf__ckpt *ck);
/* This host's pages and price for the checkpoints, from one measurement:
 * returns bf__pages_huge_cheaper (1: 2 MiB pages, where 4 KiB fresh pages
 * measure dear and 2 MiB ones cheap); *byte_s gets the price of a recorded
 * byte, BF__CKPT_BYTE_SECONDS_DEAR where 4 KiB fresh pages measure dearer
 * than BF__CKPT_DEAR_PAGES a byte (bf__pages_fresh_cost over 1 MiB), else
 * BF__CKPT_BYTE_SECONDS (ckpt_impl.h, which says why the pages do not move
 * it). */
int bf__ckpt_host_pages(double *byte_s);
/* The price of a recorded byte from a measurement of 4 KiB fresh pages
 * (bf_host_pages.small_cost, seconds a byte): as bf__ckpt_host_pages
 * prices its own measurement */
double bf__ckpt_price_for(double small_cost);
/* 1 when the checkpoints' block was asked for in 2 MiB pages */
int bf__ckpt_huge(const bf__ckpt *ck);
void bf__ckpt_free(bf__ckpt *ck);

size_t bf__ckpt_num_cuts(const bf__ckpt *ck);
/* the bytes the checkpoints hold (every sample) */
uint64_t bf__ckpt_bytes(const bf__ckpt *ck);
/* the share of a full run's golden time before each trial's starting cut,
 * weighted by mass (what the cuts are expected to save) */
double bf__ckpt_saved_share(const bf__ckpt *ck);

/* The first and last step reading parameter q (a weight fault's window),
 * or the step computing value v (a value fault's: -1 for a graph input).
 * *lo > *hi: nothing at the top level reads it (lo 0, hi the last step
 * then, so the run starts at 0 and never ends early). */
void bf__ckpt_param_steps(const bf__ckpt *ck, size_t q, int *lo, int *hi);
void bf__ckpt_value_step(const bf__ckpt *ck, int64_t v, int *lo, int *hi);

/* 1: plan p holds every cut's values in its arena with the checkpoints'
 * sizes (plans of one model and batch do; fusion or sharing options may
 * differ from the recording plan's), so runs on it may resume from them.
 * Checked once per plan, when an evaluator is given the checkpoints. */
int bf__ckpt_fits_plan(const bf__ckpt *ck, const bf_plan *p);
/* Sample s's golden run on plan p (its inputs fed), from step 0, saving
 * every cut's values: the campaign's golden pass. */
bf_status bf__ckpt_record(bf__ckpt *ck, bf_plan *p, int64_t s, bf_error *err);
/* What a trial's faults reach: made once per evaluator, set before each
 * pass (begin, each faulted parameter or value, end). A step none of whose
 * inputs depends on a fault computes its golden values: a run does not run
 * it, and puts back those of its values that a step it runs reads, from the
 * store (the golden pass kept them), or runs it when they were not kept.
 * Cleared (bf__ckpt_trial_clear): no window, every sample from step 0. */
typedef struct bf__ckpt_trial bf__ckpt_trial;
bf_status bf__ckpt_trial_new(const bf__ckpt *ck, bf__ckpt_trial **out, bf_error *err);
void bf__ckpt_trial_free(bf__ckpt_trial *tr);
void bf__ckpt_trial_clear(bf__ckpt_trial *tr);
void bf__ckpt_trial_begin(const bf__ckpt *ck, bf__ckpt_trial *tr);
void bf__ckpt_trial_param(const bf__ckpt *ck, bf__ckpt_trial *tr, size_t q);
void bf__ckpt_trial_value(const bf__ckpt *ck, bf__ckpt_trial *tr, int64_t v);
/* each faulted element of a weight fault (parameter q, element index),
 * between begin and end: a trial whose faults all lie in one output
 * channel of a Conv the checkpoints chose (ckpt_chan.c) recomputes only
 * that channel of it */
void bf__ckpt_trial_element(const bf__ckpt *ck, bf__ckpt_trial *tr, size_t q, int64_t index);
void bf__ckpt_trial_end(const bf__ckpt *ck, bf__ckpt_trial *tr);
/* the values the store keeps, their bytes over every sample */
size_t bf__ckpt_num_stored(const bf__ckpt *ck);
uint64_t bf__ckpt_store_bytes(const bf__ckpt *ck);

/* Sample s on plan p (its inputs fed, a trial's faults set, tr set for
 * them), from the last cut at or before the faults' first step (restored
 * first), skipping the steps they cannot reach, comparing at each cut past
 * their last step the values they reach with the golden ones: all equal,
 * the run stops and *golden is 1 (the sample's outputs are golden's; the
 * plan's outputs were not computed). p must fit (bf__ckpt_fits_plan). *work
 * gets the golden time of the steps run, in nanoseconds (for --stats: over
 * bf__ckpt_pass_ns, the share of a pass the sample re-ran), *skipped the
 * steps not run; chan[0] gets 1 if a Conv ran on one output channel alone
 * (ckpt_chan.c), chan[1] 1 if with its fused epilogue, chan[2] 1 if that
 * channel came back golden and ended the run (*golden then 1 too), chan[3]
 * the steps after it that followed the channel on (a map, a BatchNorm, a
 * depthwise Conv), chan[4] 1 if the detection tail's check (ckpt_tail.c)
 * ended the run (*golden then 1 too). tail_y: that check's scores,
 * bf__ckpt_tail_scratch(ck) floats of the caller's own (one a thread: tr,
 * only read here, may be run by several threads at once; NULL: no tail
 * check). */
bf_status bf__ckpt_run(const bf__ckpt *ck, const bf__ckpt_trial *tr, float *tail_y, bf_plan *p, int64_t s, int *golden,
                       int64_t *work, int64_t *skipped, int64_t chan[5], bf_error *err);
/* floats of bf__ckpt_run's tail_y (0: the graph has no detection tail) */
size_t bf__ckpt_tail_scratch(const bf__ckpt *ck);
/* Why the detection tail's early end (ckpt_tail.c) is off for this graph
 * (a sentence; NULL: it is on) */
const char *bf__ckpt_tail_off(const bf__ckpt *ck);
/* the golden time of a whole run of one sample, in nanoseconds */
int64_t bf__ckpt_pass_ns(const bf__ckpt *ck);
/* 1 when bf__ckpt_run with tr starts at a cut past every step reading
 * value v (a graph input: the caller need not feed it; its place in a
 * shared arena may hold another value by then) */
int bf__ckpt_trial_skips_value(const bf__ckpt *ck, const bf__ckpt_trial *tr, int64_t v);

#endif
