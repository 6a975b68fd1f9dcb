/* placeholder: the linalg op family (being written) */
#include "../op.h"

const bf__op bf__ops_linalg[] = {
    {0},
};
