/* bf__sgemm (core/src/exec/ops/sgemm.h): every element is the in-order chain of
 * fused multiply-adds over its row and column. Checked by hand on cases
 * where the order and the fusing show, against a double-precision product
 * within the chain's error bound, bit for bit against the scalar reference
 * on every shape class the AVX2 kernel splits into, and for the property a
 * campaign relies on: a row, a column or a gathered set of rows computed
 * alone gives the bits of the whole product. bf__fma_windows (a Conv
 * channel's chain over shifted windows) against its definition. Every CPU
 * path this machine has (the AVX2 kernel; the AVX-512 one, 12 rows x two
 * panels, where the CPU has it) forced, with the bias epilogue and the
 * panel-packer entry, against the reference; and op(B) packed whole into
 * the caller's work first (bf__sgemm_work), the same; and the epilogue
 * (column bias, residual, clip, map) after the accumulate on partial
 * panels, every combination at every level, against its definition; and
 * the product's columns stored by segments into images' planes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "exec/ops/sgemm.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float rnd(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    /* mixed magnitudes and signs, so that orders of summation round apart */
    double u = (double)(rng_state >> 11) / 9007199254740992.0;
    double mag = ldexp(1.0, (int)(rng_state % 9) - 4);
    return (float)((u * 2.0 - 1.0) * mag);
}

static float *rand_buf(size_t n)
{
    float *p = malloc(n * sizeof *p + 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = rnd();
    return p;
}

static int same_bits(const float *x, const float *y, size_t n)
{
    return memcmp(x, y, n * sizeof *x) == 0;
}

/* Worked by hand. x = 1 + 2^-12: x*x = 1 + 2^-11 + 2^-24 rounds (a tie, to
 * even) to 1 + 2^-11, so the chain's second fma leaves exactly -2^-24 where
 * a rounded product then a sum would leave 0; and 1e8 + 1 rounds back to
 * 1e8 in float, so in order [1e8, 1, -1e8] sums to 0, not to 1. */
static void by_hand(void **state)
{
    (void)state;
    float x = 1.0f + ldexpf(1.0f, -12);
    float a[2] = {x, x}, b[2] = {x, -x}, y = 42.0f;
    bf__sgemm(0, 1, 1, 1, 2, 1.0f, a, 2, b, 2, 0, &y, 1);
    assert_true(y == -ldexpf(1.0f, -24));
    float a2[3] = {1e8f, 1.0f, -1e8f}, b2[3] = {1.0f, 1.0f, 1.0f};
    bf__sgemm(0, 0, 1, 1, 3, 1.0f, a2, 3, b2, 1, 0, &y, 1);
    assert_true(y == 0.0f);
    /* accumulate: y = fma(alpha, s, y): 3 + 0.5 * (2 * 5) */
    float a3[1] = {2.0f}, b3[1] = {5.0f};
    y = 3.0f;
    bf__sgemm(0, 0, 1, 1, 1, 0.5f, a3, 1, b3, 1, 1, &y, 1);
    assert_true(y == 8.0f);
    /* k = 0: an empty sum is 0 */
    y = 7.0f;
    bf__sgemm(0, 0, 1, 1, 0, 1.0f, a3, 1, b3, 1, 0, &y, 1);
    assert_true(y == 0.0f);
}

/* Products wide enough for several groups of panels (sgemm.c multiplies a
 * block of rows by up to 16 panels in turn when k <= 256), B in place
 * (ldb <= 1024; on the AVX2 block also past it for up to 24 rows: m = 7,
 * n = 1100) and packed (ldb past it, transposed), with and without the
 * bias and activation epilogue: the reference's bits. */
static void grouped_panels_match_reference(void **state)
{
    (void)state;
    static const int ms[] = {7, 40}, ns[] = {300, 1100}, ks[] = {16, 130, 256};
    const bf__act act = {0.0f, 6.0f, 0, NULL, 0, NULL, 0, NULL};
    for (size_t im = 0; im < 2; im++)
        for (size_t in = 0; in < 2; in++)
            for (size_t ik = 0; ik < 3; ik++)
                for (int form = 0; form < 4; form++) {
                    int m = ms[im], n = ns[in], k = ks[ik], tb = form & 1, acc = form >> 1;
                    int ldb = (tb ? k : n) + 1, ldy = n + 3;
                    float *a = rand_buf((size_t)m * k), *b = rand_buf((size_t)(tb ? n : k) * ldb);
                    float *bias = rand_buf((size_t)m), *y0 = rand_buf((size_t)m * ldy);
                    float *y1 = malloc((size_t)m * ldy * sizeof *y1), *y2 = malloc((size_t)m * ldy * sizeof *y2);
                    assert_non_null(y1);
                    assert_non_null(y2);
                    memcpy(y1, y0, (size_t)m * ldy * sizeof *y1);
                    memcpy(y2, y0, (size_t)m * ldy * sizeof *y2);
                    bf__sgemm(0, tb, m, n, k, 0.75f, a, k, b, ldb, acc, y1, ldy);
                    bf__sgemm_ref(0, tb, m, n, k, 0.75f, a, k, b, ldb, acc, y2, ldy);
                    if (!same_bits(y1, y2, (size_t)m * ldy))
                        fail_msg("m %d n %d k %d transB %d accumulate %d: grouped panels != reference", m, n, k, tb, acc);
                    if (!tb) {
                        bf__sgemm_bias(BF_SGEMM_AVX2, m, n, k, a, k, b, ldb, bias, acc ? &act : NULL, y1, ldy);
                        bf__sgemm_ref(0, 0, m, n, k, 1.0f, a, k, b, ldb, 0, y2, ldy);
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++) {
                                float v = y2[(int64_t)i * ldy + j] + bias[i];
                                y2[(int64_t)i * ldy + j] = acc ? bf__act_apply(&act, v) : v;
                            }
                        if (!same_bits(y1, y2, (size_t)m * ldy))
                            fail_msg("m %d n %d k %d activation %d: grouped bias epilogue != reference", m, n, k, acc);
                    }
                    free(a), free(b), free(bias), free(y0), free(y1), free(y2);
                }
}

/* The fast path against the scalar reference, bit for bit, over shapes that
 * cover full and partial 6 x 16 blocks, k below, at and past 8 and the
 * stack panel's depth (1024), both layouts of B and A, strides wider than
 * the matrices, alpha, accumulate; and the product against double within
 * the chain's bound k u sum|a||b| (plus the final scaling's rounding). */
static void matches_reference_and_double(void **state)
{
    (void)state;
    static const int ms[] = {1, 2, 5, 6, 7, 13, 40};
    static const int ns[] = {1, 3, 8, 15, 16, 17, 33};
    static const int ks[] = {1, 7, 8, 9, 64, 130, 1100};
    long cases = 0;
    if (!bf__sgemm_simd()) print_message("no AVX2 here: bf__sgemm is the reference itself\n");
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
        for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
            for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++)
                for (int form = 0; form < 8; form++) {
                    int m = ms[im], n = ns[in], k = ks[ik];
                    int ta = form & 1, tb = (form >> 1) & 1, acc = (form >> 2) & 1;
                    float alpha = (form % 3) ? 1.0f : 0.75f;
                    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldy = n + 1;
                    float *a = rand_buf((size_t)(ta ? k : m) * lda), *b = rand_buf((size_t)(tb ? n : k) * ldb);
                    float *y0 = rand_buf((size_t)m * ldy);
                    float *y1 = malloc((size_t)m * ldy * sizeof *y1), *y2 = malloc((size_t)m * ldy * sizeof *y2);
                    assert_non_null(y1);
                    assert_non_null(y2);
                    memcpy(y1, y0, (size_t)m * ldy * sizeof *y1);
                    memcpy(y2, y0, (size_t)m * ldy * sizeof *y2);
                    bf__sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, acc, y1, ldy);
                    bf__sgemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, acc, y2, ldy);
                    if (!same_bits(y1, y2, (size_t)m * ldy))
                        fail_msg("m %d n %d k %d transA %d transB %d accumulate %d: fast path != reference", m, n, k,
                                 ta, tb, acc);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++) {
                            double s = 0, mag = 0;
                            for (int p = 0; p < k; p++) {
                                double av = a[ta ? (int64_t)p * lda + i : (int64_t)i * lda + p];
                                double bv = b[tb ? (int64_t)j * ldb + p : (int64_t)p * ldb + j];
                                s += av * bv, mag += fabs(av * bv);
                            }
                            double prev = y0[(int64_t)i * ldy + j];
                            double want = alpha * s + (acc ? prev : 0.0);
                            double bound = (k + 2) * ldexp(1.0, -24) * (fabs(alpha) * mag + fabs(want)) + 1e-30;
                            double got = y1[(int64_t)i * ldy + j];
                            if (!(fabs(got - want) <= bound))
                                fail_msg("m %d n %d k %d: y[%d][%d] = %.9g, double product %.9g (bound %.3g)", m, n,
                                         k, i, j, got, want, bound);
                        }
                    free(a), free(b), free(y0), free(y1), free(y2);
                    cases++;
                }
    print_message("%ld products, fast path == reference bit for bit, all within the bound of double\n", cases);
}

/* What the differential engine relies on: a row, a gathered set of rows or
 * a column computed alone gives the whole product's bits. */
static void parts_reproduce_the_whole(void **state)
{
    (void)state;
    for (int tb = 0; tb < 2; tb++) {
        int m = 64, n = 37, k = 129;
        float *a = rand_buf((size_t)m * k), *b = rand_buf((size_t)n * k);
        int ldb = tb ? k : n;
        float *y = malloc((size_t)m * n * sizeof *y), *part = malloc((size_t)m * n * sizeof *part);
        assert_non_null(y);
        assert_non_null(part);
        bf__sgemm(0, tb, m, n, k, 1.0f, a, k, b, ldb, 0, y, n);
        for (int i = 0; i < m; i++) {
            bf__sgemm(0, tb, 1, n, k, 1.0f, a + (int64_t)i * k, k, b, ldb, 0, part, n);
            if (!same_bits(part, y + (int64_t)i * n, (size_t)n)) fail_msg("transB %d: row %d alone differs", tb, i);
        }
        /* rows 3, 10, 17, ... gathered into one product of 9 rows */
        float *ag = malloc((size_t)9 * k * sizeof *ag);
        assert_non_null(ag);
        for (int t = 0; t < 9; t++) memcpy(ag + (int64_t)t * k, a + (int64_t)(3 + 7 * t) * k, (size_t)k * sizeof *a);
        bf__sgemm(0, tb, 9, n, k, 1.0f, ag, k, b, ldb, 0, part, n);
        for (int t = 0; t < 9; t++)
            if (!same_bits(part + (int64_t)t * n, y + (int64_t)(3 + 7 * t) * n, (size_t)n))
                fail_msg("transB %d: gathered row %d differs", tb, 3 + 7 * t);
        for (int j = 0; j < n; j++) {
            const float *bj = tb ? b + (int64_t)j * k : b + j;
            bf__sgemm(0, tb, m, 1, k, 1.0f, a, k, bj, ldb, 0, part, 1);
            for (int i = 0; i < m; i++)
                if (part[i] != y[(int64_t)i * n + j] && !(isnan(part[i]) && isnan(y[(int64_t)i * n + j])))
                    fail_msg("transB %d: column %d alone differs at row %d", tb, j, i);
        }
        free(a), free(b), free(y), free(part), free(ag);
    }
}

/* A panel deeper than the stack's is allocated; when that fails, the
 * reference gives the same bits instead of an error. */
static void deep_panel_without_memory(void **state)
{
    (void)state;
    int m = 5, n = 20, k = 1500;
    float *a = rand_buf((size_t)m * k), *b = rand_buf((size_t)k * n);
    float y1[100], y2[100];
    bf__sgemm_ref(0, 0, m, n, k, 1.0f, a, k, b, n, 0, y1, n);
    bf_test_alloc_fail_after(0);
    bf__sgemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0, y2, n);
    long refused = bf_test_alloc_failures();
    bf_test_alloc_fail_after(-1);
    if (bf__sgemm_simd()) assert_int_equal(refused, 1);
    assert_true(same_bits(y1, y2, 100));
    free(a), free(b);
}

/* bf__fma_windows against its definition, written out here with fmaf:
 * every shape of the register blocks (rows and columns below, at and past
 * 8), windows at arbitrary offsets. */
static void windows_chain(void **state)
{
    (void)state;
    int k = 13;
    int64_t ldx = 29, off[13];
    float w[13];
    float *x = rand_buf(4096);
    for (int p = 0; p < k; p++) w[p] = rnd(), off[p] = (p * 37) % 200;
    for (int level = BF_SGEMM_REF; level <= BF_SGEMM_AVX2; level++)   /* each CPU path (AVX2 where the CPU has it) */
        for (int rows = 1; rows <= 19; rows += 3)
            for (int cols = 1; cols <= 21; cols += 2) {
                float got[19 * 21], want[19 * 21];
                for (int i = 0; i < rows * cols; i++) got[i] = want[i] = rnd();
                bf__fma_windows(level, w, off, k, x, rows, cols, ldx, got);
                for (int p = 0; p < k; p++)
                    for (int r = 0; r < rows; r++)
                        for (int c = 0; c < cols; c++)
                            want[r * cols + c] = fmaf(w[p], x[off[p] + r * ldx + c], want[r * cols + c]);
                if (!same_bits(got, want, (size_t)(rows * cols)))
                    fail_msg("level %d, rows %d cols %d: differs", level, rows, cols);
            }
    free(x);
}


/* A packer that reads op(B) (k x n, row-major, ldb) the way a Conv's
 * packer reads its padded planes: 16 columns, zeros past nr. */
typedef struct mat_pack {
    const float *b;
    int ldb;
} mat_pack;

static void pack_from_matrix(const void *ctx, int j0, int nr, int k, float *panel)
{
    const mat_pack *mp = ctx;
    for (int p = 0; p < k; p++)
        for (int j = 0; j < 16; j++) panel[p * 16 + j] = j < nr ? mp->b[(int64_t)p * mp->ldb + j0 + j] : 0.0f;
}

/* Each CPU path this machine has, forced, against the reference bit for
 * bit: the plain product (both layouts of B, accumulate, alpha), the bias
 * epilogue (y = s + bias[i]) and panels from a packer; row counts around
 * the kernel's block of 6 rows (AVX-512: 12), columns around 16 and 32
 * (AVX-512: a pair of panels, the second narrow or missing), K past the
 * stack panel. */
static void every_path_matches_reference(void **state)
{
    (void)state;
    static const int ms[] = {1, 5, 6, 7, 11, 12, 13, 25, 64};
    static const int ns[] = {1, 3, 15, 16, 17, 31, 32, 33, 49};
    static const int ks[] = {1, 9, 147, 1100};
    int best = bf__sgemm_best();
    if (best < BF_SGEMM_AVX2) skip();
    print_message("CPU paths forced here: AVX2%s\n", best >= BF_SGEMM_AVX512 ? ", AVX-512" : " (no AVX-512 on this CPU)");
    long cases = 0;
    /* the references (plain product, bias, each activation) made once per
     * shape and form and checked against every level: they depend on
     * neither, and computing them again for each level was most of this
     * test's time under ASan (tests/README.md, "The sixth round") */
    static const bf__act acts[] = {{0.0f, INFINITY, 0, NULL, 0, NULL, 0, NULL}, {-0.1f, 0.2f, 0, NULL, 0, NULL, 0, NULL}, {-INFINITY, 0.05f, 0, NULL, 0, NULL, 0, NULL}};
#define N_SG_ACTS (sizeof acts / sizeof *acts)
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
        for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
            for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++)
                for (int form = 0; form < 4; form++) {
                    int m = ms[im], n = ns[in], k = ks[ik], tb = form & 1, acc = form >> 1;
                    float alpha = acc ? 0.75f : 1.0f;
                    int lda = k + 3, ldb = (tb ? k : n) + 2, ldy = n + 1;
                    size_t ysz = (size_t)m * ldy;
                    float *a = rand_buf((size_t)m * lda), *b = rand_buf((size_t)(tb ? n : k) * ldb);
                    float *bias = rand_buf((size_t)m), *y0 = rand_buf(ysz);
                    float *y1 = malloc(ysz * sizeof *y1), *y2 = malloc(ysz * sizeof *y2), *yb = NULL;
                    float *ya[N_SG_ACTS] = {NULL}, *res = NULL, *yr = NULL;
                    assert_non_null(y1);
                    assert_non_null(y2);
                    memcpy(y2, y0, ysz * sizeof *y2);
                    bf__sgemm_ref(0, tb, m, n, k, alpha, a, lda, b, ldb, acc, y2, ldy);
                    if (!tb && !acc) {
                        /* y = (A B) + bias, then each activation of it */
                        yb = malloc(ysz * sizeof *yb);
                        assert_non_null(yb);
                        memcpy(yb, y0, ysz * sizeof *yb);
                        bf__sgemm_ref(0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0, yb, ldy);
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++) yb[(int64_t)i * ldy + j] += bias[i];
                        /* and a residual added after the bias (op.h, bf__act's res), then Relu:
                         * laid out as y, its every row and tail lane read at its own place */
                        res = rand_buf(ysz), yr = malloc(ysz * sizeof *yr);
                        assert_non_null(yr);
                        memcpy(yr, yb, ysz * sizeof *yr);
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++) {   /* the columns past n stay y0's */
                                float v = yb[(int64_t)i * ldy + j] + res[(int64_t)i * ldy + j];
                                yr[(int64_t)i * ldy + j] = v < 0.0f ? 0.0f : v;
                            }
                        for (size_t q = 0; q < N_SG_ACTS; q++) {
                            ya[q] = malloc(ysz * sizeof *ya[q]);
                            assert_non_null(ya[q]);
                            memcpy(ya[q], yb, ysz * sizeof *ya[q]);
                            for (int i = 0; i < m; i++)
                                for (int j = 0; j < n; j++) {
                                    float *e = ya[q] + (int64_t)i * ldy + j;
                                    if (*e < acts[q].lo) *e = acts[q].lo;
                                    if (*e > acts[q].hi) *e = acts[q].hi;
                                }
                        }
                    }
                    for (int level = BF_SGEMM_AVX2; level <= best; level++) {
                        memcpy(y1, y0, ysz * sizeof *y1);
                        bf__sgemm_level(level, 0, tb, m, n, k, alpha, a, lda, b, ldb, acc, y1, ldy);
                        if (!same_bits(y1, y2, ysz))
                            fail_msg("level %d m %d n %d k %d transB %d accumulate %d: differs from the reference",
                                     level, m, n, k, tb, acc);
                        if (yb) {
                            /* the bias epilogue and the packer */
                            memcpy(y1, y0, ysz * sizeof *y1);
                            bf__sgemm_bias(level, m, n, k, a, lda, b, ldb, bias, NULL, y1, ldy);
                            if (!same_bits(y1, yb, ysz))
                                fail_msg("level %d m %d n %d k %d: bias epilogue differs", level, m, n, k);
                            mat_pack mp = {b, ldb};
                            memcpy(y1, y0, ysz * sizeof *y1);
                            assert_int_equal(bf__sgemm_packed(level, m, n, k, a, lda, pack_from_matrix, &mp, bias,
                                                              NULL, y1, ldy),
                                             1);
                            if (!same_bits(y1, yb, ysz))
                                fail_msg("level %d m %d n %d k %d: packed panels differ", level, m, n, k);
                            /* and a fused activation after the bias: Relu, Clip, Clip with a max only */
                            for (size_t q = 0; q < N_SG_ACTS; q++) {
                                memcpy(y1, y0, ysz * sizeof *y1);
                                bf__sgemm_bias(level, m, n, k, a, lda, b, ldb, bias, &acts[q], y1, ldy);
                                if (!same_bits(y1, ya[q], ysz))
                                    fail_msg("level %d m %d n %d k %d act %zu: bias + activation epilogue differs",
                                             level, m, n, k, q);
                                memcpy(y1, y0, ysz * sizeof *y1);
                                assert_int_equal(bf__sgemm_packed(level, m, n, k, a, lda, pack_from_matrix, &mp, bias,
                                                                  &acts[q], y1, ldy),
                                                 1);
                                if (!same_bits(y1, ya[q], ysz))
                                    fail_msg("level %d m %d n %d k %d act %zu: packed + activation differs", level,
                                             m, n, k, q);
                            }
                            const bf__act radd = {0.0f, INFINITY, 0, res, 0, NULL, 0, NULL};
                            memcpy(y1, y0, ysz * sizeof *y1);
                            bf__sgemm_bias(level, m, n, k, a, lda, b, ldb, bias, &radd, y1, ldy);
                            if (!same_bits(y1, yr, ysz))
                                fail_msg("level %d m %d n %d k %d: bias + residual + Relu epilogue differs", level, m, n, k);
                            memcpy(y1, y0, ysz * sizeof *y1);
                            assert_int_equal(bf__sgemm_packed(level, m, n, k, a, lda, pack_from_matrix, &mp, bias, &radd,
                                                              y1, ldy),
                                             1);
                            if (!same_bits(y1, yr, ysz))
                                fail_msg("level %d m %d n %d k %d: packed + residual + Relu differs", level, m, n, k);
                        }
                        cases++;
                    }
                    for (size_t q = 0; q < N_SG_ACTS; q++) free(ya[q]);
                    free(a), free(b), free(bias), free(y0), free(y1), free(y2), free(yb), free(res), free(yr);
                }
#undef N_SG_ACTS
    print_message("%ld products over the forced paths, each == reference bit for bit\n", cases);
}

/* bf__sgemm_packed_planes: a Conv's 1x1 product over images side by side
 * stored straight into each image's planes: column c of row i at y[i * ldy
 * + c + (c / seg) * jump], the residual read at the same place. Against the
 * scalar reference chain plus the bias, the residual in the Add's operand
 * order and the activation, moved there by hand; every float of y outside
 * those places (the gaps between images, a margin past the end) untouched.
 * Segments narrower than a panel (9: a panel over three images), not a
 * multiple of 16 (49: panels across images' ends), exactly 16 (no panel
 * split), row counts off the block's 6, K past the stack panel. The
 * AVX-512 block stores a pair's columns as one run: 0 there, y untouched. */
static void planes_move_columns_by_segment(void **state)
{
    (void)state;
    static const int shape[][5] = {/* m, k, seg, images, gap */
                                   {13, 40, 9, 3, 5},  {7, 300, 49, 4, 0}, {25, 1100, 16, 2, 3},
                                   {6, 5, 196, 4, 1},  {1, 17, 7, 5, 2}};
    int best = bf__sgemm_best();
    if (best < BF_SGEMM_AVX2) skip();
    for (size_t s = 0; s < sizeof shape / sizeof *shape; s++)
        for (int form = 0; form < 4; form++) {   /* none, Clip, residual as A then Relu, residual as B */
            int m = shape[s][0], k = shape[s][1], seg = shape[s][2], imgs = shape[s][3], n = seg * imgs;
            int64_t jump = (int64_t)(m - 1) * seg + shape[s][4];
            size_t ysz = (size_t)((int64_t)(m - 1) * seg + (n - 1) + (int64_t)(n - 1) / seg * jump + 1) + 16;
            float *a = rand_buf((size_t)m * k), *b = rand_buf((size_t)k * n), *bias = rand_buf((size_t)m);
            float *res = rand_buf(ysz), *y0 = rand_buf(ysz), *want = malloc(ysz * sizeof *want);
            float *y = malloc(ysz * sizeof *y), *prod = malloc((size_t)m * n * sizeof *prod);
            assert_non_null(want);
            assert_non_null(y);
            assert_non_null(prod);
            bf__act act = {-0.25f, 0.5f, 0, NULL, 0, NULL, 0, NULL};
            if (form >= 2) act = (bf__act){0.0f, INFINITY, 0, res, form == 2, NULL, 0, NULL};
            bf__sgemm_ref(0, 0, m, n, k, 1.0f, a, k, b, n, 0, prod, n);
            memcpy(want, y0, ysz * sizeof *want);
            for (int i = 0; i < m; i++)
                for (int c = 0; c < n; c++) {
                    int64_t at = (int64_t)i * seg + c + (int64_t)(c / seg) * jump;
                    float v = prod[(int64_t)i * n + c] + bias[i];
                    if (form >= 2) v = form == 2 ? res[at] + v : v + res[at];
                    if (form) v = v < act.lo ? act.lo : v > act.hi ? act.hi : v;
                    want[at] = v;
                }
            mat_pack mp = {b, n};
            memcpy(y, y0, ysz * sizeof *y);
            assert_int_equal(bf__sgemm_packed_planes(BF_SGEMM_AVX2, m, n, k, a, k, pack_from_matrix, &mp, bias,
                                                     form ? &act : NULL, y, seg, seg, jump),
                             1);
            if (!same_bits(y, want, ysz))
                fail_msg("m %d k %d seg %d images %d form %d: differs from the reference moved by hand", m, k, seg,
                         imgs, form);
            if (best >= BF_SGEMM_AVX512) {
                memcpy(y, y0, ysz * sizeof *y);
                assert_int_equal(bf__sgemm_packed_planes(BF_SGEMM_AVX512, m, n, k, a, k, pack_from_matrix, &mp, bias,
                                                         form ? &act : NULL, y, seg, seg, jump),
                                 0);
                assert_true(same_bits(y, y0, ysz));
            }
            free(a), free(b), free(bias), free(res), free(y0), free(want), free(y), free(prod);
        }
    /* no segments: refused, y untouched */
    float a1 = 1.0f, b1 = 2.0f, bias1 = 0.0f, y1 = -3.0f;
    mat_pack mp1 = {&b1, 1};
    assert_int_equal(bf__sgemm_packed_planes(BF_SGEMM_AVX2, 1, 1, 1, &a1, 1, pack_from_matrix, &mp1, &bias1, NULL, &y1,
                                             1, 0, 0),
                     0);
    assert_true(y1 == -3.0f);
}

/* op(B) packed whole into the caller's work before the product
 * (bf__sgemm_work, a transformer's weight products): each CPU path against
 * the reference bit for bit, B plain and transposed, deeper than the
 * 256-deep in-place limit and past the 1024-deep stack panel, rows more
 * than 1024 floats apart, a last panel narrower than 16 columns, alpha and
 * accumulate; and the work really holding op(B)'s panels (so the path ran):
 * panel q's row p is op(B)[p][16 q ...], zero past n. */
static void whole_packed_matches_reference(void **state)
{
    (void)state;
    static const int ms[] = {13, 40, 97};
    static const int ns[] = {2, 17, 33, 100};
    static const int ks[] = {9, 300, 1100};
    int best = bf__sgemm_best();
    long cases = 0;
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
        for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
            for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++)
                for (int form = 0; form < 8; form++) {
                    int m = ms[im], n = ns[in], k = ks[ik], tb = form & 1, acc = (form >> 1) & 1, far = form >> 2;
                    float alpha = acc ? 0.75f : 1.0f;
                    /* far: B's rows (columns of a transposed B) 1100 floats apart */
                    int lda = k + 1, ldb = far ? 1100 + (tb ? k : n) : (tb ? k : n), ldy = n + 2;
                    size_t wf = bf__sgemm_work_floats(m, n, k, tb, ldb);
                    /* packed whole where the panels would be packed one by one */
                    int expect = tb || k > 256 || ldb > 1024;
                    if ((wf > 0) != expect)
                        fail_msg("m %d n %d k %d transB %d ldb %d: work %zu floats, expected %s", m, n, k, tb, ldb,
                                 wf, expect ? "some" : "none");
                    if (!wf) continue;
                    assert_true(wf == (size_t)k * (size_t)((n + 15) / 16) * 16);
                    size_t ysz = (size_t)m * ldy;
                    float *a = rand_buf((size_t)m * lda), *b = rand_buf((size_t)(tb ? n : k) * ldb);
                    float *y0 = rand_buf(ysz), *y1 = malloc(ysz * sizeof *y1), *y2 = malloc(ysz * sizeof *y2);
                    float *work = malloc(wf * sizeof *work);
                    assert_non_null(y1);
                    assert_non_null(y2);
                    assert_non_null(work);
                    memcpy(y2, y0, ysz * sizeof *y2);
                    bf__sgemm_ref(0, tb, m, n, k, alpha, a, lda, b, ldb, acc, y2, ldy);
                    for (int level = BF_SGEMM_AVX2; level <= best; level++) {
                        for (size_t i = 0; i < wf; i++) work[i] = NAN;
                        memcpy(y1, y0, ysz * sizeof *y1);
                        bf__sgemm_work(level, tb, m, n, k, alpha, a, lda, b, ldb, acc, y1, ldy, work, NULL, NULL);
                        if (!same_bits(y1, y2, ysz))
                            fail_msg("level %d m %d n %d k %d transB %d ldb %d accumulate %d: B packed whole "
                                     "differs from the reference",
                                     level, m, n, k, tb, ldb, acc);
                        for (int q = 0; q < (n + 15) / 16; q++)
                            for (int p = 0; p < k; p += k / 3 + 1)
                                for (int j = 0; j < 16; j++) {
                                    int c = 16 * q + j;
                                    float want = c >= n ? 0.0f : tb ? b[(int64_t)c * ldb + p] : b[(int64_t)p * ldb + c];
                                    float got = work[((int64_t)q * k + p) * 16 + j];
                                    if (memcmp(&got, &want, sizeof got) != 0)
                                        fail_msg("level %d m %d n %d k %d transB %d: panel %d row %d column %d "
                                                 "holds %g, not op(B)'s %g",
                                                 level, m, n, k, tb, q, p, j, (double)got, (double)want);
                                }
                        cases++;
                    }
                    /* no work: the same bits another way */
                    memcpy(y1, y0, ysz * sizeof *y1);
                    bf__sgemm_work(best, tb, m, n, k, alpha, a, lda, b, ldb, acc, y1, ldy, NULL, NULL, NULL);
                    assert_true(same_bits(y1, y2, ysz));
                    /* a fused Relu (a Gemm's, linalg.c) at every level: the
                     * reference's bits, then y < 0 -> +0 (NaN and -0 kept) */
                    const bf__act relu = {.lo = 0.0f, .hi = INFINITY};
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++)
                            if (y2[(int64_t)i * ldy + j] < 0.0f) y2[(int64_t)i * ldy + j] = 0.0f;
                    for (int level = BF_SGEMM_REF; level <= best; level++) {
                        memcpy(y1, y0, ysz * sizeof *y1);
                        bf__sgemm_work(level, tb, m, n, k, alpha, a, lda, b, ldb, acc, y1, ldy, level ? work : NULL,
                                       &relu, NULL);
                        if (!same_bits(y1, y2, ysz))
                            fail_msg("level %d m %d n %d k %d transB %d accumulate %d: product + Relu differs from "
                                     "the reference's then Relu", level, m, n, k, tb, acc);
                    }
                    /* accumulated onto a row (a Gemm's bias row, crow) rather
                     * than y: the reference on y filled with that row, y's
                     * own values never read (NaN in y1 beforehand) */
                    if (acc) {
                        const float *crow = y0 + ldy;   /* some n values */
                        for (int i = 0; i < m; i++) memcpy(y2 + (int64_t)i * ldy, crow, sizeof(float) * (size_t)n);
                        bf__sgemm_ref(0, tb, m, n, k, alpha, a, lda, b, ldb, 1, y2, ldy);
                        for (int level = BF_SGEMM_REF; level <= best; level++) {
                            for (size_t i = 0; i < ysz; i++) y1[i] = NAN;
                            bf__sgemm_work(level, tb, m, n, k, alpha, a, lda, b, ldb, 1, y1, ldy, level ? work : NULL,
                                           NULL, crow);
                            for (int i = 0; i < m; i++)
                                if (!same_bits(y1 + (int64_t)i * ldy, y2 + (int64_t)i * ldy, (size_t)n))
                                    fail_msg("level %d m %d n %d k %d transB %d: row %d accumulated onto crow "
                                             "differs from the reference's", level, m, n, k, tb, i);
                        }
                    }
                    free(a), free(b), free(y0), free(y1), free(y2), free(work);
                }
    if (best < BF_SGEMM_AVX2) print_message("no AVX2 on this CPU: the reference alone\n");
    print_message("%ld products with op(B) packed whole, each == reference bit for bit\n", cases);
}

/* The activation epilogue on values written by hand: NaN passes (as
 * torch.relu and torch.clamp let it), infinities clip, bounds inclusive.
 * y = 1 * b[j] + 0, so y is b[j] exactly. */
static void act_epilogue_by_hand(void **state)
{
    (void)state;
    float b[16] = {NAN, INFINITY, -INFINITY, -1.0f, -0.0f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 3e38f, -3e38f, 1e-40f,
                   -1e-40f, 0.5f, 2.0f};
    const float a[1] = {1.0f}, bias[1] = {0.0f};
    const bf__act relu = {0.0f, INFINITY, 0, NULL, 0, NULL, 0, NULL}, clip = {0.25f, 0.75f, 0, NULL, 0, NULL, 0, NULL}, hi_only = {-INFINITY, 0.5f, 0, NULL, 0, NULL, 0, NULL};
    /* expected, per activation: NaN stays NaN; -0 + 0 is +0 before the activation */
    const float want_relu[16] = {NAN, INFINITY, 0, 0, 0, 0, 0.25f, 0.5f, 0.75f, 1, 3e38f, 0, 1e-40f, 0, 0.5f, 2};
    const float want_clip[16] = {NAN, 0.75f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.5f, 0.75f, 0.75f, 0.75f, 0.25f,
                                 0.25f, 0.25f, 0.5f, 0.75f};
    const float want_hi[16] = {NAN, 0.5f, -INFINITY, -1, 0, 0, 0.25f, 0.5f, 0.5f, 0.5f, 0.5f, -3e38f, 1e-40f, -1e-40f,
                               0.5f, 0.5f};
    const bf__act *acts[3] = {&relu, &clip, &hi_only};
    const float *wants[3] = {want_relu, want_clip, want_hi};
    int best = bf__sgemm_best();
    for (int level = BF_SGEMM_REF; level <= best; level++)
        for (int q = 0; q < 3; q++)
            for (int n = 15; n <= 16; n++) {   /* a narrow panel's store, and a full one */
                float y[16] = {0};
                bf__sgemm_bias(level, 1, n, 1, a, 1, b, 16, bias, acts[q], y, 16);
                for (int j = 0; j < n; j++) {
                    if (isnan(wants[q][j])) {
                        if (!isnan(y[j])) fail_msg("level %d act %d: element %d is %g, NaN should pass", level, q, j, y[j]);
                        continue;
                    }
                    if (memcmp(&y[j], &wants[q][j], sizeof(float)) != 0)
                        fail_msg("level %d act %d n %d: element %d (b = %g) is %g, want %g", level, q, n, j, b[j],
                                 y[j], wants[q][j]);
                }
            }
}

/* The residual Add in the epilogue (op.h, bf__act's res) on values
 * written by hand, y = 1 * b[j] + 0 then the Add, at every level: the
 * Add's A operand's NaN when both are NaN (x86 returns the first
 * source's), Inf - Inf the default NaN, +0 + -0 = +0, -0 (from -0 + 0 =
 * +0) + -0 = +0, a denormal sum, the residual as A and as B. */
static void res_epilogue_by_hand(void **state)
{
    (void)state;
    const uint32_t pb = 0x7fc00011u, pr = 0x7fc00022u, dflt = 0xffc00000u;
    float b[16] = {0, 1.0f, INFINITY, -0.0f, -0.0f, 1e-40f, 3e38f, 2.0f, 0, 0.5f, -1.0f, 0, 5.0f, 0.25f, 1.0f, -3.0f};
    float r[16] = {0, 0, -INFINITY, -0.0f, 0.0f, 1e-40f, 3e38f, -2.0f, 0, 0.25f, 1.0f, 0, -5.0f, 0.5f, 0, 1.0f};
    memcpy(&b[0], &pb, 4), memcpy(&r[0], &pr, 4);   /* both NaN */
    memcpy(&r[1], &pr, 4);                         /* the residual's alone */
    memcpy(&b[8], &pb, 4);                         /* the product's alone */
    /* sums by hand: 1 + 0, Inf - Inf, +0 + -0, +0 + +0, denormals, 3e38 + 3e38, 2 - 2, ... */
    const float sum[16] = {0, 0, 0, 0.0f, 0.0f, 0, INFINITY, 0.0f, 0, 0.75f, 0.0f, 0, 0.0f, 0.75f, 1.0f, -2.0f};
    const float a[1] = {1.0f}, bias[1] = {0.0f};
    int best = bf__sgemm_best();
    for (int level = BF_SGEMM_REF; level <= best; level++)
        for (int res_a = 0; res_a < 2; res_a++)
            for (int n = 15; n <= 16; n++) {   /* a narrow panel's masked load and store, and a full one */
                const bf__act act = {-INFINITY, INFINITY, 0, r, res_a, NULL, 0, NULL};
                float y[16] = {0}, want[16];
                memcpy(want, sum, sizeof want);
                memcpy(&want[0], res_a ? &pr : &pb, 4);
                memcpy(&want[1], &pr, 4), memcpy(&want[2], &dflt, 4), memcpy(&want[8], &pb, 4);
                want[5] = 2.0f * b[5];   /* a denormal doubled: exact, where the literal 2e-40f may round apart */
                bf__sgemm_bias(level, 1, n, 1, a, 1, b, 16, bias, &act, y, 16);
                for (int j = 0; j < n; j++)
                    if (memcmp(&y[j], &want[j], sizeof(float)) != 0) {
                        uint32_t got, w;
                        memcpy(&got, &y[j], 4), memcpy(&w, &want[j], 4);
                        fail_msg("level %d, residual as %s, n %d: element %d is 0x%08x, want 0x%08x", level,
                                 res_a ? "A" : "B", n, j, got, w);
                    }
            }
}

/* A map for the epilogue's last step (op.h, bf__act's map), elementwise
 * and exact: x squared. */
static void square_map(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i];
}

/* The epilogue after the accumulate (bf__sgemm_work with act: a Gemm's C
 * and whatever bf__act carries), every combination of the column bias, the
 * residual, lo and hi and the map, onto y or onto a row (crow), at every
 * level, on shapes whose last panel is partial (a plain B read in place,
 * the AVX-512 kernel's lone panel and its pair's second half): against
 * the definition written out here, y = fma(alpha, s, c), then c bias, then
 * residual, then clip, then map, with s the in-order chain (finite inputs:
 * the adds' operand order cannot show). */
static void partial_panels_accumulate_then_epilogue(void **state)
{
    (void)state;
    static const int ms[] = {7, 13}, ns[] = {5, 17, 40}, ks[] = {9, 70};
    int best = bf__sgemm_best();
    long cases = 0;
    for (size_t im = 0; im < 2; im++)
        for (size_t in = 0; in < 3; in++)
            for (size_t ik = 0; ik < 2; ik++)
                for (int tb = 0; tb < 2; tb++) {
                    int m = ms[im], n = ns[in], k = ks[ik], lda = k + 1, ldb = tb ? k + 2 : n + 1, ldy = n + 3;
                    size_t ysz = (size_t)m * ldy, wf = bf__sgemm_work_floats(m, n, k, tb, ldb);
                    float *a = rand_buf((size_t)m * lda), *b = rand_buf((size_t)(tb ? n : k) * ldb);
                    float *y0 = rand_buf(ysz), *res = rand_buf(ysz), *cb = rand_buf((size_t)n), *crow = rand_buf((size_t)n);
                    float *y1 = malloc(ysz * sizeof *y1), *want = malloc(ysz * sizeof *want);
                    float *work = wf ? malloc(wf * sizeof *work) : NULL;
                    assert_non_null(y1);
                    assert_non_null(want);
                    assert_true(!wf || work);
                    for (int form = 0; form < 3 * 16; form++) {
                        int acc = form % 3 != 0, use_crow = form % 3 == 2, epi = form / 3;
                        float alpha = acc ? 0.75f : 1.25f;
                        const bf__act act = {epi & 4 ? -0.5f : -INFINITY, epi & 4 ? 0.75f : INFINITY, 0,
                                             epi & 2 ? res : NULL, 0, epi & 1 ? cb : NULL, 1,
                                             epi & 8 ? square_map : NULL};
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++) {
                                float sum = 0.0f;
                                for (int p = 0; p < k; p++)
                                    sum = fmaf(a[(int64_t)i * lda + p], tb ? b[(int64_t)j * ldb + p] : b[(int64_t)p * ldb + j], sum);
                                float c = use_crow ? crow[j] : y0[(int64_t)i * ldy + j];
                                float v = acc ? fmaf(alpha, sum, c) : alpha * sum;
                                if (epi & 1) v = cb[j] + v;
                                if (epi & 2) v = v + res[(int64_t)i * ldy + j];
                                if (epi & 4) v = v < -0.5f ? -0.5f : v > 0.75f ? 0.75f : v;
                                if (epi & 8) v = v * v;
                                want[(int64_t)i * ldy + j] = v;
                            }
                        for (int level = BF_SGEMM_REF; level <= best; level++)
                            for (int w = 0; w < 1 + (wf > 0 && level > BF_SGEMM_REF); w++) {
                                memcpy(y1, y0, ysz * sizeof *y1);
                                bf__sgemm_work(level, tb, m, n, k, alpha, a, lda, b, ldb, acc, y1, ldy, w ? work : NULL,
                                               epi ? &act : NULL, use_crow ? crow : NULL);
                                for (int i = 0; i < m; i++)
                                    if (!same_bits(y1 + (int64_t)i * ldy, want + (int64_t)i * ldy, (size_t)n))
                                        fail_msg("level %d m %d n %d k %d transB %d accumulate %d crow %d bias %d "
                                                 "residual %d clip %d map %d work %d: row %d differs from the definition",
                                                 level, m, n, k, tb, acc, use_crow, epi & 1, (epi >> 1) & 1,
                                                 (epi >> 2) & 1, epi >> 3, w, i);
                                cases++;
                            }
                    }
                    free(a), free(b), free(y0), free(res), free(cb), free(crow), free(y1), free(want), free(work);
                }
    print_message("%ld products with an epilogue after the accumulate, each == the definition bit for bit\n", cases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_hand),
        cmocka_unit_test(matches_reference_and_double),
        cmocka_unit_test(grouped_panels_match_reference),
        cmocka_unit_test(parts_reproduce_the_whole),
        cmocka_unit_test(deep_panel_without_memory),
        cmocka_unit_test(windows_chain),
        cmocka_unit_test(every_path_matches_reference),
        cmocka_unit_test(act_epilogue_by_hand),
        cmocka_unit_test(res_epilogue_by_hand),
        cmocka_unit_test(whole_packed_matches_reference),
        cmocka_unit_test(partial_panels_accumulate_then_epilogue),
        cmocka_unit_test(planes_move_columns_by_segment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
