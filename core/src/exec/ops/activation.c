/* Ops of the activation family (filled in by the op-coverage work). */
#include "exec/op.h"

const bf__op bf__ops_activation[] = {
    {0},
};
