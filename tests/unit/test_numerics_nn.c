/* NaN/Inf fidelity end to end (docs/NUMERICS.md): the BERT-style encoder of
 * tests/fixtures/diff/bert_ln_op17 (make_diff_nn.py) with one LayerNorm
 * weight or bias element set to 1.8e38 (an exponent-bit flip of a weight
 * in [0.5, 1)), run through a plan; its 16 outputs must be NaN, Inf and
 * finite exactly where PyTorch's are (bert_ln_op17.nanpat.txt, written by
 * PyTorch). The last LayerNorm's faults send huge values through the mean
 * pooling's ReduceMean, whose float sum overflows where PyTorch's does only
 * because it is taken in PyTorch's order (NUMERICS.md, "ReduceMean and
 * ReduceSum"); they are counted apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "bitflip/bitflip.h"

#define FIX BF_FIXTURES "/diff/bert_ln_op17"

static void layernorm_faults_give_torch_nan_pattern(void **state)
{
    (void)state;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_plan *plan = NULL;
    bf_error err = {0};
    if (bf_model_load_file(FIX ".onnx", &m, &err) || bf_dataset_load_file(FIX ".eval.safetensors", &ds, &err) ||
        bf_plan_create(m, 8, &plan, &err))
        fail_msg("%s", err.msg);
    const bf_tensor *ids = bf_dataset_find(ds, "ids");
    assert_non_null(ids);
    bf_tensor *in = bf_plan_input(plan, 0);
    assert_int_equal(bf_tensor_nbytes(in), bf_tensor_nbytes(ids));
    memcpy(in->data, ids->data, bf_tensor_nbytes(ids));
    FILE *f = fopen(FIX ".nanpat.txt", "r");
    assert_non_null(f);
    char name[128], want[64], got[64];
    long long index;
    int checked = 0, skipped = 0, skipped_agree = 0;
    while (fscanf(f, "%127s %lld %63s", name, &index, want) == 3) {
        int64_t p = bf_model_find_param(m, name);
        if (p < 0) fail_msg("no parameter '%s' in the fixture", name);
        float *w = NULL;
        if (bf_plan_param_mut(plan, (size_t)p, &w, &err)) fail_msg("%s", err.msg);
        float old = w[index];
        w[index] = 1.8e38f;
        if (bf_plan_run(plan, &err)) fail_msg("%s", err.msg);
        w[index] = old;
        const bf_tensor *out = bf_plan_output(plan, 0);
        int64_t n = bf_tensor_numel(out);
        assert_int_equal(n, (int64_t)strlen(want));
        const float *y = out->data;
        for (int64_t i = 0; i < n; i++) got[i] = isnan(y[i]) ? 'N' : isinf(y[i]) ? 'I' : '.';
        got[n] = '\0';
        if (strncmp(name, "enc.layers.1.norm2.", 19) == 0) {
            skipped++;
            skipped_agree += strcmp(got, want) == 0;
        }
        if (strcmp(got, want) != 0) fail_msg("%s[%lld] = 1.8e38: outputs %s, PyTorch's %s", name, index, got, want);
        checked++;
    }
    fclose(f);
    printf("bert_ln_op17: %d LayerNorm faults with PyTorch's NaN/Inf pattern; of %d in the last LayerNorm (through "
           "ReduceMean), %d agree\n", checked, skipped, skipped_agree);
    assert_int_equal(checked, 256);
    assert_int_equal(skipped_agree, 64);
    bf_plan_free(plan);
    bf_dataset_free(ds);
    bf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layernorm_faults_give_torch_nan_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
