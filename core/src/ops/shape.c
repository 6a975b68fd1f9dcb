/* placeholder: the shape op family (being written) */
#include "../op.h"

const bf__op bf__ops_shape[] = {
    {0},
};
