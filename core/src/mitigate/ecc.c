/* The (72,64) SECDED code of the "ecc" mitigation, built from Hsiao's
 * definition (M. Y. Hsiao, "A Class of Optimal Minimum Odd-weight-column
 * SEC-DED Codes", IBM J. Res. Dev. 14(4), 1970). Its check matrix H (8 rows,
 * 72 columns) is chosen so that
 *
 *   1. every column has odd weight and all columns differ: a single error's
 *      syndrome is its column (corrected), a double error's is the XOR of
 *      two odd-weight columns, of even weight and not 0 (detected);
 *   2. H has as few 1s as possible (fewest XOR gates in the encoder): the
 *      8 weight-1 columns go to the check bits, then all C(8,3) = 56
 *      weight-3 columns, and only the 8 columns still needed of weight 5;
 *   3. each row has as many 1s as the others (equal encoder tree depths):
 *      216 ones over 8 rows is 27 each. Every row is in 21 of the weight-3
 *      columns and in 1 weight-1 column, so the 8 weight-5 columns must
 *      hold each row 5 times: the 8 cyclic shifts of rows {0, 1, 2, 3, 4}
 *      do (row r is in the shifts k = r-4 .. r mod 8).
 *
 * Bit numbering of a 72-bit word here: data bits 0..55 have the weight-3
 * columns in lexicographic order of their rows (a < b < c: {0,1,2},
 * {0,1,3}, ..., {5,6,7}); data bits 56..63 the weight-5 columns, 56 + k
 * holding rows k, k+1, ..., k+4 (mod 8); check bit i (word bit 64 + i)
 * the column with row i alone. Syndrome bit i is row i: the XOR of the
 * word's bits whose column has row i. */
#include <string.h>

#include "mitigate/ecc.h"

void bf__ecc_init(bf__ecc_code *e)
{
    int j = 0;
    for (int a = 0; a < 8; a++)
        for (int b = a + 1; b < 8; b++)
            for (int c = b + 1; c < 8; c++) e->col[j++] = (uint8_t)(1u << a | 1u << b | 1u << c);
    for (int k = 0; k < 8; k++) {
        unsigned m = 0;
        for (int r = 0; r < 5; r++) m |= 1u << ((k + r) % 8);
        e->col[j++] = (uint8_t)m;
    }
    for (int i = 0; i < 8; i++) e->col[j++] = (uint8_t)(1u << i);
    /* per data byte position, the syndrome of each byte value: eight
     * lookups per word instead of 64 conditional XORs */
    for (int k = 0; k < 8; k++)
        for (int v = 0; v < 256; v++) {
            uint8_t s = 0;
            for (int b = 0; b < 8; b++)
                if (v >> b & 1) s ^= e->col[8 * k + b];
            e->byte_syn[k][v] = s;
        }
    memset(e->locate, -1, sizeof e->locate);
    for (int i = 0; i < BF_ECC_BITS; i++) e->locate[e->col[i]] = (int8_t)i;
}

uint8_t bf__ecc_check(const bf__ecc_code *e, uint64_t data)
{
    uint8_t s = 0;
    for (int k = 0; k < 8; k++) s ^= e->byte_syn[k][(data >> (8 * k)) & 0xff];
    return s;
}

bf__ecc_verdict bf__ecc_decode(const bf__ecc_code *e, uint64_t *data_err, uint8_t *check_err, int *bit)
{
    uint8_t s = (uint8_t)(bf__ecc_check(e, *data_err) ^ *check_err);
    *bit = -1;
    if (!s) return BF_ECC_CLEAN;
    int j = e->locate[s];
    if (j < 0) return BF_ECC_DETECTED;
    *bit = j;
    if (j < BF_ECC_DATA_BITS) *data_err ^= UINT64_C(1) << j;
    else *check_err ^= (uint8_t)(1u << (j - BF_ECC_DATA_BITS));
    return BF_ECC_CORRECTED;
}
