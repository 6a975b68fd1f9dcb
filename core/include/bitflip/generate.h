/* bitflip — generation: greedy decoding of a language model under faults.
 *
 * From each prompt of an eval set (`input_ids`, int64 [N, P]: N prompts of
 * the same length P), M new tokens, each the arg-max of the last position's
 * logits (bf_argmax_nan_wins: the first maximum; a NaN wins, as torch.argmax
 * has it), fed back
 * as the next input. Golden is the same decoding with no faults.
 *
 * The model: graph input `input_ids` [B, T] (int64 or int32), optionally
 * `attention_mask` [B, T_past + T] (filled with ones) and `position_ids`
 * [B, T] (T_past, T_past + 1, ...); the logits are the output called
 * `logits`, else output 0, [B, T, V] (or [B, V]: the last position's).
 *
 * The KV cache: an export has one when, for layers i = 0 .. L-1, it has the
 * graph inputs `past_key_values.{i}.key` and `.value`, float32
 * [B, H_kv, T_past, D] with H_kv and D fixed, and the graph outputs
 * `present.{i}.key` and `.value`, [B, H_kv, T_past + T, D] (the names
 * Hugging Face's exports use). Then step 0 runs the prompt with an empty past
 * (T_past = 0) and step s >= 1 the one token generated last, with the past
 * its previous step returned; without one (or with no_cache), step s runs the
 * whole sequence so far, P + s tokens. Either way plans have static shapes,
 * so the generator builds one plan per step (its sequence or past length),
 * once, and every run (golden, each fault) reuses them.
 *
 * Positions: the prompt's tokens are positions 0 .. P-1, the token generated
 * at step s is position P + s. With the cache, step 0 writes the cache
 * entries of positions 0 .. P-1 and step s >= 1 that of position P + s - 1;
 * the last generated token (step M-1's) is never fed, so M tokens write
 * positions 0 .. P + M - 2. */
#ifndef BITFLIP_GENERATE_H
#define BITFLIP_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most new tokens a generation makes (bf_gen_opts.new_tokens): each is
 * a plan of its own. */
#define BF_GEN_MAX_NEW_TOKENS 1024

/* The KV cache of an export (see above). */
typedef struct bf_kv_layout {
    int layers;               /* L; 0: the export has no KV cache */
    int64_t heads;            /* H_kv (dim 1 of past_key_values.0.key) */
    int64_t head_dim;         /* D (dim 3) */
} bf_kv_layout;

/* Finds the KV cache by the names above. An export that has only part of
 * it (a past without its present, layers missing, shapes that differ) is
 * refused (BF_EFORMAT) with the name at fault; none at all is BF_OK with
 * layers 0. */
bf_status bf_model_kv_layout(const bf_model *model, bf_kv_layout *out, bf_error *err);

typedef struct bf_gen_opts {
    int64_t new_tokens;       /* M, 1 .. BF_GEN_MAX_NEW_TOKENS */
    int64_t batch;            /* prompts per plan run; 0: all of them, at most 64. The last
                               * batch is filled up with copies of its last prompt, so every
                               * batch runs the same plans (and the same bits) */
    int no_cache;             /* 1: re-run the prefix even where the export has a KV cache */
    /* Refuse (BF_ELIMIT, before any plan is allocated) when the plans
     * together need more than this many bytes (0: no limit). Counted from
     * shapes: every plan's activations, folds, scratch and tables; weight
     * faults add a copy of each faulted parameter per plan. */
    uint64_t max_bytes;
} bf_gen_opts;

/* A bit flip in one entry of the KV cache: written into the cache right
 * after the step that computes position `pos`, and read, as written, by
 * every later step (the step that computed it used the value before the
 * fault, as the model's own attention did). Needs an export with a cache. */
typedef struct bf_kv_fault {
    int layer;                /* 0 .. L-1 */
    int value;                /* 0: the key cache, 1: the value cache */
    int64_t head, pos, dim;   /* the entry: head 0 .. H_kv-1, position 0 .. P+M-2, 0 .. D-1 */
    int bit;                  /* 0 .. 31 */
    int64_t prompt;           /* the eval-set prompt hit; -1: every prompt */
} bf_kv_fault;

/* A value fault (an activation, a graph input: bitflip/fault.h) in the run
 * of one step only. fault.sample is the eval-set prompt (-1: every prompt);
 * fault.index the element within one prompt's slice at that step's shapes
 * (with the cache, step 0 has the prompt's P positions and later steps one;
 * without, step s has P + s). */
typedef struct bf_gen_value_fault {
    int64_t step;             /* 0 .. M-1 */
    bf_value_fault fault;
} bf_gen_value_fault;

/* The faults of one generation, applied together. */
typedef struct bf_gen_faults {
    const bf_bitflip *flips;  /* weights: flipped for every step, restored after */
    size_t n_flips;
    const bf_kv_fault *kv;
    size_t n_kv;
    const bf_gen_value_fault *values;
    size_t n_values;
} bf_gen_faults;

typedef struct bf_generator bf_generator;

/* Checks the model and the prompts (`input_ids` of `prompts`: every id in
 * 0 .. V-1) and builds the plans. */
bf_status bf_generator_create(const bf_model *model, const bf_tensor *prompts, const bf_gen_opts *opts,
                              bf_generator **out, bf_error *err);
void bf_generator_free(bf_generator *g);

int64_t bf_generator_prompts(const bf_generator *g);      /* N */
int64_t bf_generator_prompt_len(const bf_generator *g);   /* P */
int64_t bf_generator_new_tokens(const bf_generator *g);   /* M */
int64_t bf_generator_vocab(const bf_generator *g);        /* V */
int64_t bf_generator_batch(const bf_generator *g);
/* The KV cache in use: layers 0 when the prefix is re-run. */
bf_kv_layout bf_generator_kv(const bf_generator *g);
/* Bytes the plans hold (activations, folds, scratch, tables). */
uint64_t bf_generator_plan_bytes(const bf_generator *g);

/* Checks the faults against the generator (ranges, the KV cache there, a
 * value fault's step) without running. */
bf_status bf_generator_check(const bf_generator *g, const bf_gen_faults *faults, bf_error *err);

/* One generation with `faults` (NULL: golden): tokens gets N x M ids, row
 * by prompt. The weights are restored afterwards, whatever happened. */
bf_status bf_generator_run(bf_generator *g, const bf_gen_faults *faults, int64_t *tokens, bf_error *err);

/* How faulty tokens compare with golden ones, N sequences of M each. */
typedef struct bf_gen_metrics {
    int64_t prompts, new_tokens;
    double generation_match;   /* share of prompts whose M tokens all equal golden's */
    double first_divergence;   /* mean over prompts of the first position (0 .. M-1) whose
                                * token differs; M for a prompt with none */
    double edit_distance;      /* mean token Levenshtein distance (insert, delete, substitute: 1 each) */
} bf_gen_metrics;

/* Fills `out`; scratch is 2 * (M + 1) int64 values the caller provides
 * (NULL: allocated here; BF_ENOMEM if that fails). */
bf_status bf_gen_compare(const int64_t *golden, const int64_t *faulty, int64_t n, int64_t m, int64_t *scratch,
                         bf_gen_metrics *out, bf_error *err);
/* The Levenshtein distance of two token sequences (row: 2 * (m + 1) scratch values). */
int64_t bf_gen_edit_distance(const int64_t *a, const int64_t *b, int64_t m, int64_t *row);

#ifdef __cplusplus
}
#endif
#endif
