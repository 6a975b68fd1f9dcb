/* The (72,64) Hsiao SECDED code of the "ecc" mitigation (mitigate/ecc.h)
 * against Hsiao's definition and a plain reference written here:
 *
 * - H, rebuilt here by enumerating all 8-bit columns (not the code's
 *   construction): 72 distinct odd-weight columns, the identity on the
 *   check bits, all 56 weight-3 columns (in the documented order) and 8
 *   of weight 5, 216 ones (the minimum: 8*1 + 56*3 + 8*5), 27 in every
 *   row (Hsiao's balance condition);
 * - the check bits against a bit-by-bit syndrome (each row the parity of
 *   the data bits whose column has that row), on random words;
 * - every single error, data or check bit, corrected, on several words;
 * - every double error (all 72 * 71 / 2 pairs) detected, on several words;
 * - hand-worked triple errors: data bits 0, 1, 2 (rows {0,1,2}, {0,1,3},
 *   {0,1,4}: 0x07 ^ 0x0B ^ 0x13 = 0x1F, which is data bit 56's column
 *   {0..4}) miscorrected by flipping bit 56; data bits 0, 46, 55 ({0,1,2},
 *   {3,4,5}, {5,6,7}: 0x07 ^ 0x38 ^ 0xE0 = 0xDF, weight 7, no column)
 *   detected;
 * - every syndrome decoded as the brute-force search over H says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "mitigate/ecc.h"

static int popcount8(unsigned v)
{
    int n = 0;
    for (; v; v &= v - 1) n++;
    return n;
}

/* The columns as Hsiao's definition gives them, by plain enumeration: the
 * weight-3 columns sorted by their rows (lexicographic), then the 8 cyclic
 * runs of five rows starting at row 0..7, then row i alone for check bit i. */
static void reference_h(uint8_t col[72])
{
    int j = 0;
    /* lexicographic order of (a, b, c) is the order of a * 64 + b * 8 + c */
    int key[56];
    uint8_t w3[56];
    for (unsigned v = 0; v < 256; v++) {
        if (popcount8(v) != 3) continue;
        int r[3], k = 0;
        for (int b = 0; b < 8; b++)
            if (v >> b & 1) r[k++] = b;
        int kk = r[0] * 64 + r[1] * 8 + r[2], at = j++;
        while (at > 0 && key[at - 1] > kk) {
            key[at] = key[at - 1];
            w3[at] = w3[at - 1];
            at--;
        }
        key[at] = kk;
        w3[at] = (uint8_t)v;
    }
    assert_int_equal(j, 56);
    memcpy(col, w3, 56);
    for (int k = 0; k < 8; k++) col[56 + k] = (uint8_t)((0x1Fu << k | 0x1Fu >> (8 - k)) & 0xFF);
    for (int i = 0; i < 8; i++) col[64 + i] = (uint8_t)(1u << i);
}

/* The syndrome of an error pattern, bit by bit from the columns. */
static uint8_t ref_syndrome(const uint8_t col[72], uint64_t data_err, uint8_t check_err)
{
    uint8_t s = 0;
    for (int r = 0; r < 8; r++) {
        int parity = 0;
        for (int j = 0; j < 64; j++) parity ^= (int)(data_err >> j & 1) & (col[j] >> r & 1);
        for (int j = 0; j < 8; j++) parity ^= (check_err >> j & 1) & (col[64 + j] >> r & 1);
        s |= (uint8_t)(parity << r);
    }
    return s;
}

static uint64_t next(uint64_t *x)   /* xorshift64*: test words */
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * UINT64_C(2685821657736338717);
}

static const uint64_t WORDS[] = {0, UINT64_MAX, UINT64_C(0x3f800000bf800000), UINT64_C(0x0123456789abcdef),
                                 UINT64_C(0x7fc00000ff800000)};

static void h_is_hsiao(void **state)
{
    (void)state;
    bf__ecc_code e;
    bf__ecc_init(&e);
    uint8_t ref[72];
    reference_h(ref);
    assert_memory_equal(e.col, ref, 72);
    int ones = 0, row[8] = {0}, w[9] = {0};
    for (int j = 0; j < 72; j++) {
        int k = popcount8(e.col[j]);
        assert_true(k % 2 == 1);
        w[k]++;
        ones += k;
        for (int r = 0; r < 8; r++) row[r] += e.col[j] >> r & 1;
        for (int i = 0; i < j; i++) assert_true(e.col[i] != e.col[j]);
    }
    assert_int_equal(w[1], 8);
    assert_int_equal(w[3], 56);
    assert_int_equal(w[5], 8);
    assert_int_equal(ones, 216);
    for (int r = 0; r < 8; r++) assert_int_equal(row[r], 27);
    /* hand-checked columns of the documented numbering */
    assert_int_equal(e.col[0], 0x07);
    assert_int_equal(e.col[1], 0x0B);
    assert_int_equal(e.col[46], 0x38);
    assert_int_equal(e.col[55], 0xE0);
    assert_int_equal(e.col[56], 0x1F);
    assert_int_equal(e.col[63], 0x8F);
}

static void check_bits_match_reference(void **state)
{
    (void)state;
    bf__ecc_code e;
    bf__ecc_init(&e);
    uint8_t ref[72];
    reference_h(ref);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        uint64_t d = i < 5 ? WORDS[i] : next(&x);
        assert_int_equal(bf__ecc_check(&e, d), ref_syndrome(ref, d, 0));
    }
    /* a stored word (data, its check bits) has syndrome 0: clean */
    uint64_t d = 0, de = 0;
    uint8_t ce = 0;
    int bit;
    assert_int_equal(bf__ecc_decode(&e, &de, &ce, &bit), BF_ECC_CLEAN);
    assert_int_equal(ref_syndrome(ref, d, bf__ecc_check(&e, d)), 0);
}

static void single_errors_corrected(void **state)
{
    (void)state;
    bf__ecc_code e;
    bf__ecc_init(&e);
    for (size_t w = 0; w < sizeof WORDS / sizeof *WORDS; w++) {
        uint64_t data = WORDS[w];
        uint8_t check = bf__ecc_check(&e, data);
        for (int j = 0; j < 72; j++) {
            uint64_t fd = j < 64 ? data ^ UINT64_C(1) << j : data;
            uint8_t fc = j < 64 ? check : (uint8_t)(check ^ 1u << (j - 64));
            uint64_t de = fd ^ data;
            uint8_t ce = (uint8_t)(fc ^ check);
            int bit;
            assert_int_equal(bf__ecc_decode(&e, &de, &ce, &bit), BF_ECC_CORRECTED);
            assert_int_equal(bit, j);
            assert_true(de == 0 && ce == 0);
        }
    }
}

static void double_errors_detected(void **state)
{
    (void)state;
    bf__ecc_code e;
    bf__ecc_init(&e);
    int64_t pairs = 0;
    for (size_t w = 0; w < sizeof WORDS / sizeof *WORDS; w++) {
        uint64_t data = WORDS[w];
        uint8_t check = bf__ecc_check(&e, data);
        for (int a = 0; a < 72; a++)
            for (int b = a + 1; b < 72; b++) {
                uint64_t fd = data;
                uint8_t fc = check;
                if (a < 64) fd ^= UINT64_C(1) << a; else fc ^= (uint8_t)(1u << (a - 64));
                if (b < 64) fd ^= UINT64_C(1) << b; else fc ^= (uint8_t)(1u << (b - 64));
                uint64_t de = fd ^ data, de0 = de;
                uint8_t ce = (uint8_t)(fc ^ check), ce0 = ce;
                int bit;
                if (bf__ecc_decode(&e, &de, &ce, &bit) != BF_ECC_DETECTED) fail_msg("bits %d, %d not detected", a, b);
                assert_true(de == de0 && ce == ce0 && bit == -1);   /* left as it is */
                pairs++;
            }
    }
    assert_int_equal(pairs, 5 * 72 * 71 / 2);
}

static void triple_errors_by_hand(void **state)
{
    (void)state;
    bf__ecc_code e;
    bf__ecc_init(&e);
    /* 0x07 ^ 0x0B ^ 0x13 = 0x1F = column 56: bit 56 flipped too */
    uint64_t de = UINT64_C(1) << 0 | UINT64_C(1) << 1 | UINT64_C(1) << 2;
    uint8_t ce = 0;
    int bit;
    assert_int_equal(bf__ecc_check(&e, de), 0x1F);
    assert_int_equal(bf__ecc_decode(&e, &de, &ce, &bit), BF_ECC_CORRECTED);
    assert_int_equal(bit, 56);
    assert_true(de == (UINT64_C(7) | UINT64_C(1) << 56));   /* four wrong bits now */
    /* 0x07 ^ 0x38 ^ 0xE0 = 0xDF: weight 7, not a column */
    de = UINT64_C(1) << 0 | UINT64_C(1) << 46 | UINT64_C(1) << 55;
    assert_int_equal(bf__ecc_check(&e, de), 0xDF);
    assert_int_equal(bf__ecc_decode(&e, &de, &ce, &bit), BF_ECC_DETECTED);
    /* two data bits and a check bit: 0x07 ^ 0x0B ^ 0x01 = 0x0D = rows
     * {0,2,3}, data bit 6's column (after the six (0,1,c), c = 2..7):
     * bit 6 flipped too */
    de = UINT64_C(3);
    ce = 1;
    assert_int_equal(bf__ecc_decode(&e, &de, &ce, &bit), BF_ECC_CORRECTED);
    assert_int_equal(bit, 6);
    assert_int_equal(e.col[6], 0x0D);
}

/* Every syndrome: the decoder's verdict and bit as a search over H says. */
static void every_syndrome(void **state)
{
    (void)state;
    bf__ecc_code e;
    bf__ecc_init(&e);
    uint8_t ref[72];
    reference_h(ref);
    for (unsigned s = 0; s < 256; s++) {
        int found = -1;
        for (int j = 0; j < 72; j++)
            if (ref[j] == s) found = j;
        uint64_t de = 0;
        uint8_t ce = (uint8_t)s;   /* check-bit errors alone give syndrome s */
        int bit;
        bf__ecc_verdict v = bf__ecc_decode(&e, &de, &ce, &bit);
        if (s == 0) assert_int_equal(v, BF_ECC_CLEAN);
        else if (found >= 0) assert_true(v == BF_ECC_CORRECTED && bit == found);
        else assert_true(v == BF_ECC_DETECTED && popcount8(s) != 3 && popcount8(s) != 1);
        if (s && popcount8(s) % 2 == 0) assert_int_equal(v, BF_ECC_DETECTED);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(h_is_hsiao),
        cmocka_unit_test(check_bits_match_reference),
        cmocka_unit_test(single_errors_corrected),
        cmocka_unit_test(double_errors_detected),
        cmocka_unit_test(triple_errors_by_hand),
        cmocka_unit_test(every_syndrome),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
