/* libFuzzer target: ONNX external data (core/src/model/onnx_external.c), the
 * reader only a model loaded from its path reaches (fuzz_onnx loads bytes,
 * whose external tensors are refused before the reader runs). One input is
 * a model and the file beside it:
 *
 *   bytes 0-3   the model's length N, little-endian (more than is left: all
 *               of it, and an empty external file)
 *   N bytes     the model, written as DIR/m.onnx
 *   the rest    the external data, written as DIR/w.bin and DIR/sub/w.bin
 *
 * DIR is a temporary directory made once per process, holding also an
 * empty directory DIR/d (a location that is not a regular file); nothing
 * outside it is written. The model is loaded by path with fuzz_onnx's small
 * limits; a model that loads is planned at batch 1 under a 64 MiB budget
 * and run once on zeros, so the external bytes go through the same
 * conversion and kernels as raw_data. Seeds: tests/fuzz/make_external_seeds.py
 * (onnx.save_model's own external layout, a Gemm's weight at an offset
 * after junk, two tensors in one file, a nested location, and the hostile
 * entries of tests/unit/test_model_external.c). */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bitflip/bitflip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

/* the files and folders this target made, at exit */
static void cleanup(void)
{
    const char *files[] = {"m.onnx", "w.bin", "sub/w.bin"}, *dirs[] = {"sub", "d"};
    char p[320];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) path_of(p, sizeof p, files[i]), unlink(p);
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) path_of(p, sizeof p, dirs[i]), rmdir(p);
    rmdir(dir);
}

static int setup(void)
{
    if (dir[0]) return 1;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/bf_fuzz_ext_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        return 0;
    }
    char p[320];
    path_of(p, sizeof p, "sub");
    if (mkdir(p, 0700) != 0) return 0;
    path_of(p, sizeof p, "d");
    if (mkdir(p, 0700) != 0) return 0;
    atexit(cleanup);
    return 1;
}

static int write_file(const char *name, const uint8_t *data, size_t n)
{
    char p[320];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || !setup()) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (n > size - 4) n = size - 4;
    const uint8_t *model = data + 4, *ext = model + n;
    size_t ext_n = size - 4 - n;
    if (!write_file("m.onnx", model, n) || !write_file("w.bin", ext, ext_n) || !write_file("sub/w.bin", ext, ext_n))
        abort();   /* the temporary directory itself failing: not the input's doing */
    bf_load_limits lim = {.max_graph_depth = 8, .max_type_depth = 8, .max_field_bytes = 1 << 20,
                          .max_nodes = 2000, .max_initializers = 2000, .max_attributes = 64,
                          .max_tensor_elements = 1 << 20};
    char p[320];
    path_of(p, sizeof p, "m.onnx");
    bf_model *m = NULL;
    bf_error err = {0};
    if (bf_model_load_file_opts(p, &lim, &m, &err) != BF_OK) return 0;
    int64_t batch = 1;
    const bf_value_info *in0 = bf_model_input(m, 0);
    if (in0 && in0->ndim > 0 && in0->dims[0] > 0 && in0->dims[0] <= 64) batch = in0->dims[0];
    bf_plan *pl = NULL;
    bf_plan_opts o = {.max_bytes = (uint64_t)64 << 20};
    if (bf_plan_create_opts(m, batch, &o, &pl, &err) == BF_OK) {
        (void)bf_plan_run(pl, &err);
        bf_plan_free(pl);
    }
    bf_model_free(m);
    return 0;
}
