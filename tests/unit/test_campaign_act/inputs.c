/* test_campaign_act: input faults as a changed eval set, and faults on the logits and inner activations. */
#include "test_campaign_act.h"

/* --- (1) input faults = a plain pass over a changed eval set */

void input_faults_match_changed_dataset(void **state)
{
    fx *f = *state;
    const bf_tensor *in = bf_dataset_find(f->digits_ds, "input");
    const float *x = in->data;
    const int64_t row = 64, n = 360;
    /* samples in the first, middle and last (partial) batches */
    bf_fault_entry list[] = {
        {.tensor = "input", .index = 10, .bit = 30, .sample = 0},
        {.tensor = "input", .index = 27, .bit = 31, .sample = 63},
        {.tensor = "input", .index = 36, .bit = 23, .sample = 64},
        {.tensor = "input", .index = 0, .bit = 22, .sample = 200},
        {.tensor = "input", .index = 63, .bit = 29, .sample = 359},
        {.tensor = "input", .index = 44, .bit = 0, .sample = 330},
    };
    const size_t N = sizeof list / sizeof list[0];
    bf_campaign_spec s = base_spec(BF_TARGET_INPUTS, BF_PERSIST_TRANSIENT);
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = N;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 1);
    assert_string_equal(bf_campaign_site(c, 0)->name, "input");
    assert_string_equal(bf_campaign_site(c, 0)->op, "Conv");
    assert_int_equal(bf_campaign_site(c, 0)->elements, row);
    assert_true(bf_campaign_population(c) == 64.0 * 32 * 360);
    capture cap;
    capture_init(&cap, (int64_t)N);
    bf_campaign_result res;
    run(c, 2, 0, 1, &cap, &res);
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    int changed_any = 0;
    for (size_t i = 0; i < N; i++) {
        elem_fault e = {.sample = list[i].sample, .index = list[i].index, .mask = 1u << list[i].bit, .repr = BF_REPR_FP32};
        bf_dataset *mod = dataset_with(f->digits_ds, "input", mod_elem, &e);
        float *want = plain_pass(f->digits, mod, 1, &no);
        assert_memory_equal(trial_out(&cap, (int64_t)i), want, (size_t)no * sizeof(float));
        const bf_trial_record *r = &cap.rec[i];
        assert_int_equal(r->n_kept, 1);
        assert_int_equal(r->faults[0].sample, list[i].sample);
        assert_int_equal(r->faults[0].index, list[i].index);
        float old = x[list[i].sample * row + list[i].index], now = my_corrupt(&e, old);
        assert_memory_equal(&r->faults[0].old_value, &old, 4);
        assert_memory_equal(&r->faults[0].new_value, &now, 4);
        int same = memcmp(want, golden, (size_t)no * sizeof(float)) == 0;
        assert_int_equal(r->outcome == BF_OUTCOME_MASKED, same);
        changed_any |= !same;
        free(want);
        bf_dataset_free(mod);
    }
    assert_true(changed_any);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    capture_free(&cap);

    /* permanent: the same element of every sample; fp32 and bf16, and int8
     * with scale max |input| / 127 over the eval set */
    struct { bf_repr repr; int64_t index; int bit; } perm[] = {
        {BF_REPR_FP32, 27, 30}, {BF_REPR_FP32, 5, 31}, {BF_REPR_BF16, 27, 14}, {BF_REPR_BF16, 40, 3},
        {BF_REPR_INT8, 27, 6}, {BF_REPR_INT8, 19, 7},
    };
    float in_scale = max_abs(x, n * row) / 127.0f;
    for (size_t k = 0; k < sizeof perm / sizeof perm[0]; k++) {
        bf_fault_entry e1 = {.tensor = "input", .index = perm[k].index, .bit = perm[k].bit, .sample = -1};
        s = base_spec(BF_TARGET_INPUTS, BF_PERSIST_PERMANENT);
        s.sampling = BF_SAMPLE_LIST;
        s.list = &e1;
        s.n_list = 1;
        s.repr = perm[k].repr;
        c = tc_make(f->digits, f->digits_ds, &s);
        assert_int_equal(bf_campaign_site(c, 0)->bits, bf_repr_bits(perm[k].repr));
        capture_init(&cap, 1);
        run(c, 1, 0, 1, &cap, &res);
        elem_fault e = {.sample = -1, .index = perm[k].index, .mask = 1u << perm[k].bit, .repr = perm[k].repr,
                        .scale = in_scale};
        bf_dataset *mod = dataset_with(f->digits_ds, "input", mod_elem, &e);
        float *want = plain_pass(f->digits, mod, 2, &no);
        assert_memory_equal(trial_out(&cap, 0), want, (size_t)no * sizeof(float));
        assert_int_equal(cap.rec[0].faults[0].sample, -1);
        /* the record shows sample 0's element, as stored and as faulted */
        float now = my_corrupt(&e, x[perm[k].index]);
        assert_memory_equal(&cap.rec[0].faults[0].new_value, &now, 4);
        assert_int_equal(cap.rec[0].outcome == BF_OUTCOME_MASKED, memcmp(want, golden, (size_t)no * sizeof(float)) == 0);
        free(want);
        bf_dataset_free(mod);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        capture_free(&cap);
    }
    free(golden);
}

/* --- (2) a fault on the logits changes exactly that logit to the faulted value */

void logit_faults_change_one_value(void **state)
{
    fx *f = *state;
    const int64_t cols = 10, n = 360;
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    assert_int_equal(no, n * cols);
    float scale = max_abs(golden, no) / 127.0f;
    struct { bf_repr repr; bf_persistence p; int64_t index, sample; int bit; } cases[] = {
        {BF_REPR_FP32, BF_PERSIST_TRANSIENT, 3, 5, 30},   {BF_REPR_FP32, BF_PERSIST_TRANSIENT, 9, 359, 31},
        {BF_REPR_FP32, BF_PERSIST_TRANSIENT, 0, 100, 2},  {BF_REPR_BF16, BF_PERSIST_TRANSIENT, 7, 64, 13},
        {BF_REPR_INT8, BF_PERSIST_TRANSIENT, 4, 300, 5},  {BF_REPR_FP32, BF_PERSIST_PERMANENT, 6, -1, 27},
        {BF_REPR_BF16, BF_PERSIST_PERMANENT, 2, -1, 15},  {BF_REPR_INT8, BF_PERSIST_PERMANENT, 1, -1, 7},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bf_fault_entry e1 = {.tensor = "logits", .index = cases[k].index, .bit = cases[k].bit, .sample = cases[k].sample};
        bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, cases[k].p);
        s.sampling = BF_SAMPLE_LIST;
        s.list = &e1;
        s.n_list = 1;
        s.repr = cases[k].repr;
        bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
        capture cap;
        capture_init(&cap, 1);
        bf_campaign_result res;
        run(c, 2, 0, 1, &cap, &res);
        elem_fault e = {.sample = cases[k].sample, .index = cases[k].index, .mask = 1u << cases[k].bit,
                        .repr = cases[k].repr, .scale = scale};
        const float *out = trial_out(&cap, 0);
        for (int64_t smp = 0; smp < n; smp++)
            for (int64_t j = 0; j < cols; j++) {
                float g = golden[smp * cols + j], want = g;
                if (j == e.index && (e.sample < 0 || e.sample == smp)) want = my_corrupt(&e, g);
                if (bits_of(out[smp * cols + j]) != bits_of(want))
                    fail_msg("case %zu: sample %lld logit %lld is %a, want %a (golden %a)", k, (long long)smp, (long long)j,
                             out[smp * cols + j], want, g);
            }
        const bf_applied_fault *a = &cap.rec[0].faults[0];
        assert_int_equal(a->sample, cases[k].sample);
        float g0 = golden[(cases[k].sample < 0 ? 0 : cases[k].sample) * cols + cases[k].index];
        float now = my_corrupt(&e, g0);
        assert_memory_equal(&a->new_value, &now, 4);
        if (cases[k].repr == BF_REPR_FP32) assert_memory_equal(&a->old_value, &g0, 4);
        if (cases[k].repr == BF_REPR_INT8) assert_true(a->old_value == (float)my_q(g0, scale) * scale);
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        capture_free(&cap);
    }

    /* a stuck-at that changes no stored bit leaves the value as computed,
     * even in bf16, where the value is not a bf16 number: masked */
    int64_t j = 0;
    while (golden[j] == tc_bf16_decode(tc_bf16(golden[j])) || golden[j] < 0) j++;
    bf_fault_entry e2 = {.tensor = "logits", .index = j % cols, .bit = 15, .sample = j / cols};
    bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e2;
    s.n_list = 1;
    s.repr = BF_REPR_BF16;
    s.model_kind = BF_FAULT_STUCK_AT_0;
    bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
    capture cap;
    capture_init(&cap, 1);
    bf_campaign_result res;
    run(c, 1, 0, 1, &cap, &res);
    assert_int_equal(cap.rec[0].outcome, BF_OUTCOME_MASKED);
    assert_memory_equal(trial_out(&cap, 0), golden, (size_t)no * sizeof(float));
    assert_true(cap.rec[0].faults[0].old_value == cap.rec[0].faults[0].new_value);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    capture_free(&cap);
    free(golden);
}

/* A fault inside the network: Flatten only reshapes, so element k of the
 * MaxPool output and element k of the Flatten output are the same number,
 * and faulting either gives the same outputs bit for bit. The logits then
 * move by fc.weight[j][k] x (new - old), to rounding. */
void inner_activation_faults(void **state)
{
    fx *f = *state;
    const int64_t cols = 10, k = 77, smp = 123;
    int64_t no;
    float *golden = plain_pass(f->digits, f->digits_ds, 1, &no);
    float *outs[2];
    float old = 0, now = 0;
    const char *names[] = {"/MaxPool_output_0", "/Flatten_output_0"};
    for (int i = 0; i < 2; i++) {
        bf_fault_entry e = {.tensor = (char *)names[i], .index = k, .bit = 30, .sample = smp};
        bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
        s.sampling = BF_SAMPLE_LIST;
        s.list = &e;
        s.n_list = 1;
        bf_campaign *c = tc_make(f->digits, f->digits_ds, &s);
        assert_int_equal(bf_campaign_site(c, (size_t)4 + (size_t)i)->elements, 256);
        assert_string_equal(bf_campaign_site(c, (size_t)4 + (size_t)i)->name, names[i]);
        capture cap;
        capture_init(&cap, 1);
        bf_campaign_result res;
        run(c, 1, 0, 1, &cap, &res);
        outs[i] = malloc((size_t)no * sizeof(float));
        memcpy(outs[i], trial_out(&cap, 0), (size_t)no * sizeof(float));
        if (i == 1) {
            assert_memory_equal(&old, &cap.rec[0].faults[0].old_value, 4);
            assert_memory_equal(&now, &cap.rec[0].faults[0].new_value, 4);
        }
        old = cap.rec[0].faults[0].old_value;
        now = cap.rec[0].faults[0].new_value;
        bf_campaign_result_free(&res);
        bf_campaign_free(c);
        capture_free(&cap);
    }
    assert_memory_equal(outs[0], outs[1], (size_t)no * sizeof(float));
    assert_true(now == float_of(bits_of(old) ^ (1u << 30)));
    const float *w = bf_model_param(f->digits, (size_t)bf_model_find_param(f->digits, "fc.weight"))->tensor->data;
    for (int64_t j = 0; j < cols; j++) {
        double delta = (double)outs[0][smp * cols + j] - golden[smp * cols + j];
        double want = (double)w[j * 256 + k] * ((double)now - old);
        assert_true(fabs(delta - want) <= 1e-4 * (fabs(want) + 1));
    }
    free(outs[0]);
    free(outs[1]);
    free(golden);
}
