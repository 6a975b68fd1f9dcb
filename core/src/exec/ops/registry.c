/* The table of supported ops: each family file exports a NULL-terminated
 * array; lookup walks them. A hundred-odd entries: a linear scan is fine at
 * plan build time and never runs in the hot loop. The list users see
 * (bitflip ops) is made from the same tables, so it cannot fall out of date. */
#include <string.h>

#include "exec/op.h"

extern const bf__op bf__ops_linalg[];
extern const bf__op bf__ops_elementwise[];
extern const bf__op bf__ops_shape[];
extern const bf__op bf__ops_mitigate[];
/* families of the op-coverage work: each file owns its table */
extern const bf__op bf__ops_activation[];   /* activation.c */
extern const bf__op bf__ops_logic[];        /* logic.c */
extern const bf__op bf__ops_reduce[];       /* reduce.c */
extern const bf__op bf__ops_index[];        /* index.c */
extern const bf__op bf__ops_resize[];       /* resize.c */
extern const bf__op bf__ops_nn[];           /* nn.c */
extern const bf__op bf__ops_recurrent[];    /* recurrent.c */
extern const bf__op bf__ops_quant[];        /* quant.c */
extern const bf__op bf__ops_sequence[];     /* sequence.c: the forms exec/fuse_seqops.c rewrites */
extern const bf__op bf__ops_contrib[];      /* quant_nbits.c: ONNX Runtime's com.microsoft ops, named "com.microsoft:Op" */
extern const bf__op bf__ops_detect[];       /* detect.c: NonMaxSuppression, RoiAlign */
extern const bf__op bf__ops_control[];      /* control.c: If, Loop (their subgraphs: exec/plan_sub.c) */
/* ops bitflip puts in place of exported patterns (exec/fuse_loop.c): bound
 * like any op, but not listed (a model file cannot name them: the loader
 * refuses "bf." ops) */
extern const bf__op bf__ops_fused[];        /* embedding_bag.c */

static const bf__op *const families[] = {bf__ops_linalg, bf__ops_elementwise, bf__ops_shape,
                                         bf__ops_activation, bf__ops_logic, bf__ops_reduce,
                                         bf__ops_index, bf__ops_resize, bf__ops_nn,
                                         bf__ops_recurrent, bf__ops_quant, bf__ops_sequence,
                                         bf__ops_contrib, bf__ops_detect, bf__ops_control};

const bf__op *bf__op_find(const char *name)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const bf__op *op = families[f]; op->name; op++)
            if (strcmp(op->name, name) == 0) return op;
    for (const bf__op *op = bf__ops_fused; op->name; op++)
        if (strcmp(op->name, name) == 0) return op;
    return NULL;
}

const bf__op *bf__op_find_internal(const char *name)
{
    for (const bf__op *op = bf__ops_mitigate; op->name; op++)
        if (strcmp(op->name, name) == 0) return op;
    return NULL;
}

/* The smallest name after `after` (NULL: the smallest of all), or NULL. */
static const char *next_name(const char *after)
{
    const char *best = NULL;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const bf__op *op = families[f]; op->name; op++)
            if ((!after || strcmp(op->name, after) > 0) && (!best || strcmp(op->name, best) < 0)) best = op->name;
    return best;
}

size_t bf__op_names(const char **out, size_t max)
{
    size_t n = 0;
    for (const char *name = next_name(NULL); name; name = next_name(name)) {
        if (n < max) out[n] = name;
        n++;
    }
    return n;
}
