/* test_campaign: PyTorch's reference faults, threads and shards, and fp16, bf16 and int8 values. */
#include "test_campaign.h"

/* --- (1) PyTorch's reference faults through the campaign path */

typedef struct ref_fault {
    const char *param;
    int64_t index;
    int bit;
    float old_value, new_value;
    int ref_changed;          /* argmax changes in PyTorch's 16 reference samples */
} ref_fault;

/* From demo_digits.ref.json (PyTorch on the eval set's first 16 samples);
 * the last two change outputs by 0.67 and 1.79 without changing a top-1. */
static const ref_fault ref_faults[] = {
    {"fc.weight", 2281, 30, 0.09337465465068817f, 3.1773748494961385e+37f, 14},
    {"conv1.weight", 24, 30, 0.5212974548339844f, 1.773883318007692e+38f, 15},
    {"fc.bias", 4, 30, -0.0864362046122551f, -2.94127162931207e+37f, 1},
    {"conv1.weight", 59, 23, 0.5513398051261902f, 1.1026796102523804f, 0},
    {"fc.bias", 6, 25, -0.11935616284608841f, -1.9096986055374146f, 0},
};
#define N_REF (sizeof ref_faults / sizeof ref_faults[0])

void reference_faults_classified(void **state)
{
    fx *f = *state;
    bf_dataset *ds16 = subset(f->digits_ds, 16);
    bf_fault_entry list[N_REF];
    for (size_t i = 0; i < N_REF; i++)
        list[i] = (bf_fault_entry){.tensor = (char *)ref_faults[i].param, .index = ref_faults[i].index,
                                   .bit = ref_faults[i].bit, .sample = -1};
    bf_campaign_spec s = base_spec();
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = N_REF;
    bf_campaign *c = tc_make(f->digits, ds16, &s);
    assert_int_equal(bf_campaign_num_trials(c), N_REF);
    records rs;
    records_init(&rs, N_REF);
    bf_campaign_result res;
    run(c, 2, 0, 1, &rs, &res);
    assert_int_equal(res.trials_done, N_REF);
    for (size_t i = 0; i < N_REF; i++) {
        const bf_trial_record *r = &rs.r[i];
        assert_int_equal(r->n_kept, 1);
        assert_string_equal(bf_campaign_site(c, (size_t)r->faults[0].site)->name, ref_faults[i].param);
        assert_true(r->faults[0].old_value == ref_faults[i].old_value);
        assert_true(r->faults[0].new_value == ref_faults[i].new_value);
        assert_int_equal(r->faults[0].mask, 1u << ref_faults[i].bit);
        if (ref_faults[i].ref_changed) {
            assert_int_equal(r->outcome, BF_OUTCOME_CRITICAL);
            assert_int_equal(r->changed, ref_faults[i].ref_changed);
        } else {
            assert_int_equal(r->outcome, BF_OUTCOME_TOLERABLE);
            assert_int_equal(r->changed, 0);
        }
        assert_int_equal(res.by_bit[ref_faults[i].bit].n[r->outcome] > 0, 1);
    }
    assert_int_equal(res.total.n[BF_OUTCOME_CRITICAL], 3);
    assert_int_equal(res.total.n[BF_OUTCOME_TOLERABLE], 2);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);

    /* A stuck-at-0 on a bit that is already 0 (the sign of a positive bias)
     * leaves the stored value as it is: masked. Stuck-at-1 flips it. */
    bf_fault_entry sa = {.tensor = "fc.bias", .index = 0, .bit = 31, .sample = -1};
    s.list = &sa;
    s.n_list = 1;
    s.model_kind = BF_FAULT_STUCK_AT_0;
    c = tc_make(f->digits, ds16, &s);
    run(c, 1, 0, 1, &rs, &res);
    assert_int_equal(rs.r[0].outcome, BF_OUTCOME_MASKED);
    assert_true(rs.r[0].faults[0].old_value == rs.r[0].faults[0].new_value);
    assert_true(rs.r[0].metrics[BF_METRIC_MAX_ABS] == 0);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    s.model_kind = BF_FAULT_STUCK_AT_1;
    c = tc_make(f->digits, ds16, &s);
    run(c, 1, 0, 1, &rs, &res);
    assert_int_equal(rs.r[0].outcome, BF_OUTCOME_TOLERABLE);
    assert_true(rs.r[0].faults[0].new_value == -rs.r[0].faults[0].old_value);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);
    bf_dataset_free(ds16);
}

/* --- (2) threads and shards do not change anything */

void threads_and_shards_agree(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = base_spec();
    s.trials = 60;
    s.metrics = 0;     /* every metric of the task */
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    records r1, r2, r3;
    bf_campaign_result a, b, merged = {0};
    records_init(&r1, s.trials);
    records_init(&r2, s.trials);
    records_init(&r3, s.trials);
    run(c, 1, 0, 1, &r1, &a);
    run(c, 3, 0, 1, &r2, &b);
    assert_int_equal(a.trials_done, 60);
    assert_int_equal(outcomes(&a.total), 60);
    assert_true(r1.in_order && r2.in_order);
    assert_false(r1.off_thread || r2.off_thread);
    assert_int_equal(r2.calls, 60);
    tc_assert_same_aggregates(&a, &b);
    for (int64_t t = 0; t < s.trials; t++) tc_assert_same_record(&r1.r[t], &r2.r[t]);

    for (int64_t i = 0; i < 3; i++) {
        bf_campaign_result part;
        run(c, 2, i, 3, &r3, &part);
        assert_int_equal(part.trials_planned, 20);
        bf_error err = {0};
        assert_int_equal(bf_campaign_result_merge(&merged, &part, &err), BF_OK);
        bf_campaign_result_free(&part);
    }
    tc_assert_same_aggregates(&a, &merged);
    for (int64_t t = 0; t < s.trials; t++) tc_assert_same_record(&r1.r[t], &r3.r[t]);

    /* the campaign has real variety: not everything masked */
    assert_true(a.total.n[BF_OUTCOME_MASKED] < 60);
    assert_int_equal(a.metric[BF_METRIC_ACCURACY].n, 60);
    assert_true(a.golden[BF_METRIC_ACCURACY] > 0.9);
    assert_true(isnan(a.golden[BF_METRIC_AUC]));
    assert_true(a.task == BF_TASK_CLASSIFICATION && a.samples == 360);

    /* merging a different shape is refused */
    bf_campaign_result other = {0};
    other.n_sites = 2;
    other.by_site = calloc(2, sizeof *other.by_site);
    other.trials_planned = 1;
    bf_error err = {0};
    assert_int_equal(bf_campaign_result_merge(&merged, &other, &err), BF_EINVAL);
    free(other.by_site);

    bf_campaign_result_free(&a);
    bf_campaign_result_free(&b);
    bf_campaign_result_free(&merged);
    free(r1.r);
    free(r2.r);
    free(r3.r);
    bf_campaign_free(c);
}

/* --- (3) fp16, bf16 and int8 values, computed here from the definitions */

static uint16_t my_f16(float x)   /* round to nearest even; normal range only */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int exp = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t mant = u & 0x7fffffu;
    assert_true(exp > 0 && exp < 31);
    uint32_t h = (uint32_t)exp << 10 | mant >> 13;
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static float my_f16_decode(uint16_t h)
{
    int exp = (h >> 10) & 0x1f;
    double mant = h & 0x3ff;
    double v = exp == 0 ? ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, exp - 25);
    return (float)((h & 0x8000) ? -v : v);
}

static bf_trial_record one_fault(fx *f, bf_repr repr, int per_channel, const char *param, int64_t index, int bit)
{
    bf_fault_entry e = {.tensor = (char *)param, .index = index, .bit = bit, .sample = -1};
    bf_campaign_spec s = base_spec();
    s.repr = repr;
    s.per_channel = per_channel;
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e;
    s.n_list = 1;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_site(c, 0)->bits, repr == BF_REPR_INT8 ? 8 : repr == BF_REPR_FP32 ? 32 : 16);
    records rs;
    records_init(&rs, 1);
    bf_campaign_result res;
    run(c, 1, 0, 1, &rs, &res);
    /* the golden model is the quantized one, and still a good classifier */
    assert_true(res.golden[BF_METRIC_ACCURACY] > 0.9);
    bf_trial_record r = rs.r[0];
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);
    return r;
}

void reduced_precision_values(void **state)
{
    fx *f = *state;
    int64_t n;
    const float *w = param_data(f->digits, "fc.weight", &n);
    const int64_t idx = 2281;
    float x = w[idx];

    /* fp16: exponent MSB, a mantissa bit and the sign */
    int fp16_bits[] = {14, 3, 15};
    for (size_t k = 0; k < 3; k++) {
        bf_trial_record r = one_fault(f, BF_REPR_FP16, 0, "fc.weight", idx, fp16_bits[k]);
        uint16_t h = my_f16(x);
        assert_true(r.faults[0].old_value == my_f16_decode(h));
        float want = my_f16_decode((uint16_t)(h ^ (1u << fp16_bits[k])));
        assert_memory_equal(&r.faults[0].new_value, &want, sizeof want);
        assert_int_equal(r.faults[0].mask, 1u << fp16_bits[k]);
    }
    /* bf16 */
    int bf16_bits[] = {14, 6, 0};
    for (size_t k = 0; k < 3; k++) {
        bf_trial_record r = one_fault(f, BF_REPR_BF16, 0, "fc.weight", idx, bf16_bits[k]);
        uint16_t h = tc_bf16(x);
        assert_true(r.faults[0].old_value == tc_bf16_decode(h));
        float want = tc_bf16_decode((uint16_t)(h ^ (1u << bf16_bits[k])));
        assert_memory_equal(&r.faults[0].new_value, &want, sizeof want);
    }
    /* int8, per-tensor: scale = max|w| / 127 over the tensor */
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fabsf(w[i]) > m ? fabsf(w[i]) : m;
    float scale = m / 127.0f;
    double q = tc_round_half_even((double)(x / scale));
    int8_t qi = (int8_t)q;
    int int8_bits[] = {6, 7, 0};
    for (size_t k = 0; k < 3; k++) {
        bf_trial_record r = one_fault(f, BF_REPR_INT8, 0, "fc.weight", idx, int8_bits[k]);
        assert_true(r.faults[0].old_value == (float)qi * scale);
        int8_t flipped = (int8_t)(uint8_t)((uint8_t)qi ^ (1u << int8_bits[k]));
        assert_true(r.faults[0].new_value == (float)flipped * scale);
    }
    /* int8, per-channel: fc.weight is [10, 256]; element 2281 is in row 8 */
    int64_t row = idx / 256;
    m = 0;
    for (int64_t i = row * 256; i < (row + 1) * 256; i++) m = fabsf(w[i]) > m ? fabsf(w[i]) : m;
    scale = m / 127.0f;
    qi = (int8_t)tc_round_half_even((double)(x / scale));
    bf_trial_record r = one_fault(f, BF_REPR_INT8, 1, "fc.weight", idx, 6);
    assert_true(r.faults[0].old_value == (float)qi * scale);
    assert_true(r.faults[0].new_value == (float)(int8_t)(uint8_t)((uint8_t)qi ^ 64u) * scale);

    /* a bit past the representation is refused */
    bf_fault_entry e = {.tensor = "fc.weight", .index = 0, .bit = 8, .sample = -1};
    bf_campaign_spec s = base_spec();
    s.repr = BF_REPR_INT8;
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e;
    s.n_list = 1;
    bf_campaign *c = NULL;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "list entry 0"));
    assert_non_null(strstr(err.msg, "int8"));
}
