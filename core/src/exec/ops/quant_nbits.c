/* com.microsoft MatMulNBits: int4 weights as LMs ship them in ONNX.
 *
 * ONNX 1.12 (opset 17) has no int4 type and no blocked DequantizeLinear, so
 * the int4 form in use is ONNX Runtime's contrib op, as its
 * matmul_4bits_quantizer writes it: attributes K, N, bits (4), block_size
 * (a power of 2, at least 16), accuracy_level; inputs A [..., K] float,
 * B uint8 [N, n_blocks, blob_size] with n_blocks = ceil(K / block_size) and
 * blob_size = block_size * bits / 8, scales float (N * n_blocks values,
 * [N * n_blocks] or [N, n_blocks]), optional zero_points uint8 packed
 * [N * ceil(n_blocks * bits / 8)], optional g_idx, optional bias [N];
 * output Y [..., N].
 *
 * Weight (n, k), with k = b * block_size + j: q = the j-th 4-bit field of
 * B[n, b, :] (low nibble first: byte j / 2, bits 4 * (j % 2) ..), zero point
 * z = the b-th field of column n's zero-point bytes the same way (8 when
 * absent), W[n][k] = (float)(q - z) * scale[n * n_blocks + b] — one
 * rounding, the product's; the padding past K in the last block is unused.
 * Then Y = A W^T + bias through the engine's product (bf__sgemm with W
 * transposed: each output the in-order fma chain over k, docs/ENGINE.md),
 * bias added after as a separate rounding.
 *
 * What ONNX Runtime computes: the same dequantized weights (MLAS dequantizes
 * a block as (q - z) * scale), but its SQNBitGemm kernels (fp32 compute at
 * accuracy_level 0..1) sum over k in their own blocking, so Y agrees with
 * ours to rounding, not bit for bit; at accuracy_level 4 ORT quantizes A to
 * int8 as well, which bitflip does not: we always compute in fp32 and say
 * so nowhere else than here and docs/OPS.md. g_idx (act-order) and float
 * zero points are refused with an error naming them.
 *
 * The fault surface: B (and the zero points, with faults.zero_points) are
 * uint8 initializers read by this op, so model/graph_index.c makes them
 * parameters as it does a quant op's int8 weights: a campaign flips bits
 * of the stored bytes, bit b of byte i being bit b % 4 of the int4 field
 * 2 i + b / 4 of its block. The scales are float parameters like any. */
#include <stdint.h>
#include <string.h>

#include "exec/op.h"
#include "exec/ops/sgemm.h"

/* Columns of W dequantized at a time: the scratch holds NBITS_COLS rows of
 * W^T, not the whole matrix (an LLM's is hundreds of MB); the product's
 * bits do not depend on the split (sgemm.h: each output is the chain of its
 * row and column whatever the shapes). */
#define NBITS_COLS 64

typedef struct nbits_params {
    int64_t k, n, m, block, n_blocks, blob, zp_per_col;
    int has_zp, has_bias;
} nbits_params;

static bf_status nbits_attrs(bf__prep *p, nbits_params *q, bf_error *err)
{
    const bf__node *nd = p->node;
    int64_t bits, acc;
    bf_status st;
    if ((st = bf__attr_int(nd, "K", -1, &q->k, err)) || (st = bf__attr_int(nd, "N", -1, &q->n, err)) ||
        (st = bf__attr_int(nd, "bits", 4, &bits, err)) || (st = bf__attr_int(nd, "block_size", -1, &q->block, err)) ||
        (st = bf__attr_int(nd, "accuracy_level", 0, &acc, err)))
        return st;
    if (q->k < 1 || q->n < 1)
        return bf__node_error(err, nd, BF_EFORMAT, "attributes K and N are required and must be >= 1, got K %lld, N %lld",
                              (long long)q->k, (long long)q->n);
    if (bits != 4) return bf__node_error(err, nd, BF_EUNSUPPORTED, "bits %lld: only 4-bit weights are supported", (long long)bits);
    if (q->block < 16 || q->block > 65536 || (q->block & (q->block - 1)))
        return bf__node_error(err, nd, BF_EFORMAT, "block_size must be a power of 2 from 16 to 65536, got %lld",
                              (long long)q->block);
    if (q->k > INT32_MAX || q->n > INT32_MAX || (double)q->k * (double)q->n > (double)(1 << 28))
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "weights too large (K %lld, N %lld; at most 2^28 weights)",
                              (long long)q->k, (long long)q->n);
    q->n_blocks = (q->k + q->block - 1) / q->block;
    q->blob = q->block * 4 / 8;
    q->zp_per_col = (q->n_blocks * 4 + 7) / 8;
    return BF_OK;
}

static bf_status nbits_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    nbits_params *q = (nbits_params *)p->params;
    char s1[96];
    bf_status st;
    memset(q, 0, sizeof *q);
    if ((st = nbits_attrs(p, q, err)) || (st = bf__want_f32(p, 0, "A", err)) || (st = bf__want_f32(p, 2, "scales", err)))
        return st;
    const bf_tensor *a = p->in[0], *b = p->in[1], *sc = p->in[2];
    if (a->ndim < 1 || a->dims[a->ndim - 1] != q->k)
        return bf__node_error(err, nd, BF_ESHAPE, "input A has shape %s; expected [..., K] with K = %lld",
                              bf_shape_str(a->dims, a->ndim, s1, sizeof s1), (long long)q->k);
    if (!b || b->dtype != BF_U8 || b->ndim != 3 || b->dims[0] != q->n || b->dims[1] != q->n_blocks || b->dims[2] != q->blob)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "input B must be uint8 [N, n_blocks, blob_size] = [%lld, %lld, %lld] (K %lld, block_size %lld, "
                              "4 bits), got %s %s", (long long)q->n, (long long)q->n_blocks, (long long)q->blob,
                              (long long)q->k, (long long)q->block, b ? bf_dtype_name(b->dtype) : "nothing",
                              b ? bf_shape_str(b->dims, b->ndim, s1, sizeof s1) : "");
    if (bf_tensor_numel(sc) != q->n * q->n_blocks)
        return bf__node_error(err, nd, BF_ESHAPE, "input scales has shape %s; expected N * n_blocks = %lld values",
                              bf_shape_str(sc->dims, sc->ndim, s1, sizeof s1), (long long)(q->n * q->n_blocks));
    const bf_tensor *zp = p->n_in > 3 ? p->in[3] : NULL, *gi = p->n_in > 4 ? p->in[4] : NULL;
    const bf_tensor *bias = p->n_in > 5 ? p->in[5] : NULL;
    if (zp) {
        if (zp->dtype != BF_U8)
            return bf__node_error(err, nd, BF_EUNSUPPORTED, "input zero_points is %s; only packed uint8 zero points "
                                  "are supported", bf_dtype_name(zp->dtype));
        if (bf_tensor_numel(zp) != q->n * q->zp_per_col)
            return bf__node_error(err, nd, BF_ESHAPE, "input zero_points has shape %s; expected N * ceil(n_blocks * 4 / 8) "
                                  "= %lld bytes", bf_shape_str(zp->dims, zp->ndim, s1, sizeof s1),
                                  (long long)(q->n * q->zp_per_col));
        q->has_zp = 1;
    }
    if (gi) return bf__node_error(err, nd, BF_EUNSUPPORTED, "input g_idx (act-order) is not supported");
    if (bias) {
        if (bias->dtype != BF_F32 || bf_tensor_numel(bias) != q->n)
            return bf__node_error(err, nd, BF_ESHAPE, "input bias must be float [N] = [%lld], got %s %s", (long long)q->n,
                                  bf_dtype_name(bias->dtype), bf_shape_str(bias->dims, bias->ndim, s1, sizeof s1));
        q->has_bias = 1;
    }
    int64_t dims[BF_MAX_DIMS];
    memcpy(dims, a->dims, (size_t)a->ndim * sizeof *dims);
    dims[a->ndim - 1] = q->n;
    bf__set_shape(p->out[0], BF_F32, a->ndim, dims);
    q->m = bf_tensor_numel(a) / q->k;
    if (q->m > INT32_MAX) return bf__node_error(err, nd, BF_EUNSUPPORTED, "too many rows in A (%lld)", (long long)q->m);
    p->scratch = (size_t)((q->n < NBITS_COLS ? q->n : NBITS_COLS) * q->k) * sizeof(float);
    return BF_OK;
}

/* Field i (4 bits) of a packed run of bytes: low nibble first. */
static inline int32_t nibble(const uint8_t *v, int64_t i) { return (int32_t)(v[i >> 1] >> (4 * (i & 1)) & 15u); }

static bf_status nbits_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const nbits_params *q = c->params;
    const uint8_t *b = c->in[1]->data, *zp = q->has_zp ? c->in[3]->data : NULL;
    const float *sc = c->in[2]->data, *a = c->in[0]->data;
    float *w = c->scratch, *y = c->out[0]->data;
    for (int64_t n0 = 0; n0 < q->n; n0 += NBITS_COLS) {
        int64_t cols = q->n - n0 < NBITS_COLS ? q->n - n0 : NBITS_COLS;
        for (int64_t n = n0; n < n0 + cols; n++)
            for (int64_t blk = 0; blk < q->n_blocks; blk++) {
                const uint8_t *blob = b + (n * q->n_blocks + blk) * q->blob;
                int32_t z = zp ? nibble(zp + n * q->zp_per_col, blk) : 8;
                float s = sc[n * q->n_blocks + blk];
                int64_t k0 = blk * q->block, len = q->k - k0 < q->block ? q->k - k0 : q->block;
                float *row = w + (n - n0) * q->k + k0;
                for (int64_t j = 0; j < len; j++) row[j] = (float)(nibble(blob, j) - z) * s;
            }
        bf__sgemm(0, 1, (int)q->m, (int)cols, (int)q->k, 1.0f, a, (int)q->k, w, (int)q->k, 0, y + n0, (int)q->n);
    }
    if (q->has_bias) {
        const float *bias = c->in[5]->data;
        for (int64_t r = 0; r < q->m; r++)
            for (int64_t n = 0; n < q->n; n++) y[r * q->n + n] += bias[n];
    }
    return BF_OK;
}

const bf__op bf__ops_contrib[] = {
    {"com.microsoft:MatMulNBits", 3, 6, 1, 1, 0, nbits_prepare, nbits_run},
    {0},
};
