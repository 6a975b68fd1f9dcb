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
bf_status bf__ckpt_create(const bf_plan *p, int64_t samples, int64_t trials, const double *step_cost,
                          const double *param_mass, const double *value_mass, size_t budget, bf__ckpt **out,
                          bf_error *err);
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
/* Sample s on plan p (its inputs fed, a trial's faults set), from the last
 * cut at or before lo (restored first), comparing at each cut past hi the
 * values with the golden ones: all equal, the run stops and *golden is 1
 * (the sample's outputs are golden's; the plan's outputs were not
 * computed). p must fit (bf__ckpt_fits_plan). lo < 0 runs from step 0; hi < 0 never stops early. *work
 * gets the golden time of the steps run, in nanoseconds (for --stats: over
 * bf__ckpt_pass_ns, the share of a pass the sample re-ran). */
bf_status bf__ckpt_run(const bf__ckpt *ck, bf_plan *p, int64_t s, int lo, int hi, int *golden, int64_t *work,
                       bf_error *err);
/* the golden time of a whole run of one sample, in nanoseconds */
int64_t bf__ckpt_pass_ns(const bf__ckpt *ck);

#endif
