/* Fusion of exported patterns at load (core/src/exec/fuse.c), checked on the
 * bound graph: what a pattern becomes (op, attributes, inputs, the removed
 * nodes, the order, the parameters' readers), the near misses it must leave
 * alone (tests/ops/cases/fuse.py writes those graphs and checks their
 * outputs against torch), the opt-out, the message for a fault spec naming
 * a fused-away value, and the differential engine against the exact one on
 * a real fused model (vit: opset 13, five LayerNorms and two GELUs). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/campaign.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "alloc_fail.h"
#include "campaign_check.h"
#include "model/graph.h"

#define OPS BF_FIXTURES "/ops/"
#define VIT BF_FIXTURES "/real/vit"

static bf_model *load(const char *path, int no_fuse)
{
    bf_load_limits lim = {.no_fuse = no_fuse};
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file_opts(path, &lim, &m, &err) != BF_OK) fail_msg("%s", err.msg);
    return m;
}

static size_t count_op(const bf_model *m, const char *op)
{
    size_t n = 0;
    for (size_t i = 0; i < bf_model_num_nodes(m); i++) n += strcmp(bf_model_node_op(m, i), op) == 0;
    return n;
}

static size_t fused(const bf_model *m, size_t kind, size_t *lo, size_t *hi)
{
    size_t c = 0;
    assert_non_null(bf_model_fusion(m, kind, &c, lo, hi));
    return c;
}

static size_t fused_all(const bf_model *m)
{
    size_t n = 0, c;
    for (size_t k = 0; bf_model_fusion(m, k, &c, NULL, NULL); k++) n += c;
    return n;
}

/* The graph's invariants after compaction: producers point at the node
 * writing each value, the order is a permutation and topological. */
static void assert_consistent(const bf_model *m)
{
    unsigned char *seen = calloc(m->n_nodes + 1, 1), *ready = calloc(m->n_values + 1, 1);
    assert_non_null(seen);
    assert_non_null(ready);
    for (size_t v = 0; v < m->n_values; v++) ready[v] = m->values[v].kind != BF__VAL_NODE;
    for (size_t o = 0; o < m->n_nodes; o++) {
        int i = m->order[o];
        assert_true(i >= 0 && (size_t)i < m->n_nodes && !seen[i]);
        seen[i] = 1;
        const bf__node *n = &m->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) {
                if (!ready[n->in[j]]) fail_msg("node '%s' reads '%s' before it is computed", n->name, m->values[n->in[j]].name);
                assert_int_equal(m->values[n->in[j]].fused_into, 0);
            }
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) {
                assert_int_equal(m->values[n->out[j]].producer, i);
                ready[n->out[j]] = 1;
            }
    }
    free(seen);
    free(ready);
}

static const bf__node *only_node(const bf_model *m, const char *op)
{
    const bf__node *hit = NULL;
    for (size_t i = 0; i < m->n_nodes; i++)
        if (strcmp(m->nodes[i].op_type, op) == 0) {
            assert_null(hit);
            hit = &m->nodes[i];
        }
    assert_non_null(hit);
    return hit;
}

static void layernorm_becomes_one_node(void **state)
{
    (void)state;
    bf_model *m = load(OPS "fuse_layernorm_op13.onnx", 0), *raw = load(OPS "fuse_layernorm_op13.onnx", 1);
    size_t lo, hi;
    assert_int_equal(fused(m, 0, &lo, &hi), 1);
    assert_int_equal(lo, 9);
    assert_int_equal(hi, 9);
    assert_int_equal(fused_all(raw), 0);
    assert_int_equal(count_op(raw, "ReduceMean"), 2);
    /* 9 nodes and the two Constants (2 and eps) become one */
    assert_int_equal(bf_model_num_nodes(m), 1);
    assert_int_equal(bf_model_num_nodes(raw), 11);
    assert_consistent(m);
    const bf__node *ln = only_node(m, "LayerNormalization");
    /* the last node's name and output; the graph input; the same initializers */
    assert_string_equal(ln->name, raw->nodes[raw->values[raw->output_vals[0]].producer].name);
    assert_int_equal(ln->out[0], m->output_vals[0]);
    assert_int_equal(ln->n_in, 3);
    assert_int_equal(ln->in[0], m->input_vals[0]);
    assert_string_equal(m->values[ln->in[1]].name, "weight");
    assert_string_equal(m->values[ln->in[2]].name, "bias");
    assert_int_equal(m->values[ln->in[1]].kind, BF__VAL_PARAM);
    const bf__attr *ax = bf__node_attr(ln, "axis"), *eps = bf__node_attr(ln, "epsilon");
    assert_non_null(ax);
    assert_non_null(eps);
    assert_int_equal(ax->i, -1);
    assert_true(eps->f == 1e-5f);
    /* the parameters are still the fault surface, now read by the fused op */
    assert_int_equal(bf_model_num_params(m), 2);
    for (size_t p = 0; p < 2; p++) assert_string_equal(bf_model_param(m, p)->reader_op, "LayerNormalization");
    /* the intermediates remain known by name, and say where they went */
    int64_t v = bf_model_find_value(m, "/Pow_output_0");
    assert_true(v >= 0);
    assert_int_equal(m->values[v].fused_into - 1, ln->out[0]);
    assert_int_equal(m->values[v].producer, -1);
    bf_model_free(m);
    bf_model_free(raw);
}

static void variants_fuse(void **state)
{
    (void)state;
    static const struct { const char *file; size_t kind, nodes; const char *op; int n_in; } want[] = {
        {"fuse_layernorm_op14", 0, 9, "LayerNormalization", 3},
        {"fuse_layernorm_op16", 0, 9, "LayerNormalization", 3},
        {"fuse_layernorm_noaffine_op13", 0, 7, "LayerNormalization", 2},
        {"fuse_layernorm_2d_op13", 0, 9, "LayerNormalization", 3},
        {"fuse_layernorm_eps_1e-2", 0, 9, "LayerNormalization", 3},
        {"fuse_layernorm_op18_axes_input", 0, 9, "LayerNormalization", 3},
        {"fuse_gelu_op13", 1, 5, "Gelu", 1},
        {"fuse_gelu_tanh_op13", 2, 9, "Gelu", 1},
        {"fuse_hardswish_op13", 3, 2, "HardSwish", 1},
    };
    char path[512];
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        snprintf(path, sizeof path, OPS "%s.onnx", want[i].file);
        bf_model *m = load(path, 0);
        size_t lo, hi;
        if (fused(m, want[i].kind, &lo, &hi) != 1 || fused_all(m) != 1) fail_msg("%s: not fused once", want[i].file);
        assert_int_equal(lo, want[i].nodes);
        assert_consistent(m);
        const bf__node *n = only_node(m, want[i].op);
        assert_int_equal(n->n_in, want[i].n_in);
        if (strstr(want[i].file, "noaffine")) {
            /* the constant scale 1 the op needs, not a parameter */
            assert_int_equal(m->values[n->in[1]].kind, BF__VAL_CONST);
            assert_true(*(const float *)m->values[n->in[1]].init->data == 1.0f);
            assert_int_equal(bf_model_num_params(m), 0);
        }
        if (strstr(want[i].file, "_2d_")) assert_int_equal(bf__node_attr(n, "axis")->i, -2);
        if (strstr(want[i].file, "eps_1e-2")) assert_true(bf__node_attr(n, "epsilon")->f == 1e-2f);
        if (strstr(want[i].file, "tanh")) assert_string_equal(bf__node_attr(n, "approximate")->s, "tanh");
        if (want[i].kind == 1) assert_null(bf__node_attr(n, "approximate"));
        bf_model_free(m);
    }
}

/* Two LayerNorms with equal weights and equal biases: the export stores each
 * once and writes the second module's as Identity nodes of the first's (as a
 * ViT's export does with its LayerNorms' initial ones and zeros). The second
 * pattern still takes its Mul and Add: the op reads the Identity outputs, the
 * Identities stay, and the Mul's output is a fused-away intermediate like
 * the Div's (tests/ops/cases/fuse.py checks the outputs against torch). */
static void layernorm_through_identity(void **state)
{
    (void)state;
    bf_model *m = load(OPS "fuse_layernorm_identity_op13.onnx", 0);
    size_t lo, hi;
    assert_int_equal(fused(m, 0, &lo, &hi), 2);
    assert_int_equal(lo, 9);
    assert_int_equal(hi, 9);
    assert_consistent(m);
    assert_int_equal(count_op(m, "LayerNormalization"), 2);
    assert_int_equal(count_op(m, "Identity"), 2);
    assert_int_equal(count_op(m, "Add"), 0);
    assert_int_equal(count_op(m, "Mul"), 1);   /* the module's own * 3 between the two */
    int64_t y = bf_model_find_value(m, "y");
    assert_true(y >= 0);
    const bf__node *ln = &m->nodes[m->values[y].producer];
    assert_string_equal(ln->op_type, "LayerNormalization");
    assert_int_equal(ln->n_in, 3);
    static const char *const param[2] = {"a.weight", "a.bias"}, *alias[2] = {"b.weight", "b.bias"};
    for (int i = 0; i < 2; i++) {
        int v = ln->in[1 + i];
        assert_string_equal(m->values[v].name, alias[i]);
        assert_int_equal(m->values[v].kind, BF__VAL_NODE);
        const bf__node *id = &m->nodes[m->values[v].producer];
        assert_string_equal(id->op_type, "Identity");
        assert_string_equal(m->values[id->in[0]].name, param[i]);
        assert_int_equal(m->values[id->in[0]].kind, BF__VAL_PARAM);
    }
    assert_int_equal(bf_model_num_params(m), 2);
    int64_t mul = bf_model_find_value(m, "/b/Mul_output_0");
    assert_true(mul >= 0);
    assert_int_equal(m->values[mul].fused_into - 1, y);
    bf_model_free(m);
}

/* One detail off the export: left node for node. */
static void near_misses_stay(void **state)
{
    (void)state;
    static const char *const files[] = {"fuse_nearmiss_read_twice", "fuse_nearmiss_pow3", "fuse_nearmiss_axes",
                                        "fuse_nearmiss_hardsigmoid"};
    char path[512];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, OPS "%s.onnx", files[i]);
        bf_model *m = load(path, 0), *raw = load(path, 1);
        if (fused_all(m)) fail_msg("%s: fused", files[i]);
        assert_int_equal(bf_model_num_nodes(m), bf_model_num_nodes(raw));
        assert_int_equal(count_op(m, "LayerNormalization") + count_op(m, "HardSwish"), 0);
        for (size_t v = 0; v < m->n_values; v++) assert_int_equal(m->values[v].fused_into, 0);
        bf_model_free(m);
        bf_model_free(raw);
    }
}

/* A fused-away intermediate as a fault site: a clear error naming the node
 * that computes it now, for a pattern and for a value fault. */
static void fused_value_is_explained(void **state)
{
    (void)state;
    bf_model *m = load(VIT ".onnx", 0), *raw = load(VIT ".onnx", 1);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_file(VIT ".eval.safetensors", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    size_t lo, hi;
    assert_int_equal(fused(m, 0, &lo, &hi), 5);
    assert_int_equal(fused(m, 1, &lo, &hi), 2);
    assert_int_equal(bf_model_num_nodes(raw) - bf_model_num_nodes(m), 5 * (8 + 2) + 2 * (4 + 3));
    assert_consistent(m);
    char *pow[] = {"/encoder/layers/encoder_layer_0/ln_1/Pow_output_0"};
    static const tc_config transient = {"activations bitflip fp32 transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP,
                                        BF_REPR_FP32, BF_PERSIST_TRANSIENT, 1};
    bf_campaign_spec s = tc_config_spec(&transient, 1, 4, 8, pow, 1);
    bf_campaign *c = NULL;
    assert_int_not_equal(bf_campaign_create(m, ds, &s, &c, &err), BF_OK);
    if (!strstr(err.msg, "intermediate of an exported pattern") || !strstr(err.msg, "ln_1/Add_1") ||
        !strstr(err.msg, "LayerNormalization") || !strstr(err.msg, "--no-fuse"))
        fail_msg("unclear: %s", err.msg);
    /* unfused, it is a site */
    assert_int_equal(bf_campaign_create(raw, ds, &s, &c, &err), BF_OK);
    bf_campaign_free(c);
    /* a value fault on it */
    bf_plan *p = NULL;
    assert_int_equal(bf_plan_create(m, 2, &p, &err), BF_OK);
    bf_value_fault f = {.value = bf_model_find_value(m, pow[0]), .sample = 0, .index = 0, .model = BF_FAULT_BITFLIP,
                        .mask = 1u << 30, .repr = BF_REPR_FP32};
    assert_true(f.value >= 0);
    assert_int_not_equal(bf_plan_set_value_faults(p, &f, 1, &err), BF_OK);
    assert_non_null(strstr(err.msg, "intermediate of an exported pattern"));
    bf_plan_free(p);
    bf_dataset_free(ds);
    bf_model_free(m);
    bf_model_free(raw);
}

/* Every allocation of a load failing in turn, fusion's among them: ENOMEM
 * and a freeable model, never a crash or a leak (the ASan build checks). */
static void allocation_failures_are_clean(void **state)
{
    (void)state;
    static const char *const files[] = {OPS "fuse_layernorm_noaffine_op13.onnx", OPS "fuse_chain_gelu_op13.onnx",
                                        OPS "fuse_gelu_tanh_op13.onnx", OPS "fuse_layernorm_2d_op13.onnx"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        int succeeded = 0;
        for (long n = 0; n < 5000 && !succeeded; n++) {
            bf_model *m = NULL;
            bf_error err = {0};
            bf_test_alloc_fail_after(n);
            bf_status st = bf_model_load_file(files[f], &m, &err);
            bf_test_alloc_fail_after(-1);
            if (st == BF_OK) succeeded = fused_all(m) == 1;
            else if (st != BF_ENOMEM) fail_msg("%s: allocation %ld failing gave status %d: %s", files[f], n, st, err.msg);
            bf_model_free(m);
        }
        assert_true(succeeded);
    }
}

static const tc_config configs[] = {
    {"weights bitflip fp32", BF_TARGET_WEIGHTS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_PERMANENT, 1},
    {"weights stuck_at_1 fp16", BF_TARGET_WEIGHTS, BF_FAULT_STUCK_AT_1, BF_REPR_FP16, BF_PERSIST_PERMANENT, 1},
    {"activations bitflip fp32 transient", BF_TARGET_ACTIVATIONS, BF_FAULT_BITFLIP, BF_REPR_FP32, BF_PERSIST_TRANSIENT, 1},
};

/* LayerNorm weights and biases (now the fused op's scale and B), the
 * attention and MLP parameters before them; the fused ops' outputs. */
static char *weights[] = {"*ln*", "*mlp*", "class_token"}, *acts[] = {"*ln_1/Add_1_output_0", "*mlp*Mul_1_output_0"};

static void vit_faults_match_exact(void **state)
{
    (void)state;
    bf_model *m = load(VIT ".onnx", 0);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    if (bf_dataset_load_file(VIT ".eval.safetensors", &ds, &err) != BF_OK) fail_msg("%s", err.msg);
    double scale = tc_out_scale(m, ds);
    static const int64_t batches[] = {8, 7};
    tc_tally t = {0};
    for (size_t k = 0; k < sizeof configs / sizeof *configs; k++)
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
            const tc_config *cf = &configs[k];
            bf_campaign_spec s = cf->target == BF_TARGET_WEIGHTS ? tc_config_spec(cf, 7, 120, batches[b], weights, 3)
                                                                 : tc_config_spec(cf, 7, 120, batches[b], acts, 2);
            char label[96];
            snprintf(label, sizeof label, "%s, batch %lld", cf->label, (long long)batches[b]);
            tc_both(m, ds, scale, "vit", &s, label, &t, NULL);   /* no BER among the configs: one comparison */
        }
    printf("vit (fused): %lld trials compared, %lld DUE (exact)\n", (long long)t.trials, (long long)t.exact_due);
    assert_true(t.exact_due > 0);
    tc_assert_agree("fused LayerNorm and GELU faults, differential vs exact", &t, 700);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layernorm_becomes_one_node),
        cmocka_unit_test(variants_fuse),
        cmocka_unit_test(layernorm_through_identity),
        cmocka_unit_test(near_misses_stay),
        cmocka_unit_test(fused_value_is_explained),
        cmocka_unit_test(allocation_failures_are_clean),
        cmocka_unit_test(vit_faults_match_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
