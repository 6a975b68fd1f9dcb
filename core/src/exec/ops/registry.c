/* The table of supported ops: each family file exports a NULL-terminated
 * array; lookup walks them. Few dozen entries: a linear scan is fine at plan
 * build time and never runs in the hot loop. */
#include <string.h>

#include "exec/op.h"

extern const bf__op bf__ops_linalg[];
extern const bf__op bf__ops_elementwise[];
extern const bf__op bf__ops_shape[];
extern const bf__op bf__ops_mitigate[];

static const bf__op *const families[] = {bf__ops_linalg, bf__ops_elementwise, bf__ops_shape};

const bf__op *bf__op_find(const char *name)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const bf__op *op = families[f]; op->name; op++)
            if (strcmp(op->name, name) == 0) return op;
    return NULL;
}

const bf__op *bf__op_find_internal(const char *name)
{
    for (const bf__op *op = bf__ops_mitigate; op->name; op++)
        if (strcmp(op->name, name) == 0) return op;
    return NULL;
}

const char *bf__op_supported_list(void)
{
    return "Abs, Add, AveragePool, BatchNormalization, Cast, Clip, Concat, Constant, "
           "ConstantOfShape, Conv, Div, Dropout, Erf, Exp, Expand, Flatten, Gather, Gemm, "
           "GlobalAveragePool, Identity, LayerNormalization, LeakyRelu, Log, MatMul, MaxPool, "
           "Mul, Neg, Pow, ReduceMax, ReduceMean, ReduceSum, Relu, Reshape, Shape, Sigmoid, "
           "Slice, Softmax, Sqrt, Squeeze, Sub, Tanh, Transpose, Unsqueeze, Where";
}
