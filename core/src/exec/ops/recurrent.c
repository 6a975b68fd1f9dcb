/* Ops of the recurrent family (filled in by the op-coverage work). */
#include "exec/op.h"

const bf__op bf__ops_recurrent[] = {
    {0},
};
