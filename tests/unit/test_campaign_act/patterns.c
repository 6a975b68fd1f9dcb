/* test_campaign_act: fault patterns and the errors they must give. */
#include "test_campaign_act.h"

/* --- (4) patterns and errors */

void patterns_and_errors(void **state)
{
    fx *f = *state;
    bf_campaign *c = NULL;
    bf_error err = {0};
    bf_campaign_spec s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_PERMANENT);

    /* every activation of the digits CNN, in execution order */
    c = tc_make(f->digits, f->digits_ds, &s);
    const char *acts[] = {"/conv1/Conv_output_0", "/Relu_output_0", "/conv2/Conv_output_0", "/Relu_1_output_0",
                          "/MaxPool_output_0", "/Flatten_output_0", "logits"};
    const int64_t elems[] = {512, 512, 1024, 1024, 256, 256, 10};
    assert_int_equal(bf_campaign_num_sites(c), 7);
    double pop = 0;
    for (size_t i = 0; i < 7; i++) {
        assert_string_equal(bf_campaign_site(c, i)->name, acts[i]);
        assert_int_equal(bf_campaign_site(c, i)->elements, elems[i]);
        pop += (double)elems[i] * 32;
    }
    assert_string_equal(bf_campaign_site(c, 6)->op, "Gemm");
    assert_true(bf_campaign_population(c) == pop);
    bf_campaign_free(c);
    s.persistence = BF_PERSIST_TRANSIENT;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_true(bf_campaign_population(c) == pop * 360);
    bf_campaign_free(c);

    char *relu[] = {"op:Relu"};
    s.tensors = relu;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 2);
    assert_string_equal(bf_campaign_site(c, 0)->name, "/Relu_output_0");
    assert_string_equal(bf_campaign_site(c, 1)->name, "/Relu_1_output_0");
    assert_string_equal(bf_campaign_site(c, 1)->op, "Relu");
    bf_campaign_free(c);
    char *glob[] = {"/conv?/*", "logits"};
    s.tensors = glob;
    s.n_tensors = 2;
    c = tc_make(f->digits, f->digits_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 3);
    bf_campaign_free(c);
    s.n_tensors = 1;

    char *nope[] = {"nope"};
    s.tensors = nope;
    c = NULL;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_null(c);
    assert_non_null(strstr(err.msg, "'nope'"));
    assert_non_null(strstr(err.msg, "node output"));
    assert_non_null(strstr(err.msg, "/conv1/Conv_output_0"));
    assert_non_null(strstr(err.msg, "and 1 more"));
    char *lstm[] = {"op:LSTM"};
    s.tensors = lstm;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "LSTM"));
    assert_non_null(strstr(err.msg, "Relu"));
    /* a weight is not an activation */
    char *w[] = {"fc.weight"};
    s.tensors = w;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);

    /* DLRM: the sparse ids are int64, as are the node outputs slicing them */
    char *sparse[] = {"sparse"};
    s.target = BF_TARGET_INPUTS;
    s.tensors = sparse;
    assert_int_equal(bf_campaign_create(f->dlrm, f->dlrm_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'sparse'"));
    assert_non_null(strstr(err.msg, "int64"));
    assert_non_null(strstr(err.msg, "not fault sites"));
    assert_non_null(strstr(err.msg, "dense"));
    char *gather[] = {"/Gather_output_0"};
    s.target = BF_TARGET_ACTIVATIONS;
    s.tensors = gather;
    assert_int_equal(bf_campaign_create(f->dlrm, f->dlrm_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "/Gather_output_0"));
    assert_non_null(strstr(err.msg, "int64"));
    /* '*' over DLRM's activations skips the integer ones */
    s.tensors = all_tensors;
    c = tc_make(f->dlrm, f->dlrm_ds, &s);
    for (size_t i = 0; i < bf_campaign_num_sites(c); i++) assert_null(strstr(bf_campaign_site(c, i)->name, "Slice"));
    bf_campaign_free(c);
    c = NULL;

    /* spec rules */
    s = base_spec(BF_TARGET_WEIGHTS, BF_PERSIST_TRANSIENT);
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "transient"));
    s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_PERMANENT);
    s.repr = BF_REPR_INT8;
    s.per_channel = 1;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "per_channel"));

    /* list entries */
    bf_fault_entry e = {.tensor = "logits", .index = 3, .bit = 1, .sample = -1};
    s = base_spec(BF_TARGET_ACTIVATIONS, BF_PERSIST_TRANSIENT);
    s.sampling = BF_SAMPLE_LIST;
    s.list = &e;
    s.n_list = 1;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'sample' required for 'transient' faults"));
    e.sample = 360;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    assert_non_null(strstr(err.msg, "360"));
    e.sample = 3;
    e.index = 10;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ERANGE);
    assert_string_equal(err.msg, "list entry 0: tensor 'logits' has 10 elements per sample, index 10 is out of range");
    e.index = 0;
    s.persistence = BF_PERSIST_PERMANENT;
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "'sample' applies only to 'transient' faults"));
    e.sample = -1;
    e.tensor = "logit";
    assert_int_equal(bf_campaign_create(f->digits, f->digits_ds, &s, &c, &err), BF_ENOTFOUND);
    assert_non_null(strstr(err.msg, "'logit'"));
    assert_non_null(strstr(err.msg, "node output"));
    assert_null(c);
}
