/* What the layers above exec (the differential engine, the mitigations)
 * may read of a plan, an evaluator and an op's parsed parameters: a step run
 * alone, the evaluator's plans and feeds, and for Gemm, Conv, pooling,
 * unary maps, Gather and Concat the forms that let a caller recompute part
 * of a step exactly. Declared here, below diff/, so that exec never includes
 * a header of a layer above it; implemented in plan.c, eval.c and ops/. */
#ifndef BF_STEP_ACCESS_H
#define BF_STEP_ACCESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bitflip/eval.h"
#include "bitflip/plan.h"
#include "exec/eval_ckpt.h"
#include "exec/plan_impl.h"

/* When a change of a step's output counts as clear (relative to the golden
 * value: an update gives the exact bits) and as huge (recompute instead):
 * shared by the Conv update below and diff/'s column and rank updates. */
#define CLEAR_CHANGE 0x1p-11
#define HUGE_CHANGE 0x1p8

/* plan.c: runs step i of the plan alone, on whatever its inputs hold. */
bf_status bf__plan_run_step(bf_plan *plan, size_t i, bf_error *err);
/* From now on a step run alone (bf__plan_run_step, _fused) first faults in
 * the arena slots it writes whole, each once, in one call (plan.c says why);
 * best effort: out of memory for its map, nothing changes. */
void bf__plan_warm_slots(bf_plan *plan);
/* The same for value v alone, where a copy other than a step's run is about
 * to write nearly all of its slot (diff/diffchan.c, bf__chan_fill: the
 * golden channels around a changed one); nothing without warm slots, for a
 * value outside the arena or one already faulted in. */
void bf__plan_warm_value(bf_plan *plan, int v);
/* plan.c: the last step Conv step i may compute in its epilogue now (its
 * activation, a residual Add or a BatchNormalization: plan_impl.h's
 * fuse_to, whatever the plan's fuse says), *bn the BatchNormalization and
 * *add the residual Add among them (0: none); 0 when it fuses nothing or a
 * value fault needs an output in between. Then
 * bf__plan_run_fused runs step i so: the last step's output written, the
 * Conv's (and those of a BN or an Add before the last) not; the steps in between
 * are the caller's to skip (the differential engine's trials). */
int bf__plan_fused_last(const bf_plan *plan, size_t i, int *bn, int *add);
bf_status bf__plan_run_fused(bf_plan *plan, size_t i, bf_error *err);
/* plan.c: 1x1 Conv step i and depthwise Conv step plan->tab.pwdw[i] run
 * together (plan_impl.h, pwdw; linalg_conv_pwdw.c), each with its fused
 * epilogue, the pair's block of channels in buf (floats of it: at least
 * bf__conv_pwdw_pair's); 1 when done, the steps computed marked in
 * fused_skip for the caller to skip (as bf__plan_run_from does); 0 when
 * nothing ran (a value fault needs a value in between, or the kernel does
 * not take the pair). bf__plan_run_from and the golden cache's pass
 * (diff/gcache.c). */
int bf__plan_run_pwdw(bf_plan *plan, size_t i, float *buf, size_t floats);
/* plan.c: applies the plan's value faults that belong after `step` (-1:
 * graph inputs), as bf_plan_run would. */
void bf__plan_apply_value_faults(bf_plan *plan, int step);

/* eval.c: the evaluator's full-batch plan of thread 0 (tail 0) or its plan
 * for the last, partial batch (tail 1; NULL when the batch divides the eval
 * set), and the dataset tensor feeding graph input i. */
bf_plan *bf__evaluator_plan(bf_evaluator *ev, int tail);
const bf_tensor *bf__evaluator_feed(const bf_evaluator *ev, size_t input);
/* eval.c: the task metrics of `outputs` (samples x out_cols), as a pass
 * that produced them would report; res->outputs points at `outputs`. */
void bf__evaluator_score(bf_evaluator *ev, const float *outputs, bf_eval_result *res);
/* The same, a segmentation task's arg-max of every image left in seg_keep
 * [samples, H*W] (NULL, or another task: bf__evaluator_score). */
void bf__evaluator_score_keep(bf_evaluator *ev, const float *outputs, int32_t *seg_keep, bf_eval_result *res);
/* eval.c: a result with no task metric (every metric NaN, the rest 0),
 * for the scorers to fill. */
void bf__eval_result_clear(bf_eval_result *res);
/* eval.c: a segmentation eval set's layout (metrics_seg.h), NULL for
 * other tasks. */
struct bf__seg;
const struct bf__seg *bf__evaluator_seg(const bf_evaluator *ev);
/* eval.c: the labels as the metrics read them (NULL when not that task). */
void bf__evaluator_labels(const bf_evaluator *ev, const int64_t **classes, const float **binary);
/* eval.c: a language_model eval set's layout (all 0 / NULL for other
 * tasks): labels [samples, T] (-100: none), vocabulary V, the labelled
 * positions, and multiple choice's mc_item and mc_answer (NULL: none). */
typedef struct bf__lm_layout {
    const int64_t *labels;
    int64_t T, V, labelled;
    const int64_t *item, *answer;
} bf__lm_layout;
void bf__evaluator_lm(const bf_evaluator *ev, bf__lm_layout *lm);
/* eval.c: the cancel flag an evaluator's passes poll (an evaluator made for
 * one caller and handed to another). */
void bf__evaluator_set_cancel(bf_evaluator *ev, const int *cancel);
/* One-sample graphs: the per-sample outputs bf_evaluator_run_sample takes
 * every other sample's from (e.g. a campaign's golden ones), as `base` gives
 * output 0's; NULL: what the evaluator's last pass left. */
void bf__evaluator_ragged_base(bf_evaluator *ev, const bf_ragged_output *base);
/* One-sample graphs: the golden checkpoints (exec/ckpt.h) every later pass
 * resumes each sample from (ck, NULL: none), or that the next pass records
 * (record, then detached), and the golden outputs [samples x out_cols] a
 * sample that ends early takes (with bf__evaluator_ragged_base's, which must
 * be set first). _trial: what the next pass's faults reach, for the caller
 * to set (bf__ckpt_trial_begin ... _end; NULL: no checkpoints to resume
 * from), for the next pass only. _counts: what the passes so far ran from
 * checkpoints (exec/eval_ckpt.h, bf__ckpt_counts). */
struct bf__ckpt;
struct bf__ckpt_trial;
bf_status bf__evaluator_ckpt(bf_evaluator *ev, const struct bf__ckpt *ck, struct bf__ckpt *record,
                             const float *golden_out, bf_error *err);
struct bf__ckpt_trial *bf__evaluator_ckpt_trial(bf_evaluator *ev);
/* 1 when ev's passes resume from the checkpoints it was given (its plans
 * fit them: bf__ckpt_fits_plan), 0 when they run every sample in full. */
int bf__evaluator_ckpt_on(const bf_evaluator *ev);
bf__ckpt_counts bf__evaluator_ckpt_counts(const bf_evaluator *ev);
/* An image-major sweep (campaign/campaign_imaj.c), one sample at a time on
 * the evaluator's first plan. rec set: sample s's golden run, recording its
 * checkpoints into rec, its outputs kept as a pass keeps them (the golden
 * ones, laid out by _finish with from NULL). Else a trial's run of s (its
 * faults written, tr its reach) resuming from ck, its outputs kept into the
 * trial's own per-sample slots `into` and rows `outs` ([samples x out_cols])
 * instead; a sample the checkpoints show golden takes the golden slots kept
 * so far. _finish: the pass's result over the slots `from` and rows `outs`
 * (a trial's, whose view res->ragged then is) as bf_evaluator_run gives it
 * over its own. */
struct bf__ragged;
int64_t bf__evaluator_out_cols(const bf_evaluator *ev);
bf_status bf__evaluator_imaj(bf_evaluator *ev, const struct bf__ckpt *ck, struct bf__ckpt *rec,
                             struct bf__ckpt_trial *tr, int64_t s, struct bf__ragged *into, float *outs, bf_error *err);
bf_status bf__evaluator_imaj_finish(bf_evaluator *ev, struct bf__ragged *from, const float *outs, bf_eval_result *res,
                                    bf_error *err);
/* sample s's golden outputs, kept by another evaluator's image-major runs
 * (a sweep's second thread), into ev's as its own run keeps them */
bf_status bf__evaluator_imaj_merge(bf_evaluator *ev, const bf_evaluator *from, int64_t s, bf_error *err);
/* what another evaluator's passes ran from checkpoints (_counts) added to ev's */
void bf__evaluator_ckpt_add_counts(bf_evaluator *ev, const bf_evaluator *from);
/* Value fault i of the last pass: the element it struck in the sample it
 * hit (sample 0 for every-sample faults; -1: none, a dynamic value empty
 * or shorter there) and the elements the value had there (plan_impl.h). */
void bf__evaluator_value_fault_at(const bf_evaluator *ev, size_t i, int64_t *index, int64_t *elements);
/* 1: the model takes one sample per call from this eval set (its first
 * input has one dim fewer than the eval set's tensor of that name, and a fixed dim 0), as
 * bf_evaluator_create decides it; plans of it need bf_plan_opts.unbatched. */
int bf__eval_set_unbatched(const bf_model *m, const bf_dataset *ds);
/* A detection evaluator's outputs and ground truth (eval_det.h). */
struct bf__det_task;
const struct bf__det_task *bf__evaluator_det(const bf_evaluator *ev);
/* bf_evaluator_create's check of the eval set's tensors against the graph
 * inputs (names, shapes, dtypes), for estimates made before it. */
bf_status bf__eval_check_inputs(const bf_model *m, const bf_dataset *ds, bf_error *err);
/* Sample s of eval tensor src into a one-sample graph's input dst. */
bf_status bf__eval_feed_sample(const bf_tensor *src, int64_t s, bf_tensor *dst, bf_error *err);

/* linalg.c: a Gemm step's parsed attributes; 0 if the step is no Gemm. */
typedef struct bf__gemm_info {
    int m, n, k, trans_a, trans_b;
    float alpha, beta;
    int use_c;
    int64_t c_rs, c_cs;
} bf__gemm_info;
int bf__gemm_params(const bf__step *s, bf__gemm_info *out);
/* linalg.c: 1 if the step is a Gemm, whose run applies c->act (lo and hi
 * alone: a fused Relu or Clip, plan_build.c). */
int bf__gemm_step(const bf__step *s);
/* linalg.c: a MatMul of one B matrix (numpy's fold of A's batch into M)
 * as the Gemm it runs as; 0 for any other step. */
int bf__matmul_fold_params(const bf__step *s, bf__gemm_info *out);
/* linalg.c: 1 if the step is a MatMul whose run may take a fused bias Add
 * and Gelu (op.h, bf__act's cbias and map): one B matrix [K, N], the fold's
 * one bf__sgemm product (never the small bmm's plain loop). */
int bf__matmul_epi(const bf__step *s);
/* linalg.c: 1 if the step is a batched MatMul (no fold, not the small
 * bmm's plain loop, A and B of one rank and the same batch dims) whose run
 * may read B as another tensor transposed (bf__ctx.bt): a folded
 * Transpose (plan_fuse.c, bf__plan_find_tfolds). */
int bf__matmul_tfold(const bf__step *s);
/* linalg.c: 1 if the step is a batched MatMul whose run may take a fused
 * Softmax over its output's last axis (op.h, bf__ctx's rowmap): the
 * bf__sgemm products of bf__matmul_tfold's steps, B's batch broadcast or
 * not, of a fixed shape. */
int bf__matmul_rows_epi(const bf__step *s);
/* linalg.c: for a Gemm or MatMul step whose product packs op(B) whole at
 * every call (sgemm.h, bf__sgemm_work), that packing of input 1's data as
 * it is now, from the model's shared copies (base/wpack.h: made the first
 * time, kept with the model); NULL for any other step, or no copy. The
 * caller (plan_build.c) asks only while input 1 is the model's own
 * tensor, never a plan's faulty view of it. */
struct bf__wpack;
const float *bf__linalg_packed(const bf__step *s, struct bf__wpack *w);
/* The bytes bf__linalg_packed's copy of step s's B holds (0: s packs none),
 * whether or not the copy is made yet: for the plan's estimate. */
size_t bf__linalg_pack_bytes(const bf__step *s);
/* linalg_conv.c: the same two for a Conv step, whose W the output-channel
 * lanes kernel (linalg_conv_bcast.c) takes packed (bf__linalg_packed and
 * bf__linalg_pack_bytes hand Conv steps to them). */
const float *bf__conv_wpacked(const bf__step *s, struct bf__wpack *w);
size_t bf__conv_pack_bytes(const bf__step *s);
/* 1 for a BatchNormalization in training mode: each sample's output depends
 * on the whole batch (its statistics), so the step never runs on a subset of
 * the batch's rows (linalg_norm.c). */
int bf__batchnorm_batch_stats(const bf__step *s);
/* linalg_conv.c: applies to y (a Conv step's golden output, from input
 * x) the change of element `index` of its weight (slot 1) or bias (slot 2)
 * from old to now, if every output it moves moves clearly (see
 * CLEAR_CHANGE, HUGE_CHANGE). 1 applied; 0 the step must run instead (y may
 * be partly written); -1 the step is no Conv. */
int bf__conv_delta(const bf__step *s, int slot, const float *x, int64_t index, float old, float now, float *y);
/* linalg_conv.c: the output channel that element `index` of a Conv
 * step's weight (slot 1) or bias (slot 2) feeds, recomputed alone into y
 * (the step's output; other channels untouched) with the bits the whole
 * step gives it; scratch: the plan's step scratch. 0 if the step is no
 * Conv. */
int bf__conv_channel(const bf__step *s, int slot, int64_t index, const float *x, const float *w, const float *bias,
                     float *y, void *scratch);
/* linalg_conv.c: output channel ch of a Conv step run as c says (its
 * inputs, and as bf__plan_run_fused sets them up: the last step's output,
 * a BatchNormalization, a residual Add and an activation computed in its
 * epilogue), recomputed alone into c->out[0] (other channels untouched)
 * with the bits the whole fused step gives it: the one-channel product,
 * then the epilogue's own operations on that channel's planes. 0 if the
 * step is no Conv. */
int bf__conv_channel_epi(const bf__step *s, const bf__ctx *c, int64_t ch, void *scratch);
/* plan.c: channel ch of Conv step i and the steps its epilogue computes
 * now (bf__plan_fused_last), into the last one's output, those steps then
 * marked computed as a fused run marks them; returns that last step, or 0
 * (nothing written) when the plan does not fuse step i now or it is no
 * Conv. */
int bf__plan_fused_channel(bf_plan *p, size_t i, int64_t ch);
/* The same, whatever the plan's fuse says (the differential engine's
 * plans, whose trials fuse Conv chains themselves), and nothing marked:
 * the caller skips the chain's steps. */
int bf__plan_chain_channel(bf_plan *p, size_t i, int64_t ch);
/* linalg_conv_pwdw.c: a 1x1 Conv step and the depthwise Conv step that
 * reads its activation's output, run together a block of channels of one
 * image at a time (plan_impl.h, pwdw). bf__conv_pwdw_pair: the floats of
 * the block's buffer that pair takes (the scratch the plan must hold), 0
 * when the shapes or the CPU level are not the pair's. bf__conv_pwdw: pw
 * and dw set up as a run would for each step (their epilogues' activation,
 * if any), the depthwise step's output written, the 1x1's not; buf the
 * block's buffer of buf_floats; 0 (nothing written) when it does not take
 * them (an epilogue with a BN, a residual Add or HardSwish, a buffer too
 * small). Each output the two steps' bits apart. */
int64_t bf__conv_pwdw_pair(const bf__step *pw, const bf__step *dw);
int bf__conv_pwdw(const bf__ctx *pw, const bf__ctx *dw, float *buf, size_t buf_floats);
/* linalg_conv_stpool.c: a first Conv step on linalg_conv_stem.c's kernel
 * and the MaxPool step that reads its activation's output, run together
 * over bands of rows of one image at a time (plan_impl.h, pwdw).
 * bf__conv_stpool_pair: the floats of scratch that pair takes, 0 when the
 * shapes or the CPU level are not the pair's. bf__conv_stpool: cv set up
 * as a run would (its activation), the pool's output written, the
 * Conv's and the activation's not; 0 (nothing written) when it does not
 * take them. Each output the two steps' bits apart. */
int64_t bf__conv_stpool_pair(const bf__step *cv, const bf__step *pl);
int bf__conv_stpool(const bf__ctx *cv, const bf__step *pl, float *buf, size_t buf_floats);
/* linalg_pool.c: MaxPool over bands of input rows (linalg_conv_stpool.c).
 * bf__maxpool_band_ok: 1 when the step is a 2-D MaxPool of horizontal
 * stride 2 and the CPU path is AVX2 or AVX-512 (undilated down the rows,
 * so a band of output rows reads a band of input rows);
 * bf__maxpool_band_rows: the input rows [*h0, *h1) output rows oh0 ..
 * oh1 read; bf__maxpool_band: output rows oh0 .. oh1 of one image's cn
 * planes y (channel c at y + c OH OW) from x channels-last, which holds
 * input row ih, column iw, channel c at x + ((ih - xr0) IW + iw) cn + c
 * (cn a multiple of 8: 16 channels a vector where cn is a multiple of 16
 * on AVX-512, else 8); row: IW cn floats. The bits of the step's own
 * planes (maxpool_s2_plane's order). */
int bf__maxpool_band_ok(const bf__step *st);
void bf__maxpool_band_rows(const bf__step *st, int64_t oh0, int64_t oh1, int64_t *h0, int64_t *h1);
void bf__maxpool_band(const bf__step *st, const float *x, int64_t xr0, int64_t oh0, int64_t oh1, int64_t cn, float *y,
                      float *row);
/* linalg_conv.c: 1 if the step is a Conv, whose run applies c->act. */
int bf__conv_step(const bf__step *s);
/* linalg_conv.c: for a Conv whose whole runs may carry partial sums
 * across K (op.h, bf__psum: one group, prepared for linalg_conv_bcast.c,
 * more than one chunk of K), the floats of one checkpoint of
 * a run, in *block the input channels of a block (a checkpoint's position
 * is a multiple of it) and in *chunk those of a chunk of K (input channel c
 * is in chunk c / *chunk); 0 for any other step. */
size_t bf__conv_psum_of(const bf__step *s, int64_t *block, int64_t *chunk);
/* linalg_conv.c: 1 if the step is a Conv whose every output channel reads
 * its own input channel alone (group = C = M: depthwise), so that
 * bf__conv_channel_n's channel c reads only channel c of its input. */
int bf__conv_depthwise(const bf__step *s);
/* linalg_conv.c: for a Conv whose every output channel reads the input
 * channels of its own group alone, one output channel a group (a grouped
 * or depthwise Conv with mg = 1): the input channels per group (1 for a
 * depthwise Conv), so that input channel c feeds output channel c / that
 * alone; 0 for any other step. */
int64_t bf__conv_group_in(const bf__step *s);
/* linalg_conv.c, for diffchain.c; each returns 0 if the step is not of
 * its kind. A Conv's input and output channels and positions per plane. */
int bf__conv_shape(const bf__step *s, int64_t *c, int64_t *m, int64_t *isp, int64_t *osp);
/* A 2-D Conv's window for diffpos.c: batch, input channels and map, output
 * channels and map, kernel, strides, leading pads, dilations. 1 when its
 * whole runs may take linalg_conv_bcast.c's kernel, the 1x1 lanes
 * (linalg_conv_pwlanes.c) or the 1x1 product on gathered columns
 * (linalg_conv_pwlist.c: then *work is the gather room it needs, in
 * floats; 0 for the others), the paths that compute a list of output
 * positions alone (op.h, bf__cpos); 0 otherwise, or where the step is no
 * Conv. */
typedef struct bf__conv_geom {
    int64_t n, c, h, w, m, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
} bf__conv_geom;
int bf__conv_pos_ok(const bf__step *s, bf__conv_geom *g, int64_t *work);
/* For element `index` of a Conv's weight (slot 1) or bias (slot 2): the
 * output channel it feeds, the input channel it reads (-1 for a bias), and
 * for each output position of a plane the input position its tap reads
 * (-1: padding; 0 for a bias). tap: osp entries. */
int bf__conv_taps(const bf__step *s, int slot, int64_t index, int64_t *oc, int64_t *ic, int32_t *tap);
/* Output channel oc of n samples (at most the step's batch; x and y laid
 * out as its input and output) with the bits the whole step gives it. */
int bf__conv_channel_n(const bf__step *s, int64_t oc, int64_t n, const float *x, const float *wt, const float *bias,
                       float *y, void *scratch);
/* A Conv channel's update for one sample, position p of n: e[p] = yg[p] +
 * dw (x[tap[p]] tapm[p]), or yg[p] where that change is 0 (-0 + 0 would be
 * +0); *moved if any element moved; returns 1 if any change is NaN or huge
 * (HUGE_CHANGE). The hot loop of a Conv fault in diffchain.c: with `simd`
 * (the caller's bf__sgemm_simd(), asked once: it reads BITFLIP_SIMD) on a
 * CPU with AVX2, eight lanes at a time with gathers; the same IEEE
 * operations either way (no contraction in ISO C mode), so the same bits,
 * or both NaN (test_chain). */
int bf__conv_update(int simd, const float *x, const int32_t *tap, const float *tapm, const float *yg, float dw,
                    int64_t n, float *e, int *moved);
/* linalg_pool.c: a MaxPool or AveragePool step: one plane (the positions per plane in and
 * out), with the bits the whole step gives it. */
int bf__pool_plane(const bf__step *s, const float *x, float *y, void *scratch);
int bf__pool_shape(const bf__step *s, int64_t *isp, int64_t *osp);
/* linalg_pool.c: 1 if the step is a GlobalAveragePool or GlobalMaxPool;
 * then bf__gpool_plane computes output element pl (plane pl of its input,
 * on the step's tensors as they hold now) as the run does. */
int bf__gpool_step(const bf__step *s);
void bf__gpool_plane(const bf__step *s, int64_t pl);
/* elementwise.c: 1 if the step is a float unary map (Relu, Sigmoid, ...),
 * whose every output element depends on its own input element only. */
int bf__unary_f32(const bf__step *s);
int bf__unary_relu(const bf__step *s);   /* ... and that map is Relu */
/* elementwise.c: 1 if the step is a float Gelu (erf form, as the loader
 * fuses it); bf__gelu_kernel its kernel for this CPU and BITFLIP_SIMD
 * (read now), y[i] = gelu(x[i]) for i < n (x and y must not overlap), the
 * very function the step runs. */
typedef void (*bf__map_fn)(float *y, const float *x, int64_t n);
int bf__unary_gelu(const bf__step *s);
/* shape.c: 1 if the step's output is its input 0's bytes, copied
 * (Reshape, Flatten, Squeeze, Unsqueeze, Identity: bf__run_copy, which
 * moves nothing when a shared arena gives the two the same place; a Split
 * into one output of its whole input likewise). */
int bf__copy_step(const bf__step *s);
bf__map_fn bf__gelu_kernel(void);
/* elementwise.c: 1 if the step is a float unary map or a float Clip; then
 * bf__map_span runs it on elements [off, off + n) of its input into the
 * same elements of its output (the step's tensors as they hold now), with
 * the bits the whole step gives them. */
int bf__map_f32(const bf__step *s);
void bf__map_span(const bf__step *s, int64_t off, int64_t n);
/* elementwise.c: 1 if the step is a float Softmax of fixed shapes over the
 * last axis (contiguous rows), with *rows rows of *n (each row depends on
 * its own input row alone). */
int bf__softmax_rows(const bf__step *s, int64_t *rows, int64_t *n);
/* elementwise.c: the Softmax's row kernel on count rows of n in place,
 * each row's bits the step's (op.h, bf__ctx's rowmap: a MatMul's fused
 * Softmax) */
void bf__softmax_inplace(float *y, int64_t count, int64_t n);
/* elementwise_softmax.c: the Softmax step's rows, count rows of n from x
 * into y (not overlapping), each row's bits the step's (exec/ckpt_tail.c:
 * the rows a trial's faults reached) */
void bf__softmax_rows_run(float *y, const float *x, int64_t count, int64_t n);
/* elementwise_broadcast.c: 1 if the step is a float Add, Sub, Mul or Div;
 * then bf__binary_span computes output elements [off, off + n) (flat, the
 * operands broadcast as planned) with the bits the whole step gives them. */
int bf__binary_f32(const bf__step *s);
void bf__binary_span(const bf__step *s, int64_t off, int64_t n);
/* elementwise.c: 1 if the step is a float32 Relu, Clip or HardSwish, with *act (if
 * not NULL: the bounds are read, so they must be computed) its bounds as
 * its inputs hold them now (op.h, bf__act); 0 otherwise. */
int bf__act_of(const bf__step *s, bf__act *act);
/* linalg_norm.c: 1 if the step is a BatchNormalization (inference, one
 * output), with *bn (if not NULL) its parameters as its inputs hold them
 * now (op.h, bf__bnorm); 0 otherwise. */
int bf__bnorm_of(const bf__step *s, bf__bnorm *bn);
/* linalg_norm.c: channel ch of such a BatchNormalization alone, every
 * sample's plane of it, on the step's tensors as they hold now, with the
 * bits the whole step gives it; 0 if the step is not one. */
int bf__bnorm_channel(const bf__step *s, int64_t ch);
/* elementwise_reduce.c: 1 if the step is a float ReduceSum or ReduceMean
 * of [N, C, ...] over every axis from 2 on; then bf__reduce_plane computes
 * output element pl (plane pl of its input, the step's tensors as they
 * hold now) as the run does. */
int bf__reduce_planes(const bf__step *s);
void bf__reduce_plane(const bf__step *s, int64_t pl);
/* resize.c: 1 if the step is a float Resize of rank 3 or more whose dims 0
 * and 1 keep their size and scale (each output plane reads its own input
 * plane alone); then bf__resize_channel computes channel ch of every
 * sample's output (the step's tensors as they hold now; scratch: the plan's
 * step scratch) with the bits the whole step gives it. */
int bf__resize_planes(const bf__step *s);
void bf__resize_channel(const bf__step *s, int64_t ch, void *scratch);
/* The same for planes pl[0..n) of the output, plane n * C + c being
 * sample n's channel c (diffplane.c: the planes whose input changed). */
void bf__resize_plane_list(const bf__step *s, const int64_t *pl, int64_t n, void *scratch);
/* shape_gather.c: a Gather step's axis; -1 if the step is no Gather. */
int bf__gather_axis(const bf__step *s);
/* shape_gather.c: grouped class-column Gathers (plan_impl.h, gcol) */
int bf__gather_column(const bf__step *s);
int bf__gather_alike(const bf__step *a, const bf__step *b);
int bf__gather_columns(bf__step *const *s, int n);
/* Whether step s looks rows (dim 0) of input 0 up by the indices of input 1,
 * each output row reading only the rows its indices name: a Gather on axis
 * 0, or bf.EmbeddingBag (ops/embedding_bag.c). */
int bf__row_lookup(const bf__step *s);
/* A Concat step's axis; -1 if the step is no Concat. */
int bf__concat_axis(const bf__step *s);
/* Concat step s: input j's part of the output written into out, the
 * other inputs' parts left as they are (in: the step's inputs). */
void bf__concat_input(const bf__step *s, const bf_tensor *const *in, int j, void *out);
/* fault.c: element i of an int8/uint8 parameter written from a float
 * holding the integer (saturated to the type's range). */
void bf__param_int_set(void *data, bf_dtype dt, int64_t i, float v);

#endif
