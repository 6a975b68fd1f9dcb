/* What diffshared.c builds once per campaign and diffexec.c reads in every
 * trial (see diff.h). */
#ifndef BF_DIFF_IMPL_H
#define BF_DIFF_IMPL_H

#include <string.h>

#include "diff/diff.h"

#define RANK_MAX_COLS 8        /* a rank-k update beyond this runs the product */

/* Chain mode's linear segment (difflinear.c) from a chain Gemm through a
 * ReLU to the next Gemm, per sample. */
#define BF__LIN_MAX_COLS 8       /* a segment's input changed in more columns: the links */
typedef struct bf__lin {
    int last;                    /* the second Gemm's step */
    int k, n;                    /* the first Gemm's input width, the second's output width */
    int shared;                  /* one Gemm, no ReLU: J and radii the same for every sample */
    float *jac;                  /* [column][sample][n] ([column][n] shared): the second Gemm's output per
                                  * unit of input column */
    float *inv_radius;           /* [column][sample] ([column] shared): the largest ReLU input move per unit of
                                  * the column, relative to that input's distance from 0 (inf: never linear) */
} bf__lin;

/* diffshared.c: batch b's values of index value iv (read by an embedding
 * lookup in plan p), and their dtype: from the golden cache, or, for a graph
 * input (never cached: nn.Embedding on the input ids, as BERT's and DIN's
 * exports read them), from the eval set. NULL when neither holds them as
 * int64 or int32. */
const void *bf__dx_lookup_indices(const struct bf__dx_shared *sh, bf_evaluator *ev, const bf_plan *p, int iv,
                                  int64_t b, bf_dtype *dt);

/* An embedding table: row -> the batches reading it. Only the rows the
 * eval set reads are listed (ascending, found by bisection), so the index
 * follows the eval set's lookups, not the table: a 2M-row table read by
 * 16,384 samples lists at most 16,384 rows, where an offset per row took
 * 16 MiB (85 MiB over a Criteo-shaped DLRM's tables). */
typedef struct bf__emb_index {
    int64_t rows, row_elems;     /* the table's; rows 0: not indexed (every batch) */
    int64_t n_read;              /* rows the eval set reads */
    int64_t *row;                /* n_read, ascending */
    int64_t *off;                /* n_read + 1: row[i]'s batches are batch[off[i] .. off[i + 1]) */
    int32_t *batch;
    int tied;                    /* also read whole, through a 2-D Transpose (tied logits): every batch */
} bf__emb_index;

/* Step `step` of p is a row lookup (Gather, EmbeddingBag) of parameter q,
 * not a tied table's Transpose. */
int bf__dx_lookup_step(const struct bf__dx_shared *sh, const bf_plan *p, size_t q, int step);

/* The batches reading row r of table e (n 0: none, a row no sample looks
 * up). */
const int32_t *bf__emb_batches(const bf__emb_index *e, int64_t r, int64_t *n);

/* chain_next of a step that has no next link: the chain ends at the graph
 * output; row mode takes the chain on from its output (diffchain.c); not
 * in a chain. */
enum { CHAIN_END = -1, NOT_CHAIN = -2, HANDOFF = -3 };

struct bf__dx_shared {
    const bf_model *m;
    bf__gcache *gc;
    bf__psum_store *ps;          /* the partial-sum checkpoints (diffpsum.c); NULL: none */
    bf__pvals *pv;               /* parameter-only values, computed once (dxparam.c); NULL: none */
    int64_t samples, batch, n_batches, out_cols;
    int near_exact;              /* made for the near-exact updates: their bounds and linear segments */
    int batch_shift;             /* log2 of batch when a power of two, else -1 */
    const float *golden;
    int out_val;
    size_t n_steps;
    int *first_use, *last_use;   /* per value: first and last step reading it; -1 none */
    /* per value: read only as the first input of depthwise Convs (each
     * output channel from its own input channel), no graph output: a trial
     * that moved it in one channel reads no golden of it (bf__own_chan_all) */
    unsigned char *own_chan;
    int *pc_off, *pc_step;       /* per parameter: the steps reading it */
    bf__emb_index *emb;              /* per parameter; rows 0 when not an embedding table */
    int *colw[2];                /* per step, full and tail plan: a Gemm whose columns can be recomputed, 0 none */
    bf__colblk **colblk[2];      /* per step, full and tail plan: each column's exact block (NULL: none) */
    int *roww[2];                /* per step, full and tail plan: Gemm row chunk, 0 none */
    size_t scratch_floats;       /* the largest run-time value of the full batch, graph inputs included */
    int max_n;                   /* widest Gemm output */
    int max_m;                   /* most rows of any Gemm's A, and at least the batch: a row is a sample
                                  * only where M is the batch ([seq x batch, E] in attention) */
    double *step_cost;           /* per step: its work on a full batch, in multiply-adds or elements
                                  * moved (step_cost_of); counted, not timed, so that which path a
                                  * trial takes is the same on every run and machine */
    double pass_cost;            /* their sum: one batch of the full pass */

    /* Chain mode (diffchain.c). */
    int *chain_next;             /* per step: the next step of its chain, or one of the below */
    int *chain_at;               /* per parameter: the chain Gemm it corrupts alone; -1 none */
    const float **chain_rows;    /* per value: row 0 of its golden rows over the eval set, contiguous
                                  * (a cached value, a float graph input, the outputs); NULL */
    int64_t chain_width;         /* widest value of any chain; 0: no chain mode */
    float **chain_amax;          /* per value read by a chain Gemm or Conv: each sample's largest |element| */
    float **chain_colabs;        /* per chain Gemm: each output column's sum of |alpha B[k][n]| */
    float **chain_bt;            /* per chain Gemm with B transposed: B as K x N rows (NULL: none) */
    float **chain_cols_in, **chain_cols_out;   /* per Gemm starting a chain: its input and output
                                  * over the eval set column by column (NULL: none) */
    bf__lin **chain_lin;         /* per chain Gemm reached as a link: its linear segment (NULL: none) */
};

#define BF__SUB_MAX 7            /* row-mode plans of 1, 2, 4, ..., 64 rows */

enum { UNLOADED = 0, GOLDEN, DIRTY };

/* diffout.c's per-worker state: the output Gemm over every batch at once. */
typedef struct bf__dx_out bf__dx_out;

/* An element of a parameter-only value a trial wrote into its view. */
typedef struct bf__pv_write {
    int value;
    size_t at, size;             /* bytes */
} bf__pv_write;

/* A worker's state for the parameter-only values, dxparam.c's own: a
 * private view of each, made when a trial first corrupts the parameter it
 * moves; which ones this trial hit (hit), and the elements it wrote (w).
 * Per plan, per value: the worker's own golden copy of a value the campaign
 * left unheld (bf__pvals_left), computed once when the worker is made
 * (bf__pv_init) and pointed at at each batch's start instead of fetched
 * (NULL: fetched, as a cached one or one past the limit); mem[t] holds plan
 * t's, copy_bytes both plans' together (at most bf__pvals_limit), once the
 * steps that computed them. */
typedef struct bf__dx_pv {
    void **view;
    unsigned char *hit;
    bf__pv_write *w;
    size_t n_w, w_cap;
    void **copy[2];
    void *mem[2];
    size_t copy_bytes;
    int64_t once;
} bf__dx_pv;


/* Plane-local Resize's state (diffplane.c), a worker's own: the changed
 * planes of the step at hand (pl); the planes of the trial's outputs
 * written in place (opl: offsets into bf__dx's out, opl_len floats each),
 * per batch whether its output was so written alone (opl_b: restored plane
 * by plane); the steps and planes so run (n_steps, n_planes: --stats). */
typedef struct bf__dx_plane {
    int64_t *pl, pl_cap, *opl, n_opl, opl_cap, opl_len;
    unsigned char *opl_b;
    int64_t n_steps, n_planes;
} bf__dx_plane;

/* A Conv re-run at the positions its moved input reaches (diffpos.c), a
 * worker's own: the marks of the input's and the output's positions that
 * moved or are reached, the list of the output's (q), their room; and the
 * re-runs so made, the positions they computed and those of their batches
 * (--stats). */
typedef struct bf__dx_pos {
    unsigned char *in, *out;
    int32_t *q;
    float *work;                     /* the 1x1 product's gather room (bf__cpos) */
    size_t in_cap, out_cap, q_cap, work_cap;   /* elements (base/grow.h) */
    int64_t runs, done, all;
} bf__dx_pos;

struct bf__dx {
    const bf__dx_shared *sh;
    bf_plan *plan[2];
    bf_evaluator *ev;
    unsigned char *state;        /* per value, in the batch at hand */
    unsigned char *param_hit;    /* per step: reads a faulty parameter in this trial */
    unsigned char *step_mark;    /* per step + 1: scratch */
    unsigned char *fdone;        /* per step, in the batch at hand: FUSED_LAST, computed in a Conv's
                                  * epilogue (diffstep.c, bf__dx_run_fused); FUSED_MID, a residual Add so
                                  * computed whose output was never written */
    int *pfaults;                /* per parameter: faults in this trial */
    const bf__dx_weight **pfault;
    unsigned char *bmark;        /* per batch: reached by this trial */
    int64_t *touched;            /* batches whose output rows differ from golden */
    int64_t n_touched;
    int64_t *rows;               /* samples whose outputs differ from golden */
    int64_t n_rows;
    float *out;
    float *scratch;
    int cols[RANK_MAX_COLS];
    int *rowbuf;                 /* row indices of a Gemm's A: max_m of them */
    double *bc;                  /* rank-k update scratch */
    void **arena[2];             /* per plan and value: its buffer in the trial at hand (data may point into
                                  * the cache): own_tab's or lt_tab's (diffarena.c, bf__dx_arena_use) */
    void **own_tab[2];           /* per plan and value: the plan's own slot, one a value */
    void **lt_tab[2];            /* per plan and value: its place shared by lifetime (NULL: none) */
    void *lt_mem[2];             /* those places' memory, lt_bytes of it */
    size_t lt_bytes[2];
    unsigned lt_pages[2];        /* the pages asked for that memory (BF__WRITE_HUGE where the cache's are, else
                                  * 0), kept where the call is made: what a test can see was asked */
    int simd;                    /* bf__sgemm_simd() when created: the scans' CPU path (base/simd.h) */
    int approx;                  /* the batch at hand took a rank-k update */
    int no_approx;               /* no updates: always, unless near_exact; else while a batch is redone */
    int near_exact;              /* updates and linear segments allowed (bf__dx_near_exact) */
    bf_value_fault *vfb;         /* value faults of the batch at hand */
    size_t *vfb_of, vfb_cap;

    /* Row mode (diffrows*.c): a batch whose faults reach a few of its
     * samples runs on those rows only, in plans of 1, 2, 4, ... rows. */
    bf_plan *sub[BF__SUB_MAX];
    int n_sub;                   /* plans of up to 64 rows and the batch, for the reached rows of every batch */
    int n_sub_batch;             /* those of at most a quarter batch, for one batch's rows */
    int rows_ready;              /* the sub-plans exist and are checked (made on first use: a
                                  * campaign whose faults reach every sample never needs them,
                                  * and on a CNN they cost about a golden pass to check) */
    unsigned char *row_ok;       /* [n_sub][n_steps]: the step gives the full batch's bits on r rows */
    unsigned char *rows_from;    /* [n_sub][n_values]: every step downstream of the value is row_ok */
    unsigned char *moves;        /* per step: its output holds every element of its data inputs (Concat,
                                  * Transpose, Reshape, ...): a changed input, a changed output */
    unsigned char *sstate;       /* per value, in row mode: as state, rows in the sub-plan */
    unsigned char *rmark;        /* per row of a batch: reached */
    int64_t *rsel;               /* the samples in row mode, padded to the sub-plan's rows */
    int64_t *rall;               /* the reached samples of every batch, before runs of rsel */
    unsigned char *shape_only;   /* per value: computed from parameters, initializers and shapes alone */
    unsigned char *inv;          /* [n_sub][n_values]: shape_only, no sample axis, and the same in the
                                  * sub-plan as in the batch (a causal mask, a tied table's transpose) */
    int mark_reached;            /* bf__rows_all flags the samples it ran in reached */
    int checking;                /* check_steps at work: every step runs its own kernel */
    unsigned char *reached;      /* per sample: its outputs came from row mode (rall[0..n_reached)) */
    int64_t n_reached;

    /* Chain mode (diffchain.c): the changed rows of a value over the eval
     * set, three of them (two and, past a linear segment, the rows it left
     * to the links); the same for one sample (a witness), two; and the rows
     * of one exact product. */
    float *cv[3], *wv[2], *ca, *cb, *ctapm, *cbias;
    int64_t *crow[3];
    int *ccol[3], *wcol[2];
    int32_t *ctap;
    int64_t n_chain, n_chain_exact;   /* trials run so, and redone exactly */
    int64_t n_linear;            /* samples through a linear segment */
    int64_t n_full;              /* trials handed back for a full pass (bf__dx_run's *full) */
    int64_t n_fused;             /* Conv re-runs that computed their chain in the epilogue (run_fused) */
    /* Channel-local steps (diffchan.c), per value in the batch at hand:
     * dch c + 1 when the value is DIRTY in channel c (dim 1) alone, 0 when
     * not known to be; dlazy 1 when its buffer holds only that channel, the
     * others to be copied from golden before a step reads it whole
     * (bf__chan_fill). */
    int32_t *dch;
    unsigned char *dlazy;
    /* per value: 1 + the Conv step whose fused chain wrote its one lazy
     * channel where the cache holds no golden of it (own_chan), which
     * bf__chan_fill then runs whole instead of copying; 0 otherwise */
    int32_t *dsrc;
    int chan_c;                  /* the channel of the step just run (CHAN_DONE) */
    int fchan_c;                 /* the channel a Conv's fused chain moved (try_conv, FUSED_CHAN) */
    int64_t n_chan;              /* steps run on one channel */
    int64_t n_chan_kind[5];      /* of them Resize, Concat, Conv, broadcast gate, Reduce (bf__dx_chan_kinds) */
    int no_full;                 /* never hand one back (bf__dx_no_full_pass) */
    /* The graph's output written in place (diffexec.c, own): the trial's
     * outputs of the batch at hand, which hold golden bits until a step
     * writes them (NULL: the plan's buffer, as for every other value); the
     * batch; whether a step wrote them (the batch then listed in touched);
     * the rows the output's compare found changed (orow_ok: for its last
     * write); batches whose changed output was so written. */
    float *out_here;
    int64_t out_b;
    int out_wrote, orow_ok;
    int64_t *orow, n_orow;
    int64_t n_in_place[2];       /* and of them, those on one channel (bf__chan_rows) */
    double *work;                /* per step: batches' worth of it the trials ran in full or on rows */
    double *psum_skip;           /* per step: batches' worth of it skipped by partial-sum resumes */
    int64_t n_psum;              /* whole Conv re-runs resumed from a checkpoint (diffpsum.c) */
    bf__dx_plane plane;          /* plane-local Resize (diffplane.c): its own state */
    bf__dx_pos pos;              /* Convs on the positions reached (diffpos.c): its own state */

    /* The graph's output Gemm over every batch at once: diffout.c's own
     * state and buffers (bf__out_init). */
    bf__dx_out *og;

    /* Parameter-only values: dxparam.c's own state (bf__dx_pv). */
    bf__dx_pv pv;
};

/* Sample s's batch and its row in it: a shift and a mask for the usual
 * power-of-two batch (row mode asks for every row of every step), a
 * division otherwise. */
static inline int64_t bf__batch_of(const bf__dx_shared *sh, int64_t s)
{
    return sh->batch_shift >= 0 ? s >> sh->batch_shift : s / sh->batch;
}

static inline int64_t bf__row_in_batch(const bf__dx_shared *sh, int64_t s)
{
    return sh->batch_shift >= 0 ? s & (sh->batch - 1) : s % sh->batch;
}

/* Bit for bit, as memcmp, inlined: chain mode's rows are a few dozen
 * floats wide, and the loop vectorises. */
static inline int bf__same_bits(const float *a, const float *b, int64_t n)
{
    uint32_t diff = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, &a[i], sizeof x);
        memcpy(&y, &b[i], sizeof y);
        diff |= x ^ y;
    }
    return diff == 0;
}

/* A value computed at run time (a graph input or a step output). */
static inline int bf__runtime(const bf_plan *p, int v) { return v >= 0 && p->val_step[v] != BF__VAL_NOT_RUN; }

bf_status bf__dx_oom(bf_error *err);

/* A step computed on one channel of its output (diffchan.c): run_batch's
 * `done` then, the channel in dx->chan_c. */
#define CHAN_DONE 4

/* diffarena.c: the worker's places shared by lifetime. bf__dx_lifetimes:
 * per value of plan p, the first and last moments (steps; -1 before the
 * first, n_steps after the last) a weight-fault trial may write or read it,
 * out-of-order paths included (diffarena.c says which), where held marks
 * the values the golden cache gives for every batch (never recomputed) and
 * out_val is the graph output the trial compares; the places over those
 * lives come from exec's bf__plan_first_fit (plan_impl.h).
 * bf__dx_slots_overlap: 1 (the pair in *va, *vb) when two placed values
 * alive at the same time share a byte, 0 when none do, -1 out of memory.
 * bf__dx_arena_init (bf__dx_create): the shared places of each plan that
 * has none already; bf__dx_arena_use: the trial's plans on the plans' own
 * slots (own: a trial with value faults) or on the shared places;
 * bf__dx_arena_assumed: the places are shared and counted on the cache
 * holding v (fetch must not recompute it). */
bf_status bf__dx_lifetimes(const bf_plan *p, const unsigned char *held, int out_val, int *first, int *last,
                           bf_error *err);
int bf__dx_slots_overlap(size_t n, const unsigned char *place, const size_t *bytes, const int *first, const int *last,
                         const size_t *off, int *va, int *vb);
bf_status bf__dx_arena_init(bf__dx *dx, bf_error *err);
void bf__dx_arena_use(bf__dx *dx, int own);
int bf__dx_arena_assumed(const bf__dx *dx, const bf_plan *p, int v);
void bf__dx_arena_free(bf__dx *dx);

/* Whether fetch reads value v from the cache once the trial has found it
 * GOLDEN (diffexec.c), so that the lives need not keep v's place for the
 * moments fetch runs v's readers (diffarena.c, fetch_closure): one rule for
 * both, or a place is freed that fetch still reads. A computed value (not a
 * graph input), and not the graph's output: a trial writes that straight
 * into its outputs, and run_batch tells which path it took by its data
 * pointer. */
static inline int bf__dx_fetch_from_cache(const bf_plan *p, int out_val, int v)
{
    return p->val_step[v] >= 0 && v != out_val;
}

/* diffexec.c: value v's golden tensor of batch b into the plan (read in
 * place from the cache, the dataset, or its producer run on golden inputs),
 * unless it is loaded already; and v pointed back at its own buffer, to be
 * written. */
bf_status bf__dx_fetch(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err);
void bf__dx_own(bf__dx *dx, bf_plan *p, int v);
/* bf__dx_own of each output of step i */
void bf__dx_own_outputs(bf__dx *dx, bf_plan *p, size_t i);

/* diffstep.c: step i of batch b (plan p, tail: the short last batch's)
 * computed for less than its whole run, as diffexec.c's run_batch tries
 * them; *done 0 when the form does not apply (nothing written), else what
 * it computed (1, CHAN_DONE, FUSED_CONV: diffstep.c says each).
 * run_fused: a Conv with what its epilogue computes (activation, residual
 * Add, BatchNormalization), as the exact engine's fused passes do;
 * try_conv: a Conv with one corrupted weight or bias element and golden
 * input; try_gemm: a Gemm's one moved column, rank-k update or changed
 * rows; try_matmul: a MatMul's one moved column (B faulty) or changed rows
 * (A moved). */
bf_status bf__dx_run_fused(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err);
bf_status bf__dx_try_conv(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err);
bf_status bf__dx_try_gemm(bf__dx *dx, bf_plan *p, int tail, int64_t b, size_t i, int *done, bf_error *err);
bf_status bf__dx_try_matmul(bf__dx *dx, bf_plan *p, int tail, int64_t b, size_t i, int *done, bf_error *err);

/* diffchan.c: channel-local steps (docs/ENGINE.md, step 4). Step i of
 * batch b on the one channel its inputs (or a fault in one channel of a
 * BatchNormalization's parameters) changed, into its output's buffer
 * alone: *done CHAN_DONE, the channel in dx->chan_c; *done 0 (nothing
 * written) when the step is not channel-local or its inputs are not. */
bf_status bf__chan_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err);
/* 1 when the step keeps a change of one channel of its inputs in that
 * channel of its output (the kinds bf__chan_try computes on one channel);
 * from its kind alone, for diffpsum.c's choice before the pass */
int bf__chan_local_step(const bf__step *s);
/* The values trials with faults in `roots` read (diffshared.c, want_values):
 * per value 1 to keep; with trim, a fault in a parameter only Convs and
 * BatchNormalizations read keeps none past its first channel-mixing step
 * but golden inputs (root_values); *out NULL: every value (a subgraph). */
bf_status bf__dx_want_values(const bf_plan *p, const unsigned char *roots, int trim, unsigned char **out,
                             bf_error *err);
/* diffpsum.c: around a trial's whole run of step i on batch b. bf__psum_try
 * sets the resume up (r->on) when step i is a Conv whose data input moved in
 * one channel alone (dch), whose other inputs are golden and whose
 * checkpoint the golden pass saved; bf__psum_done clears it and counts what
 * the run skipped (bf__dx_psum_resumed, the re-run work in dx->work). */
typedef struct bf__psum_run {
    bf__psum slot;
    double skip;
    int on;
} bf__psum_run;
void bf__psum_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, bf__psum_run *r);
void bf__psum_done(bf__dx *dx, bf_plan *p, size_t i, const bf__psum_run *r);
/* diffpos.c: around a trial's whole run of step i on batch b, after
 * bf__psum_try. bf__pos_try sets up (r->on) a run of the Conv at the output
 * positions its moved inputs reach alone, where they are few enough: the
 * output's place then holds the golden output, and the run writes those
 * positions. bf__pos_done clears it and counts what the run left out (in
 * dx->work, with the resume pr's share). bf__pos_free: the state. */
typedef struct bf__pos_run {
    bf__cpos slot;
    int64_t all;          /* the batch's output positions */
    int on, add, last;
} bf__pos_run;
bf_status bf__pos_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, bf__pos_run *r, bf_error *err);
void bf__pos_done(bf__dx *dx, bf_plan *p, size_t i, const bf__pos_run *r, const bf__psum_run *pr);
void bf__pos_free(bf__dx *dx);
/* Output o of such a step (or of a Conv whose one corrupted weight moved
 * channel c alone) compared with golden on channel c: DIRTY in channel c
 * (lazy) and 1, or GOLDEN, read from the cache again, and 0. */
int bf__chan_settle(bf__dx *dx, bf_plan *p, int64_t b, int o, int c);
/* Value v whole in its buffer (the golden channels copied around its
 * own), if it was lazy. */
/* Per value of plan p (own: one byte each), 1 where it is read only as the
 * first input of depthwise Convs (one input channel per output channel)
 * and is no graph output, else 0: one pass over the steps (diffshared.c;
 * bf__dx_shared's own_chan). */
void bf__own_chan_all(const bf_plan *p, unsigned char *own);
bf_status bf__chan_fill(bf__dx *dx, bf_plan *p, int64_t b, int v, bf_error *err);
/* The samples (rows of the batch) whose channel of lazy value v differs
 * from golden, ascending, into row[]; their count. */
int64_t bf__chan_rows(const bf__dx *dx, const bf_plan *p, int64_t b, int v, int64_t *row);
/* The same for every input of step i and of the steps its Conv epilogue
 * may compute: before any step that reads them whole. */
bf_status bf__chan_fill_inputs(bf__dx *dx, bf_plan *p, int64_t b, size_t i, bf_error *err);
/* After value faults hit value v (DIRTY, whole in its buffer): dch set when
 * they all hit one channel of it, in every sample or one. */
void bf__chan_value_faults(bf__dx *dx, const bf_plan *p, size_t nb);

/* diffout.c: the graph's output Gemm over every batch at once. _init
 * finds it (a Gemm computing the output whose single rows give the whole
 * product's bits) and makes room; _begin says whether this trial may defer
 * it; _defer, at that step of batch b, takes the changed input rows
 * (*done OUT_DEFERRED: the output is left alone, not DIRTY); _flush runs
 * them as one product into dx->out, dx->rows and dx->touched. */
#define OUT_DEFERRED 5
/* diffplane.c: a Resize keeping dims 0 and 1 whose input changed on some
 * of its [N, C] planes, on those planes alone, over golden bits (*done
 * PLANE_DONE; its output's state set, *horizon moved on); 0 when it is no
 * such step or most planes changed. bf__out_restore: the batches of the
 * trial's outputs the last trial touched (dx->touched) back to golden, of
 * those it wrote so only the planes written. */
#define PLANE_DONE 7
bf_status bf__plane_try(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *horizon, int *done, bf_error *err);
void bf__out_restore(bf__dx *dx);
void bf__plane_free(bf__dx *dx);
/* dx->fdone's marks, and bf__dx_run_fused's *done (diffstep.c): the last step of a
 * Conv's fused run, a step in between */
#define FUSED_LAST 1
#define FUSED_MID 2
/* diffchan.c: channel oc of Conv step i computed through its fused chain
 * (BatchNormalization, residual Add, activation) into the chain's last
 * output, when the cache keeps the Conv's output not (gcache.c leaves a
 * fused chain's values in between out): *done FUSED_CONV, the chain's
 * steps marked in dx->fdone (its last FUSED_CHAN, the channel in
 * dx->fchan_c); 0 when the chain's other operands are not golden. */
#define FUSED_CONV 3
#define FUSED_CHAN 6
bf_status bf__dx_chain_channel(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int64_t oc, int64_t cout, int *done,
                               bf_error *err);
bf_status bf__out_init(bf__dx *dx, bf_error *err);
void bf__out_free(bf__dx *dx);
void bf__out_begin(bf__dx *dx, size_t n_vf, int rowable);
bf_status bf__out_defer(bf__dx *dx, bf_plan *p, int64_t b, size_t i, int *done, bf_error *err);
void bf__out_flush(bf__dx *dx);
/* Nothing deferred (between trials, and on a trial's failure). */
void bf__out_off(bf__dx *dx);
/* Products run so, for --stats. */
int64_t bf__out_batched(const bf__dx *dx);

/* diffexec.c: applies the value faults of `plan` (the first nb, their
 * values already loaded in it) once per step, marks their values DIRTY in
 * `state` and returns the horizon widened to their last readers. */
int bf__dx_hit_values(bf__dx *dx, bf_plan *plan, size_t nb, unsigned char *state, int horizon);

/* chain mode: diffchain_setup.c, then diffchain.c (its files share
 * diffchain_impl.h; its Conv update, bf__conv_update, is exec's:
 * step_access.h) */
bf_status bf__chain_setup(bf__dx_shared *sh, bf_evaluator *ev, bf_plan *plan[2], bf_error *err);
/* Before the cache is built: *possible 0 when no chain could be made over
 * the values `has` marks as cached (the widest value chains would read is
 * too wide for BF__CHAIN_MAX_FLOATS even without Gemm links), so
 * bf__chain_setup will make none on a cache that holds them. */
bf_status bf__chain_possible(bf__dx_shared *sh, bf_plan *plan[2], const unsigned char *has, int *possible,
                             bf_error *err);
void bf__chain_shared_free(bf__dx_shared *sh);
bf_status bf__chain_init(bf__dx *dx, bf_error *err);
void bf__chain_free(bf__dx *dx);
/* One trial whose only fault, w (written into the plans), is in a chain
 * Gemm or Conv: its changed output rows into dx->out, dx->rows and
 * dx->touched. *done 0 when w is not such a fault or row mode could not
 * take the chain on (nothing written). */
bf_status bf__chain_run(bf__dx *dx, const bf__dx_weight *w, int *done, bf_error *err);

/* difflinear.c */
bf_status bf__lin_setup(bf__dx_shared *sh, const bf_plan *p, bf_error *err);
void bf__lin_free(bf__dx_shared *sh);
/* Runs the changed rows of segment L's input, n rows row[] (ascending)
 * with new values v[t nc + q] in columns col[0..nc) (golden elsewhere),
 * through the segment where the change keeps every ReLU input on its
 * golden side with room to spare (sum |d_q| inv_radius <= 1/2, d the
 * change): yg + sum_q d_q J[col_q], a product then a sum per term, yg the
 * golden output; those that differ from yg in some bit are appended to
 * yrow and yv (width L->n), and their count returned. The other rows are
 * left in row[] and v, in order, *nleft of them. gin and gout: row 0 of
 * the golden input (width L->k) and output over the eval set. `simd`:
 * eight lanes at a time on a CPU with AVX2, the same IEEE operations, so
 * the same bits (test_chain). */
int64_t bf__lin_rows(int simd, const bf__lin *L, int64_t samples, int64_t n, int64_t *row, float *v, const int *col,
                     int nc, const float *gin, const float *gout, int64_t *yrow, float *yv, int64_t *nleft);

/* diffrows.c, diffrows_check.c (diffrows_impl.h shares their helpers) */
bf_status bf__rows_init(bf__dx *dx, bf_error *err);
void bf__rows_free(bf__dx *dx);
/* Points the row-mode plans at the evaluator's copies of the parameters the
 * trial corrupts (faulty now, golden again after the trial); makes the
 * row-mode plans first if this is their first use. */
bf_status bf__rows_params(bf__dx *dx, const bf__dx_weight *w, size_t n_w, bf_error *err);
/* Tries batch b in row mode; *done 0 (nothing written) when it cannot. */
bf_status bf__rows_batch(bf__dx *dx, int64_t b, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf,
                         size_t n_vf, int first, int last_entry, float *vf_old, float *vf_new, int *done, bf_error *err);
/* Tries every marked batch (dx->bmark) at once, their reached samples on
 * the rows of one sub-plan; *done 0 (nothing written) when it cannot. */
/* Whether a chain's changed rows of value v can run on rows from v's
 * readers to the output (bf__rows_seeded), into *can; makes the row-mode
 * plans first if this is their first use (w: the trial's corrupted
 * parameters, which the new plans then read from the evaluator's). */
bf_status bf__rows_can_seed(bf__dx *dx, int v, const bf__dx_weight *w, size_t n_w, int *can, bf_error *err);
/* Runs the changed rows of value v (rows[0..n) ascending; vals: their
 * whole rows) from v's readers to the output on the sub-plans, in runs of
 * the widest, into dx->out, dx->rows and dx->touched; *done 0 (nothing
 * written) when they cannot. */
bf_status bf__rows_seeded(bf__dx *dx, int v, const int64_t *rows, const float *vals, int64_t n, int *done,
                          bf_error *err);
bf_status bf__rows_all(bf__dx *dx, const bf__dx_weight *w, size_t n_w, const bf_value_fault *vf, size_t n_vf,
                       int first, int last_entry, float *vf_old, float *vf_new, int *done, bf_error *err);

/* dxparam.c: a trial's faults in parameters that parameter-only values
 * move (Transpose, Reshape, ...) written into the worker's views of those
 * values, their steps left unrun (param_hit cleared) and *last_entry
 * widened to their readers; _batch marks them DIRTY in a batch and points
 * plan p at the views; _end writes the golden bits back and gives the
 * written pages back.
 *
 * A worker's plans hold every parameter-only value golden wherever a
 * reader may read it in place (a Conv's weight or bias, a Gemm's C, a
 * chain link's operands): _golden points both plans at the campaign's
 * copies at the start of each trial (bf__dx_arena_use; between trials the
 * plans hold their own slots, where a full pass, run by the evaluator,
 * writes every value), _batch at the start of each batch points p at them (or at the
 * trial's views) and fetches the values the campaign could not hold (over
 * its limit, no arena), so a value's own slot holds bytes only where its
 * step ran in this batch (a fault reached it). */
bf_status bf__pv_init(bf__dx *dx, bf_error *err);
void bf__pv_free(bf__dx *dx);
bf_status bf__pv_trial_begin(bf__dx *dx, const bf__dx_weight *w, size_t n_w, int *last_entry, bf_error *err);
void bf__pv_golden(bf__dx *dx);
bf_status bf__pv_batch(bf__dx *dx, bf_plan *p, int64_t b, bf_error *err);
void bf__pv_trial_end(bf__dx *dx);
/* Value v's golden tensor in batch b: the cache's, a parameter-only
 * value's (the same for every batch), or for the graph's output the
 * campaign's golden outputs (the cache, smallest values first, leaves a
 * language model's logits out: GPT-2's, 103 MB for 2 x 256 tokens, were
 * then read by no trial, and a tied table's logit column could not be
 * recomputed alone); NULL: none holds it. */
static inline const void *bf__dx_golden(const bf__dx_shared *sh, int v, int64_t b)
{
    const void *g = bf__pvals_data(sh->pv, v);
    if (!g) g = bf__gcache_block(sh->gc, v, b);
    if (!g && v == sh->out_val && sh->golden) g = sh->golden + b * sh->batch * sh->out_cols;
    return g;
}

/* diffshared.c: for a MatMul of one B matrix (bf__matmul_fold_params) whose
 * B is a 2-D parameter, or a Transpose of one (GPT-2's logits read its tied
 * embedding table so): that parameter in *q, and in *tr whether B is its
 * transpose; 0 otherwise. */
int bf__dx_matmul_weight(const bf_model *m, const bf_plan *p, const bf__step *s, size_t *q, int *tr);
#endif
