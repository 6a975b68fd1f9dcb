/* Generation's internals, shared by its files (exec/generate.c runs it,
 * exec/gen_layout.c finds what each graph input and output is for,
 * exec/gen_metrics.c compares token sequences). */
#ifndef BF_GEN_IMPL_H
#define BF_GEN_IMPL_H

#include "bitflip/generate.h"
#include "bitflip/plan.h"

/* The most layers a KV cache may have (a bound on names tried, and on the
 * index table below). */
#define BF__GEN_MAX_LAYERS 256

/* What each graph input and output of a language model is (-1: absent). */
typedef struct bf__genio {
    int ids, mask, pos;       /* graph inputs */
    int logits;               /* graph output */
    bf_kv_layout kv;          /* the export's cache (layers 0: none) */
    int cache;                /* 1: decode through it */
    /* layer l: [4l] past key, [4l+1] past value (inputs), [4l+2] present key,
     * [4l+3] present value (outputs) */
    int kv_idx[4 * (BF__GEN_MAX_LAYERS + 1)];
} bf__genio;

/* The cache's layout and (idx, if not NULL, 4 per layer) its inputs and outputs. */
bf_status bf__gen_find_kv(const bf_model *m, bf_kv_layout *out, int *idx, bf_error *err);
/* Every graph input and output given its role, or a refusal naming the one
 * that has none or the wrong shape. use_cache 0: the prefix is re-run even
 * if the export has a cache (its past inputs then get an empty past). */
bf_status bf__gen_roles(const bf_model *m, int use_cache, bf__genio *r, bf_error *err);

/* A generator (exec/generate.c builds it, exec/gen_run.c runs it). */
typedef struct bf__gen_step {
    bf_plan *plan;
    int64_t seq, past;        /* tokens fed, and the cache length before them */
} bf__gen_step;

struct bf_generator {
    const bf_model *m;
    bf__genio io;
    int64_t n, p, mnew, vocab, batch;
    int64_t *prompts;         /* n x p */
    int64_t *seq;             /* batch x (p + mnew): the batch's tokens so far */
    bf__gen_step *steps;          /* mnew */
    uint64_t plan_bytes;
    bf_value_fault *vf;       /* one step's value faults for one batch */
    size_t vf_cap;
};

/* exec/generate.c: what a generator of model on prompts with new_tokens
 * (default batch, the cache where the export has one) holds in its plans,
 * from shapes, nothing allocated but the prompts' copy (a campaign's
 * estimate, campaign/job_budget.c). */
bf_status bf__gen_estimate(const bf_model *model, const bf_tensor *prompts, int64_t new_tokens, uint64_t *bytes,
                           bf_error *err);

/* exec/generate.c: a campaign's stored weights and faults in every step's
 * plan, as bf_evaluator_set_param, bf_evaluator_write_param and
 * bf__evaluator_param_golden do in an evaluator's (param and index are
 * the caller's to check). */
bf_status bf__generator_set_param(bf_generator *g, size_t param, const float *values, bf_error *err);
bf_status bf__generator_write_param(bf_generator *g, size_t param, int64_t index, float value, bf_error *err);
void bf__generator_param_golden(bf_generator *g, size_t param);

#endif
