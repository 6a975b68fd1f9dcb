/* Ops of the reduce family (filled in by the op-coverage work). */
#include "exec/op.h"

const bf__op bf__ops_reduce[] = {
    {0},
};
