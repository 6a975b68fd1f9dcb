/* Differential re-execution: what a campaign trial needs to recompute only
 * what its faults can change (issue: campaigns 100x faster than
 * flip-and-rerun).
 *
 * gcache.c   the golden-activation cache: every run-time value of every
 *            batch of the golden pass, within a byte budget; gpool.c the
 *            pass's pools, kept for the workers' places.
 * diffshared.c what every worker shares: the cache, use lists, embedding
 *            row -> batch index, exact Gemm block shapes.
 * diffexec.c a worker's executor: for one trial, the batches its faults can
 *            reach, and in each only the steps downstream of them, stopping
 *            once every difference from the golden pass has vanished;
 *            diffstep.c the steps it computes for less than a whole run
 *            (fused epilogues, one moved channel, column or rows);
 *            diffworker.c a worker's state, made and freed.
 * diffgemm.c cheaper exact or near-exact forms of a Gemm step: one column
 *            block for a corrupted weight, a rank-k update for an input that
 *            changed in a few columns.
 * diffrows.c row mode: a batch whose faults reach a few samples runs on
 *            those rows only.
 * score.c    trial metrics updated from the golden ones.
 *
 * The accessors below let those files reach the plan's steps, the
 * evaluator's plans and an op's parsed parameters without widening the
 * public headers. */
#ifndef BF_DIFF_H
#define BF_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/eval.h"
#include "bitflip/plan.h"

#include "exec/step_access.h"

/* diffgemm.c, for a Gemm step with transA = 0 (see there). y: the golden
 * output; scratch: m x n floats. */
/* Where each output column can be recomputed bit for bit: blk[j] is a block
 * of columns [c0, c0 + w) holding j whose product reproduces y on the
 * golden pass (w 0: only the whole product does). Returns 0 when the step
 * does not qualify, else 1. */
typedef struct bf__colblk {
    int c0, w;
} bf__colblk;
int bf__gemm_col_blocks(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                        float *scratch, bf__colblk *blk);
/* A corrupted B[k][j] (k >= 0) or C[j] (k < 0), old -> now, as an update of
 * column j of the golden y, if every row that moves moves clearly; 0 when
 * the caller must compute the column exactly instead (y partly written). */
int bf__gemm_column_delta(const bf__gemm_info *g, const float *a, int k, float old, float now, int j, float *y);
/* Recomputes column j of y from a, b, c with its block (w 0: the whole product). */
void bf__gemm_column(const bf__gemm_info *g, bf__colblk blk, const float *a, const float *b, const float *c, int j,
                     float *y, float *scratch);
/* y = yg + (a - ag) B' over the rows where a differs from ag, if a differs
 * in at most max_cols columns (cols: room for them) and every such row
 * either changes clearly or not at all (bc: (max_cols + 1) x n doubles
 * of scratch; max_cols at most 64). Returns 0 when the step must run in
 * full instead (y may then be partly written). */
int bf__gemm_rank(const bf__gemm_info *g, const float *a, const float *ag, const float *b, const float *yg, float *y,
                  int max_cols, int *cols, double *bc);

/* The fewest rows r (a power of two, at most m/2) for which products over
 * any r rows of A, gathered, reproduce y bit for bit; 0 when none does.
 * rows: m ints of scratch. */
int bf__gemm_row_width(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                       float *scratch, int *rows);
/* 1 when rows of A reproduce y one by one and gathered out of order,
 * checked on a sample (the first row, the last, eight out of order), else
 * 0: for a MatMul over every token, where checking each of its rows alone
 * cost a product per row (12 s of the quick LM benchmark's setup, most of
 * it its logits); the kernel computes each row's chain alone by
 * construction (test_sgemm). */
int bf__gemm_row_one(const bf__gemm_info *g, const float *a, const float *b, const float *c, const float *y,
                     float *scratch, int *rows);
/* y's rows where a differs from ag recomputed exactly, in chunks of r rows;
 * scratch: r x (k + n) floats, rows: m ints. Returns 0 (y untouched) when
 * more than half the rows differ. */
int bf__gemm_rows(const bf__gemm_info *g, int r, const float *a, const float *ag, const float *b, const float *c,
                  float *y, float *scratch, int *rows);

/* The same in two calls, for any number of rows (a language model's MatMul
 * whose input changed from a token on: the rows before it are golden): the
 * rows where a differs from ag, into rows (m ints), and their count; then
 * those rows of y recomputed exactly (the others left as they are: golden,
 * written by the caller once it knows the rows are not all of them). */
int bf__gemm_rows_changed(const bf__gemm_info *g, const float *a, const float *ag, int *rows);
void bf__gemm_rows_at(const bf__gemm_info *g, int r, const float *a, const int *rows, int n, const float *b,
                      const float *c, float *y, float *scratch);

/* The product for n rows of A given contiguous (a: n x k), into y (n x n
 * cols), in chunks of r rows as bf__gemm_rows. */
void bf__gemm_rows_compact(const bf__gemm_info *g, int r, const float *a, int n, const float *b, const float *c, float *y,
                           float *scratch);
/* The whole product Y = alpha A op(B) + beta C for g->m rows of A
 * (contiguous, g->trans_a 0, C not per row: g->c_rs 0). */
void bf__gemm_product(const bf__gemm_info *g, const float *a, const float *b, const float *c, float *y);

/* Step i's counted work on plan p (diffshared.c): multiply-adds of a
 * Gemm, Conv or MatMul (*product 1), else elements read and written (+1;
 * *product 0). A count, the same on every machine. */
double bf__dx_step_work(const bf_plan *p, size_t i, int *product);

/* --- the golden cache (gcache.c) --------------------------------------- */

typedef struct bf__gcache bf__gcache;

/* The golden pass's pools (gpool.c): per plan of the pass, the places of
 * the values the cache does not keep, which a differential worker of the
 * same plan then takes for its own places (diffarena.c): the pages the pass
 * wrote are mapped already, where fresh ones cost the guest's zeroing and
 * this host's first touch (docs/perf/trials/resnet18.md, h38-pool).
 * bf__gpool_reserve: `bytes` for the pass with room for plan p's whole
 * arena where the address space allows (only written pages are mapped),
 * else `bytes` alone; *room the block's bytes; NULL: no memory. Not
 * zeroed. bf__gpools_put keeps mem for plan p (1; 0: no slot left, the
 * caller keeps it); bf__gpools_take hands it over once (NULL: none left
 * for p), bf__gpools_peek shows it without taking it; bf__gpools_drop
 * frees those nobody took (the campaign's runner, once its workers are
 * made). Not thread-safe: workers are made one at a time. */
typedef struct bf__gpools bf__gpools;
void *bf__gpool_reserve(const bf_plan *p, size_t bytes, size_t *room);
bf__gpools *bf__gpools_new(int n);
int bf__gpools_put(bf__gpools *g, const bf_plan *p, void *mem, size_t bytes);
void *bf__gpools_take(bf__gpools *g, const bf_plan *p, size_t *bytes);
const void *bf__gpools_peek(const bf__gpools *g, const bf_plan *p, size_t *bytes);
void bf__gpools_drop(bf__gpools *g);
void bf__gpools_free(bf__gpools *g);

/* The partial-sum resume's checkpoints (diffpsum.c; docs/ENGINE.md, step 4,
 * "The partial-sum resume"). bf__psum_choose: the Convs of plan p whose
 * data input the faults in `roots` (per value, as bf__dx_shared_golden's)
 * can move in one channel alone, through channel-local steps, and whose
 * runs carry partial sums (bf__conv_psum_of); *out NULL without roots.
 * bf__psum_alloc: their checkpoints for n_batches batches while they fit in
 * room bytes (returns the bytes taken), each block written with `pages`
 * beside BF__WRITE_ONCE (the cache's, bf__gcache_build). The golden pass brackets each step with
 * bf__psum_golden_begin / _end (saving when begin says 1); a trial's
 * whole run of step i on batch b whose data input moved in channel c alone
 * with bf__psum_resume_begin (> 0: the first input channel it runs, the
 * checkpoint it resumes from in slot, p->psum set to it; *skip the share of the Conv's terms
 * it skips), the caller clearing p->psum after the run (diffpsum.c's
 * bf__psum_done). */
typedef struct bf__psum_store bf__psum_store;
/* The drawn faults' channels: per fault in a parameter, its value and the
 * output channel it moves (its element index over numel / dims[0]). With
 * them bf__psum_choose keeps, of a Conv whose input such a fault moves in
 * one channel, only the checkpoints the trials resume from (one in each
 * chunk of K but the first that holds such a channel, at the lowest's
 * 16-channel block); a root with none listed (an activation, a parameter
 * not listed) keeps one at every chunk's start but the first's. */
typedef struct bf__root_chans {
    size_t n;
    const int64_t *val, *chan;
} bf__root_chans;
bf_status bf__psum_choose(const bf_plan *p, const unsigned char *roots, const bf__root_chans *rc, int64_t n_batches,
                          bf__psum_store **out, bf_error *err);
size_t bf__psum_alloc(bf__psum_store *ps, size_t room, unsigned pages);
size_t bf__psum_bytes(const bf__psum_store *ps, int *convs);
void bf__psum_free(bf__psum_store *ps);
int bf__psum_golden_begin(bf__psum_store *ps, bf_plan *p, size_t i, int64_t b, bf__psum *slot);
void bf__psum_golden_end(bf__psum_store *ps, bf_plan *p, size_t i, int64_t b, const bf__psum *slot);
int64_t bf__psum_resume_begin(const bf__psum_store *ps, bf_plan *p, size_t i, int64_t b, int64_t c, bf__psum *slot,
                              double *skip);

/* Parameter-only values (dxparam.c): run-time values computed from
 * parameters and constants alone, computed once per campaign from plan[0]
 * (plan[1], the partial batch's, may be NULL) and held outside the cache's
 * budget, while their total stays within `limit` bytes (none where no
 * weights arena can hold them); the others of the kind are listed. */
typedef struct bf__pvals bf__pvals;
bf_status bf__pvals_build(bf_plan *const plan[2], size_t limit, bf__pvals **out, bf_error *err);
void bf__pvals_free(bf__pvals *pv);
/* Value v's bytes, or NULL when it is not parameter-only (pv NULL: none is). */
const void *bf__pvals_data(const bf__pvals *pv, int v);
/* 1 when step i of plan p computes parameter-only values. */
int bf__pvals_step(const bf__pvals *pv, size_t i, const bf_plan *p);
/* The values computed from parameters and constants alone that pv does
 * not hold (*n of them; pv NULL: none). */
const int *bf__pvals_left(const bf__pvals *pv, size_t *n);
size_t bf__pvals_bytes(const bf__pvals *pv);
/* The limit pv was built with (bytes): what it may hold, and what each
 * worker's own copies of the values left may take (dxparam.c, bf__pv_init). */
size_t bf__pvals_limit(const bf__pvals *pv);

/* Runs the golden pass batch by batch on n_plans threads, thread k on
 * full[k] (and rest[k] for the last, partial batch; rest NULL: none) fed
 * from `feeds`, keeping each run-time value's per-batch tensor while the
 * total stays within `budget` bytes: the values marked in `must` first,
 * then the others smallest first (the most values per byte). A batch is
 * computed by one thread, into its own slots, so the cache is the same for
 * any thread count; the plans' kept values are written straight into the
 * cache and point at the plans' own buffers again afterwards. Graph inputs
 * are never cached: the dataset holds them. Each batch's output 0 must
 * equal its rows of `golden` (samples x columns; NULL: not checked), or the
 * model is not deterministic and the build fails; golden_out (non-NULL)
 * gets every batch's output 0 instead: the pass is then the campaign's
 * golden pass. The parameter-only values of pv (NULL: none) are neither
 * computed nor cached: their steps read pv's copy. want (NULL: every value)
 * marks the only values that may be cached beside the `must` ones; with
 * want, lean leaves out the output of a Conv whose activation alone
 * follows it too, the pair run fused (gcache.c: only where no chain can be
 * made, bf__chain_possible). planned (NULL: computed here, with want) is
 * what bf__gcache_plan gave for the same arguments, copied for
 * bf__gcache_planned rather than planned twice. ps (NULL: none): the
 * partial-sum checkpoints, allocated from what the budget leaves after the
 * cache and saved on the way (diffpsum.c). pages: beside BF__WRITE_ONCE for
 * the stored blocks and ps's (BF__WRITE_HUGE: 2 MiB pages, base/warena.h;
 * 0: 4 KiB pages). */
bf_status bf__gcache_build(bf_plan *const *full, bf_plan *const *rest, int n_plans, const bf_tensor *const *feeds,
                                 int64_t samples, size_t budget, const unsigned char *must, const unsigned char *want,
                                 int lean, const bf__pvals *pv, const unsigned char *planned, const float *golden,
                                 float *golden_out, bf__psum_store *ps, unsigned pages, bf__gcache **out,
                                 bf_error *err);
/* The values bf__gcache_build with the same arguments and want NULL would
 * hold (stored or derived), per value into planned (n_values bytes). */
bf_status bf__gcache_plan(bf_plan *const *full, bf_plan *const *rest, int64_t samples, size_t budget,
                          const unsigned char *must, const bf__pvals *pv, unsigned char *planned, bf_error *err);
void bf__gcache_free(bf__gcache *gc);
/* Value v's golden tensor in batch b, or NULL if not cached. A derived
 * value (the output of a Relu or Clip of a stored value) is computed into
 * its block on the first call for that batch, by whichever thread makes it
 * (thread-safe); the cache stores the rest in the golden pass. */
const void *bf__gcache_block(const bf__gcache *gc, int64_t v, int64_t b);
/* 1 when bf__gcache_block gives value v for every batch (stored or
 * derived), without deriving anything; _stored: 1 only when the pass
 * stored it. */
int bf__gcache_has(const bf__gcache *gc, int64_t v);
int bf__gcache_stored(const bf__gcache *gc, int64_t v);
/* 1 when the cache would hold value v were every value wanted (the
 * budget's choice among them all; bf__gcache_build's want): what
 * bf__gcache_has says when want was NULL. */
int bf__gcache_planned(const bf__gcache *gc, int64_t v);
/* Every batch of value v, one after the other (deriving the ones not yet
 * computed), or NULL if not cached. */
const void *bf__gcache_rows(const bf__gcache *gc, int64_t v);
/* Bytes the cache holds now: what the pass stored, and the derived blocks
 * computed so far. */
size_t bf__gcache_bytes(const bf__gcache *gc);
/* Bytes of every value it serves, stored or derived: at most the budget
 * (but for the values that must be cached), and its memory once every
 * derived block has been read. */
size_t bf__gcache_served(const bf__gcache *gc);
/* Per plan step: the seconds one full batch of it took on the golden pass. */
const double *bf__gcache_step_seconds(const bf__gcache *gc);
int64_t bf__gcache_batches(const bf__gcache *gc);
/* The 1x1 -> depthwise pairs and the stem Conv -> MaxPool pairs
 * (exec/plan_impl.h, pwdw) the golden pass ran together, over its batches:
 * where the cache keeps none of the values a pair leaves unwritten
 * (gcache.c, pass_pairs) */
int64_t bf__gcache_pairs(const bf__gcache *gc);
/* The pages the cache's blocks were given beside BF__WRITE_ONCE
 * (bf__gcache_build's `pages`: BF__WRITE_HUGE where this host's 2 MiB
 * pages are cheap and its 4 KiB ones dear, else 0): the host's choice,
 * which the workers' own arenas follow (diffarena.c) */
unsigned bf__gcache_pages(const bf__gcache *gc);
/* The golden pass's pools, kept past it for the workers' places (gpool.c);
 * NULL: none (the pass kept every value, or no memory to list them). */
bf__gpools *bf__gcache_pools(const bf__gcache *gc);

/* --- the executor (diffworker.c, diffexec.c, diffstep.c) ---------------- */

/* What every worker shares, read-only once built: the cache, the graph's
 * use lists, the embedding tables' row -> batch index, the Gemm steps'
 * verified column-block widths. */
typedef struct bf__dx_shared bf__dx_shared;
typedef struct bf__dx bf__dx;

/* A corrupted parameter element of a trial, already written into the plans. */
typedef struct bf__dx_weight {
    size_t param;
    int64_t index;
    float old_value, new_value;
} bf__dx_weight;

/* Built from n_ev evaluators' plans (holding the golden parameters; the
 * cache's golden pass runs on n_ev threads, one on each, and the rest is
 * found on evs[0]'s), with `golden` the campaign's golden outputs (samples
 * x out_cols), which every batch of the pass is checked against. */
bf_status bf__dx_shared_create(bf_evaluator *const *evs, int n_ev, int64_t samples, const float *golden,
                               int64_t out_cols, size_t budget, int near_exact, bf__dx_shared **out, bf_error *err);
/* Before bf__dx_shared_finish: make what the near-exact updates read too
 * (chain mode's rounding bounds and linear segments: bf__dx_near_exact).
 * Without it an executor that asks for them runs chains exactly. */
void bf__dx_shared_near_exact(bf__dx_shared *sh);
int bf__dx_shared_is_near_exact(const bf__dx_shared *sh);
void bf__dx_shared_free(bf__dx_shared *sh);
/* The same in two halves, for a campaign whose golden pass is the cache's:
 * bf__dx_shared_golden runs the pass (writing output 0 of every sample into
 * golden_out, samples x out_cols) and caches the values; once the caller
 * has the golden outputs, bf__dx_shared_finish does what needs them (the
 * embedding index, the exact Gemm blocks, the chains). `golden` must
 * outlive sh. roots (NULL: none known) marks, per value, what the
 * campaign's faults strike, drawn before the pass (a parameter's value, an
 * activation): the cache then keeps only what trials with those faults
 * read (the values they reach, and the other inputs of the steps computing
 * them), the rest run through the pool, never written to memory of its
 * own. A trial with other faults is still exact: what it needs and the
 * cache lacks is recomputed from cached ancestors, as for any value the
 * budget leaves out. With roots, the pass also saves the partial-sum
 * checkpoints of the Convs those faults can move one channel of the input
 * of (diffpsum.c), within the same budget: with rc (NULL: none), only the
 * checkpoints the listed faults' channels resume from. The cache's stored
 * blocks and the checkpoints are written with `pages` (BF__WRITE_HUGE or 0)
 * beside BF__WRITE_ONCE: the campaign's choice from this host's measured
 * pages (bf_host_pages); the same values either way. */
bf_status bf__dx_shared_golden(bf_evaluator *const *evs, int n_ev, int64_t samples, int64_t out_cols,
                                     size_t budget, const unsigned char *roots, const bf__root_chans *rc,
                                     float *golden_out, unsigned pages, bf__dx_shared **out, bf_error *err);
/* The partial-sum checkpoints' bytes and Convs (0: none) */
size_t bf__dx_shared_psum_bytes(const bf__dx_shared *sh, int *convs);
bf_status bf__dx_shared_finish(bf__dx_shared *sh, bf_evaluator *ev, const float *golden, bf_error *err);
size_t bf__dx_shared_cache_bytes(const bf__dx_shared *sh);
/* The parameter-only values' bytes (dxparam.c), outside the cache's budget. */
size_t bf__dx_shared_param_bytes(const bf__dx_shared *sh);

bf_status bf__dx_create(const bf__dx_shared *sh, bf_evaluator *ev, bf__dx **out, bf_error *err);
void bf__dx_free(bf__dx *dx);

/* One trial: weight faults already written into the evaluator's plans, and
 * value faults (eval-set samples, as bf_evaluator_set_value_faults) that the
 * executor sets itself. *outputs gets the trial's outputs (golden rows
 * except where they changed; valid until the next call), *rows the samples
 * whose outputs differ from golden, ascending. old/new (n_vf each, may be
 * NULL) get what each value fault found and left, as
 * bf_evaluator_value_fault_seen. *full 1: nothing was computed (no
 * outputs, rows or old/new), since a full pass costs less than the
 * differential run would (more faults than a batch has samples, reaching
 * nearly every batch and step): the caller runs the trial as the exact
 * engine does (bf_evaluator_run), which gives its record by definition. */
bf_status bf__dx_run(bf__dx *dx, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf, size_t n_vf,
                     const float **outputs, const int64_t **rows, int64_t *n_rows, float *vf_old, float *vf_new,
                     int *full, bf_error *err);
/* How many trials bf__dx_run handed back for a full pass. */
int64_t bf__dx_full_passes(const bf__dx *dx);
/* The bytes of the worker's own copies of the parameter-only values left unheld (dxparam.c). */
size_t bf__dx_pv_copy_bytes(const bf__dx *dx);
/* How many times this executor's trials re-ran a Conv with its activation,
 * BatchNormalization or residual Add in its epilogue (a batch each). */
int64_t bf__dx_fused_runs(const bf__dx *dx);
/* Of this executor's trials' whole Conv re-runs, those that resumed from a
 * partial-sum checkpoint (diffpsum.c), and per step the batches' worth of
 * the Conv's work they skipped (n_steps; bf__dx_work has the rest). */
int64_t bf__dx_psum_resumed(const bf__dx *dx);
const double *bf__dx_psum_skipped(const bf__dx *dx);
/* Conv re-runs on a list of output positions (diffpos.c): how many, the
 * positions computed, and those of their batches */
void bf__dx_pos_counts(const bf__dx *dx, int64_t *runs, int64_t *positions, int64_t *of);
/* How many steps this executor's trials ran on one channel of their output
 * (a batch each: diffchan.c). */
int64_t bf__dx_chan_steps(const bf__dx *dx);
/* How many times this executor's trials ran the graph's output Gemm once
 * over every batch's changed rows (diffout.c). */
int64_t bf__dx_out_batched(const bf__dx *dx);
/* Batches whose changed graph output this executor's trials wrote straight
 * into the trial's outputs (diffexec.c, own): not copied there after;
 * chan 1: of them, those written on one channel (bf__chan_rows). */
int64_t bf__dx_out_in_place(const bf__dx *dx, int chan);
/* Resize steps this executor's trials ran on the planes their input
 * changed on alone (diffplane.c), and those planes (*planes). */
int64_t bf__dx_plane_steps(const bf__dx *dx, int64_t *planes);
/* of those: Resize, Concat, Conv with golden weights, Add/Sub/Mul/Div with
 * a changed operand broadcast over the planes, ReduceMean/ReduceSum over
 * the planes (bf_campaign_result.chan_kinds) */
void bf__dx_chan_kinds(const bf__dx *dx, int64_t kinds[5]);
/* From now on bf__dx_run runs every trial differentially, however cheaper
 * a full pass would be (bf_campaign_opts.no_full_pass: tests). */
void bf__dx_no_full_pass(bf__dx *dx);
/* From now on bf__dx_run may use the near-exact updates (a Gemm column or
 * rank-k update, a Conv channel update, chain mode's updates and linear
 * segments), whose records can differ from a full pass's at near ties and
 * in a metric's last bits (bf_campaign_opts.near_exact). Without it every
 * record is the full pass's, bit for bit. */
void bf__dx_near_exact(bf__dx *dx);

/* How many trials this executor ran in chain mode (diffchain.c), how many
 * of those were recomputed exactly for want of a witness, and how many
 * samples took a linear segment (difflinear.c). */
void bf__dx_chain_counts(const bf__dx *dx, int64_t *trials, int64_t *exact, int64_t *linear);
/* Per plan step: how many batches' worth of it this executor ran, in full
 * or on rows (row runs count their share of a batch), over its trials. */
const double *bf__dx_work(const bf__dx *dx);
/* The shared state's golden cache (for its per-step times). */
const bf__gcache *bf__dx_shared_cache(const bf__dx_shared *sh);
/* bf__gpools_drop of sh's cache's pools: once the workers are made */
void bf__dx_shared_drop_pools(bf__dx_shared *sh);
/* What a fault in parameter `param` can cost a trial, as a share of the
 * pass: the counted work (step_cost) of the steps from the first one that
 * reads it to the end. An upper bound, for ordering trials by expected
 * cost (campaign_order.c), never for choosing a path; 0 for a parameter no
 * step reads. */
double bf__dx_param_reach(const bf__dx_shared *sh, size_t param);

/* --- trial metrics from the golden ones (score.c) ---------------------- */

/* The task metrics of a trial whose outputs differ from the golden pass in
 * a few rows, updated from the golden pass's instead of recomputed: the
 * accuracy's hit count and the log loss's sum move by the changed rows; the
 * AUC's sorted scores are the golden order with the changed rows taken out
 * and merged back in (the same order a full sort gives, so the same AUC).
 * Falls back to the full computation when the log loss would switch between
 * probabilities and logits or the golden loss is not finite. */
typedef struct bf__scorer bf__scorer;
/* seg_pred: a segmentation task's golden arg-max, [samples, H*W] (as
 * bf__seg_argmax gives it from golden), when the caller has it already:
 * the scorer reads it in place instead of computing its own (NULL:
 * computed here). */
bf_status bf__scorer_create(bf_evaluator *ev, const float *golden, const int32_t *seg_pred, int64_t samples, int64_t cols,
                            bf__scorer **out, bf_error *err);
void bf__scorer_free(bf__scorer *sc);
/* Per-worker scratch for bf__score. */
typedef struct bf__score_scratch {
    uint64_t *keys, *fresh;
    unsigned char *in_rows;
    int64_t *pred;             /* classification: each changed row's argmax, by bf__score
                                * (language_model: its labelled positions whose argmax changed) */
    int has_pred;              /* pred holds the rows of the last bf__score */
    int64_t *lm_idx;           /* language_model: the changed rows' tree leaves and sums */
    double *lm_val;
    int64_t *seg_cm;           /* segmentation: the trial's confusion matrix, and one image's arg-max */
    int32_t *seg_px;
} bf__score_scratch;
/* sc: the scorer the scratch serves (NULL: the tasks that need no more
 * than samples). */
bf_status bf__score_scratch_init(bf__score_scratch *s, const bf__scorer *sc, int64_t samples, bf_error *err);
void bf__score_scratch_free(bf__score_scratch *s);
void bf__score(const bf__scorer *sc, bf__score_scratch *s, bf_evaluator *ev, const float *outputs, const int64_t *rows,
               int64_t n_rows, bf_eval_result *res);
/* score_lm.c: the same for a language_model task (bf__scorer holds one):
 * perplexity, token accuracy and multiple choice from the golden pass's
 * per-sequence sums, the changed rows recomputed. */
typedef struct bf__lm_scorer bf__lm_scorer;
bf_status bf__lm_scorer_create(bf_evaluator *ev, const float *golden, int64_t samples, int64_t cols, bf__lm_scorer **out,
                               bf_error *err);
void bf__lm_scorer_free(bf__lm_scorer *sc);
void bf__lm_score(const bf__lm_scorer *sc, bf__score_scratch *s, const float *outputs, const int64_t *rows, int64_t n_rows,
                  bf_eval_result *res);
/* score_seg.c: the same for a segmentation task: mIoU and pixel accuracy
 * from the golden confusion matrix, the changed images' pixels moved in it;
 * pred: each changed image's pixels whose arg-max moved. */
typedef struct bf__seg_scorer bf__seg_scorer;
bf_status bf__seg_scorer_create(bf_evaluator *ev, const float *golden, const int32_t *golden_pred, int64_t samples,
                                int64_t cols, bf__seg_scorer **out, bf_error *err);
void bf__seg_scorer_free(bf__seg_scorer *sc);
bf_status bf__seg_scratch_init(const bf__seg_scorer *sc, bf__score_scratch *s, bf_error *err);
void bf__seg_score_rows(const bf__seg_scorer *sc, bf__score_scratch *s, const float *outputs, const int64_t *rows,
                        int64_t n_rows, bf_eval_result *res);

#endif
