/* The op interface. Each ONNX op is a bf__op with two functions:
 *
 * prepare (plan build time): reads the node's attributes and its inputs'
 *   dtypes and shapes (and the data of inputs already known at build time,
 *   such as a Reshape's shape), checks them, and sets every output's dtype and
 *   shape, the op's parsed parameters and the scratch bytes it needs. Every
 *   error names the node (use bf__node_error).
 *
 * run (every pass): computes outputs from inputs. It must not allocate; it
 *   gets `scratch` of the size prepare asked for. It may still fail for
 *   data-dependent reasons (an index out of range) and says so in err.
 *
 * Ops live in the files of ops/, grouped by family, each family exporting a table that
 * ops/registry.c concatenates. */
#ifndef BF_OP_H
#define BF_OP_H

#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/tensor.h"
#include "model/graph.h"

#define BF__OP_PARAMS_MAX 1536 /* bytes of parsed parameters per node */
/* Gemm, MatMul and Conv stay within this, so that the ABFT check that
 * follows them can hold their parameters to recompute them. */
#define BF__OP_SUBPARAMS_MAX 768

/* NonMaxSuppression's decisions taken within rounding, recorded per sample
 * when a caller asks (bf_eval_opts.nms_ties: the conformance runner; docs/
 * OPS.md, "NMS near-ties"): a kept box and a box it suppressed whose scores
 * are within the score tolerance, or a compared IoU within `iou` of the
 * threshold, or a candidate's score within the tolerance of the
 * score_threshold. Another engine's last bits may decide those the other
 * way and cascade, so the rows of the sample from there on cannot be
 * verified against it. */
typedef struct bf__nms_sample {
    int runs;          /* NonMaxSuppression runs in the sample's pass so far */
    int earlier;       /* a run before the last one had a near tie */
    int last;          /* the last run had one ... */
    float score;       /* ... its highest score involved (the first in score order) */
    /* The last run's scores of every candidate whose fate another engine
     * may decide otherwise: each candidate in an overlap component (boxes
     * linked by an IoU at least the threshold less the margin) that holds a box
     * of a near decision (detect.c, note_region; bf_nms_ties_region). */
    float *region;
    int64_t n_region, cap_region;
} bf__nms_sample;

/* Sample r's record afresh for a new pass (its region buffer kept). */
void bf__nms_sample_reset(bf__nms_sample *r);

struct bf_nms_ties {
    int64_t samples;
    double rtol, atol;   /* scores a and b are within rounding: |a - b| <= max(atol, rtol max(|a|, |b|)) */
    double iou;          /* an IoU within this of the threshold */
    bf__nms_sample *s;   /* per sample */
};

typedef struct bf__prep {
    const bf__node *node;
    int64_t opset;
    const char *producer;   /* the model's, "pytorch 1.13.1" (bf_model_producer); never NULL */
    int tie_order;          /* the model's bf_load_limits.tie_order (TopK, NonMaxSuppression) */
    int n_in, n_out;
    /* dtype and shape set; data non-NULL only for inputs known at plan build
     * time (constants and folded shape arithmetic). NULL entries: omitted
     * optional inputs. */
    const bf_tensor *in[BF__MAX_IO];
    bf_tensor *out[BF__MAX_IO];     /* prepare sets dtype, ndim, dims */
    alignas(16) unsigned char params[BF__OP_PARAMS_MAX];
    size_t scratch;                  /* bytes of scratch run needs */
    /* Shapes that are data (a detector's NonMaxSuppression keeps a different
     * number of boxes per image). at_run 0: prepare is called when the plan is
     * built, and an op whose output shape needs the data of an input that is
     * not known then (in[i]->data NULL) sets data_dependent = 1 and returns
     * BF_OK without setting its outputs: the plan builder then makes it, and
     * every step that reads what it computes, a step prepared again on every
     * run (at_run 1), when every input's data is there. */
    int at_run;
    int data_dependent;
    /* at_run 1: memory for prepare itself from the plan's run-time arena
     * (plan_dyn.c), kept until the run ends, so what prepare computed there
     * (NonMaxSuppression's selection, which sizes its output) run may copy
     * instead of computing it again: params may hold the pointer. NULL at
     * plan build. */
    bf_status (*run_alloc)(void *ctx, size_t bytes, const char *what, void **out, bf_error *err);
    void *run_ctx;
    /* at_run 1, when the caller records NMS near-ties: the margins, and the
     * record of the sample being run (NULL: nothing recorded, the normal path) */
    const struct bf_nms_ties *nms;
    bf__nms_sample *nms_at;
} bf__prep;

/* Where a row lookup (Gather on axis 0, EmbeddingBag) reads the rows of
 * its table (input 0) when that table is a plan's private view of the
 * weights arena holding a trial's faults (exec/plan.c): rows on a page the
 * trial wrote from the view, every other row from the model's own tensor.
 * Reading a clean row through the view would map the arena's page a second
 * time, and resident memory counts it once per mapping: a BER trial's
 * whole-batch lookups made each worker's views as resident as the tables. */
typedef struct bf__rowsrc {
    const unsigned char *golden;    /* the model's tensor, laid out as the view */
    const uint64_t *dirty;          /* a bit per page of the view: written */
    unsigned page_shift;
} bf__rowsrc;

/* An activation run in an op's epilogue instead of as a step of its own
 * (plan_build.c fuses a Conv's only reader, a Relu or a Clip, into it): each
 * output element v becomes v < lo ? lo : v, then that > hi ? hi : it, the
 * very expressions of Relu (lo 0, hi +inf) and Clip, so the bits are the
 * ones the two steps give. Comparisons are false for NaN, which passes; an
 * absent bound is -inf or +inf, which never compares true. */
typedef struct bf__act {
    float lo, hi;
    int hswish;     /* 1: HardSwish instead (fastmath_impl.h's hard_swish_f32, the op's own
                     * kernel; lo and hi unused): only in the pass after the Conv
                     * (linalg_conv.c, conv_epilogue), never in a path's epilogue */
    /* A residual Add fused in between, computed in the matrix product's
     * epilogue (sgemm.h: bf__sgemm_bias, bf__sgemm_packed; a MatMul's after
     * its bias, bf__sgemm_colepi) and nowhere else:
     * res laid out as the product's y (the same row stride), each element
     * v = s + bias becoming res + v (res_a: res is the Add's A) or v + res
     * before lo and hi. NULL: none (every other reader of bf__act). */
    const float *res;
    int res_a;
    /* A MatMul's fused bias Add and map (plan_fuse.c: MatMul -> Add(bias)
     * [-> Gelu]), in the product's epilogue (sgemm.h, bf__sgemm_colepi):
     * cbias[j] (the N floats of a bias broadcast along the last axis) added
     * to column j's v = s as the Add does, cbias + v (cbias_a: the bias is
     * the Add's A) or v + cbias, lo and hi as for a Conv (the MatMul's
     * fused_ctx sets no bound), then map (the Gelu step's own kernel,
     * elementwise.c: bf__gelu_map) over each block's rows just stored.
     * NULL: none (every Conv). */
    const float *cbias;
    int cbias_a;
    void (*map)(float *y, const float *x, int64_t n);
} bf__act;

/* A BatchNormalization (inference) fused into a Conv between the Conv and
 * its activation (plan_build.c): the BN step's four parameter inputs as they
 * hold now (a trial's faults in them included) and its epsilon; each output
 * element of channel ch becomes fmaf(v, a, b) with invstd = 1 / sqrtf(var +
 * eps), a = invstd * scale, b = fmaf(-mean, a, bias), as PyTorch's CPU
 * batch_norm computes them and the BN kernel does (linalg_norm.c; docs/
 * NUMERICS.md). */
typedef struct bf__bnorm {
    const float *scale, *bias, *mean, *var;
    float eps;
} bf__bnorm;

/* channel ch's a and b: BatchNormalization's kernel and the fused epilogue
 * both take them from here, so the two compute the same floats */
static inline void bf__bnorm_coef(const bf__bnorm *bn, int64_t ch, float *a, float *b)
{
    float invstd = 1.0f / sqrtf(bn->var[ch] + bn->eps);
    *a = invstd * bn->scale[ch];
    *b = fmaf(-bn->mean[ch], *a, bn->bias[ch]);
}

static inline float bf__act_apply(const bf__act *a, float v)
{
    v = v < a->lo ? a->lo : v;
    return v > a->hi ? a->hi : v;
}

/* act for the part of y that starts off floats on: with a residual, a copy
 * in *tmp whose res starts there too (res is laid out as y); act itself
 * (NULL included) otherwise */
static inline const bf__act *bf__act_res_at(const bf__act *act, int64_t off, bf__act *tmp)
{
    if (!act || !act->res) return act;
    *tmp = *act;
    tmp->res = act->res + off;
    return tmp;
}

/* A Conv's partial sums kept across K (docs/ENGINE.md, "The partial-sum
 * resume"): linalg_conv_bcast.c carries each output's sums across K in
 * chunks of whole 16-channel blocks (bf__conv_krow orders k by block
 * first, so the terms of the blocks before one are a prefix of every
 * output's chain), storing them between chunks; at a checkpoint that falls
 * inside a chunk it cuts the chunk there, which moves no term (a float
 * stored and loaded is the same float). The golden pass keeps those
 * stores (save), and a trial's re-run whose input moved in channels at or
 * after a checkpoint alone starts there from them (load), the chains
 * before it being the golden ones, to the bit. Laid out per checkpoint k,
 * row block r of 64 output channels, output position q of the whole batch
 * (image-major, as the step's output): ((k x row blocks + r) x positions
 * + q) x 64 floats (bf__conv_psum_floats: one checkpoint). Only the
 * whole-step path through linalg_conv_bcast.c takes it; `used` says it
 * did. */
typedef struct bf__psum {
    float *save;            /* NULL: none; else checkpoint k at save + k x one checkpoint's floats */
    const int64_t *at;      /* with save: checkpoint k holds the sums of the input channels before at[k]
                             * (a multiple of 16, increasing, 0 < at[k] < channels) */
    int64_t n;              /* with save: the checkpoints */
    const float *load;      /* NULL: none; else resume from checkpoint lk at load + lk x one checkpoint's floats
                             * (the run's own: a plan of fewer images lays them out closer) */
    int64_t lk;
    int64_t from;           /* with load: its position, the sums of the channels before it (a multiple of 16,
                             * 0 < from < channels) */
    int used;               /* set by the Conv: 1 when the sums were saved or loaded */
} bf__psum;

/* A Conv's outputs at some output positions alone (the differential
 * engine's: diffpos.c): each listed position's every output channel,
 * computed as the whole step computes it (the same chain over K, from +0
 * or from a bf__psum checkpoint, the same epilogue), the others left as
 * they are in y, which the caller filled with the golden output. Only the
 * whole-step paths through linalg_conv_bcast.c, the 1x1 lanes
 * (linalg_conv_pwlanes.c) and the 1x1 product on gathered columns
 * (linalg_conv_pwlist.c) take it, and only where the step's fused chain
 * finishes in that kernel's epilogue (no BatchNorm or HardSwish after it);
 * `used` says it did. Otherwise the step computes every position, which
 * gives the listed ones the same bits. */
typedef struct bf__cpos {
    const int32_t *q;       /* output positions, image x (output plane size) + position in it, ascending */
    int64_t n;
    int used;               /* set by the Conv: 1 when it computed the listed positions alone */
    float *work;            /* room to gather in (the 1x1 product's, linalg_conv_pwlist.c), or NULL */
    int64_t work_floats;
} bf__cpos;

typedef struct bf__ctx {
    const bf__node *node;
    const void *params;             /* what prepare wrote */
    int n_in, n_out;
    const bf_tensor *const *in;     /* NULL entries: omitted optional inputs */
    bf_tensor *const *out;
    void *scratch;
    const bf__rowsrc *rows;         /* row lookups only; NULL: input 0's data as it is */
    const bf__act *act;             /* Conv (bf__conv_step), or Gemm (lo and hi alone: a Relu or
                                     * Clip); NULL: none. Set: output 0 is
                                     * the activation's, the op's own is not written */
    const float *res;               /* with act: a residual Add fused in between (plan_build.c),
                                     * its other operand, shaped as output 0; each element
                                     * becomes act(res + v) (res_a: res is the Add's A) or
                                     * act(v + res), the Add's own expression */
    int res_a;
    const bf__bnorm *bn;            /* with act: a BatchNormalization fused right after the
                                     * Conv, before the Add and the activation */
    const float *packed;            /* Gemm or MatMul: op(B) packed whole, the model's copy
                                     * (base/wpack.h), set by the plan only while input 1
                                     * is the model's own tensor; NULL: pack it per call */
    const bf_tensor *bt;            /* MatMul: B is this tensor with its last two dims swapped
                                     * (a Transpose folded into the read, plan.c); input 1's
                                     * data is then not read. NULL: input 1 as it is */
    void (*rowmap)(float *y, int64_t count, int64_t n);
                                    /* MatMul, batched: a Softmax over the last axis fused
                                     * after it (plan_fuse.c, matmul_softmax), run in place
                                     * on each output matrix's count rows of n just computed,
                                     * while they are in cache: the Softmax step's own row
                                     * kernel (elementwise_softmax.c, bf__softmax_inplace), so the
                                     * step's bits; out is then the Softmax's. NULL: none */
    bf__psum *psum;                 /* Conv, whole steps: partial sums saved or loaded (above);
                                     * NULL: none */
    bf__cpos *cpos;                 /* Conv, whole steps: the output positions to compute alone
                                     * (above); NULL: all */
} bf__ctx;

/* The `len` bytes at byte `off` of a row lookup's table: from x (input 0's
 * data), or from the model's tensor where c->rows says the view is clean. */
static inline const unsigned char *bf__row_at(const bf__ctx *c, const unsigned char *x, size_t off, size_t len)
{
    const bf__rowsrc *r = c->rows;
    if (!r || len == 0) return x + off;
    for (size_t pg = off >> r->page_shift, end = (off + len - 1) >> r->page_shift; pg <= end; pg++)
        if (r->dirty[pg >> 6] >> (pg & 63) & 1) return x + off;
    return r->golden + off;
}

typedef struct bf__op {
    const char *name;
    int min_inputs, max_inputs;     /* max -1: variadic up to BF__MAX_IO */
    int min_outputs, max_outputs;
    /* Folding: if set, the output depends only on input shapes (Shape), so it
     * is known at plan time whatever the input data. */
    int shape_only;
    bf_status (*prepare)(bf__prep *p, bf_error *err);
    bf_status (*run)(const bf__ctx *c, bf_error *err);
} bf__op;

/* 1: op is If or Loop (ops/control.c), whose subgraphs a plan runs
 * itself (exec/plan_sub.c): checked per run of a dynamic step, so by the
 * op's functions rather than its name. */
int bf__op_is_control(const bf__op *op);
/* Looks up an op of the default domain; NULL if unsupported. */
const bf__op *bf__op_find(const char *name);
/* The ops bitflip inserts itself ("bf.Clip", "bf.AbftCheck": see
 * mitigate.c); never reachable from a model file. */
const bf__op *bf__op_find_internal(const char *name);
/* The supported op names, sorted, up to max into out; returns how many
 * there are. */
size_t bf__op_names(const char **out, size_t max);

/* Error helper: "node 'NAME' (OP): <message>". */
bf_status bf__node_error(bf_error *err, const bf__node *node, bf_status status, const char *fmt,
                         ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Attribute readers: absent -> default; present with a wrong type -> error
 * naming the node and attribute. `ints` fills up to `max` values. */
bf_status bf__attr_int(const bf__node *n, const char *name, int64_t def, int64_t *out,
                       bf_error *err);
bf_status bf__attr_float(const bf__node *n, const char *name, float def, float *out,
                         bf_error *err);
bf_status bf__attr_string(const bf__node *n, const char *name, const char *def,
                          const char **out, bf_error *err);
/* *count = -1 when absent. */
bf_status bf__attr_ints(const bf__node *n, const char *name, int64_t *out, int max,
                        int *count, bf_error *err);

/* Shape helpers shared by ops. */
/* Numpy-style broadcast of a and b into out; error names the node. */
bf_status bf__broadcast_shape(const bf__node *node, const bf_tensor *a, const bf_tensor *b,
                              bf_tensor *out, bf_error *err);
/* Normalises a possibly negative axis against rank; error if out of range. */
bf_status bf__norm_axis(const bf__node *node, int64_t axis, int rank, int *out, bf_error *err);
/* Reads an integer (int64 or int32) tensor known at plan time into out[]. */
bf_status bf__read_ints(const bf__node *node, const char *what, const bf_tensor *t,
                        int64_t *out, int max, int *count, bf_error *err);
void bf__set_shape(bf_tensor *t, bf_dtype dtype, int ndim, const int64_t *dims);

/* Input i is present and float32; the error names it `what` ("X", "W"). */
bf_status bf__want_f32(const bf__prep *p, int i, const char *what, bf_error *err);
/* Optional output i exists and the graph reads it. */
int bf__output_wanted(const bf__prep *p, int i);
/* Float sum over 16 independent lanes: vectorises without reassociation and
 * keeps the rounding error of a blocked sum. Overflow gives Inf, as in PyTorch. */
float bf__sum16_f32(const float *restrict x, int64_t n);

#endif
