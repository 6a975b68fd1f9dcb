/* Weights as LMs store them (issue 30): bf16 faults on exactly its 16
 * stored bits, and int<m>/uint<m> with per-group scales along the input
 * dimension (group_size, GPTQ/AWQ's layout) — the rounding, the group
 * layout per op, the decode of every pattern and the trial records'
 * old and new values, all against references written here from the
 * definitions (docs/CAMPAIGNS.md), not from core/src/base/repr.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "bitflip/spec_rules.h"
#include "campaign_check.h"
#include "onnx_graph.h"

#define FIX BF_FIXTURES "/conformance/"

/* --- references from the format definitions */

/* fp16 rounding of a positive normal or subnormal value, through double:
 * the nearest multiple of fp16's spacing at x, ties to even. */
static float ref_f16_round(float x)
{
    assert_true(x > 0 && x < 65504.0f);
    int e;
    frexp((double)x, &e);                  /* x in [2^(e-1), 2^e) */
    int q = e - 11 < -24 ? -24 : e - 11;   /* 11 significant bits; subnormal spacing 2^-24 */
    double m = ldexp((double)x, -q);
    return (float)ldexp(tc_round_half_even(m), q);
}

/* --- (1) bf16: the 16 stored bits */

typedef struct recs {
    bf_trial_record *r;
    int64_t n;
} recs;

static void keep(void *user, const bf_trial_record *rec)
{
    recs *rs = user;
    if (rec->trial >= 0 && rec->trial < rs->n) rs->r[rec->trial] = *rec;
}

static bf_campaign_spec base_spec(void) { return tc_uniform_spec(16); }

/* Runs the list of (tensor, index, bit) faults; records in `out` (n). */
static void run_list(const bf_model *m, const bf_dataset *ds, bf_campaign_spec s, bf_fault_entry *e, size_t n,
                     bf_trial_record *out)
{
    s.sampling = BF_SAMPLE_LIST;
    s.list = e;
    s.n_list = n;
    bf_campaign *c = tc_make(m, ds, &s);
    recs rs = {out, (int64_t)n};
    bf_campaign_opts o = {.threads = 1, .shard_count = 1, .on_trial = keep, .user = &rs};
    bf_campaign_result res;
    bf_error err = {0};
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

static void bf16_sixteen_bits(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_model_load_file(FIX "demo_digits.onnx", &m, &err) ||
        bf_dataset_load_file(FIX "demo_digits.eval.safetensors", &ds, &err))
        fail_msg("load: %s", err.msg);
    int64_t p = bf_model_find_param(m, "fc.weight");
    assert_true(p >= 0);
    const float *w = bf_model_param(m, (size_t)p)->tensor->data;
    /* every bit of two elements: 15 sign, 14..7 exponent, 6..0 mantissa */
    const int64_t idx[2] = {2281, 17};
    bf_fault_entry e[32];
    for (int k = 0; k < 32; k++) e[k] = (bf_fault_entry){.tensor = "fc.weight", .index = idx[k / 16], .bit = k % 16, .sample = -1};
    bf_campaign_spec s = base_spec();
    s.repr = BF_REPR_BF16;
    bf_trial_record r[32];
    run_list(m, ds, s, e, 32, r);
    for (int k = 0; k < 32; k++) {
        uint16_t h = tc_bf16(w[idx[k / 16]]);
        float old = tc_bf16_decode(h), now = tc_bf16_decode((uint16_t)(h ^ (1u << (k % 16))));
        assert_int_equal(r[k].n_kept, 1);
        assert_memory_equal(&r[k].faults[0].old_value, &old, 4);
        assert_memory_equal(&r[k].faults[0].new_value, &now, 4);
        assert_int_equal(r[k].faults[0].mask, 1u << (k % 16));
        /* the field each bit belongs to, read off the value */
        uint32_t a, b;
        memcpy(&a, &old, 4);
        memcpy(&b, &now, 4);
        assert_int_equal(a ^ b, 1u << (k % 16 + 16));
    }
    /* bit 16 is past bf16's width */
    bf_fault_entry past = {.tensor = "fc.weight", .index = 0, .bit = 16, .sample = -1};
    s.sampling = BF_SAMPLE_LIST;
    s.list = &past;
    s.n_list = 1;
    bf_campaign *c = NULL;
    assert_int_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "bf16"));

    /* per_bit: 16 strata, named 0..15, and nothing past them */
    s = base_spec();
    s.repr = BF_REPR_BF16;
    s.sampling = BF_SAMPLE_PER_BIT;
    s.trials = 64;
    c = tc_make(m, ds, &s);
    assert_int_equal(bf_campaign_site(c, 0)->bits, 16);
    bf_campaign_opts o = {.threads = 1, .shard_count = 1};
    bf_campaign_result res;
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    for (int b = 0; b < 64; b++) {
        int64_t n = 0;
        for (int k = 0; k < BF_OUTCOME_COUNT; k++) n += res.by_bit[b].n[k];
        if (b < 16) assert_int_equal(n, 4);   /* 64 trials over 16 equal strata */
        else assert_int_equal(n, 0);
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    bf_model_free(m);
    bf_dataset_free(ds);
}

/* --- (2) per-group scales */

#define K1 40   /* MatMul W1 [K1, N1]: groups of a column, the last shorter */
#define N1 70
#define M2 3    /* Gemm transB = 1, W2 [M2, N1]: contiguous groups */
#define NS 8

typedef struct gfx {
    bf_model *m;
    bf_dataset *ds;
    float w1[K1 * N1], w2[M2 * N1], b2[M2];
} gfx;

static float lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int setup(void **state)
{
    gfx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    uint32_t seed = 7;
    for (int i = 0; i < K1 * N1; i++) f->w1[i] = lcg(&seed) * (i % 13 == 0 ? 3.0f : 0.5f);
    for (int i = 0; i < M2 * N1; i++) f->w2[i] = lcg(&seed) * 0.3f;
    for (int i = 0; i < M2; i++) f->b2[i] = lcg(&seed) * 0.1f;
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 2, (int64_t[]){-1, K1});
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, M2});
    tg_init_f32(&g, "W1", 2, (int64_t[]){K1, N1}, f->w1);
    tg_init_f32(&g, "W2", 2, (int64_t[]){M2, N1}, f->w2);
    tg_init_f32(&g, "B2", 1, (int64_t[]){M2}, f->b2);
    tg_node(&g, "MatMul", "mm", (const char *[]){"x", "W1"}, 2, "h");
    tg_node(&g, "Relu", "relu", (const char *[]){"h"}, 1, "hr");
    Onnx__NodeProto *gm = tg_node(&g, "Gemm", "fc", (const char *[]){"hr", "W2", "B2"}, 3, "y");
    tg_attr_int(&g, gm, "transB", 1);
    bf_error err = {0};
    if (tg_load_opts(&g, "groups", NULL, &f->m, &err) != BF_OK) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    /* the eval set: NS samples of x and their labels */
    float x[NS * K1];
    int64_t lab[NS];
    for (int i = 0; i < NS * K1; i++) x[i] = lcg(&seed);
    for (int i = 0; i < NS; i++) lab[i] = i % M2;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "{\"x\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%zu]},"
                      "\"labels\":{\"dtype\":\"I64\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}}",
                      NS, K1, sizeof x, NS, sizeof x, sizeof x + sizeof lab);
    size_t total = 8 + (size_t)hl + sizeof x + sizeof lab;
    unsigned char *st = malloc(total);
    if (!st) return -1;
    for (int k = 0; k < 8; k++) st[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    memcpy(st + 8, head, (size_t)hl);
    memcpy(st + 8 + hl, x, sizeof x);
    memcpy(st + 8 + hl + sizeof x, lab, sizeof lab);
    if (bf_dataset_load_buffer(st, total, "groups", &f->ds, &err) != BF_OK) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    free(st);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    gfx *f = *state;
    bf_model_free(f->m);
    bf_dataset_free(f->ds);
    free(f);
    return 0;
}

/* The reference's group of element i: its members' indices into `mem`
 * (returns the count). W1 [K1, N1] groups down a column; W2 [M2, N1]
 * along a row. */
static int group_members(int w1, int64_t i, int64_t gs, int64_t *mem)
{
    int n = 0;
    if (w1) {
        int64_t k = i / N1, col = i % N1, k0 = k / gs * gs;
        for (int64_t kk = k0; kk < k0 + gs && kk < K1; kk++) mem[n++] = kk * N1 + col;
    } else {
        int64_t row = i / N1, c = i % N1, c0 = c / gs * gs;
        for (int64_t cc = c0; cc < c0 + gs && cc < N1; cc++) mem[n++] = row * N1 + cc;
    }
    return n;
}

/* Symmetric int<m>: scale = fp16(max|w| / (2^(m-1) - 1)) over the group,
 * q = round-half-even(w / scale) clamped; the stored m bits. */
static float ref_sym_scale(const float *w, const int64_t *mem, int n, int m)
{
    float ab = 0;
    for (int j = 0; j < n; j++) ab = fabsf(w[mem[j]]) > ab ? fabsf(w[mem[j]]) : ab;
    return ref_f16_round(ab / (float)((1 << (m - 1)) - 1));
}

static int32_t ref_sym_q(float w, float scale, int m)
{
    double hi = (1 << (m - 1)) - 1, x = (double)(w / scale);
    x = x > hi ? hi : x < -hi ? -hi : x;
    return (int32_t)tc_round_half_even(x);
}

static float ref_sym_decode(uint32_t bits, float scale, int m)
{
    int32_t q = (int32_t)(bits & ((1u << m) - 1));
    if (q >= 1 << (m - 1)) q -= 1 << m;
    return (float)q * scale;
}

static void int4_groups_records(void **state)
{
    gfx *f = *state;
    const int64_t sizes[] = {32, 64, 128, 7};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        int64_t gs = sizes[z];
        /* W1: elements in the first and the short last group of several
         * columns; W2: in each row's groups; every one of the 4 bits */
        int64_t picks1[] = {0, 5 * N1 + 3, 33 * N1 + 3, 39 * N1 + 69, 31 * N1 + 10, 32 * N1 + 10};
        int64_t picks2[] = {0, 69, N1 + 40, 2 * N1 + 65, 2 * N1 + 31};
        bf_fault_entry e[44];
        size_t n = 0;
        for (size_t i = 0; i < 6; i++)
            for (int b = 0; b < 4; b++) e[n++] = (bf_fault_entry){.tensor = "W1", .index = picks1[i], .bit = b, .sample = -1};
        for (size_t i = 0; i < 5; i++)
            for (int b = 0; b < 4; b++) e[n++] = (bf_fault_entry){.tensor = "W2", .index = picks2[i], .bit = b, .sample = -1};
        bf_campaign_spec s = base_spec();
        s.repr = BF_REPR_INT4;
        s.group_size = gs;
        bf_trial_record r[44];
        run_list(f->m, f->ds, s, e, n, r);
        for (size_t t = 0; t < n; t++) {
            int w1 = strcmp(e[t].tensor, "W1") == 0;
            const float *w = w1 ? f->w1 : f->w2;
            int64_t mem[128] = {0};
            int cnt = group_members(w1, e[t].index, gs, mem);
            float scale = ref_sym_scale(w, mem, cnt, 4);
            int32_t q = ref_sym_q(w[e[t].index], scale, 4);
            float old = (float)q * scale, now = ref_sym_decode((uint32_t)q ^ (1u << e[t].bit), scale, 4);
            assert_int_equal(r[t].n_kept, 1);
            if (r[t].faults[0].old_value != old || r[t].faults[0].new_value != now)
                fail_msg("group %lld, %s[%lld] bit %d: got %a -> %a, want %a -> %a", (long long)gs, e[t].tensor,
                         (long long)e[t].index, e[t].bit, r[t].faults[0].old_value, r[t].faults[0].new_value, old, now);
        }
    }
}

/* uint4 with groups: u = rhe((w - lo) / scale) clamped to 0..15, lo and
 * scale fp16-rounded, value = u * scale + lo. */
static void uint4_groups_records(void **state)
{
    gfx *f = *state;
    const int64_t gs = 32;
    bf_fault_entry e[] = {
        {"W1", 3 * N1 + 8, 3, -1}, {"W1", 35 * N1 + 8, 0, -1}, {"W2", N1 + 68, 2, -1}, {"W2", 17, 1, -1},
    };
    bf_campaign_spec s = base_spec();
    s.repr = BF_REPR_UINT4;
    s.group_size = gs;
    bf_trial_record r[4];
    run_list(f->m, f->ds, s, e, 4, r);
    for (size_t t = 0; t < 4; t++) {
        int w1 = strcmp(e[t].tensor, "W1") == 0;
        const float *w = w1 ? f->w1 : f->w2;
        int64_t mem[128] = {0};
        int cnt = group_members(w1, e[t].index, gs, mem);
        float mn = w[mem[0]], mx = w[mem[0]];
        for (int j = 1; j < cnt; j++) {
            mn = w[mem[j]] < mn ? w[mem[j]] : mn;
            mx = w[mem[j]] > mx ? w[mem[j]] : mx;
        }
        float scale = ref_f16_round((mx - mn) / 15.0f);
        float lo = mn < 0 ? -ref_f16_round(-mn) : ref_f16_round(mn);
        double x = (double)((w[e[t].index] - lo) / scale);
        x = x > 15 ? 15 : x < 0 ? 0 : x;
        uint32_t u = (uint32_t)tc_round_half_even(x);
        float p0 = (float)u * scale, p1 = (float)(u ^ (1u << e[t].bit)) * scale;
        float old = p0 + lo, now = p1 + lo;
        assert_true(r[t].faults[0].old_value == old);
        assert_true(r[t].faults[0].new_value == now);
    }
}

/* Every 4-bit pattern decodes, -8 included; ties round to even. */
static void int4_patterns_and_ties(void **state)
{
    (void)state;
    const float scale = 0.25f;
    for (uint32_t b = 0; b < 16; b++) {
        float want = (float)((int32_t)b - (b >= 8 ? 16 : 0)) * scale;
        assert_true(bf_repr_decode(BF_REPR_INT4, b, scale) == want);
        assert_true(bf_repr_decode(BF_REPR_UINT4, b, scale) == (float)b * scale);
    }
    /* w / scale = 0.5, 1.5, 2.5, -2.5, 6.5, 7.6 (clamped to 7), -9 (clamped to -7) */
    const float w[] = {0.125f, 0.375f, 0.625f, -0.625f, 1.625f, 1.9f, -2.25f};
    const int32_t q[] = {0, 2, 2, -2, 6, 7, -7};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        assert_int_equal(bf_repr_encode(BF_REPR_INT4, w[i], scale), (uint32_t)q[i] & 15u);
    /* the layout arithmetic: [2, 5, 3] in groups of 2 along the 5 */
    bf_qgroups g = {.outer = 2, .k = 5, .inner = 3, .group = 2};
    assert_int_equal(bf_repr_group_count(&g), 2 * 3 * 3);
    for (int64_t o = 0; o < 2; o++)
        for (int64_t k = 0; k < 5; k++)
            for (int64_t i = 0; i < 3; i++)
                assert_int_equal(bf_repr_group_of(&g, (o * 5 + k) * 3 + i), (o * 3 + k / 2) * 3 + i);
    bf_qgroups bad = {.outer = 1, .k = 4, .inner = 1, .group = 0};
    assert_int_equal(bf_repr_group_count(&bad), 0);
    bf_qgroups huge = {.outer = INT64_MAX / 2, .k = 4, .inner = 4, .group = 1};
    assert_int_equal(bf_repr_group_count(&huge), 0);
}

/* The golden model is the rounded one: the campaign's golden outputs equal
 * a forward pass written here over the reference's int4 weights. */
static void golden_is_the_rounded_model(void **state)
{
    gfx *f = *state;
    const int64_t gs = 32;
    static float q1[K1 * N1], q2[M2 * N1];
    int64_t mem[128] = {0};
    for (int64_t i = 0; i < K1 * N1; i++) {
        int cnt = group_members(1, i, gs, mem);
        float sc = ref_sym_scale(f->w1, mem, cnt, 4);
        q1[i] = (float)ref_sym_q(f->w1[i], sc, 4) * sc;
    }
    for (int64_t i = 0; i < M2 * N1; i++) {
        int cnt = group_members(0, i, gs, mem);
        float sc = ref_sym_scale(f->w2, mem, cnt, 4);
        q2[i] = (float)ref_sym_q(f->w2[i], sc, 4) * sc;
    }
    /* the evaluator over the reference's weights, and the campaign's golden
     * accuracy from the same */
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = 16, .threads = 1};
    if (bf_evaluator_create(f->m, f->ds, &eo, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
    assert_int_equal(bf_evaluator_set_param(ev, (size_t)bf_model_find_param(f->m, "W1"), q1, &err), BF_OK);
    assert_int_equal(bf_evaluator_set_param(ev, (size_t)bf_model_find_param(f->m, "W2"), q2, &err), BF_OK);
    bf_eval_result er;
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &er, &err), BF_OK);
    bf_campaign_spec s = base_spec();
    s.repr = BF_REPR_INT4;
    s.group_size = gs;
    s.trials = 4;
    bf_campaign *c = tc_make(f->m, f->ds, &s);
    bf_campaign_opts o = {.threads = 1, .shard_count = 1};
    bf_campaign_result res;
    if (bf_campaign_run(c, &o, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_true(res.golden[BF_METRIC_ACCURACY] == er.accuracy);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    bf_evaluator_free(ev);
}

/* The differential engine gives the exact runs' outcomes on group-scaled
 * weights too (its old and new values are the store's). */
static void differential_matches_exact(void **state)
{
    gfx *f = *state;
    double scale = tc_out_scale(f->m, f->ds);
    tc_tally t = {0};
    bf_campaign_spec s = base_spec();
    s.repr = BF_REPR_INT4;
    s.group_size = 32;
    s.trials = 300;
    tc_both(f->m, f->ds, scale, "groups", &s, "int4 g32 bitflip", &t, NULL);
    double rate = 2e-3;
    s = base_spec();
    s.repr = BF_REPR_UINT3;
    s.group_size = 16;
    s.model_kind = BF_FAULT_BER;
    s.rates = &rate;
    s.n_rates = 1;
    s.repeats = 40;
    tc_both(f->m, f->ds, scale, "groups", &s, "uint3 g16 ber", &t, NULL);
    tc_assert_agree("group scales, differential vs exact", &t, 300);
}

/* Conv W [M, C, kh, kw] groups along C x kh x kw, contiguous per output
 * channel; a 1-D bias along its only axis. */
static void conv_layout(void **state)
{
    (void)state;
    enum { CO = 4, CI = 3, KS = 3, ROW = CI * KS * KS, G = 8 };
    float w[CO * ROW], bias[CO];
    uint32_t seed = 99;
    for (int i = 0; i < CO * ROW; i++) w[i] = lcg(&seed) * (i % 7 == 0 ? 2.0f : 0.4f);
    for (int i = 0; i < CO; i++) bias[i] = lcg(&seed);
    tg_graph g = {0};
    g.ins[g.n_ins++] = tg_value_info(&g, "x", 1, 4, (int64_t[]){-1, CI, 4, 4});
    g.outs[g.n_outs++] = tg_value_info(&g, "y", 1, 2, (int64_t[]){-1, CO * 4});
    tg_init_f32(&g, "W", 4, (int64_t[]){CO, CI, KS, KS}, w);
    tg_init_f32(&g, "B", 1, (int64_t[]){CO}, bias);
    tg_node(&g, "Conv", "conv", (const char *[]){"x", "W", "B"}, 3, "c");
    Onnx__NodeProto *fl = tg_node(&g, "Flatten", "flat", (const char *[]){"c"}, 1, "y");
    tg_attr_int(&g, fl, "axis", 1);
    bf_model *m = tg_load(&g, "conv");
    bf_error err = {0};
    float x[4 * CI * 16];
    int64_t lab[4] = {0, 5, 9, 15};
    for (int i = 0; i < 4 * CI * 16; i++) x[i] = lcg(&seed);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "{\"x\":{\"dtype\":\"F32\",\"shape\":[4,%d,4,4],\"data_offsets\":[0,%zu]},"
                      "\"labels\":{\"dtype\":\"I64\",\"shape\":[4],\"data_offsets\":[%zu,%zu]}}",
                      CI, sizeof x, sizeof x, sizeof x + sizeof lab);
    size_t total = 8 + (size_t)hl + sizeof x + sizeof lab;
    unsigned char *st = malloc(total);
    assert_non_null(st);
    for (int k = 0; k < 8; k++) st[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    memcpy(st + 8, head, (size_t)hl);
    memcpy(st + 8 + hl, x, sizeof x);
    memcpy(st + 8 + hl + sizeof x, lab, sizeof lab);
    bf_dataset *ds = NULL;
    if (bf_dataset_load_buffer(st, total, "conv", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    free(st);
    /* elements at group edges of channels 0 and 3, and the bias */
    bf_fault_entry e[] = {{"W", 7, 2, -1}, {"W", 8, 3, -1}, {"W", 26, 1, -1}, {"W", 3 * ROW + 24, 0, -1},
                          {"W", 3 * ROW + 15, 3, -1}, {"B", 2, 3, -1}};
    size_t n = sizeof e / sizeof e[0];
    bf_campaign_spec s = base_spec();
    s.repr = BF_REPR_INT4;
    s.group_size = G;
    bf_trial_record r[sizeof e / sizeof e[0]];
    run_list(m, ds, s, e, n, r);
    for (size_t t = 0; t < n; t++) {
        int is_w = e[t].tensor[0] == 'W';
        const float *v = is_w ? w : bias;
        int64_t row = is_w ? ROW : CO, base = e[t].index / row * row, c = e[t].index % row, c0 = c / G * G;
        int64_t mem[G];
        int cnt = 0;
        for (int64_t cc = c0; cc < c0 + G && cc < row; cc++) mem[cnt++] = base + cc;
        float sc = ref_sym_scale(v, mem, cnt, 4);
        int32_t q = ref_sym_q(v[e[t].index], sc, 4);
        assert_true(r[t].faults[0].old_value == (float)q * sc);
        assert_true(r[t].faults[0].new_value == ref_sym_decode((uint32_t)q ^ (1u << e[t].bit), sc, 4));
    }
    bf_dataset_free(ds);
    bf_model_free(m);
}

/* fault_scales: the sites are W1's and W2's fp16 group scales; a fault's
 * old and new values are the scale's, and the pass sees every weight of
 * the group rescaled (q the same): the trial's max_abs equals one
 * computed here from an evaluator given those weights. */
static void fault_scales_records(void **state)
{
    gfx *f = *state;
    const int64_t gs = 32;
    static float q1[K1 * N1], q2[M2 * N1], s1[K1 * N1];
    int64_t mem[128] = {0};
    for (int64_t i = 0; i < K1 * N1; i++) {
        int cnt = group_members(1, i, gs, mem);
        float sc = ref_sym_scale(f->w1, mem, cnt, 4);
        q1[i] = (float)ref_sym_q(f->w1[i], sc, 4) * sc;
    }
    for (int64_t i = 0; i < M2 * N1; i++) {
        int cnt = group_members(0, i, gs, mem);
        float sc = ref_sym_scale(f->w2, mem, cnt, 4);
        q2[i] = (float)ref_sym_q(f->w2[i], sc, 4) * sc;
    }
    /* W1 [40, 70] in groups of 32 down a column: scales [2, 70], scale
     * (kg, col) = kg * 70 + col; W2 [3, 70] along rows: [3, 3] */
    bf_fault_entry e[] = {{"W1", 3, 14, -1}, {"W1", N1 + 5, 10, -1}, {"W1", 69, 15, -1}, {"W2", 4, 12, -1}, {"W2", 8, 0, -1}};
    size_t n = sizeof e / sizeof e[0];
    bf_campaign_spec s = base_spec();
    s.repr = BF_REPR_INT4;
    s.group_size = gs;
    s.fault_scales = 1;
    bf_campaign *c = tc_make(f->m, f->ds, &s);
    assert_int_equal(bf_campaign_site(c, 0)->bits, 16);
    assert_int_equal(bf_campaign_site(c, 0)->elements + bf_campaign_site(c, 1)->elements, 2 * N1 + 3 * 3);
    bf_campaign_free(c);
    bf_trial_record r[5];
    run_list(f->m, f->ds, s, e, n, r);
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_eval_opts eo = {.batch = 16, .threads = 1};
    if (bf_evaluator_create(f->m, f->ds, &eo, &ev, &err) != BF_OK) fail_msg("%s", err.msg);
    size_t p1 = (size_t)bf_model_find_param(f->m, "W1"), p2 = (size_t)bf_model_find_param(f->m, "W2");
    assert_int_equal(bf_evaluator_set_param(ev, p1, q1, &err), BF_OK);
    assert_int_equal(bf_evaluator_set_param(ev, p2, q2, &err), BF_OK);
    bf_eval_result er;
    assert_int_equal(bf_evaluator_run(ev, NULL, 0, &er, &err), BF_OK);
    float golden[NS * M2];
    memcpy(golden, er.outputs, sizeof golden);
    for (size_t t = 0; t < n; t++) {
        int w1 = e[t].tensor[1] == '1';
        const float *w = w1 ? f->w1 : f->w2;
        /* the scale's group: its first element, then the reference's members */
        int64_t first = w1 ? (e[t].index / N1) * gs * N1 + e[t].index % N1 : (e[t].index / 3) * N1 + (e[t].index % 3) * gs;
        int cnt = group_members(w1, first, gs, mem);
        float sc = ref_sym_scale(w, mem, cnt, 4);
        uint16_t h = bf_f32_to_f16(sc);
        float now = bf_f16_to_f32((uint16_t)(h ^ (1u << e[t].bit)));
        assert_true(r[t].faults[0].old_value == sc);
        assert_memory_equal(&r[t].faults[0].new_value, &now, 4);
        memcpy(s1, w1 ? q1 : q2, (w1 ? K1 : M2) * N1 * sizeof(float));
        for (int j = 0; j < cnt; j++) s1[mem[j]] = (float)ref_sym_q(w[mem[j]], sc, 4) * now;
        assert_int_equal(bf_evaluator_set_param(ev, w1 ? p1 : p2, s1, &err), BF_OK);
        assert_int_equal(bf_evaluator_run(ev, NULL, 0, &er, &err), BF_OK);
        double mx = 0;
        for (int i = 0; i < NS * M2; i++) {
            double d = fabs((double)er.outputs[i] - (double)golden[i]);
            if (d > mx || d != d) mx = d;
        }
        double got = r[t].metrics[BF_METRIC_MAX_ABS];
        if (!(fabs(got - mx) <= 1e-6 * (1 + mx)) && !(isnan(got) && isnan(mx)) && !(isinf(got) && isinf(mx)))
            fail_msg("scale fault %zu: max_abs %g, want %g", t, got, mx);
        assert_int_equal(bf_evaluator_set_param(ev, w1 ? p1 : p2, w1 ? q1 : q2, &err), BF_OK);
    }
    bf_evaluator_free(ev);
    /* and the differential engine agrees with exact runs on them */
    tc_tally tl = {0};
    s = base_spec();
    s.repr = BF_REPR_INT4;
    s.group_size = gs;
    s.fault_scales = 1;
    s.trials = 200;
    tc_both(f->m, f->ds, tc_out_scale(f->m, f->ds), "groups", &s, "int4 g32 scales", &tl, NULL);
    tc_assert_agree("fault_scales, differential vs exact", &tl, 200);
}

static void group_size_errors(void **state)
{
    gfx *f = *state;
    bf_campaign *c = NULL;
    bf_error err = {0};
    struct { bf_repr repr; int64_t gs; int per_channel; bf_target target; bf_status want; const char *says; } cases[] = {
        {BF_REPR_INT4, 0, 0, BF_TARGET_WEIGHTS, BF_OK, NULL},
        {BF_REPR_INT4, -1, 0, BF_TARGET_WEIGHTS, BF_ERANGE, "group_size"},
        {BF_REPR_INT4, BF_GROUP_SIZE_MAX + 1, 0, BF_TARGET_WEIGHTS, BF_ERANGE, "1..1048576"},
        {BF_REPR_INT4, INT64_MAX, 0, BF_TARGET_WEIGHTS, BF_ERANGE, "group_size"},
        {BF_REPR_FP16, 32, 0, BF_TARGET_WEIGHTS, BF_EINVAL, "fixed-point"},
        {BF_REPR_INT8, 32, 0, BF_TARGET_ACTIVATIONS, BF_EINVAL, "target 'weights'"},
        {BF_REPR_INT4, 32, 1, BF_TARGET_WEIGHTS, BF_EINVAL, "per_channel"},
        {BF_REPR_INT4, BF_GROUP_SIZE_MAX, 0, BF_TARGET_WEIGHTS, BF_OK, NULL},   /* one group per row */
    };
    /* fault_scales without groups (with a profiled map or mitigations:
     * test_spec_rules) */
    bf_campaign_spec fs = base_spec();
    fs.repr = BF_REPR_INT4;
    fs.fault_scales = 1;
    assert_int_equal(bf_campaign_create(f->m, f->ds, &fs, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "only with group_size"));

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bf_campaign_spec s = base_spec();
        s.repr = cases[i].repr;
        s.group_size = cases[i].gs;
        s.per_channel = cases[i].per_channel;
        s.target = cases[i].target;
        bf_status st = bf_campaign_create(f->m, f->ds, &s, &c, &err);
        assert_int_equal(st, cases[i].want);
        if (cases[i].says && !strstr(err.msg, cases[i].says)) fail_msg("case %zu: %s", i, err.msg);
        if (st == BF_OK) bf_campaign_free(c);
        c = NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bf16_sixteen_bits),
        cmocka_unit_test(int4_patterns_and_ties),
        cmocka_unit_test(int4_groups_records),
        cmocka_unit_test(uint4_groups_records),
        cmocka_unit_test(golden_is_the_rounded_model),
        cmocka_unit_test(differential_matches_exact),
        cmocka_unit_test(conv_layout),
        cmocka_unit_test(fault_scales_records),
        cmocka_unit_test(group_size_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
