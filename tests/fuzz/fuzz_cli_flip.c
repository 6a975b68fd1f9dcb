/* libFuzzer target: the fault arguments `bitflip generate` takes on its
 * command line (clients/cli/faults_cli.c): --kv-flip LAYER:k|v:HEAD:POS:DIM:BIT,
 * --act-flip VALUE:STEP:INDEX:BIT and --flip PARAM:INDEX:BIT, parsed against
 * the GPT of tests/fixtures/gen (gpt_kv.onnx: a KV cache, named sites).
 * The first byte picks the parser, the rest (to its first NUL, at most 600
 * bytes) is the argument. Invariants: a refusal is EXIT_USAGE and its
 * message formats; an accepted argument has its fields in the parser's
 * ranges, and the argument written back with its numbers in plain decimal
 * parses to the same fault. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "faults_cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the CLI's (main.c) without the printing: the message is still formatted */
int usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0 || !cmd) abort();
    return EXIT_USAGE;
}

static const bf_model *model(void)
{
    static bf_model *m;
    if (!m) {
        const char *dir = getenv("BF_FUZZ_FIXTURES");
        char path[1024];
        snprintf(path, sizeof path, "%s/gen/gpt_kv.onnx", dir ? dir : BF_FIXTURES);
        bf_error err = {0};
        if (bf_model_load_file(path, &m, &err) != BF_OK) {
            fprintf(stderr, "fuzz_cli_flip: %s\n", err.msg);
            abort();
        }
    }
    return m;
}

/* the argument up to its last k ':' (the name part), in out */
static void name_part(const char *s, int k, char *out, size_t len)
{
    snprintf(out, len, "%s", s);
    for (int i = 0; i < k; i++) {
        char *c = strrchr(out, ':');
        if (!c) abort();   /* accepted, so it had them */
        *c = '\0';
    }
}

static void kv(const char *s)
{
    bf_kv_fault f, g;
    int rc = cli_parse_kv_flip("generate", s, &f);
    if (rc) {
        if (rc != EXIT_USAGE) abort();
        return;
    }
    if (f.layer < 0 || f.layer > 1 << 20 || (f.value != 0 && f.value != 1) || f.bit < 0 || f.bit > 64 || f.prompt != -1)
        abort();
    char again[256];
    snprintf(again, sizeof again, "%d:%c:%lld:%lld:%lld:%d", f.layer, f.value ? 'v' : 'k', (long long)f.head,
             (long long)f.pos, (long long)f.dim, f.bit);
    if (cli_parse_kv_flip("generate", again, &g) || g.layer != f.layer || g.value != f.value || g.head != f.head ||
        g.pos != f.pos || g.dim != f.dim || g.bit != f.bit || g.prompt != f.prompt)
        abort();   /* field by field: the structs have padding */
}

static void act(const char *s)
{
    const bf_model *m = model();
    bf_gen_value_fault f, g;
    int rc = cli_parse_act_flip("generate", m, s, &f);
    if (rc) {
        if (rc != EXIT_USAGE) abort();
        return;
    }
    int bit = 0;
    while (bit < 32 && f.fault.mask != UINT32_C(1) << bit) bit++;
    if (bit == 32 || f.fault.value < 0 || f.fault.sample != -1 || f.fault.model != BF_FAULT_BITFLIP) abort();
    char name[700], again[800];
    name_part(s, 3, name, sizeof name);
    snprintf(again, sizeof again, "%s:%lld:%lld:%d", name, (long long)f.step, (long long)f.fault.index, bit);
    if (cli_parse_act_flip("generate", m, again, &g) || g.step != f.step || g.fault.value != f.fault.value ||
        g.fault.index != f.fault.index || g.fault.mask != f.fault.mask)
        abort();
}

static void flip(const char *s)
{
    const bf_model *m = model();
    bf_bitflip f, g;
    int rc = cli_parse_flip("generate", m, s, &f);
    if (rc) {
        if (rc != EXIT_USAGE) abort();
        return;
    }
    bf_error err = {0};
    if (f.param >= bf_model_num_params(m) || bf_bitflip_check(m, &f, &err) != BF_OK) abort();
    char name[700], again[800];
    name_part(s, 2, name, sizeof name);
    snprintf(again, sizeof again, "%s:%lld:%d", name, (long long)f.index, f.bit);
    if (cli_parse_flip("generate", m, again, &g) || g.param != f.param || g.index != f.index || g.bit != f.bit) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char s[601];
    size_t n = size - 1 < 600 ? size - 1 : 600;
    memcpy(s, data + 1, n);
    s[n] = '\0';   /* and to the first NUL, as argv holds it */
    switch (data[0] % 3) {
    case 0: kv(s); break;
    case 1: act(s); break;
    default: flip(s); break;
    }
    return 0;
}
