/* Internal layout of a plan, shared by the files that execute and fault it. */
#ifndef BF_PLAN_IMPL_H
#define BF_PLAN_IMPL_H

#include "bitflip/fault.h"
#include "bitflip/plan.h"
#include "model/graph.h"
#include "exec/op.h"

typedef struct bf__step {
    const bf__node *node;
    int n_in, n_out;
    const bf_tensor **in;     /* into plan->vals; NULL for omitted inputs */
    bf_tensor **out;          /* into plan->vals; outputs nobody reads get a dummy */
    void *params;             /* what the op's prepare wrote */
    int dyn;                  /* prepared again on every run (plan_dyn.c): a shape that is data */
} bf__step;

/* The run-time arena of dynamic steps (plan_dyn.c): chunks kept across
 * runs, emptied at the start of each run, so that a run whose shapes are
 * those of an earlier one allocates nothing. */
typedef struct bf__dynarena {
    unsigned char **chunk;    /* 64-byte aligned */
    size_t *cap;              /* bytes of each chunk */
    size_t n, n_cap;
    size_t cur, used;         /* the chunk being filled, bytes used in it */
    uint64_t total;           /* bytes of every chunk */
    uint64_t limit;           /* total may not exceed it */
    uint64_t run_bytes;       /* bytes handed out this run */
} bf__dynarena;

/* A value fault as the plan keeps it: where it applies and what it saw. */
typedef struct bf__vfault {
    bf_value_fault f;         /* f.sample: the row, -1 every row */
    int step;                 /* applied after this step; -1: graph input, before the first */
    int64_t row_elems;        /* elements per row of the value */
    float old_value, new_value;   /* at the first row hit, last run */
    int64_t at, at_n;         /* ... its element there (-1: none) and the value's elements in that row */
} bf__vfault;

#define BF__VAL_NOT_RUN (-2)   /* val_step of a value no step computes */
/* bf__plan_fault_site's row length of a dynamic step's value: each run's */
#define BF__ROW_PER_RUN INT64_MAX

/* The per-step tables a run reads to run a step otherwise than on its own
 * (a fusion: a step computed with others, or skipped) or to find what it
 * needs faster. Each is NULL when the plan has none; all but row_step only
 * save time (without them a run runs the steps one by one). Found together
 * by bf__plan_tables_find at the end of a build (but pwdw, which lay_out
 * finds before the arena is placed) and freed together by
 * bf__plan_tables_free (both plan_fuse.c): a new fusion adds its table
 * here and to those two. */
typedef struct bf__plan_tables {
    /* per step: a Gemm's or MatMul's B packed whole once, the model's copy
     * (base/wpack.h), passed to the step (bf__ctx.packed) while its input 1
     * is still the model's own tensor (no fault of this plan's in it);
     * NULL (the array or an entry): the step packs per call */
    const float **packed;
    /* Transposes folded into a batched MatMul's read (bf__plan_find_tfolds,
     * plan_fuse.c): tfold[t] = j + 1 for a Transpose step t swapping the
     * last two dims of X whose only reader is MatMul step j, as its B, with
     * X its A; tfold[j] = t + 1 for that MatMul. A whole run of a fusing
     * plan without a watch (bf__plan_run_from) skips t and has j read X
     * transposed (bf__ctx.bt), unless a value fault strikes t's output.
     * NULL: none. */
    int *tfold;
    /* Gathers of one constant index each from one input, consecutive steps
     * (find_gcols, plan_fuse.c; SSDlite's tail takes each of the 91 class
     * columns of its [3234, 91] scores so, one cache line of 364 bytes a
     * row for 4): gcol[i] = the group's last step for its first step i, 0
     * elsewhere. A run (bf__plan_run_from) runs the group at i, reading
     * each row once, and skips the others as it skips a fused Conv's
     * activation, when no watch acts on any of them and no value fault
     * strikes one. NULL: none. */
    int *gcol;
    /* 1x1 -> depthwise pairs (bf__plan_find_pwdw, plan_fuse.c): pwdw[i] =
     * d for a 1x1 Conv step i fused with its activation r whose output
     * only depthwise Conv step d reads; 0 elsewhere. A run of a fusing
     * plan without a watch (bf__plan_run_from) runs i and d together at i,
     * a block of channels at a time (linalg_conv_pwdw.c), r's output never
     * written, unless a value fault strikes i's, r's or d's output. Only in
     * batched plans that share their arena (bitflip eval's: no caller reads
     * r's output after a run), where d's output (its chain's) lives from step
     * i on, apart from every value live then; and, for its pass alone, in a
     * campaign's golden pass (diff/gcache.c, pass_pairs: set before its pool
     * is laid out, taken off after). NULL: none. n_pwdw: the pairs the last
     * run ran so (test_conv_pwdw). The same table holds the first Conv ->
     * MaxPool pairs (linalg_conv_stpool.c): pwdw[i] = d for a stem Conv step
     * i fused with its activation r whose output only MaxPool step d reads,
     * run together at i over bands of rows, neither i's nor r's output
     * written; n_stpool: those the last run ran so (test_conv_stpool). */
    int *pwdw;
    size_t n_pwdw, n_stpool;
    /* The class selections of a detector's unrolled post-processing
     * (NonZero .. TopK .. ConstantOfShape per class; plan_csel.c), computed
     * in one loop at the first of their steps. NULL: none, or a plan that
     * does not fuse. */
    struct bf__cselset *csel;
    /* per step: 1 when its input 0 is a parameter and it looks rows up in
     * it (bf__row_lookup), the steps rowsrc (plan.c) must look at each run;
     * reading the node's inputs and the model's value of every step for it
     * missed the caches twice a step (2% of SSDlite's trials). Made by every
     * build (its lack fails it with ENOMEM, as the other tables': a plan
     * that builds with a refused allocation is one whose table only saves
     * time, tfold, gcol and csel, which test_matmul_fuse and test_plan_dyn
     * check); NULL only in a plan being built: ask each step. */
    unsigned char *row_step;
} bf__plan_tables;

struct bf_plan {
    const bf_model *model;
    int64_t batch;
    /* > 0: a value fault may also strike a value whose dim 0 is batch x
     * flat_rows (a language model's tokens flattened across the batch,
     * [B·T, E], as a router's logits are), sample s being rows s·T .. s·T+T-1
     * (the batch-major order a reshape of [B, T, E] gives): the generator
     * sets it to its step's sequence length (exec/generate.c). 0: dim 0 must
     * be the batch, as everywhere else (campaigns, the differential engine). */
    int64_t flat_rows;
    /* bf_plan_opts.unbatched: one sample per run, every value wholly its */
    int unbatched;
    bf_tensor *vals;          /* one per model value: concrete dtype, shape, data */
    unsigned char *known;     /* 1: computed when the plan was built */
    void **param_copy;        /* per parameter: the plan's private copy (of its dtype), or NULL */
    size_t *param_view;       /* per parameter: param_copy is a private view of the model's
                               * weights arena of this many bytes (base/warena.h); 0: a heap copy */
    unsigned char *param_rewritten;  /* 1: the whole copy was rewritten (a stored representation):
                                      * its pages are never given back to the arena's golden ones */
    uint64_t **param_dirty;   /* per parameter with a view: a bit per page of it written since it was last
                               * given back (bf__plan_param_write); row lookups read the rest from the
                               * model's tensor (op.h, bf__rowsrc) */
    unsigned char *param_untracked;  /* 1: handed out writable (bf_plan_param_data), any page may differ:
                                      * lookups read the view itself */
    const struct bf_plan *views_of;  /* a plan whose views this one reads as its parameters (the
                                      * differential engine's row-mode plans): its dirty pages too */
    void **owned;             /* buffers of folded values */
    size_t n_owned;
    bf__step *steps;
    size_t n_steps;
    /* the per-step tables of the whole-run fusions and shortcuts (above) */
    bf__plan_tables tab;
    bf_tensor *dummies;       /* unread optional outputs (e.g. Dropout's mask) */
    void *arena;              /* 64-byte aligned, inside arena_mem */
    void *arena_mem;
    size_t arena_bytes;
    void *scratch;
    size_t scratch_bytes;
    /* value faults: val_step maps a value to the step computing it (-1 for
     * graph inputs, BF__VAL_NOT_RUN otherwise); step_hit marks steps after
     * which some fault applies (inputs_hit: before the first). */
    int *val_step;
    unsigned char *step_hit;
    /* a differential worker's plans (bf__plan_warm_slots): a byte a value,
     * 1 once its slot in the arena was faulted in whole; NULL elsewhere */
    unsigned char *warm;
    int inputs_hit;
    bf__vfault *vf;
    size_t n_vf, vf_cap;
    /* fusion (bf_plan_opts.fuse_activations): fuse_to[i] > i when step i
     * (a Conv) may compute that step (its output's only reader, a Relu or
     * Clip) in its epilogue, else 0; made for every plan (a shared arena
     * keeps the pair's buffers apart either way), used only when fuse is
     * set. fused_skip: steps a run computed already, inside their Conv (or Gemm).
     * fuse_add[i] > i: a residual Add between Conv i and its activation
     * fuse_to[i] (Conv -> Add(other) -> Relu/Clip), computed in the Conv's
     * epilogue too (fuse_mid[that Add]: 1; its output is never written
     * then); 0: none. fuse_bn[i] > i: a BatchNormalization right after
     * Conv i, computed in its epilogue too (before the Add and the
     * activation, if any; fuse_mid[it] 1 unless it is fuse_to[i] itself:
     * Conv -> BN alone); 0: none. */
    int fuse;
    int *fuse_to;
    int *fuse_add;
    int *fuse_bn;
    unsigned char *fuse_mid;
    unsigned char *fused_skip;
    /* The differential engine's partial sums (op.h, bf__psum) for step
     * psum_step's Conv, when that step runs whole (run_one,
     * bf__plan_run_fused, bf__plan_run_step); NULL: none. Set and cleared
     * around the one step by the engine (gcache.c, diffexec.c). */
    bf__psum *psum;
    size_t psum_step;
    /* ... and its output positions to compute alone (op.h, bf__cpos;
     * diffpos.c), set and cleared the same way; NULL: all */
    bf__cpos *cpos;
    size_t cpos_step;
    size_t n_fusable, n_fused;
    /* dynamic steps (plan_dyn.c): dyn_val[v] 1 when a dynamic step computes
     * v (its shape and data are the last run's); dyn_prep: the prepare
     * state a run fills for each dynamic step */
    size_t n_dyn;
    unsigned char *dyn_val;
    bf__prep *dyn_prep;
    bf__prep *sub_prep;       /* a subgraph node's (plan_sub.c) */
    bf__dynarena dyn;
    /* NMS near-ties (op.h, bf_nms_ties): the record the evaluator's caller
     * asked for, and the sample this run computes; NULL: none recorded */
    struct bf_nms_ties *nms;
    int64_t nms_sample;
    /* graph inputs read where the caller's rows lie (bf__plan_input_view)
     * since the plan was made: the tests see that a view was taken */
    uint64_t n_input_views;
};

/* What a run started part-way does at its marked steps (exec/ckpt.c's
 * checkpoints): before step i runs, where mark[i] is set, at() is called;
 * nonzero stops the run there (what follows is known to be golden).
 * act[i] (act may be NULL): BF__STEP_SKIP, step i is not run (a trial's
 * fault cannot reach it: its values are golden), and with BF__STEP_FILL
 * fill() puts the golden values of it that later steps read in place;
 * BF__STEP_POST, post() is called after step i ran (to record its values);
 * BF__STEP_CHAN, chan() is called instead of running step i, and the step
 * runs only if it returns 0 (a Conv computing one output channel over its
 * golden output: ckpt_chan.c); 2 stops the run as at() does (that channel
 * came back golden, and it was all the trial's faults changed).
 * step_time, if not NULL, gets each step's seconds added. */
#define BF__STEP_SKIP 1
#define BF__STEP_FILL 2
#define BF__STEP_POST 4
#define BF__STEP_CHAN 8
typedef struct bf__plan_watch {
    const unsigned char *mark;
    int (*at)(void *user, bf_plan *p, size_t step);
    const unsigned char *act;
    void (*fill)(void *user, bf_plan *p, size_t step);
    void (*post)(void *user, bf_plan *p, size_t step);
    int (*chan)(void *user, bf_plan *p, size_t step);
    void *user;
    double *step_time;
} bf__plan_watch;
/* plan.c: bf_plan_run from step `from` on, the values the steps before it
 * computed taken as they are in the plan (the caller put them there): a
 * graph input's value faults apply only when from is 0. *stopped (if not
 * NULL) is 1 when the watch stopped the run. */
bf_status bf__plan_run_from(bf_plan *p, size_t from, const bf__plan_watch *w, int *stopped, bf_error *err);

/* plan_dyn.c: runs dynamic step i: prepared on the values its inputs hold
 * now, its outputs and scratch from the run-time arena. */
bf_status bf__dyn_run_step(bf_plan *p, size_t i, bf_error *err);
/* plan_sub.c: runs If or Loop step i, its subgraph node by node; the Loop
 * alone (after the step's prepare checked its inputs). A Loop runs at most
 * BF__LOOP_MAX_ITERS iterations a run (docs/LIMITS.md). */
#define BF__LOOP_MAX_ITERS INT64_C(100000)
bf_status bf__sub_run_step(bf_plan *p, size_t i, bf_error *err);
bf_status bf__sub_run_loop(bf_plan *p, bf__step *s, bf_error *err);
/* plan_dyn.c: empties the run-time arena (the start of a run). */
void bf__dyn_reset(bf_plan *p);
void bf__dyn_free(bf_plan *p);
/* plan_dyn.c: n bytes (64-byte aligned) of the run-time arena into *out,
 * or an error naming `what` when they would pass its limit. */
bf_status bf__dyn_alloc(bf_plan *p, size_t n, const char *what, void **out, bf_error *err);
/* the same for node n's output j (-1: its scratch; -2: an output of a
 * subgraph's node), the error naming them */
bf_status bf__dyn_alloc_for(bf_plan *p, const bf__node *n, int j, size_t bytes, void **out, bf_error *err);

/* plan_fuse.c: marks the chains a run may fuse (fuse_to, fuse_add, fuse_bn,
 * fuse_mid, n_fusable) once the steps are made; fails only for memory. */
bf_status bf__plan_find_fusions(bf_plan *p, bf_error *err);
/* plan_fuse.c: the plan's bf__plan_tables (but pwdw, bf__plan_find_pwdw's)
 * once its steps are made and val_step filled; fails only for memory (its
 * row_step: the others are best effort). free: every table, pwdw's too. */
bf_status bf__plan_tables_find(bf_plan *p, bf_error *err);

/* plan.c: graph input i reads rows [start, start + the plan's batch) of src
 * where they lie, in place of a copy into its own place (an eval batch's
 * input, 2.4 MB at batch 4 of a 224x224 image model, is then not moved):
 * 1 when it can, *home then its own place, which bf__plan_input_home puts
 * back once the run and every read of its outputs are done (an output may
 * be the input itself); 0 when the caller must copy the rows as before.
 * It can in a batched plan when the rows are the input's bytes as they are
 * (the same dtype and row shape: no cast), 64-byte aligned as the arena's
 * places are, and no value fault of the plan strikes a graph input (applied
 * at the run's start, where the input lies, which must stay the caller's).
 * Nothing else writes a graph input: a step reads its inputs through const
 * tensors and writes its outputs alone, and a value the arena lays over the
 * input's place (a Reshape's output, bf__plan_share_offsets) keeps that
 * place, which the view leaves alone. The caller keeps the rows unchanged
 * and alive until it puts the home back. */
int bf__plan_input_view(bf_plan *p, size_t i, const bf_tensor *src, int64_t start, void **home);
void bf__plan_input_home(bf_plan *p, size_t i, void *home);
void bf__plan_tables_free(bf_plan *p);
/* plan_fuse.c: the Transposes a batched MatMul reads through (p->tab.tfold). */
void bf__plan_find_tfolds(bf_plan *p);
/* plan_fuse.c: the groups of class-column Gathers (p->tab.gcol) */
void bf__plan_find_gcols(bf_plan *p);
/* plan_fuse.c: the 1x1 -> depthwise pairs (p->tab.pwdw) of a plan that fuses
 * and shares its arena, once the fusions are marked; *floats the largest
 * block buffer a pair takes (the scratch the plan must hold). Fails only
 * for memory. */
bf_status bf__plan_find_pwdw(bf_plan *p, size_t *floats, bf_error *err);
/* plan_readers.c: the steps reading each value v, step[first[v]] to
 * step[first[v + 1] - 1] in step order, a step once per input slot holding
 * v (subgraphs' reads not included). make fails only for memory. */
typedef struct bf__plan_readers {
    size_t *first;   /* n_values + 1 */
    int *step;
} bf__plan_readers;
int bf__plan_readers_make(const bf_plan *p, bf__plan_readers *r);
void bf__plan_readers_free(bf__plan_readers *r);
/* plan_csel.c: the class selections (p->tab.csel; find needs val_step). A
 * run calls off at its start and start before step first(): that computes
 * them all, unless a value fault strikes one of their values or the watch
 * acts on or marks one of their steps (then every step runs as a step);
 * emit, for a dynamic step, puts its outputs in place (1, *st its status)
 * or returns 0 (not one of theirs, or not computed this run). */
void bf__plan_find_csels(bf_plan *p);
void bf__plan_free_csels(bf_plan *p);
void bf__plan_csel_off(bf_plan *p);
size_t bf__plan_csel_first(const bf_plan *p);
void bf__plan_csel_start(bf_plan *p, const unsigned char *act, const unsigned char *mark);
int bf__plan_csel_emit(bf_plan *p, size_t i, bf_status *st, bf_error *err);
/* the classes found; *computed: the last run computed them together */
size_t bf__plan_csel_classes(const bf_plan *p, int *computed);

/* Offsets (*out, per value) in *total bytes for the graph inputs and the
 * step outputs marked in `needed`, places shared by values whose lives do
 * not overlap (plan.c explains how); free *out. The plan's own arena for
 * share_buffers, and the golden cache's pass for the values it does not
 * keep (diff/gcache.c). */
bf_status bf__plan_share_offsets(const bf_plan *p, const unsigned char *needed, size_t *total, size_t **out,
                                 bf_error *err);
/* The first fit under bf__plan_share_offsets, for any set of lives: offsets
 * (off[v], for the n values marked in place) for bytes[v] each, rounded up to
 * 64, taken in order of first moment (then value) at the lowest gap among the
 * places of values still alive (last >= that first); *total the bytes. The
 * differential workers' arenas (diff/diffarena.c) use it over their own,
 * longer lives. */
bf_status bf__plan_first_fit(size_t n, const unsigned char *place, const size_t *bytes, const int *first,
                             const int *last, size_t *off, size_t *total, bf_error *err);

/* The row length of `value` if a value fault may hit it in this plan: run
 * time, float32, dim 0 the batch. Otherwise an error saying why. */
bf_status bf__plan_fault_site(const bf_plan *plan, int64_t value, int64_t *row_elems, bf_error *err);
/* Value fault i of the last run: the element it struck at its first row
 * (-1: none; a dynamic value empty or shorter there) and the elements the
 * value had in that row. */
void bf__plan_value_fault_at(const bf_plan *plan, size_t i, int64_t *index, int64_t *elements);
/* The elements per row that value v holds in this run (a dynamic step's:
 * that run's; 0 when not float32 or dim 0 is not the batch). */
int64_t bf__plan_run_row(const bf_plan *plan, int64_t v);
/* Room for n value faults, so that setting up to n allocates nothing. */
/* fault.c: element i of an int8/uint8 parameter as a float holding the
 * integer (bf__param_int_set, in exec/step_access.h, writes one back). */
float bf__param_int_get(const void *data, bf_dtype dt, int64_t i);
/* Parameter copies that are private views of the weights arena (plan.c):
 * _golden makes the plan read the model's tensor again and gives the view's
 * pages back (the caller has restored every fault in it), unless the copy
 * was _rewritten whole (a stored representation), which also makes
 * _is_golden 0. */
void bf__plan_param_golden(bf_plan *p, size_t param);
/* ... keeping the view's private pages, which the caller wrote back to the
 * stored bits (an image-major sweep writes a trial's faults once an image,
 * and dropping them each time, a madvise over the whole tensor and the
 * pages faulted in again, was most of what it cost more: campaign_imaj.c) */
void bf__plan_param_golden_kept(bf_plan *p, size_t param);
/* Writes element `index` of the plan's copy of parameter `param` in its
 * stored type, and marks its page of a view written: the one way to fault
 * a parameter that leaves row lookups reading the other rows from the
 * model's tensor. */
bf_status bf__plan_param_write(bf_plan *p, size_t param, int64_t index, float value, bf_error *err);
void bf__plan_param_rewritten(bf_plan *p, size_t param);
int bf__plan_param_is_golden(const bf_plan *p, size_t param);
/* bf__plan_param_golden in every plan of an evaluator (eval.c): after a
 * trial's faults are written back, their pages return to the arena's, so a
 * campaign's private pages stay those of one trial, whatever it ran before. */
struct bf_evaluator;
void bf__evaluator_param_golden(struct bf_evaluator *ev, size_t param);
void bf__evaluator_param_golden_kept(struct bf_evaluator *ev, size_t param);
bf_status bf__plan_reserve_value_faults(bf_plan *plan, size_t n, bf_error *err);
/* plan_dyn.c: prep readied for a run-time prepare of node n (at_run 1,
 * nothing prepared yet); the caller sets its inputs and outputs. */
void bf__prep_at_run(bf__prep *prep, bf_plan *p, const bf__node *n, int n_in, int n_out);
/* 1: graph output k has the same shape on every run (its size is not data),
 * as bf_plan_output gives it after the plan is built. */
int bf__plan_output_static(const bf_plan *plan, size_t k);

/* bf_plan_estimate of a plan made with share_buffers (or not), and the
 * element count of graph output 0 (out0_numel, if not NULL). */
/* bf__plan_estimate_shared with every option of opts (share_buffers, the
 * symbolic dimensions' sizes); opts->budget is ignored, out filled. */
bf_status bf__plan_estimate_opts(const bf_model *model, int64_t batch, const bf_plan_opts *opts, bf_plan_budget *out,
                                 int64_t *out0_numel, bf_error *err);
bf_status bf__plan_estimate_shared(const bf_model *model, int64_t batch, int share, bf_plan_budget *out,
                                   int64_t *out0_numel, bf_error *err);

#endif
