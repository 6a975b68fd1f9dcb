/* SECDED over 64-bit words: the (72,64) Hsiao code (ecc.c says how its
 * check matrix is built). A word is 64 data bits and 8 check bits; the
 * check bits are the data's syndrome, so a stored word's syndrome is 0 and
 * an error pattern's syndrome is the XOR of the columns of the bits it
 * flips. Decoding a syndrome: 0, no error seen; a column of H, that one bit
 * is flipped back (data or check bit; a pattern of 3 or more flips with
 * that syndrome is miscorrected); anything else, detected and not
 * correctable (every double error lands here: the XOR of two odd-weight
 * columns has even weight, and is not 0 since the columns differ). */
#ifndef BF_MITIGATE_ECC_H
#define BF_MITIGATE_ECC_H

#include <stdint.h>

#define BF_ECC_DATA_BITS 64
#define BF_ECC_CHECK_BITS 8
#define BF_ECC_BITS 72

typedef struct bf__ecc_code {
    uint8_t col[BF_ECC_BITS];         /* column j of H: row i is bit i; 0..63 data, 64..71 check */
    uint8_t byte_syn[8][256];         /* syndrome of data byte b at byte position k */
    int8_t locate[256];               /* syndrome -> the bit whose column it is, or -1 */
} bf__ecc_code;

typedef enum bf__ecc_verdict {
    BF_ECC_CLEAN = 0,                 /* syndrome 0 */
    BF_ECC_CORRECTED,                 /* syndrome a column: that bit flipped */
    BF_ECC_DETECTED                   /* any other syndrome: uncorrectable */
} bf__ecc_verdict;

/* Builds the code's tables (pure: the same every call). */
void bf__ecc_init(bf__ecc_code *e);
/* The 8 check bits of 64 data bits (the data part of the syndrome). */
uint8_t bf__ecc_check(const bf__ecc_code *e, uint64_t data);
/* Decodes a word whose data bits differ from the stored ones by `data_err`
 * and whose check bits differ by `check_err` (the syndrome depends only on
 * the error). On return *data_err and *check_err are what is left after
 * the decoder's correction; *bit the corrected bit (CORRECTED) else -1. */
bf__ecc_verdict bf__ecc_decode(const bf__ecc_code *e, uint64_t *data_err, uint8_t *check_err, int *bit);

#endif
