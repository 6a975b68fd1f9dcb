/* bitflip-opcheck DIR [CASE...]: runs one-op (or few-op) ONNX graphs and
 * compares every output with what PyTorch (or a plain numpy reference of the
 * ONNX spec) computed for the same inputs.
 *
 * DIR holds, per case NAME (tests/ops/README.md):
 *   NAME.onnx             the graph
 *   NAME.io.safetensors   "input:X" for each graph input X, "output:Y" for
 *                         each graph output Y; __metadata__ may give "rtol",
 *                         "atol" (defaults 1e-5, 1e-6) and "ref" (who computed
 *                         the outputs: printed on failure)
 * A case whose graph inputs do not share dim 0 gets those inputs as
 * initializers instead (the generator does that): the plan is created with
 * batch = dim 0 of the first graph input (1 when it is a scalar).
 *
 * Matching: shapes and dtypes equal; integers and bools exactly; floats
 * within atol + rtol |want|, with NaN and +-Inf in exactly the same places.
 * Exit 0 when every case matches, 1 on a mismatch or an error, 2 on usage.
 * Cases named on the command line (substring match) restrict the run;
 * --self-test also checks that every comparison can fail; --dump FILE writes
 * every output's bytes, case by case, so that two runs can be compared bit for
 * bit (tests/conformance/simd_levels.sh: one run per CPU path). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"

#define MAX_IO 32

typedef struct io_tensor {
    char name[256];
    bf_tensor t;
} io_tensor;

typedef struct io_file {
    unsigned char *buf;
    size_t len;
    io_tensor *items;
    size_t n;
    double rtol, atol;
    char ref[64];
} io_file;

static void io_free(io_file *f)
{
    free(f->buf);
    free(f->items);
    memset(f, 0, sizeof *f);
}

static bf_dtype dtype_of(const char *s)
{
    if (!strcmp(s, "F32")) return BF_F32;
    if (!strcmp(s, "I64")) return BF_I64;
    if (!strcmp(s, "I32")) return BF_I32;
    if (!strcmp(s, "BOOL")) return BF_BOOL;
    if (!strcmp(s, "U8")) return BF_U8;
    if (!strcmp(s, "I8")) return BF_I8;
    return BF_DTYPE_INVALID;
}

/* Reads a safetensors file without the eval-set rules (tensors of any shape,
 * scalars and empty ones included). */
static int io_load(const char *path, io_file *f, char *why, size_t why_len)
{
    memset(f, 0, sizeof *f);
    f->rtol = 1e-5;
    f->atol = 1e-6;
    FILE *fp = fopen(path, "rb");
    if (!fp) { snprintf(why, why_len, "cannot open %s: %s", path, strerror(errno)); return 0; }
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    rewind(fp);
    if (sz < 8) { fclose(fp); snprintf(why, why_len, "%s: too short", path); return 0; }
    f->buf = malloc((size_t)sz);
    if (!f->buf || fread(f->buf, 1, (size_t)sz, fp) != (size_t)sz) {
        fclose(fp);
        snprintf(why, why_len, "%s: read failed", path);
        return 0;
    }
    fclose(fp);
    f->len = (size_t)sz;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->buf[i];
    if (hlen > f->len - 8) { snprintf(why, why_len, "%s: header length %llu", path, (unsigned long long)hlen); return 0; }
    json_error_t jerr;
    json_t *h = json_loadb((const char *)f->buf + 8, hlen, 0, &jerr);
    if (!json_is_object(h)) { snprintf(why, why_len, "%s: header: %s", path, jerr.text); json_decref(h); return 0; }
    const unsigned char *data = f->buf + 8 + hlen;
    size_t data_len = f->len - 8 - hlen;
    f->items = calloc(json_object_size(h) + 1, sizeof *f->items);
    if (!f->items) { json_decref(h); snprintf(why, why_len, "out of memory"); return 0; }
    const char *key;
    json_t *v;
    json_object_foreach(h, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *s;
            if ((s = json_string_value(json_object_get(v, "rtol")))) f->rtol = atof(s);
            if ((s = json_string_value(json_object_get(v, "atol")))) f->atol = atof(s);
            if ((s = json_string_value(json_object_get(v, "ref")))) snprintf(f->ref, sizeof f->ref, "%s", s);
            continue;
        }
        io_tensor *it = &f->items[f->n];
        snprintf(it->name, sizeof it->name, "%s", key);
        it->t.name = it->name;
        it->t.dtype = dtype_of(json_string_value(json_object_get(v, "dtype")));
        json_t *shape = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
        if (it->t.dtype == BF_DTYPE_INVALID || !json_is_array(shape) || json_array_size(shape) > BF_MAX_DIMS ||
            !json_is_array(off) || json_array_size(off) != 2) {
            snprintf(why, why_len, "%s: tensor '%s': unsupported dtype or bad entry", path, key);
            json_decref(h);
            return 0;
        }
        it->t.ndim = (int)json_array_size(shape);
        for (int d = 0; d < it->t.ndim; d++) it->t.dims[d] = json_integer_value(json_array_get(shape, (size_t)d));
        size_t b = (size_t)json_integer_value(json_array_get(off, 0)), e = (size_t)json_integer_value(json_array_get(off, 1));
        if (b > e || e > data_len || e - b != bf_tensor_nbytes(&it->t)) {
            snprintf(why, why_len, "%s: tensor '%s': offsets do not match its shape", path, key);
            json_decref(h);
            return 0;
        }
        it->t.data = (void *)(data + b);
        f->n++;
    }
    json_decref(h);
    return 1;
}

static const bf_tensor *io_find(const io_file *f, const char *prefix, const char *name)
{
    char key[300];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->items[i].name, key)) return &f->items[i].t;
    return NULL;
}

/* Reads through memcpy: a tensor in a safetensors file is only as aligned as
 * the sizes of the tensors before it (an int64 after a bool may not be). */
static double elem(const bf_tensor *t, int64_t i)
{
    const unsigned char *p = (const unsigned char *)t->data + (size_t)i * bf_dtype_size(t->dtype);
    float f;
    int64_t l;
    int32_t w;
    switch (t->dtype) {
    case BF_F32: memcpy(&f, p, sizeof f); return f;
    case BF_I64: memcpy(&l, p, sizeof l); return (double)l;
    case BF_I32: memcpy(&w, p, sizeof w); return w;
    case BF_BOOL: case BF_U8: return *p;
    case BF_I8: return (int8_t)*p;
    default: return NAN;
    }
}

/* 1 when got matches want; else prints why into msg. */
static int match(const bf_tensor *got, const bf_tensor *want, double rtol, double atol, char *msg, size_t len)
{
    char gs[128], ws[128];
    if (got->dtype != want->dtype || got->ndim != want->ndim ||
        memcmp(got->dims, want->dims, sizeof got->dims[0] * (size_t)got->ndim) != 0) {
        snprintf(msg, len, "got %s %s, want %s %s", bf_dtype_name(got->dtype), bf_shape_str(got->dims, got->ndim, gs, sizeof gs),
                 bf_dtype_name(want->dtype), bf_shape_str(want->dims, want->ndim, ws, sizeof ws));
        return 0;
    }
    int64_t n = bf_tensor_numel(want), bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        double g = elem(got, i), w = elem(want, i);
        int ok;
        if (want->dtype != BF_F32) ok = g == w;
        else if (isnan(w) || isnan(g)) ok = isnan(w) && isnan(g);
        else if (isinf(w) || isinf(g)) ok = g == w;
        else ok = fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok) { if (first < 0) first = i; bad++; }
    }
    if (bad == 0) return 1;
    snprintf(msg, len, "%lld of %lld elements differ; first at flat index %lld: got %.9g, want %.9g", (long long)bad,
             (long long)n, (long long)first, elem(got, first), elem(want, first));
    return 0;
}

/* The check itself can fail: a copy of want with its first element moved
 * must not match got. 1 when it does not (as it should). */
static int perturbed_fails(const bf_tensor *got, const bf_tensor *want, double rtol, double atol)
{
    if (bf_tensor_numel(want) == 0) return 1;
    size_t nb = bf_tensor_nbytes(want);
    unsigned char *copy = malloc(nb);
    if (!copy) return 0;
    memcpy(copy, want->data, nb);
    bf_tensor w = *want;
    w.data = copy;
    switch (w.dtype) {
    case BF_F32: { float *f = (float *)copy; f[0] = isfinite(f[0]) ? f[0] + 1.0f + 2.0f * fabsf(f[0]) : 0.0f; break; }
    case BF_I64: ((int64_t *)copy)[0] += 1; break;
    case BF_I32: ((int32_t *)copy)[0] += 1; break;
    case BF_BOOL: copy[0] = !copy[0]; break;
    default: copy[0] ^= 1; break;
    }
    char msg[600];
    int fails = !match(got, &w, rtol, atol, msg, sizeof msg);
    free(copy);
    return fails;
}

static int self_test;
static FILE *dump;

/* Appends a tensor's bytes to the dump; a float32 NaN as the one quiet NaN
 * 0x7fc00000: its sign and payload are not results (IEEE 754 and ONNX leave
 * them open, and which operand's NaN an x86 instruction passes on depends on
 * the operand order the compiler chose, which differs between a kernel's
 * scalar and AVX2 copies). */
static int dump_tensor(const bf_tensor *t)
{
    size_t nb = bf_tensor_nbytes(t);
    if (t->dtype != BF_F32) return fwrite(t->data, 1, nb, dump) == nb;
    const uint32_t *w = t->data;
    for (size_t i = 0; i < nb / 4; i++) {
        uint32_t bits = (w[i] & 0x7f800000u) == 0x7f800000u && (w[i] & 0x7fffffu) ? 0x7fc00000u : w[i];
        if (fwrite(&bits, sizeof bits, 1, dump) != 1) return 0;
    }
    return 1;
}

static int run_case(const char *dir, const char *name)
{
    char path[2048], why[4096] = "";
    bf_error err = {0};
    bf_model *m = NULL;
    bf_plan *p = NULL;
    io_file io;
    int ok = 0;

    snprintf(path, sizeof path, "%s/%s.io.safetensors", dir, name);
    if (!io_load(path, &io, why, sizeof why)) { printf("FAIL %-40s %s\n", name, why); io_free(&io); return 0; }
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    if (bf_model_load_file(path, &m, &err) != BF_OK) { snprintf(why, sizeof why, "%s", err.msg); goto out; }
    int64_t batch = 1;
    size_t n_in = bf_model_num_inputs(m), n_out = bf_model_num_outputs(m);
    const bf_tensor *feeds[MAX_IO];
    if (n_in > MAX_IO || n_out > MAX_IO) { snprintf(why, sizeof why, "too many inputs or outputs"); goto out; }
    for (size_t i = 0; i < n_in; i++) {
        const char *in = bf_model_input(m, i)->name;
        feeds[i] = io_find(&io, "input:", in);
        if (!feeds[i]) { snprintf(why, sizeof why, "io file has no 'input:%s'", in); goto out; }
        if (i == 0 && feeds[i]->ndim > 0) batch = feeds[i]->dims[0];
    }
    /* symbolic dims past the batch (an exported LM's sequence axes) take the fed sizes */
    const int64_t *shapes[MAX_IO];
    int ndims[MAX_IO];
    const char *dim_names[MAX_IO * BF_MAX_DIMS];
    int64_t dim_sizes[MAX_IO * BF_MAX_DIMS];
    size_t n_dims = 0;
    for (size_t i = 0; i < n_in; i++) shapes[i] = feeds[i]->dims, ndims[i] = feeds[i]->ndim;
    if (bf_plan_dims_from(m, shapes, ndims, dim_names, dim_sizes, MAX_IO * BF_MAX_DIMS, &n_dims, &err) != BF_OK) {
        snprintf(why, sizeof why, "%s", err.msg);
        goto out;
    }
    bf_plan_opts opts = {.n_dims = n_dims, .dim_names = dim_names, .dim_sizes = dim_sizes};
    if (bf_plan_create_opts(m, batch, &opts, &p, &err) != BF_OK) { snprintf(why, sizeof why, "%s", err.msg); goto out; }
    for (size_t i = 0; i < n_in; i++) {
        bf_tensor *dst = bf_plan_input(p, i);
        if (dst->dtype != feeds[i]->dtype || bf_tensor_nbytes(dst) != bf_tensor_nbytes(feeds[i])) {
            snprintf(why, sizeof why, "input '%s': the plan wants %s, the io file holds %s", bf_model_input(m, i)->name,
                     bf_dtype_name(dst->dtype), bf_dtype_name(feeds[i]->dtype));
            goto out;
        }
        memcpy(dst->data, feeds[i]->data, bf_tensor_nbytes(dst));
    }
    if (bf_plan_run(p, &err) != BF_OK) { snprintf(why, sizeof why, "%s", err.msg); goto out; }
    ok = 1;
    for (size_t i = 0; i < n_out && ok; i++) {
        const char *on = bf_model_output(m, i)->name;
        const bf_tensor *want = io_find(&io, "output:", on);
        if (!want) { snprintf(why, sizeof why, "io file has no 'output:%s'", on); ok = 0; break; }
        char msg[600];
        const bf_tensor *got = bf_plan_output(p, i);
        if (dump && !dump_tensor(got)) {
            snprintf(why, sizeof why, "cannot write --dump");
            ok = 0;
            break;
        }
        if (!match(bf_plan_output(p, i), want, io.rtol, io.atol, msg, sizeof msg)) {
            snprintf(why, sizeof why, "output '%s': %s (reference: %s)", on, msg, io.ref[0] ? io.ref : "?");
            ok = 0;
        } else if (self_test && !perturbed_fails(bf_plan_output(p, i), want, io.rtol, io.atol)) {
            snprintf(why, sizeof why, "self-test: output '%s' still matches with its first element moved", on);
            ok = 0;
        }
    }
out:
    printf("%s %-40s %s\n", ok ? "ok  " : "FAIL", name, ok ? "" : why);
    bf_plan_free(p);
    bf_model_free(m);
    io_free(&io);
    return ok;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: bitflip-opcheck [--self-test] [--dump FILE] DIR [CASE...]\n"
                "Runs each DIR/NAME.onnx on the inputs of DIR/NAME.io.safetensors and compares its outputs\n"
                "with the reference ones stored there (tests/ops/README.md). CASE: run only cases whose\n"
                "name contains it. --self-test: also checks that each output, with its first element moved,\n"
                "no longer matches (the comparison can fail). --dump FILE: write every output's bytes to\n"
                "FILE (to compare two runs bit for bit). Exit 0: all match; 1: a mismatch or an error;\n"
                "2: usage.\n");
        return argc < 2 ? 2 : 0;
    }
    const char *dump_path = NULL;
    while (argc > 1 && (!strcmp(argv[1], "--self-test") || !strcmp(argv[1], "--dump"))) {
        if (!strcmp(argv[1], "--dump")) {
            if (argc < 3) { fprintf(stderr, "bitflip-opcheck: --dump needs FILE\n"); return 2; }
            dump_path = argv[2];
            argv++;
            argc--;
        } else self_test = 1;
        argv++;
        argc--;
    }
    if (argc < 2) { fprintf(stderr, "bitflip-opcheck: DIR is missing\n"); return 2; }
    if (dump_path && !(dump = fopen(dump_path, "wb"))) {
        fprintf(stderr, "bitflip-opcheck: cannot write --dump %s: %s\n", dump_path, strerror(errno));
        return 2;
    }
    const char *dir = argv[1];
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "bitflip-opcheck: cannot open %s: %s\n", dir, strerror(errno)); return 2; }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".onnx") != 0) continue;
        if (argc > 2) {
            int want = 0;
            for (int i = 2; i < argc; i++) want |= strstr(e->d_name, argv[i]) != NULL;
            if (!want) continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) { closedir(d); return 2; }
            names = nn;
        }
        names[n] = strndup(e->d_name, l - 5);
        if (!names[n]) { closedir(d); return 2; }
        n++;
    }
    closedir(d);
    if (n == 0) { fprintf(stderr, "bitflip-opcheck: no case (.onnx) in %s\n", dir); free(names); return 2; }
    qsort(names, n, sizeof *names, cmp_str);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (!run_case(dir, names[i])) failed++;
        free(names[i]);
    }
    free(names);
    if (dump && fclose(dump) != 0) {
        fprintf(stderr, "bitflip-opcheck: cannot write --dump %s: %s\n", dump_path, strerror(errno));
        failed++;
    }
    printf("bitflip-opcheck: %zu of %zu cases match\n", n - failed, n);
    return failed ? 1 : 0;
}
