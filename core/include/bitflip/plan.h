/* bitflip — plan: a model compiled for one batch size.
 *
 * Building a plan fixes every tensor's shape, orders the nodes, folds the
 * shape arithmetic that dynamic-batch exports compute at run time (Shape ->
 * Gather -> Unsqueeze -> Concat -> Reshape) and any other node whose inputs are
 * all known when the plan is built, and allocates one arena for every
 * activation. Running a plan allocates nothing.
 *
 * A plan is used by one thread at a time. It reads the model's parameters in
 * place until a fault writes to one; that tensor is then copied into the plan,
 * so a plan's faults never reach the model or other plans. A plan runs on
 * the thread that calls it: parallelism is across plans. */
#ifndef BITFLIP_PLAN_H
#define BITFLIP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/model.h"
#include "bitflip/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bf_plan bf_plan;

/* Symbolic dimension 0 of every graph input becomes `batch`; a fixed dim 0
 * must equal it. Other symbolic dimensions (a language model's sequence
 * axes) need their sizes given by name: bf_plan_opts.dims. */
bf_status bf_plan_create(const bf_model *model, int64_t batch, bf_plan **out, bf_error *err);
void bf_plan_free(bf_plan *plan);

/* The CPU path the kernels of plans take: "avx2" where the CPU has AVX2 and
 * FMA, "ref" (the scalar reference) otherwise or when the environment
 * variable BITFLIP_SIMD is "ref". Both compute the same bits
 * (docs/ENGINE.md, "Same bits on every CPU"): the choice moves speed only. */
const char *bf_cpu_path(void);

/* --- memory known before allocating
 *
 * A plan's peak memory follows from shapes alone, so it is computed before
 * anything big is allocated: the activation arena (graph inputs and every
 * value computed per run), the values folded when the plan is built
 * (constants: a ConstantOfShape of [32768, 32768] is a 4 GiB fold), the
 * largest scratch any op asks for, a copy of every parameter (what weight
 * faults make, at worst all of them) and the plan's own tables. Every buffer
 * counts rounded up to 64 bytes, as it is allocated. */

/* One buffer of a plan. Strings point into the model. */
typedef struct bf_plan_item {
    const char *what;          /* "output", "folded", "scratch", "input", "parameter copy" */
    const char *node;          /* the node computing it (NULL for inputs, parameters) */
    const char *op;            /* its op type (NULL likewise) */
    const char *value;         /* the value's name (NULL for scratch) */
    bf_dtype dtype;            /* BF_DTYPE_INVALID for scratch */
    int ndim;
    int64_t dims[BF_MAX_DIMS];
    uint64_t bytes;
} bf_plan_item;

typedef struct bf_plan_budget {
    int64_t batch;
    uint64_t arena_bytes;       /* graph inputs and activations, one arena */
    uint64_t folded_bytes;      /* values computed once, at build time */
    uint64_t scratch_bytes;     /* the largest scratch of any op */
    uint64_t param_copy_bytes;  /* every parameter copied (worst case of weight faults) */
    uint64_t overhead_bytes;    /* the plan's tables: a value, step and op parameters per node */
    uint64_t total_bytes;       /* the sum of the above */
    /* the products' weights packed once per model and shared by all its
     * plans (a Gemm's or MatMul's B), so not in total_bytes: a job counts
     * them once (bf_job_budget.packed_bytes) */
    uint64_t packed_bytes;
    /* values computed from parameters and constants alone (a weight's
     * Transpose): a differential campaign computes them once for all its
     * workers (docs/LIMITS.md), so they are not in total_bytes either */
    uint64_t param_only_bytes;
    bf_plan_item largest;       /* the single largest buffer */
} bf_plan_budget;

/* Fills `out` for a plan of `batch` without allocating the plan's buffers:
 * shapes are worked out as bf_plan_create does, and only small folded values
 * (up to 1 MiB each, 64 MiB in all) are computed, since later shapes may
 * depend on them; bigger ones are counted, not made. Fails as bf_plan_create
 * would on a model that cannot be planned at this batch, and with
 * BF_EUNSUPPORTED in the rare model where a shape depends on the data of a
 * value too big to compute here (a Reshape whose shape is read from a
 * folded tensor over 1 MiB). */
bf_status bf_plan_estimate(const bf_model *model, int64_t batch, bf_plan_budget *out, bf_error *err);

typedef struct bf_plan_opts {
    /* Refuse (BF_ELIMIT, nothing big allocated) a plan whose budget's
     * total_bytes exceeds this; 0: no limit. */
    uint64_t max_bytes;
    /* If not NULL, receives the budget (also when refused). */
    bf_plan_budget *budget;
    /* 1: values whose lifetimes do not overlap share memory, so after a run
     * only the graph inputs and outputs hold their values (bf_plan_value of
     * another may read a later value's bytes). For plans that only run
     * whole passes (bitflip eval); the differential engine recomputes steps
     * out of order and needs every value kept. */
    int share_buffers;
    /* 1: a Conv whose output is read by one Relu or Clip alone (and is no
     * graph output) applies that activation in its own epilogue and writes
     * the activation's output directly: the same bits, one pass over the
     * memory fewer. The Conv's own output is then not written (bf_plan_value
     * of it reads whatever was there), so only for plans whose callers read
     * no activation but the graph outputs (bitflip eval, the exact engine's
     * trials). Likewise a residual Add read the Conv's output alone, of a
     * same-shape value computed before the Conv (Conv -> Add(other) ->
     * Relu/Clip, or Conv -> Add): the Conv adds, then activates, in one
     * pass, the Add's own expression; the Conv's and (with an activation)
     * the Add's outputs are not written. A BatchNormalization reading the
     * Conv's output alone (parameters ready when the Conv runs) and a float
     * HardSwish as the activation are computed there too (Conv -> BN ->
     * Relu/Clip/HardSwish, Conv -> BN -> Add ..., Conv -> BN alone), each
     * with its own kernel's arithmetic, the BN's parameters read at each
     * run (a weight fault in them included). Decided per run: a value fault
     * on the Conv's output or on such a BN's or Add's before the last step
     * (bf_plan_set_value_faults) makes it run unfused. */
    int fuse_activations;
    /* Sizes of the symbolic dimensions other than dim 0, by the name the
     * ONNX file gives them (dim_param: "sequence", "past_sequence" in a
     * torch.onnx.export with dynamic_axes): n_dims pairs, sizes >= 0 (0: an
     * empty KV cache). A plan has static shapes, so one plan serves one set
     * of sizes; a graph input with a symbolic dim (other than dim 0) not
     * named here is refused, naming it. Fill them from the eval set's
     * tensors with bf_plan_dims_from. NULL/0: none. */
    size_t n_dims;
    const char *const *dim_names;
    const int64_t *dim_sizes;
    /* 1: the graph takes one sample per call, with no batch dimension (a
     * torchvision detector's `images` [3, H, W]); batch must be 1. Every
     * value computed at run time is then the sample's, whatever its dim 0:
     * a value fault's index counts within the whole value. */
    int unbatched;
    /* Bytes of the run-time arena: the outputs and scratch of the steps
     * whose shapes are data (NonZero of a computed value, what reads it,
     * If and Loop), sized on every run and not in the budget above. A run
     * that needs more fails naming the step. 0: what max_bytes leaves over
     * the plan's total_bytes when max_bytes is set, else
     * BF_PLAN_RUN_BYTES_DEFAULT. */
    uint64_t max_run_bytes;
} bf_plan_opts;

#define BF_PLAN_RUN_BYTES_DEFAULT ((uint64_t)4 << 30)   /* 4 GiB */

/* bf_plan_estimate for the plan bf_plan_create_opts would build with `opts`
 * (share_buffers and the dims count; max_bytes and budget are ignored). */
bf_status bf_plan_estimate_opts(const bf_model *model, int64_t batch, const bf_plan_opts *opts, bf_plan_budget *out,
                                bf_error *err);

/* The sizes of the model's symbolic dimensions other than dim 0, read from
 * the shapes the graph inputs will be fed (shapes[i]: ndims[i] dims for
 * graph input i, in bf_model_input order): up to max names (pointing into
 * the model) and sizes into names[] and sizes[], *n how many. Fails, naming
 * the input and dimension, when an input's rank differs from the model's,
 * when one name gets two sizes, or when a fixed dimension differs. */
bf_status bf_plan_dims_from(const bf_model *model, const int64_t *const *shapes, const int *ndims,
                            const char **names, int64_t *sizes, size_t max, size_t *n, bf_error *err);

/* bf_plan_create with options (NULL: as bf_plan_create). A refusal's message
 * reads "the plan for batch B needs 4.0 GiB (node 'c' ConstantOfShape
 * folded [32768, 32768] float32: 4.0 GiB), over the limit of 4.0 GiB". */
bf_status bf_plan_create_opts(const bf_model *model, int64_t batch, const bf_plan_opts *opts,
                              bf_plan **out, bf_error *err);

/* What a job (an evaluation, a fault campaign) holds at its peak, from
 * shapes, before it starts: what bf_eval_estimate and bf_campaign_estimate
 * fill, so that a job over a memory limit is refused up front. */
typedef struct bf_job_budget {
    int threads;              /* workers, each with its own plans and outputs */
    int64_t batch;            /* samples per plan */
    int64_t rest;             /* the last, partial batch (0: none) */
    uint64_t model_bytes;     /* the model's initializers: loaded once, shared */
    uint64_t dataset_bytes;   /* the eval set: loaded once, shared */
    uint64_t weights_bytes;   /* campaigns on weights in fp16/bf16/int8: the weights as stored */
    uint64_t packed_bytes;    /* the products' weights packed once, shared (bf_plan_budget.packed_bytes) */
    uint64_t param_only_bytes; /* differential campaigns: the parameter-only values, once (at most 2x the weights),
                                * and each worker's copy of those left past that (at most 2x the weights each) */
    uint64_t plans_bytes;     /* per worker and for the golden pass: a plan at batch, one at rest */
    uint64_t outputs_bytes;   /* outputs over the eval set, per worker and for the golden pass */
    uint64_t cache_bytes;     /* golden-activation cache: min(its budget, the activations over the set) */
    uint64_t total_bytes;     /* the sum of the above */
    bf_plan_budget plan;      /* the plan at `batch`, with its largest buffer */
} bf_job_budget;

/* BF_OK if the job fits in `limit` bytes (0: no limit); else BF_ELIMIT with
 * the sentence a user sees, naming the limit as `limit_name` and the job as
 * `job` ("campaign", "evaluation"):
 *   the plan needs 4.0 GiB (node 'c' ConstantOfShape folded [32768, 32768]
 *   float32: 4.0 GiB), over the 4.0 GiB job memory limit (--job-memory)
 * or, when one plan fits but the job does not, "the campaign needs 9.1 GiB
 * (plans ..., golden cache ..., outputs ..., stored weights ..., eval set
 * ..., model ...; the largest buffer: ...), over the ...". */
bf_status bf_job_budget_check(const bf_job_budget *b, uint64_t limit, const char *job, const char *limit_name,
                              bf_error *err);

/* "node 'c' ConstantOfShape folded [32768, 32768] float32: 4.0 GiB" (or
 * "input 'x' [64, 3] float32: ...", "parameter copy 'w' ...", "scratch of
 * node 'conv' Conv: ..."); returns buf. */
char *bf_plan_item_str(const bf_plan_item *item, char *buf, size_t len);

const bf_model *bf_plan_model(const bf_plan *plan);
int64_t bf_plan_batch(const bf_plan *plan);

/* Buffers with concrete shapes: fill the inputs, run, read the outputs. The
 * pointers stay valid for the plan's life. */
bf_tensor *bf_plan_input(bf_plan *plan, size_t i);
const bf_tensor *bf_plan_output(const bf_plan *plan, size_t i);

bf_status bf_plan_run(bf_plan *plan, bf_error *err);

/* Any value of the plan by id (bf_model_find_value): a graph input, a
 * parameter, a folded constant or an activation as the last run left it.
 * NULL for an id out of range; data NULL for a value the plan never computes
 * (it reaches no graph output). */
const bf_tensor *bf_plan_value(const bf_plan *plan, int64_t value);

/* Bytes in the activation arena (for reports). */
size_t bf_plan_arena_bytes(const bf_plan *plan);
/* Number of nodes executed per run, after folding. */
size_t bf_plan_num_steps(const bf_plan *plan);
/* Activations (Relu, Clip, HardSwish), residual Adds and BatchNormalizations
 * the last run computed inside the Conv before them
 * (bf_plan_opts.fuse_activations), a Conv -> BN -> Add -> Relu counted once; *sites (if not NULL): how many Conv + activation
 * pairs and Conv + Add (+ activation) runs of the plan could be (a run
 * fuses fewer when a value fault hits a Conv's or a fused Add's output). */
size_t bf_plan_num_fused(const bf_plan *plan, size_t *sites);

/* The plan's writable copy of parameter `param` (copied from the model on the
 * first call; allocation happens here, never in bf_plan_run). A float32
 * parameter only: the int8/uint8 ones take bf_plan_param_data. */
bf_status bf_plan_param_mut(bf_plan *plan, size_t param, float **data, bf_error *err);
/* The same for a parameter of any dtype (bf_param_info.dtype). */
bf_status bf_plan_param_data(bf_plan *plan, size_t param, void **data, bf_error *err);

#ifdef __cplusplus
}
#endif
#endif
