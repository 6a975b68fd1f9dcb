/* Internal layout of the golden checkpoints (ckpt.h), shared by ckpt.c
 * (the cuts, recording, restoring) and ckpt_reach.c (what a trial's faults
 * can reach, the golden values kept for the steps they cannot). */
#ifndef BF_EXEC_CKPT_IMPL_H
#define BF_EXEC_CKPT_IMPL_H

#include "base/warena.h"
#include "exec/ckpt.h"
#include "exec/plan_impl.h"

/* What recording a checkpoint byte costs the golden pass, for the cuts
 * (ckpt.c), the store (ckpt_reach.c) and the one-channel outputs
 * (ckpt_chan.c): the pages faulted in at once (MADV_POPULATE_WRITE, the
 * kernel zeroing them) and the pass's copy into them. On SSDlite320 (16
 * images, h17-ssd) the populate took 0.30 ns a byte (101 -> 228 MiB: 31 ->
 * 70 ms of CPU), the copies about 0.1 more (an estimate): twice that, for a loaded
 * machine. It was 3 ns, measured when the copies faulted each page in
 * themselves: 1 GiB of checkpoints then made the setup 3.3 s longer than
 * 64 MiB did. */
#define BF__CKPT_BYTE_SECONDS 1e-9
/* The price where fresh memory measures dear (bf__pages_fresh_cost over
 * BF__CKPT_DEAR_PAGES seconds a byte): on the AMD benchmark host of
 * h18-ssd (a guest whose first write to each page faults to the
 * hypervisor, populated or not) 136 MiB of fresh pages took 0.30-0.36 s
 * of CPU, 2.3-2.6 ns a byte; priced at 2.5 ns SSDlite320's campaign chose 4
 * cuts and 93.5 MiB instead of 6 and 135.9, and took 8% less CPU
 * (docs/perf/detectors.md, h18-ssd). Two fixed prices, far apart, and a
 * threshold far from both hosts' measurements, so that the choice does
 * not move with the load as timed step costs did (h17-ssd). */
#define BF__CKPT_BYTE_SECONDS_DEAR 2.5e-9
#define BF__CKPT_DEAR_PAGES BF__PAGES_DEAR   /* 1.2e-9: the one threshold of dear pages (base/warena.h) */
/* Where 4 KiB pages measure dear and 2 MiB ones cheap
 * (bf__pages_huge_cheaper, base/warena.h), the checkpoints' block goes in
 * 2 MiB pages: on the AMD host of h21-ssd SSDlite320's golden pass took
 * 0.31-0.39 s of CPU instead of 0.44-0.52. The byte price stays the 4 KiB
 * measurement's (2.5 ns there): priced at 1 ns the choice took 90 MiB
 * instead of 51 and the campaign no less CPU, its system time up to 0.2 s
 * higher on a loaded host (docs/perf/detectors.md, h21-ssd). */

/* The detection tail's early end (ckpt_tail.c, which says why it is
 * exact): the class logits L [.., rows, cols] whose Softmax's columns are
 * thresholded (thr[c]; +Inf: a column no step reads), checked before step
 * `step` (L's Concat along its rows, the blocks its inputs, or the
 * Softmax, L one block), and per image the golden selections. */
#define BF__CKPT_TAIL_CHUNK 32   /* rows whose scores a check computes at once */
typedef struct bf__ckpt_tail_sel {
    int64_t n;                  /* -1: not recorded (no end for the image) */
    int64_t *at;                /* n (row x cols + column)s passing, ascending (the allocation) */
    float *y;                   /* their scores */
} bf__ckpt_tail_sel;
/* A block of L that is a Conv's output [1, m, spatial (hw positions)]
 * moved by copies and n_tr Transposes alone (SSD's heads: Reshape,
 * Transpose, Reshape), each value read by the next step alone: the input
 * dims and perm of each Transpose, Conv side first, to map a channel's
 * elements to the block's rows (ckpt_tail.c, chan_rows). conv -1: none. */
#define BF__CKPT_TAIL_TR 4
typedef struct bf__ckpt_tail_map {
    int conv, n_tr;
    int64_t m, hw;
    int nd[BF__CKPT_TAIL_TR];
    int64_t dims[BF__CKPT_TAIL_TR][BF_MAX_DIMS], perm[BF__CKPT_TAIL_TR][BF_MAX_DIMS];
} bf__ckpt_tail_map;
typedef struct bf__ckpt_tail {
    const bf__node *node;       /* the check step's node (NULL: no rule; why says why) */
    const char *why;
    int step;
    int logits;
    int64_t rows, cols;
    float *thr;                 /* cols */
    int n_in;
    int *in_val;                /* the blocks' values */
    int64_t *in_row;            /* n_in + 1: their first rows in L */
    bf__ckpt_tail_map *map;     /* n_in */
    int64_t map_rows;           /* the most positions (hw) of a mapped block's Conv */
    size_t n_cross;
    int *cross;                 /* values computed before step, read at or after it (or outputs) */
    int64_t samples;
    bf__ckpt_tail_sel *golden;  /* per image */
} bf__ckpt_tail;

struct bf__ckpt {
    size_t n_steps, n_params, n_values;
    int *param_lo, *param_hi;   /* per parameter: first and last step reading it (lo > hi: none) */
    int *val_step;              /* per value: the step computing it (-1: a graph input) */
    int *val_last;              /* per value: the last step reading it (n_steps: a graph output; -1: none) */
    double saved;               /* bf__ckpt_saved_share */
    double byte_s;              /* what recording a byte costs (BF__CKPT_BYTE_SECONDS or _DEAR) */
    int64_t *pre_ns;            /* n_steps + 1: golden time of the steps before each */
    size_t n_cuts;
    int *cut;                   /* ascending steps */
    int *cut_of;                /* per step: the last cut at or before it (an index into cut), or -1 */
    unsigned char *mark;        /* per step: 1 at a cut */
    size_t *lv_first;           /* n_cuts + 1, into lv: each cut's values */
    int64_t *lv;                /* value ids */
    size_t *lv_off, *lv_bytes;  /* where in a sample's block, how many bytes */
    /* the graph (ckpt_reach.c): each step's inputs and outputs (value ids,
     * CSR by step), each value's parameter (-1: none), dynamic steps, the
     * graph outputs */
    int *in_first, *in_val, *out_first, *out_val;
    int *val_param;
    unsigned char *dyn;
    size_t n_outputs;
    int *outputs;
    /* the store (ckpt_reach.c): golden values of steps a trial may skip that
     * steps it runs read; by producing step (st_first, CSR), after the cuts'
     * values in a sample's block */
    size_t n_store;
    int *st_first;
    int64_t *st_val;
    size_t *st_off, *st_bytes;
    int *store_of;              /* per value: its index in st_*, or -1 */
    unsigned char *post;        /* per step: BF__STEP_POST where it computes a stored value */
    /* channel-local Convs (ckpt_chan.c): per step, the output channels of a
     * Conv whose golden output the store keeps so that a trial whose faults
     * all lie in one of its channels recomputes that channel alone (0: not
     * one); per parameter, the elements of such a Conv's weight per output
     * channel (-1: its bias, one element a channel; 0: neither) */
    int64_t *chan_m;
    int64_t *chan_div;
    /* per step, three: a chosen Conv's chain as the recording plan fuses
     * it (plan_impl.h): the step whose output the store keeps (the Conv
     * itself when it runs alone, else the last step its epilogue computes),
     * its BatchNormalization and its residual Add (0: none) */
    int *chan_chain;
    /* per step: the step that follows the changed channel on from a chosen
     * Conv's output (or from such a step's own), reading it alone and
     * changing one channel of its own output alone (a unary map or Clip, a
     * BatchNormalization, a depthwise or grouped Conv with its epilogue),
     * its golden output in the store too; 0: none */
    int *chan_next;
    /* the values price_store (ckpt_reach.c) took out of the store, and
     * their bytes in one sample's block (for --stats and the tests) */
    size_t priced_out;
    uint64_t priced_bytes;
    size_t sample_bytes;
    int64_t samples;
    int64_t slots;            /* samples' blocks held (bf__ckpt_opts.slots): sample s's is s % slots */
    int64_t slot_mult;        /* slots' multiple from bf__ckpt_opts.slot_bytes (1: none) */
    int huge;                   /* the block asked for in 2 MiB pages (bf__ckpt_host_pages) */
    unsigned char *data;        /* samples x sample_bytes */
    bf__ckpt_tail tail;
};

/* What a trial's faults reach (ckpt.h, bf__ckpt_trial_*). */
struct bf__ckpt_trial {
    int lo, hi;                 /* the faults' window (lo < 0: none given) */
    int all;                    /* reach unknown (a graph input's fault): every step from `from` runs */
    int from;                   /* the cut index a run restores (-1: step 0) */
    unsigned char *origin;      /* per step: a fault lands in it (reads a faulted parameter, or computes a faulted value) */
    unsigned char *taint;       /* per value: depends on a fault */
    unsigned char *step_taint;  /* per step */
    unsigned char *req;         /* per step, scratch: must run */
    unsigned char *act;         /* per step: BF__STEP_SKIP / FILL (plan_impl.h) */
    int64_t *run_pre;           /* n_steps + 1: golden ns of the steps run before each */
    int *skip_pre;              /* n_steps + 1: steps skipped before each */
    unsigned char *used;        /* per value, if not NULL: put back from the store (choosing it) */
    unsigned char *read;        /* per value: read by a step the run runs, or a graph output (restored at the cut) */
    /* the Conv step whose one output channel chan_oc every fault lies in
     * (-1: none seen yet; -2: not so), and one faulted element of it as
     * bf__conv_channel takes it (slot 1 weight, 2 bias; its index) */
    int chan_step, chan_slot;
    int64_t chan_oc, chan_index;
    /* pricing the store against the drawn trials (bf__ckpt_store_drawn),
     * at each trial's end: sig, if not NULL, per value, folds in the
     * trial's number (`seen`, counted) where the trial put the value back
     * (used[v] 1, then set to 2), so values put back by the same trials
     * share a sig; with `price` set, `cost` adds the golden seconds of the
     * steps the trial runs from its cut and of the stored bytes it puts
     * back */
    uint64_t *sig;
    int64_t seen;
    int price;
    double cost;
    /* the tail's check (ckpt_tail.c): 1 when it may end the images, and per
     * block of L whether the faults reach it. Its scores' buffer is the
     * caller's of bf__ckpt_run (one a thread), not the trial's: an
     * image-major sweep runs one trial on several threads' images at once,
     * and a buffer here was written by both (a check then compared another
     * image's scores with its golden ones) */
    int tail;
    unsigned char *tail_in;
    int64_t tail_cols;          /* the row length (the checkpoints' when the state was made) */
    /* the one block the faults reach, when they all lie in one output
     * channel of the Conv it is mapped from (-1: none), and that channel's
     * rows in it, ascending: the check computes those alone */
    int tail_map;
    int64_t *tail_rows, tail_nrows, tail_rows_cap;
};

/* ckpt_reach.c: the graph's facts above, from plan p */
bf_status bf__ckpt_graph(bf__ckpt *ck, const bf_plan *p);
/* ckpt_reach.c: chooses the store (st_*, store_of, post) once the cuts are
 * laid out, within `room` bytes over every sample, for `trials` trials
 * (0: unknown): the values trials' closures would read from steps they
 * skip, kept if recording them costs the golden pass less than the trials
 * save. mass[i]: the share of faults first landing in step i (of mtotal);
 * Sets the offsets from *off on. */
/* The store cut to what drawn's trials put back (bf__ckpt_opts.drawn);
 * ck->sample_bytes with it. */
bf_status bf__ckpt_store_drawn(bf__ckpt *ck, const bf_plan *p, bf__ckpt_drawn drawn, void *user, bf_error *err);
bf_status bf__ckpt_choose_store(bf__ckpt *ck, const bf_plan *p, const double *mass, double mtotal,
                                uint64_t room, int64_t trials, size_t *off);
/* ckpt_reach.c: the steps a trial runs (act, run_pre, skip_pre) from tr's
 * origins, storing only values whose producer is after `min_store` (-1:
 * any stored value) */
void bf__ckpt_reach(const bf__ckpt *ck, bf__ckpt_trial *tr, int min_store);
int bf__ckpt_in_arena(const bf_plan *p, const void *data);
/* ckpt_chan.c: chooses the channel-local Convs (chan_m, chan_div) among
 * the steps where faults land, marking their outputs in used (the values
 * the store will hold), within `room` bytes over every sample, for
 * `trials` trials (0: unknown); storable: a value's bytes if the store may
 * hold it, else 0. */
bf_status bf__ckpt_choose_chan(bf__ckpt *ck, const bf_plan *p, const double *mass, double mtotal, uint64_t room,
                               int64_t trials, unsigned char *used,
                               size_t (*storable)(const bf__ckpt *, const bf_plan *, int));
/* ckpt_chan.c: after bf__ckpt_reach, the trial's Conv (chan_step) marked
 * BF__STEP_CHAN where it can run on one channel (else chan_step -2), the
 * work counted for it the one channel's */
void bf__ckpt_chan_mark(const bf__ckpt *ck, bf__ckpt_trial *tr);
/* ckpt_chan.c: instead of step i of a trial's run on plan p: the Conv's
 * golden output (or its fused chain's last step's) from the sample's
 * block, its one channel recomputed (with the epilogue); 0 when this plan
 * cannot (the step then runs whole), 2 when the channel came back golden
 * (the sample's outputs are then golden's: the run stops), else 1; *fused
 * 1 when the chain was fused. The same for a step following the channel
 * on (chan_next) after a Conv or another such step did so: *walk, cleared
 * before the run, says which step is next and on what channel. */
typedef struct bf__chan_walk {
    int next;                   /* the next step following the channel (0: none) */
    int64_t ch;                 /* the channel changed (-1: none followed) */
} bf__chan_walk;
int bf__ckpt_chan_run(const bf__ckpt *ck, const bf__ckpt_trial *tr, const unsigned char *block, bf_plan *p, size_t i,
                      int *fused, bf__chan_walk *walk);
/* ckpt_tail.c: the tail's pattern on plan p (ck->tail; the rule off with
 * its reason where the graph is not it); BF_ENOMEM only for memory */
bf_status bf__ckpt_tail_find(bf__ckpt *ck, const bf_plan *p);
void bf__ckpt_tail_free(bf__ckpt_tail *t);
/* ckpt_tail.c: the golden pass at the check step: sample s's selections
 * kept (BF_ENOMEM when they cannot be) */
bf_status bf__ckpt_tail_record(bf__ckpt *ck, const bf_plan *p, int64_t s);
/* ckpt_tail.c: after bf__ckpt_reach, tr->tail and tr->tail_in */
void bf__ckpt_tail_trial(const bf__ckpt *ck, bf__ckpt_trial *tr);
/* ckpt_tail.c: at the check step of sample s's run on p: 1 when the rows
 * of the blocks the faults reach select, by their Softmax scores and
 * thresholds, exactly the golden pass's (row, class) pairs with the same
 * scores (the image's outputs are then golden's) */
int bf__ckpt_tail_golden(const bf__ckpt *ck, const bf__ckpt_trial *tr, const bf_plan *p, int64_t s, float *y);
bf_status bf__ckpt_trial_alloc(const bf__ckpt *ck, bf__ckpt_trial *tr);
void bf__ckpt_trial_release(bf__ckpt_trial *tr);

#endif
