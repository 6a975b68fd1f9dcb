/* placeholder: the elementwise op family (being written) */
#include "../op.h"

const bf__op bf__ops_elementwise[] = {
    {0},
};
