/* A Conv whose kernel takes W packed (the output channels in the lanes,
 * linalg_conv_bcast.c, on AVX-512 and AVX2 (its own layout there), and for
 * 1x1 linalg_conv_pwlanes.c, on AVX-512; on AVX2 a Conv of more than one tap
 * that the lanes do not take runs the panels, W's rows reordered to the
 * column matrix's K order, bf__conv_reorder) reads the model's copy of W packed once
 * (base/wpack.h; plan.c, packed_of) while the plan reads the model's own
 * tensor, and packs its own W at every call once a fault is in it:
 *
 *   - a weight fault in a plan (bf_plan_flip_bit, the path every weight
 *     fault of a campaign or `bitflip run` takes) gives that plan's outputs
 *     the bits of a model that stores the weight flipped (whose own copy
 *     is packed from the flipped bits), and moves them; another plan of the
 *     same model, run in between, keeps the golden outputs; flipped back,
 *     the faulted plan is golden again. Three Convs of the first kernel: 160
 *     input channels (K in chunks of 128 and 32 channels) to 64 rows with a
 *     fused Relu, 3x3/2 to 80 rows (row blocks of 64 and 16), and groups 2
 *     of 16 rows over 80 channels each; one of the second: a 1x1
 *     projection of the 160 channels to 80 rows (row blocks of 3 and 2
 *     vectors of 16) on the 15x15 map; a batch of 3 (calls of 2 images,
 *     then 1; the 8x8 output all 3 in one); at AVX-512 with and without
 *     fusion, at AVX2 (the three Convs of more than one tap on the lanes'
 *     copy in row blocks of 16, linalg_conv_bcast8.c) and the reference (no copy there) once each; a fault
 *     in each Conv's W at the first and the last element of a row block
 *     and of the tensor. A fifth Conv, 3x3 to 8 rows, which the lanes do
 *     not take (rows not a multiple of 16): at AVX2 it runs the panels on
 *     W reordered once (bf__conv_reorder); at AVX-512 it has no copy.
 *   - several faults at once in one W and across two, undone in another
 *     order than made.
 *   - the copies the model keeps: the four lanes' W once (m x K floats)
 *     where the CPU has AVX-512; the three 3x3 lanes' ones and the fifth's
 *     reordered one where it stops at AVX2; and the plan's estimate counts
 *     the five (each step's larger copy of the two levels) on any CPU.
 *
 * The kernel itself against a plain reference, with and without the copy:
 * test_conv_exact.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/wpack.h"
#include "bitflip/fault.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "exec/ops/sgemm.h"
#include "exec/plan_impl.h"
#include "model/graph.h"
#include "onnx_graph.h"

#define BATCH 3
#define HW 15   /* c2's output 8x8: one image a product (several where smaller), so the kernel runs */

static float urand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) * 0x1p-53 * 2.0 - 1.0);
}

typedef struct flip {
    const char *w;
    int64_t at;
    int bit;
} flip;

#define NW 5     /* weights, one a Conv */
#define NOUT 4   /* outputs: y2, y3, y4, y5 */
static const char *const wnames[NW] = {"w1", "w2", "w3", "w4", "w5"};
static const int64_t wdims[NW][4] = {{64, 160, 3, 3}, {80, 64, 3, 3}, {32, 80, 3, 3}, {80, 160, 1, 1}, {8, 160, 3, 3}};

/* x [B, 160, 15, 15] -> Conv(w1, b1, pads 1) -> Relu -> Conv(w2, b2,
 * 3x3/2, pads 1) -> y2 [B, 80, 8, 8]; x -> Conv(w3, b3, groups 2, pads 1)
 * -> y3 [B, 32, 15, 15]; x -> Conv(w4, b4, 1x1) -> y4 [B, 80, 15, 15];
 * x -> Conv(w5, b5, pads 1) -> y5 [B, 8, 15, 15].
 * Each flip in f[0 .. nf) stored flipped. */
static bf_model *load(const flip *f, int nf)
{
    tg_graph g = {.opset = 13};
    uint64_t s = 0x5151;
    for (int i = 0; i < NW; i++) {
        int64_t n = wdims[i][0] * wdims[i][1] * wdims[i][2] * wdims[i][3];
        float *w = tg_alloc(&g, sizeof(float) * (size_t)n);
        for (int64_t e = 0; e < n; e++) w[e] = urand(&s) * 0.1f;
        for (int k = 0; k < nf; k++)
            if (!strcmp(f[k].w, wnames[i])) {
                uint32_t u;
                memcpy(&u, &w[f[k].at], 4);
                u ^= 1u << f[k].bit;
                memcpy(&w[f[k].at], &u, 4);
            }
        tg_init_f32(&g, wnames[i], 4, wdims[i], w);
        char bn[4] = {'b', (char)('1' + i), 0};
        float *b = tg_alloc(&g, sizeof(float) * (size_t)wdims[i][0]);
        for (int64_t e = 0; e < wdims[i][0]; e++) b[e] = urand(&s) * 0.1f;
        tg_init_f32(&g, bn, 1, (int64_t[]){wdims[i][0]}, b);
    }
    static const int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1}, s2[2] = {2, 2};
    Onnx__NodeProto *n = tg_node(&g, "Conv", "c1", (const char *[]){"x", "w1", "b1"}, 3, "h1");
    tg_attr_ints(&g, n, "kernel_shape", 2, k3), tg_attr_ints(&g, n, "pads", 4, p1);
    tg_node(&g, "Relu", "r1", (const char *[]){"h1"}, 1, "a1");
    n = tg_node(&g, "Conv", "c2", (const char *[]){"a1", "w2", "b2"}, 3, "y2");
    tg_attr_ints(&g, n, "kernel_shape", 2, k3), tg_attr_ints(&g, n, "pads", 4, p1), tg_attr_ints(&g, n, "strides", 2, s2);
    n = tg_node(&g, "Conv", "c3", (const char *[]){"x", "w3", "b3"}, 3, "y3");
    tg_attr_ints(&g, n, "kernel_shape", 2, k3), tg_attr_ints(&g, n, "pads", 4, p1), tg_attr_int(&g, n, "group", 2);
    tg_node(&g, "Conv", "c4", (const char *[]){"x", "w4", "b4"}, 3, "y4");
    n = tg_node(&g, "Conv", "c5", (const char *[]){"x", "w5", "b5"}, 3, "y5");
    tg_attr_ints(&g, n, "kernel_shape", 2, k3), tg_attr_ints(&g, n, "pads", 4, p1);
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){BATCH, 160, HW, HW});
    g.outs[g.n_outs++] = tg_value_info(&g, "y2", 1, 4, (int64_t[]){BATCH, 80, 8, 8});
    g.outs[g.n_outs++] = tg_value_info(&g, "y3", 1, 4, (int64_t[]){BATCH, 32, HW, HW});
    g.outs[g.n_outs++] = tg_value_info(&g, "y4", 1, 4, (int64_t[]){BATCH, 80, HW, HW});
    g.outs[g.n_outs++] = tg_value_info(&g, "y5", 1, 4, (int64_t[]){BATCH, 8, HW, HW});
    return tg_load(&g, "convw");
}

static void run(bf_plan *p)
{
    uint64_t s = 9;
    float *x = bf_plan_input(p, 0)->data;
    for (int64_t i = 0; i < BATCH * 160 * HW * HW; i++) x[i] = urand(&s);
    bf_error err = {0};
    if (bf_plan_run(p, &err) != BF_OK) fail_msg("%s", err.msg);
}

/* 1 if every output of a and b has the same bits */
static int same(const bf_plan *a, const bf_plan *b)
{
    for (size_t o = 0; o < NOUT; o++) {
        const bf_tensor *ya = bf_plan_output(a, o), *yb = bf_plan_output(b, o);
        if (memcmp(ya->data, yb->data, bf_tensor_nbytes(yb)) != 0) return 0;
    }
    return 1;
}

static void flip_in(const bf_model *m, bf_plan *p, const flip *f)
{
    bf_bitflip b = {.param = (size_t)bf_model_find_param(m, f->w), .index = f->at, .bit = f->bit};
    bf_error err = {0};
    if (bf_plan_flip_bit(p, &b, NULL, NULL, &err) != BF_OK) fail_msg("%s", err.msg);
}

/* the plan passes the model's copy to each Conv step but c5 (AVX-512: no
 * kernel there takes 8 rows packed), to each but the 1x1 (AVX2: c5's W
 * reordered for the panels) */
static int copies(const bf_plan *p)
{
    int n = 0;
    for (size_t i = 0; p->tab.packed && i < p->n_steps; i++) n += p->tab.packed[i] != NULL;
    return n;
}

static void faulted_plans_compute_their_fault(void **state)
{
    (void)state;
    static const char *const levels[] = {"avx512", "avx2", "ref"};
    /* the first and the last element of a row block (w1: 64 rows of 1440;
     * w2: the block of 16 rows after 64; w3: group 1's last row; w4: the
     * block of 32 rows after 48, rows of 160) */
    static const flip one[] = {{"w1", 0, 30},         {"w1", 63 * 1440 + 1439, 29}, {"w2", 64 * 576, 30},
                               {"w2", 80 * 576 - 1, 30}, {"w3", 15 * 720 + 5, 30},    {"w3", 32 * 720 - 1, 27},
                               {"w4", 48 * 160, 30},     {"w4", 80 * 160 - 1, 29},    {"w4", 47 * 160 + 159, 30},
                               {"w5", 0, 30},            {"w5", 8 * 1440 - 1, 29}};
    /* each W once, m x K floats, where the kernel runs: the three Convs
     * both levels copy, w4 (the 1x1 lanes) at AVX-512 only, w5 (3x3 to 8
     * rows, reordered for the panels) at AVX2 only; the estimate counts
     * them whatever the CPU */
    const size_t three = sizeof(float) * (64 * 1440 + 80 * 576 + 32 * 720), w4 = sizeof(float) * 80 * 160,
                 w5 = sizeof(float) * 8 * 1440, want = three + w4 + w5;
    bf_model *m = load(NULL, 0);
    /* the copies at AVX-512, fused and not; the reordered ones at AVX2; none at the reference */
    for (int run_at = 0; run_at < 4; run_at++) {
        int l = run_at < 2 ? 0 : run_at - 1, fuse = run_at != 0 && run_at != 3;
        setenv("BITFLIP_SIMD", levels[l], 1);
        int level = bf__sgemm_best();   /* avx512 lowers to AVX2 on a CPU without it */
        {
            bf_plan *a = tg_plan(m, BATCH, fuse, 0), *b = tg_plan(m, BATCH, fuse, 0), *g = tg_plan(m, BATCH, 0, 0);
            assert_int_equal(copies(a), level >= BF_SGEMM_AVX2 ? NW - 1 : 0);
            run(g);
            for (size_t k = 0; k < sizeof one / sizeof *one; k++) {
                bf_model *mf = load(&one[k], 1);
                bf_plan *r = tg_plan(mf, BATCH, fuse, 0);
                run(r);
                flip_in(m, a, &one[k]);
                run(a), run(b);
                if (!same(a, r)) fail_msg("fault %zu (%s[%lld]) at %s: not the flipped model's outputs", k, one[k].w,
                                          (long long)one[k].at, levels[l]);
                assert_true(same(b, g));    /* the other plan */
                assert_false(same(a, g));   /* the fault reached an output */
                flip_in(m, a, &one[k]);
                run(a);
                assert_true(same(a, g));    /* flipped back */
                bf_plan_free(r);
                bf_model_free(mf);
            }
            /* several at once, in two weights, undone in another order */
            static const flip many[] = {{"w1", 77, 30}, {"w1", 5000, 30}, {"w4", 100, 30}, {"w1", 90000, 28}};
            bf_model *mf = load(many, 4);
            bf_plan *r = tg_plan(mf, BATCH, fuse, 0);
            run(r);
            for (int k = 0; k < 4; k++) flip_in(m, a, &many[k]);
            run(a);
            assert_true(same(a, r));
            for (int k = 3; k >= 0; k--) flip_in(m, a, &many[(k + 2) % 4]);
            run(a);
            assert_true(same(a, g));
            bf_plan_free(r);
            bf_model_free(mf);
            bf_plan_free(a), bf_plan_free(b), bf_plan_free(g);
        }
        if (run_at == 1) {   /* every run so far at the CPU's best level (avx512 lowers to AVX2) */
            size_t at_best = level >= BF_SGEMM_AVX512 ? three + w4 : level == BF_SGEMM_AVX2 ? three + w5 : 0;
            assert_int_equal(bf__wpack_bytes(m->wpack), at_best);
        }
    }
    unsetenv("BITFLIP_SIMD");
    /* after the runs at AVX2 too: on an AVX-512 CPU the model then holds
     * both levels' copies (another kind, another entry: wpack.c's tag) */
    if (bf__sgemm_best() >= BF_SGEMM_AVX512) assert_int_equal(bf__wpack_bytes(m->wpack), (three + w4) + (three + w5));
    else if (bf__sgemm_best() == BF_SGEMM_AVX2) assert_int_equal(bf__wpack_bytes(m->wpack), three + w5);
    bf_plan_budget pb;
    bf_error err = {0};
    assert_int_equal(bf_plan_estimate(m, BATCH, &pb, &err), BF_OK);
    assert_int_equal(pb.packed_bytes, want);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(faulted_plans_compute_their_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
