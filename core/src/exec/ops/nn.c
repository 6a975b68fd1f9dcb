/* The nn family: ops of neural-network layers beyond the linear-algebra
 * core. Kernels live beside their relatives: the normalisations in
 * linalg_norm.c, GlobalMaxPool with the pools in linalg_pool.c,
 * ConvTranspose in nn_convtranspose.c, Einsum in nn_einsum.c. */
#include "exec/op.h"
#include "linalg_impl.h"

const bf__op bf__ops_nn[] = {
    {"InstanceNormalization", 3, 3, 1, 1, 0, bf__instnorm_prepare, bf__instnorm_run},
    {"GroupNormalization", 3, 3, 1, 1, 0, bf__groupnorm_prepare, bf__groupnorm_run},
    {"LpNormalization", 1, 1, 1, 1, 0, bf__lpnorm_prepare, bf__lpnorm_run},
    {"GlobalMaxPool", 1, 1, 1, 1, 0, bf__gap_prepare, bf__gmp_run},
    {"ConvTranspose", 2, 3, 1, 1, 0, bf__convt_prepare, bf__convt_run},
    {"Einsum", 1, -1, 1, 1, 0, bf__einsum_prepare, bf__einsum_run},
    {0},
};
