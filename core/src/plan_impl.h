/* Internal layout of a plan, shared by the files that execute and fault it. */
#ifndef BF_PLAN_IMPL_H
#define BF_PLAN_IMPL_H

#include "bitflip/plan.h"
#include "graph.h"
#include "op.h"

typedef struct bf__step {
    const bf__node *node;
    int n_in, n_out;
    const bf_tensor **in;     /* into plan->vals; NULL for omitted inputs */
    bf_tensor **out;          /* into plan->vals; outputs nobody reads get a dummy */
    void *params;             /* what the op's prepare wrote */
} bf__step;

struct bf_plan {
    const bf_model *model;
    int64_t batch;
    bf_tensor *vals;          /* one per model value: concrete dtype, shape, data */
    unsigned char *known;     /* 1: computed when the plan was built */
    float **param_copy;       /* per parameter: the plan's private copy, or NULL */
    void **owned;             /* buffers of folded values */
    size_t n_owned;
    bf__step *steps;
    size_t n_steps;
    bf_tensor *dummies;       /* unread optional outputs (e.g. Dropout's mask) */
    void *arena;
    size_t arena_bytes;
    void *scratch;
    size_t scratch_bytes;
};

#endif
