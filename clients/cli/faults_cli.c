/* Fault arguments given on the command line: numbers read from the right, so
 * that names holding ':' (onnx::MatMul_12, /blocks.0/attn/Softmax_output_0)
 * stay whole, and every refusal quotes the argument. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "faults_cli.h"

/* Splits "NAME:N1:...:Nk" (k numbers) into buf's NAME and nums; 0 if it fits. */
static int split_right(const char *spec, char *buf, size_t len, char **nums, int k)
{
    if (strlen(spec) >= len) return -1;
    strcpy(buf, spec);
    for (int i = k - 1; i >= 0; i--) {
        char *c = strrchr(buf, ':');
        if (!c) return -1;
        *c = '\0';
        nums[i] = c + 1;
    }
    return 0;
}

static int num(const char *s, long long *out)
{
    char *end;
    if (!*s) return -1;
    *out = strtoll(s, &end, 10);
    return *end ? -1 : 0;
}

int cli_parse_flip(const char *cmd, const bf_model *m, const char *spec, bf_bitflip *out)
{
    char buf[512], *n[2];
    long long index, bit;
    if (split_right(spec, buf, sizeof buf, n, 2) || num(n[0], &index) || num(n[1], &bit))
        return usage_error(cmd, "--flip wants PARAM:INDEX:BIT (e.g. fc1.weight:12:30), got '%.200s'", spec);
    int64_t p = bf_model_find_param(m, buf);
    size_t by_torch = 0;   /* or the PyTorch name of one parameter */
    for (size_t i = 0; p < 0 && i < bf_model_num_params(m); i++) {
        const char *t = bf_model_param(m, i)->torch_name;
        if (t && !strcmp(t, buf) && by_torch++ == 0) p = (int64_t)i;
    }
    if (by_torch > 1)
        return usage_error(cmd, "--flip %s: '%s' is the PyTorch name of %zu parameters; give the ONNX name of the one "
                           "meant (see 'bitflip info')", spec, buf, by_torch);
    if (p < 0) return usage_error(cmd, "--flip %s: the model has no parameter '%s' (see 'bitflip info')", spec, buf);
    *out = (bf_bitflip){.param = (size_t)p, .index = index, .bit = bit < 0 || bit > 64 ? -1 : (int)bit};
    bf_error err = {0};
    if (bf_bitflip_check(m, out, &err) != BF_OK) return usage_error(cmd, "--flip %s: %s", spec, err.msg);
    return 0;
}

int cli_parse_kv_flip(const char *cmd, const char *spec, bf_kv_fault *out)
{
    char buf[128], *n[5];
    long long v[5];
    int ok = !split_right(spec, buf, sizeof buf, n, 5) && (!strcmp(n[0], "k") || !strcmp(n[0], "v"));
    for (int i = 1; ok && i < 5; i++) ok = !num(n[i], &v[i]);
    long long layer = 0;
    if (!ok || num(buf, &layer) || layer < 0 || layer > 1 << 20 || v[4] < 0 || v[4] > 64)
        return usage_error(cmd, "--kv-flip wants LAYER:k|v:HEAD:POS:DIM:BIT (e.g. 0:k:1:2:3:30), got '%.100s'", spec);
    *out = (bf_kv_fault){.layer = (int)layer, .value = n[0][0] == 'v', .head = v[1], .pos = v[2], .dim = v[3],
                         .bit = (int)v[4], .prompt = -1};
    return 0;
}

int cli_parse_act_flip(const char *cmd, const bf_model *m, const char *spec, bf_gen_value_fault *out)
{
    char buf[512], *n[3];
    long long step, index, bit;
    if (split_right(spec, buf, sizeof buf, n, 3) || num(n[0], &step) || num(n[1], &index) || num(n[2], &bit) ||
        bit < 0 || bit > 31)
        return usage_error(cmd, "--act-flip wants VALUE:STEP:INDEX:BIT with BIT 0 .. 31 (e.g. logits:2:47:30), got '%.200s'",
                           spec);
    int64_t v = bf_model_find_value(m, buf);
    if (v < 0) v = bf_model_named_site_value(m, buf);
    if (v < 0)
        return usage_error(cmd, "--act-flip %s: the model has no value or fault site '%s' (see 'bitflip info')", spec, buf);
    *out = (bf_gen_value_fault){.step = step,
                                .fault = {.value = v, .sample = -1, .index = index, .model = BF_FAULT_BITFLIP,
                                          .mask = UINT32_C(1) << bit, .repr = BF_REPR_FP32}};
    return 0;
}
