/* Fixed-point quantization and faults as the engine does them, for
 * tests/conformance/stutz_check.py to compare with its numpy rendition of
 * Stutz et al.'s formulas:
 *
 *   fixed_dump REPR PER_CHANNEL W_MAX DIM0 < IN > OUT
 *
 * IN: n float32 weights, then n uint32 masks (little-endian, as this
 * machine). OUT: per element the stored code (uint32), then per element the
 * golden value, the value after flipping `mask`, after stuck-at-0 and after
 * stuck-at-1 on `mask` (float32 each). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bitflip/repr.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: fixed_dump REPR PER_CHANNEL W_MAX DIM0 < weights+masks > out\n");
        return 2;
    }
    int r = bf_repr_parse(argv[1]);
    int per_channel = atoi(argv[2]);
    float w_max = strtof(argv[3], NULL);
    int64_t dim0 = atoll(argv[4]);
    if (r < 0 || !bf_repr_is_fixed((bf_repr)r) || dim0 < 1) {
        fprintf(stderr, "fixed_dump: '%s' is not a fixed-point representation, or DIM0 < 1\n", argv[1]);
        return 2;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *in = malloc(cap);
    for (size_t got; in && (got = fread(in + n, 1, cap - n, stdin)) > 0;) {
        n += got;
        if (n == cap && !(in = realloc(in, cap *= 2))) break;
    }
    if (!in || n % 8) {
        fprintf(stderr, "fixed_dump: the input is not n floats and n masks\n");
        return 2;
    }
    int64_t count = (int64_t)(n / 8);
    const float *w = (const float *)in;
    const uint32_t *mask = (const uint32_t *)(in + count * 4);
    int64_t n_scale = per_channel ? dim0 : 1, slice = count / n_scale;
    float *scale = malloc((size_t)n_scale * sizeof *scale), *lo = malloc((size_t)n_scale * sizeof *lo);
    if (!scale || !lo) return 2;
    bf_repr_fixed_scales((bf_repr)r, w, count, dim0, per_channel, w_max, scale, lo);
    int uns = bf_repr_is_unsigned((bf_repr)r);
    for (int64_t i = 0; i < count; i++) {
        float s = scale[i / slice], l = uns ? lo[i / slice] : 0.0f;
        uint32_t code = bf_repr_encode_lo((bf_repr)r, w[i], s, l);
        fwrite(&code, 4, 1, stdout);
    }
    for (int64_t i = 0; i < count; i++) {
        float s = scale[i / slice], l = uns ? lo[i / slice] : 0.0f;
        float v[4];
        uint32_t code = bf_repr_encode_lo((bf_repr)r, w[i], s, l);
        v[0] = bf_repr_decode_lo((bf_repr)r, code, s, l);
        v[1] = bf_repr_corrupt_lo((bf_repr)r, w[i], s, l, BF_FAULT_BITFLIP, mask[i]);
        v[2] = bf_repr_corrupt_lo((bf_repr)r, w[i], s, l, BF_FAULT_STUCK_AT_0, mask[i]);
        v[3] = bf_repr_corrupt_lo((bf_repr)r, w[i], s, l, BF_FAULT_STUCK_AT_1, mask[i]);
        fwrite(v, 4, 4, stdout);
    }
    free(in);
    free(scale);
    free(lo);
    return fflush(stdout) == 0 ? 0 : 1;
}
