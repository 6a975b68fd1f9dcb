/* PyTorch names of parameters (core/src/model/torch_names.c), on real
 * torch.onnx.export files and crafted graphs (tests/fixtures/names,
 * make_names.py). Two kinds of expectations: names.json, where the
 * generator found by VALUE which PyTorch tensor each initializer holds
 * (folded, transposed, gate-reordered tensors recomputed from the module),
 * and lists written here from the modules' structure. Files are only parsed
 * (no op bound), so LSTM/GRU/RNN need not run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "alloc_fail.h"
#include "bitflip/bitflip.h"
#include "model/graph.h"

#define NAMES BF_FIXTURES "/names/"

static bf_model *parse(const char *path)
{
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf__model_parse_file(path, NULL, &m, &err) != BF_OK) fail_msg("%s: %s", path, err.msg);
    return m;
}

static const bf_param_info *param(const bf_model *m, const char *onnx_name)
{
    int64_t i = bf_model_find_param(m, onnx_name);
    if (i < 0) fail_msg("no parameter '%s'", onnx_name);
    return bf_model_param(m, (size_t)i);
}

static void expect(const bf_model *m, const char *onnx_name, const char *torch, const char *note_part)
{
    const bf_param_info *p = param(m, onnx_name);
    if (!torch) {
        if (p->torch_name) fail_msg("%s: named '%s', wanted no name", onnx_name, p->torch_name);
    } else if (!p->torch_name || strcmp(p->torch_name, torch) != 0) {
        fail_msg("%s: named '%s', wanted '%s'", onnx_name, p->torch_name ? p->torch_name : "(none)", torch);
    }
    if (!note_part) {
        if (p->torch_note) fail_msg("%s: note '%s', wanted none", onnx_name, p->torch_note);
    } else if (!p->torch_note || !strstr(p->torch_note, note_part)) {
        fail_msg("%s: note '%s', wanted one with '%s'", onnx_name, p->torch_note ? p->torch_note : "(none)", note_part);
    }
}

/* The note each kind of value match implies. */
static const char *note_for(const char *how)
{
    if (!how) return NULL;
    if (!strcmp(how, "folded")) return "a BatchNorm folded in";
    if (!strcmp(how, "transposed")) return "transposed";
    if (!strcmp(how, "gates reordered")) return "gates reordered";
    if (!strcmp(how, "followed by bias_hh")) return "followed by bias_hh_l";
    fail_msg("names.json: unknown kind '%s'", how);
    return NULL;
}

static void names_agree_with_values(void **state)
{
    (void)state;
    json_error_t je;
    json_t *all = json_load_file(NAMES "tiny_resnet.names.json", 0, &je);
    assert_non_null(all);
    const char *file;
    json_t *names;
    size_t files = 0;
    json_object_foreach(all, file, names) {
        if (!strcmp(file, "blas")) continue;   /* the generator's BLAS (tests/fixtures/refjson.py), not a file */
        char path[512];
        snprintf(path, sizeof path, NAMES "%s", file);
        bf_model *m = parse(path);
        assert_int_equal(bf_model_num_params(m), json_object_size(names));
        const char *onnx_name;
        json_t *e;
        json_object_foreach(names, onnx_name, e) {
            const char *torch = json_string_value(json_object_get(e, "torch"));
            const char *how = json_string_value(json_object_get(e, "how"));
            /* a MatMul weight with no bias beside it: the module might not
             * be an nn.Linear, so only its path is claimed */
            if (!strcmp(file, "recurrent.onnx") && !strcmp(torch, "tail.weight"))
                expect(m, onnx_name, "tail", "if tail is an nn.Linear");
            else if (!strcmp(file, "reuse.onnx") && !strcmp(torch, "blk.0.weight"))
                expect(m, onnx_name, "blk.0", "if blk.0 is an nn.Linear");
            else
                expect(m, onnx_name, torch, note_for(how));
        }
        bf_model_free(m);
        files++;
    }
    assert_int_equal(files, 5);
    json_decref(all);
}

/* The PyTorch names of a file are exactly `want` (in any order). */
static void expect_names(const bf_model *m, const char *const *want, size_t n)
{
    assert_int_equal(bf_model_num_params(m), n);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t p = 0; p < bf_model_num_params(m) && !found; p++) {
            const char *t = bf_model_param(m, p)->torch_name;
            found = t && !strcmp(t, want[i]);
        }
        if (!found) fail_msg("no parameter is named '%s'", want[i]);
    }
}

static void tiny_resnet_by_hand(void **state)
{
    (void)state;
    /* TinyNet in make_names.py: conv1/bn1, layer1 = [BasicBlock(8, 8)],
     * layer2 = [BasicBlock(8, 16, downsample = conv1x1 + BN)], emb, proj, fc;
     * every BN folded into the Conv before it */
    static const char *const folded[] = {"conv1.weight", "conv1.bias", "layer1.0.conv1.weight", "layer1.0.conv1.bias",
                                         "layer1.0.conv2.weight", "layer1.0.conv2.bias", "layer2.0.conv1.weight",
                                         "layer2.0.conv1.bias", "layer2.0.conv2.weight", "layer2.0.conv2.bias",
                                         "layer2.0.downsample.0.weight", "layer2.0.downsample.0.bias"};
    static const char *const all[] = {"conv1.weight", "conv1.bias", "layer1.0.conv1.weight", "layer1.0.conv1.bias",
                                      "layer1.0.conv2.weight", "layer1.0.conv2.bias", "layer2.0.conv1.weight",
                                      "layer2.0.conv1.bias", "layer2.0.conv2.weight", "layer2.0.conv2.bias",
                                      "layer2.0.downsample.0.weight", "layer2.0.downsample.0.bias", "emb.weight",
                                      "proj.weight", "proj.bias", "fc.weight", "fc.bias"};
    bf_model *m = parse(NAMES "tiny_resnet.onnx");
    expect_names(m, all, sizeof all / sizeof all[0]);
    for (size_t p = 0; p < bf_model_num_params(m); p++) {
        const bf_param_info *pi = bf_model_param(m, p);
        int is_folded = 0;
        for (size_t k = 0; k < sizeof folded / sizeof folded[0]; k++) is_folded |= !strcmp(pi->torch_name, folded[k]);
        if (is_folded) {
            assert_non_null(pi->torch_note);
            assert_string_equal(pi->torch_note, "a BatchNorm folded in");
            assert_non_null(strstr(pi->tensor->name, "onnx::Conv_"));
        } else if (!strcmp(pi->torch_name, "proj.weight")) {
            assert_string_equal(pi->torch_note, "transposed");
        } else {   /* kept their state_dict keys */
            assert_null(pi->torch_note);
            assert_string_equal(pi->torch_name, pi->tensor->name);
        }
    }
    bf_model_free(m);

    /* exported with TrainingMode.PRESERVE: the BNs stay, every key kept */
    m = parse(NAMES "tiny_resnet_bn.onnx");
    for (size_t p = 0; p < bf_model_num_params(m); p++) {
        const bf_param_info *pi = bf_model_param(m, p);
        if (strstr(pi->tensor->name, "onnx::MatMul_")) {   /* transposed even here */
            assert_string_equal(pi->torch_name, "proj.weight");
            continue;
        }
        assert_string_equal(pi->torch_name, pi->tensor->name);
        assert_null(pi->torch_note);
    }
    expect(m, "layer2.0.downsample.1.running_var", "layer2.0.downsample.1.running_var", NULL);
    bf_model_free(m);
}

static void recurrent_by_hand(void **state)
{
    (void)state;
    /* Recurrent in make_names.py: emb, lstm (2 layers), gru (bidirectional),
     * rnn, head (Linear), tail (Linear, no bias) */
    static const char *const all[] = {"emb.weight", "lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0",
                                      "lstm.weight_ih_l1", "lstm.weight_hh_l1", "lstm.bias_ih_l1", "gru.weight_ih_l0",
                                      "gru.weight_hh_l0", "gru.bias_ih_l0", "rnn.weight_ih_l0", "rnn.weight_hh_l0",
                                      "rnn.bias_ih_l0", "head.weight", "head.bias", "tail"};
    bf_model *m = parse(NAMES "recurrent.onnx");
    expect_names(m, all, sizeof all / sizeof all[0]);
    for (size_t p = 0; p < bf_model_num_params(m); p++) {
        const bf_param_info *pi = bf_model_param(m, p);
        const char *t = pi->torch_name, *note = pi->torch_note ? pi->torch_note : "";
        if (!strncmp(t, "lstm.", 5)) assert_non_null(strstr(note, "i,f,g,o to ONNX's i,o,f,c"));
        if (!strncmp(t, "gru.", 4)) {
            assert_non_null(strstr(note, "r,z,n to ONNX's z,r,h"));
            assert_non_null(strstr(note, "_reverse direction stacked"));
        }
        if (!strncmp(t, "rnn.", 4)) assert_null(strstr(note, "gates"));
        if (strstr(t, ".bias_ih_l1")) assert_non_null(strstr(note, "followed by bias_hh_l1"));
    }
    bf_model_free(m);
}

/* Reuse in make_names.py calls fc, blk and conv+bn twice each: the second
 * calls' nodes are "/fc_1/MatMul", "/blk/blk.0_1/MatMul", "/conv_1/Conv",
 * reading the merged copies of the first call's tensors. Two calls of one
 * module are not two modules. */
static void modules_called_twice(void **state)
{
    (void)state;
    static const char *const all[] = {"fc.weight", "fc.bias", "blk.0", "conv.weight", "conv.bias"};
    bf_model *m = parse(NAMES "reuse.onnx");
    expect_names(m, all, sizeof all / sizeof all[0]);
    for (size_t p = 0; p < bf_model_num_params(m); p++) {
        const bf_param_info *pi = bf_model_param(m, p);
        if (!strncmp(pi->torch_name, "conv.", 5)) assert_string_equal(pi->torch_note, "a BatchNorm folded in");
        if (!strcmp(pi->torch_name, "fc.weight")) assert_string_equal(pi->torch_note, "transposed");
    }
    bf_model_free(m);
}

static void crafted_graph(void **state)
{
    (void)state;
    bf_model *m = parse(NAMES "crafted.onnx");
    /* components "features", "features.1", "conv", "conv.0", "conv.0.0":
     * containers replaced by their numbered children */
    expect(m, "onnx::Conv_1", "features.1.conv.0.0.weight", "a BatchNorm folded in");
    expect(m, "onnx::Conv_2", "features.1.conv.0.0.bias", "a BatchNorm folded in");
    /* "blk.weight" twice: the leaf is no help, the module path stays */
    expect(m, "onnx::Conv_3", "blk", NULL);
    expect(m, "onnx::Conv_4", "blk", NULL);
    /* a BatchNormalization reads the Conv: nothing was folded into it */
    expect(m, "onnx::Conv_5", "head.weight", NULL);
    expect(m, "onnx::Conv_6", "head.bias", NULL);
    expect(m, "head_bn.running_var", "head_bn.running_var", NULL);
    /* nn.Sequential as the model: its children are "0", "1", ... */
    expect(m, "onnx::Conv_10", "0.weight", "a BatchNorm folded in");
    expect(m, "onnx::Conv_11", "0.bias", "a BatchNorm folded in");
    expect(m, "onnx::MatMul_7", NULL, NULL);   /* the root module's */
    expect(m, "onnx::Mul_8", "act", NULL);     /* a Mul does not say which parameter */
    expect(m, "onnx::Add_9", NULL, NULL);      /* read from x1 and x2 */
    bf_model_free(m);

    /* the same graph from another exporter: nothing recovered */
    m = parse(NAMES "crafted_other.onnx");
    for (size_t p = 0; p < bf_model_num_params(m); p++) {
        assert_null(bf_model_param(m, p)->torch_name);
        assert_null(bf_model_param(m, p)->torch_note);
    }
    bf_model_free(m);

    /* from PyTorch, but no scope in the node names: only the kept keys */
    m = parse(NAMES "crafted_unscoped.onnx");
    for (size_t p = 0; p < bf_model_num_params(m); p++) {
        const bf_param_info *pi = bf_model_param(m, p);
        if (!strncmp(pi->tensor->name, "head_bn.", 8)) assert_string_equal(pi->torch_name, pi->tensor->name);
        else assert_null(pi->torch_name);
    }
    bf_model_free(m);
}

static void helper_built_models_get_no_names(void **state)
{
    (void)state;
    static const char *const files[] = {"misc_attrs_op11", "misc_conv_pool_op13", "misc_norm_op17", "misc_shapes_op13"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[512];
        snprintf(path, sizeof path, BF_FIXTURES "/conformance/%s.onnx", files[f]);
        bf_model *m = parse(path);
        assert_true(bf_model_num_params(m) > 0);
        for (size_t p = 0; p < bf_model_num_params(m); p++) {
            assert_null(bf_model_param(m, p)->torch_name);
            assert_null(bf_model_param(m, p)->torch_note);
        }
        bf_model_free(m);
    }
}

/* An untrained nn.TransformerEncoder: its two layers are copies, so the
 * exporter kept one of each equal pair and reads it through Identity nodes
 * named after the others. */
static void merged_tensors(void **state)
{
    (void)state;
    bf_model *m = parse(BF_FIXTURES "/diff/transformer_encoder_op13.onnx");
    expect(m, "enc.layers.0.norm1.weight", "enc.layers.0.norm1.weight", "merged 3 equal tensors into this one");
    expect(m, "enc.layers.0.norm1.weight", "enc.layers.0.norm1.weight", "enc.layers.0.norm2.weight");
    expect(m, "enc.layers.0.linear1.bias", "enc.layers.0.linear1.bias", "enc.layers.1.linear1.bias");
    /* one in-projection for both layers: nobody's in particular */
    expect(m, "onnx::MatMul_281", NULL, NULL);
    expect(m, "head.weight", "head.weight", NULL);
    bf_model_free(m);
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    int done = 0;
    for (long n = 0; !done && n < 100000; n++) {
        bf_model *m = NULL;
        bf_error err = {0};
        bf_test_alloc_fail_after(n);
        bf_status st = bf__model_parse_file(NAMES "crafted.onnx", NULL, &m, &err);
        long failed = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            assert_int_equal(failed, 0);
            expect(m, "onnx::Conv_1", "features.1.conv.0.0.weight", "a BatchNorm folded in");
            bf_model_free(m);
            done = 1;
        } else {
            assert_int_equal(st, BF_ENOMEM);
            assert_null(m);
            assert_non_null(strstr(err.msg, "out of memory"));
        }
    }
    assert_true(done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_agree_with_values),
        cmocka_unit_test(tiny_resnet_by_hand),
        cmocka_unit_test(recurrent_by_hand),
        cmocka_unit_test(modules_called_twice),
        cmocka_unit_test(crafted_graph),
        cmocka_unit_test(helper_built_models_get_no_names),
        cmocka_unit_test(merged_tensors),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
