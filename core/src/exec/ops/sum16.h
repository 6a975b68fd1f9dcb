/* The float sum over 16 independent lanes (op.h, bf__sum16_f32) as an inline
 * body, for the kernels compiled again for 8 and 16 lanes (linalg_norm.c's
 * LayerNorm rows) to inline into each copy: the lanes and their tree are the
 * same at any vector width, so every copy has the plain one's bits. */
#ifndef BF_OPS_SUM16_H
#define BF_OPS_SUM16_H

#include <stdint.h>

static inline __attribute__((always_inline)) float bf__sum16_body(const float *restrict x, int64_t n)
{
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += x[i + j];
    for (int j = 0; i < n; i++, j++) acc[j] += x[i];
    for (int h = 8; h >= 1; h /= 2)
        for (int j = 0; j < h; j++) acc[j] += acc[j + h];
    return acc[0];
}

#endif
