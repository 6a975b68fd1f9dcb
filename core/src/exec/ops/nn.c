/* Ops of the nn family (filled in by the op-coverage work). */
#include "exec/op.h"

const bf__op bf__ops_nn[] = {
    {0},
};
