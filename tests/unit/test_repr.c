/* Representations and faults, checked against references computed outside
 * the engine: values worked out by hand from the bit layouts (in the
 * comments), and tables of pseudo-random cases computed with numpy (and
 * torch for bf16) by the script quoted above the tables. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "bitflip/repr.h"

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static float corrupt(bf_repr r, float v, float scale, bf_fault_model m, uint32_t mask)
{
    return bf_repr_corrupt(r, v, scale, m, mask);
}

static void names(void **state)
{
    (void)state;
    static const char *reprs[] = {"fp32", "fp16", "bf16", "int8"};
    static const char *models[] = {"bitflip", "stuck_at_0", "stuck_at_1", "random_value", "ber"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(bf_repr_name((bf_repr)i), reprs[i]);
        assert_int_equal(bf_repr_parse(reprs[i]), i);
    }
    for (int i = 0; i < 5; i++) {
        assert_string_equal(bf_fault_model_name((bf_fault_model)i), models[i]);
        assert_int_equal(bf_fault_model_parse(models[i]), i);
    }
    assert_int_equal(bf_repr_parse("FP32"), -1);
    assert_int_equal(bf_repr_parse("fp64"), -1);
    assert_int_equal(bf_repr_parse(""), -1);
    assert_int_equal(bf_repr_parse(NULL), -1);
    assert_int_equal(bf_fault_model_parse("flip"), -1);
    assert_int_equal(bf_fault_model_parse(NULL), -1);
    assert_int_equal(bf_repr_bits(BF_REPR_FP32), 32);
    assert_int_equal(bf_repr_bits(BF_REPR_FP16), 16);
    assert_int_equal(bf_repr_bits(BF_REPR_BF16), 16);
    assert_int_equal(bf_repr_bits(BF_REPR_INT8), 8);
}

static void fp32_by_hand(void **state)
{
    (void)state;
    /* 1.0 = 0x3f800000 */
    assert_int_equal(bf_repr_encode(BF_REPR_FP32, 1.0f, 0), 0x3f800000);
    /* bit 30 is the exponent's top bit: 0x7f800000 = +inf */
    assert_true(isinf(corrupt(BF_REPR_FP32, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 30)));
    assert_true(corrupt(BF_REPR_FP32, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 30) > 0);
    /* bit 31 is the sign */
    assert_true(corrupt(BF_REPR_FP32, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 31) == -1.0f);
    /* bit 22, the top mantissa bit: 0x3fc00000 = 1.5 */
    assert_true(corrupt(BF_REPR_FP32, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 22) == 1.5f);
    /* stuck-at: -2.0 = 0xc0000000; sign stuck at 0 -> 2.0; stuck at 1 -> unchanged */
    assert_true(corrupt(BF_REPR_FP32, -2.0f, 0, BF_FAULT_STUCK_AT_0, 1u << 31) == 2.0f);
    assert_true(corrupt(BF_REPR_FP32, -2.0f, 0, BF_FAULT_STUCK_AT_1, 1u << 31) == -2.0f);
    /* random value replaces every bit: 0x40490fdb is pi in fp32 */
    assert_true(corrupt(BF_REPR_FP32, 7.0f, 0, BF_FAULT_RANDOM_VALUE, 0x40490fdbu) == 0x1.921fb6p+1f);
    /* BER applies the drawn mask as a flip: bits 31 and 23 of 1.0 -> 0xbf000000 = -0.5 */
    assert_true(corrupt(BF_REPR_FP32, 1.0f, 0, BF_FAULT_BER, (1u << 31) | (1u << 23)) == -0.5f);
    /* decode is the bit pattern itself, NaN included */
    assert_true(isnan(bf_repr_decode(BF_REPR_FP32, 0x7fc00000u, 0)));
}

static void fp16_by_hand(void **state)
{
    (void)state;
    /* 1.0 = 0x3c00 (exponent 15, mantissa 0) */
    assert_int_equal(bf_repr_encode(BF_REPR_FP16, 1.0f, 0), 0x3c00);
    /* bit 14 -> 0x7c00: exponent all ones, mantissa 0 = +inf */
    float v = corrupt(BF_REPR_FP16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 14);
    assert_true(isinf(v) && v > 0);
    /* bit 10, the exponent's lowest -> 0x3800 = 2^-1 */
    assert_true(corrupt(BF_REPR_FP16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 10) == 0.5f);
    /* bit 15 -> 0xbc00 = -1 */
    assert_true(corrupt(BF_REPR_FP16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 15) == -1.0f);
    /* bit 9, the top mantissa bit -> 0x3e00 = 1.5 */
    assert_true(corrupt(BF_REPR_FP16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 9) == 1.5f);
    /* 65504 = 0x7bff; bit 10 -> 0x7fff: exponent all ones, mantissa != 0 = NaN */
    assert_true(isnan(corrupt(BF_REPR_FP16, 65504.0f, 0, BF_FAULT_BITFLIP, 1u << 10)));
    /* 0 with bit 0 set -> 0x0001, the smallest subnormal 2^-24 */
    assert_true(corrupt(BF_REPR_FP16, 0.0f, 0, BF_FAULT_STUCK_AT_1, 1u) == 0x1p-24f);
    /* 1.0 with its exponent bits stuck at 0 -> 0x0000 = 0 */
    assert_true(corrupt(BF_REPR_FP16, 1.0f, 0, BF_FAULT_STUCK_AT_0, 0x7c00u) == 0.0f);
    /* random value 0x3c00 is 1.0 whatever the stored value */
    assert_true(corrupt(BF_REPR_FP16, -123.0f, 0, BF_FAULT_RANDOM_VALUE, 0x3c00u) == 1.0f);
    /* bits above 15 are outside the format: no effect */
    assert_true(corrupt(BF_REPR_FP16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 16) == 1.0f);
    assert_true(corrupt(BF_REPR_FP16, 1.0f, 0, BF_FAULT_RANDOM_VALUE, 0xffff3c00u) == 1.0f);
    /* 0.1 rounds to 0x2e66 = 1638 * 2^-14 = 0.0999755859375 */
    assert_int_equal(bf_repr_encode(BF_REPR_FP16, 0.1f, 0), 0x2e66);
    assert_true(bf_repr_decode(BF_REPR_FP16, 0x2e66, 0) == 0.0999755859375f);
}

/* Every 16-bit pattern decodes, and re-encodes to itself (NaNs aside, whose
 * payload the encoder may quieten): a flip can produce any of them. */
static void fp16_bf16_every_pattern(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = bf_repr_decode(BF_REPR_FP16, h, 0);
        uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
        if (exp == 31 && man) {
            assert_true(isnan(f));
        } else {
            assert_int_equal(bf_repr_encode(BF_REPR_FP16, f, 0), h);
        }
        float g = bf_repr_decode(BF_REPR_BF16, h, 0);
        exp = (h >> 7) & 0xff, man = h & 0x7f;
        if (exp == 255 && man) {
            assert_true(isnan(g));
        } else {
            assert_int_equal(bf_repr_encode(BF_REPR_BF16, g, 0), h);
        }
    }
    /* fp16 0x8001 = -2^-24; 0xfc00 = -inf; 0x03ff = 1023 * 2^-24, the largest subnormal */
    assert_true(bf_repr_decode(BF_REPR_FP16, 0x8001, 0) == -0x1p-24f);
    assert_true(isinf(bf_repr_decode(BF_REPR_FP16, 0xfc00, 0)));
    assert_true(bf_repr_decode(BF_REPR_FP16, 0x03ff, 0) == 1023 * 0x1p-24f);
    /* bf16 0x0001 is fp32 0x00010000 = 2^16 * 2^-149 = 2^-133 (an fp32 subnormal) */
    assert_true(bf_repr_decode(BF_REPR_BF16, 0x0001, 0) == 0x1p-133f);
    assert_true(bf_repr_decode(BF_REPR_BF16, 0xff80, 0) == -INFINITY);
}

static void bf16_by_hand(void **state)
{
    (void)state;
    /* 1.0 = 0x3f80 (the top half of 0x3f800000) */
    assert_int_equal(bf_repr_encode(BF_REPR_BF16, 1.0f, 0), 0x3f80);
    /* bit 14 -> 0x7f80 = +inf */
    float v = corrupt(BF_REPR_BF16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 14);
    assert_true(isinf(v) && v > 0);
    /* bit 7, the exponent's lowest -> 0x3f00 = 0.5 */
    assert_true(corrupt(BF_REPR_BF16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 7) == 0.5f);
    /* bit 6, the top mantissa bit -> 0x3fc0 = 1.5 */
    assert_true(corrupt(BF_REPR_BF16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 6) == 1.5f);
    /* 1 + 2^-8 is halfway between 1 (0x3f80) and 1 + 2^-7 (0x3f81): ties to even */
    assert_int_equal(bf_repr_encode(BF_REPR_BF16, 1.0f + 0x1p-8f, 0), 0x3f80);
    /* bit 16 is outside the format */
    assert_true(corrupt(BF_REPR_BF16, 1.0f, 0, BF_FAULT_BITFLIP, 1u << 16) == 1.0f);
}

static void int8_by_hand(void **state)
{
    (void)state;
    /* scale 0.5: 3.0 -> q = 6 = 0x06 */
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, 3.0f, 0.5f), 0x06);
    /* bit 7 -> 0x86 = -128 + 6 = -122 -> -61.0 */
    assert_true(corrupt(BF_REPR_INT8, 3.0f, 0.5f, BF_FAULT_BITFLIP, 1u << 7) == -61.0f);
    /* stuck-at-1 on bit 0: 6 -> 7 -> 3.5; stuck-at-0 on bit 1: 6 -> 4 -> 2.0 */
    assert_true(corrupt(BF_REPR_INT8, 3.0f, 0.5f, BF_FAULT_STUCK_AT_1, 1u) == 3.5f);
    assert_true(corrupt(BF_REPR_INT8, 3.0f, 0.5f, BF_FAULT_STUCK_AT_0, 2u) == 2.0f);
    /* 0 with bit 7 flipped is 0x80 = -128, outside the encoder's [-127, 127]
     * but reachable by a fault: -128 * 0.5 = -64 */
    assert_true(corrupt(BF_REPR_INT8, 0.0f, 0.5f, BF_FAULT_BITFLIP, 1u << 7) == -64.0f);
    assert_true(bf_repr_decode(BF_REPR_INT8, 0x80, 0.5f) == -64.0f);
    /* 0xff = -1 */
    assert_true(bf_repr_decode(BF_REPR_INT8, 0xff, 2.0f) == -2.0f);
    /* random value 0x7f = 127 */
    assert_true(corrupt(BF_REPR_INT8, -5.0f, 0.5f, BF_FAULT_RANDOM_VALUE, 0x7f) == 63.5f);
    /* bit 8 is outside the format */
    assert_true(corrupt(BF_REPR_INT8, 3.0f, 0.5f, BF_FAULT_BITFLIP, 1u << 8) == 3.0f);
    /* round half to even at scale 1: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, -3.5 -> -4, 0.5 -> 0 */
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, 2.5f, 1.0f), 2);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, 3.5f, 1.0f), 4);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, -2.5f, 1.0f), 0xfe);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, -3.5f, 1.0f), 0xfc);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, 0.5f, 1.0f), 0);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, 2.6f, 1.0f), 3);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, -0.4f, 1.0f), 0);
    /* clamped to [-127, 127] = [0x81, 0x7f]; huge values and inf too */
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, 127.6f, 1.0f), 0x7f);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, -200.0f, 1.0f), 0x81);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, 1e30f, 1.0f), 0x7f);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, -INFINITY, 1.0f), 0x81);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, NAN, 1.0f), 0);
}

static void int8_scales(void **state)
{
    (void)state;
    /* per-tensor: max|w| = 2.54 -> 2.54 / 127 = 0.02 (in float arithmetic) */
    float w[6] = {0.5f, -2.54f, 1.0f, 0.0f, 2.0f, -1.0f}, s[3];
    bf_repr_int8_scales(w, 6, 3, 0, s);
    assert_true(s[0] == 2.54f / 127.0f);
    /* per-channel over axis 0 of a [3, 2] tensor: rows {0.5,-2.54}, {1,0}, {2,-1} */
    bf_repr_int8_scales(w, 6, 3, 1, s);
    assert_true(s[0] == 2.54f / 127.0f);
    assert_true(s[1] == 1.0f / 127.0f);
    assert_true(s[2] == 2.0f / 127.0f);
    /* a zero range gives scale 1 */
    float z[4] = {0, 0, 0, 0};
    bf_repr_int8_scales(z, 4, 2, 1, s);
    assert_true(s[0] == 1.0f && s[1] == 1.0f);
    bf_repr_int8_scales(z, 4, 2, 0, s);
    assert_true(s[0] == 1.0f);
    /* the max element is stored as exactly +-127 */
    bf_repr_int8_scales(w, 6, 3, 0, s);
    assert_int_equal(bf_repr_encode(BF_REPR_INT8, -2.54f, s[0]), 0x81);
}

/* Per-channel quantisation uses each row's own scale: the same value 1.0
 * lands on a different grid in rows with different ranges. */
static void quantize_per_channel(void **state)
{
    (void)state;
    /* a [3, 2] tensor with rows {1, 127}, {1, 12.7}, {1, 3} */
    float w[6] = {1.0f, 127.0f, 1.0f, 12.7f, 1.0f, 3.0f}, s[3], out[6];
    bf_repr_int8_scales(w, 6, 3, 1, s);
    assert_true(s[0] == 1.0f && s[1] == 12.7f / 127.0f && s[2] == 3.0f / 127.0f);
    assert_true(s[0] != s[1] && s[1] != s[2] && s[0] != s[2]);
    bf_qscale q = {s, 3, 2, NULL};
    bf_repr_quantize(BF_REPR_INT8, w, out, 6, &q);
    assert_true(out[0] == 1.0f);                 /* 1 / 1 -> q = 1 */
    assert_true(out[1] == 127.0f);
    assert_true(out[2] == 10.0f * s[1]);         /* 1 / 0.1 -> q = 10 */
    assert_true(out[3] == 127.0f * s[1]);
    assert_true(out[4] == 42.0f * s[2]);         /* 1 / (3/127) = 42.33 -> q = 42 */
    assert_true(out[5] == 127.0f * s[2]);
    /* per-tensor instead: one scale 127 / 127 = 1, a grid of integers */
    float st;
    bf_repr_int8_scales(w, 6, 3, 0, &st);
    assert_true(st == 1.0f);
    bf_qscale qt = {&st, 1, 6, NULL};
    bf_repr_quantize(BF_REPR_INT8, w, out, 6, &qt);
    assert_true(out[2] == 1.0f && out[3] == 13.0f && out[4] == 1.0f && out[5] == 3.0f);
}

/* The golden model is a fixed point: quantising it again changes nothing.
 * fp32 quantisation is the identity, bit for bit; dst may alias src. */
static void quantize_idempotent(void **state)
{
    (void)state;
    enum { N = 4096 };
    static float x[N], a[N], b[N];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)ldexp((double)((int64_t)(s >> 40) - (1 << 23)), (int)((s >> 16) % 41) - 40);
    }
    for (int r = 0; r < 4; r++) {
        float scale[8];
        bf_repr_int8_scales(x, N, 8, 1, scale);
        bf_qscale q = {scale, 8, N / 8, NULL};
        bf_repr_quantize((bf_repr)r, x, a, N, &q);
        bf_repr_quantize((bf_repr)r, a, b, N, &q);
        assert_memory_equal(a, b, sizeof a);
        if (r == BF_REPR_FP32) assert_memory_equal(a, x, sizeof a);
        memcpy(b, x, sizeof b);
        bf_repr_quantize((bf_repr)r, b, b, N, &q);    /* in place */
        assert_memory_equal(a, b, sizeof a);
    }
    /* a NaN passes through fp32 untouched */
    float nan_in = bits_f32(0x7fc01234u), nan_out;
    bf_repr_quantize(BF_REPR_FP32, &nan_in, &nan_out, 1, NULL);
    assert_int_equal(f32_bits(nan_out), 0x7fc01234u);
}

/* The tables: pseudo-random fp32 inputs from an LCG that the C below and
 * the Python repeat exactly, each with a bit to flip. Per row: input bits,
 * bit, stored pattern, golden (quantised) value's fp32 bits, and the fp32
 * bits of the value after flipping the bit. Generated by this script
 * (python3 with numpy and torch; its output pasted below as is):

   import numpy as np, torch
   M = 2**64 - 1
   def lcg(s):
       return (s * 6364136223846793005 + 1442695040888963407) & M
   def draws(seed, n, bits, e_fixed=None):
       s = seed; out = []
       for _ in range(n):
           s = lcg(s); m = (s >> 40) - (1 << 23)
           e = e_fixed if e_fixed is not None else (s >> 16) % 41 - 40
           v = np.float32(m * 2.0 ** e)
           s = lcg(s); b = (s >> 32) % bits
           out.append((v, b))
       return out
   f32bits = lambda f: int(np.array([f], np.float32).view(np.uint32)[0])
   rows = {}
   # fp32
   rows['fp32'] = [(f32bits(v), b, f32bits(v), f32bits(v),
                    f32bits(np.array([f32bits(v) ^ (1 << b)], np.uint32).view(np.float32)[0]))
                   for v, b in draws(1, 16, 32)]
   # fp16
   r = []
   for v, b in draws(2, 16, 16):
       h = int(np.array([v], np.float32).astype(np.float16).view(np.uint16)[0])
       q = np.array([h], np.uint16).view(np.float16).astype(np.float32)[0]
       fl = np.array([h ^ (1 << b)], np.uint16).view(np.float16).astype(np.float32)[0]
       r.append((f32bits(v), b, h, f32bits(q), f32bits(fl)))
   rows['fp16'] = r
   # bf16: round-to-nearest-even on the fp32 bits, cross-checked against torch
   r = []
   for v, b in draws(3, 16, 16):
       u = f32bits(v)
       h = ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff
       assert h == int(torch.tensor([float(v)], dtype=torch.float32).to(torch.bfloat16).view(torch.int16)[0]) & 0xffff
       q = np.array([h << 16], np.uint32).view(np.float32)[0]
       fl = np.array([(h ^ (1 << b)) << 16], np.uint32).view(np.float32)[0]
       r.append((u, b, h, f32bits(q), f32bits(fl)))
   rows['bf16'] = r
   # int8, per-tensor scale max|w| / 127 in float32
   d = draws(4, 16, 8, e_fixed=-20)
   w = np.array([v for v, _ in d], np.float32)
   scale = np.float32(np.abs(w).max()) / np.float32(127)
   q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
   r = []
   for i, (v, b) in enumerate(d):
       p = int(q.view(np.uint8)[i])
       dq = np.float32(np.float32(q[i]) * scale)
       fl = np.array([p ^ (1 << b)], np.uint8).view(np.int8).astype(np.float32)[0] * scale
       r.append((f32bits(v), b, p, f32bits(dq), f32bits(np.float32(fl))))
   rows['int8'] = r
   print("#define INT8_REF_SCALE 0x%08xu" % f32bits(scale))
   for k, rr in rows.items():
       print("static const struct ref_row ref_%s[] = {" % k)
       for row in rr:
           print("    {0x%08x, %2d, 0x%08x, 0x%08x, 0x%08x}," % row)
       print("};")
 */
struct ref_row {
    uint32_t in;
    int bit;
    uint32_t stored, golden, flipped;
};

#define INT8_REF_SCALE 0x3d7c3e57u
static const struct ref_row ref_fp32[] = {
    {0xbf9d4488, 19, 0xbf9d4488, 0xbf9d4488, 0xbf954488},
    {0x3817eb84, 13, 0x3817eb84, 0x3817eb84, 0x3817cb84},
    {0x3b9744ec,  6, 0x3b9744ec, 0x3b9744ec, 0x3b9744ac},
    {0x37dceb50, 13, 0x37dceb50, 0x37dceb50, 0x37dccb50},
    {0x44adf094, 21, 0x44adf094, 0x44adf094, 0x448df094},
    {0x477baa0c,  4, 0x477baa0c, 0x477baa0c, 0x477baa1c},
    {0x42913ef4,  0, 0x42913ef4, 0x42913ef4, 0x42913ef5},
    {0xbe03494e, 25, 0xbe03494e, 0xbe03494e, 0xbc03494e},
    {0xc29a8cb0, 31, 0xc29a8cb0, 0xc29a8cb0, 0x429a8cb0},
    {0x457b26c8, 10, 0x457b26c8, 0x457b26c8, 0x457b22c8},
    {0x48bb54e4, 27, 0x48bb54e4, 0x48bb54e4, 0x40bb54e4},
    {0x3fcbc970,  5, 0x3fcbc970, 0x3fcbc970, 0x3fcbc950},
    {0xb9e706e0,  1, 0xb9e706e0, 0xb9e706e0, 0xb9e706e2},
    {0x39b7b0f0,  1, 0x39b7b0f0, 0x39b7b0f0, 0x39b7b0f2},
    {0x46edf494,  1, 0x46edf494, 0x46edf494, 0x46edf496},
    {0xc1ddfcc4,  4, 0xc1ddfcc4, 0xc1ddfcc4, 0xc1ddfcd4},
};
static const struct ref_row ref_fp16[] = {
    {0x488952c6,  5, 0x00007c00, 0x7f800000, 0x7f840000},
    {0x4443fd2c,  0, 0x00006220, 0x44440000, 0x44442000},
    {0xc795e0c0,  6, 0x0000fc00, 0xff800000, 0xff880000},
    {0xc5714654, 12, 0x0000eb8a, 0xc5714000, 0xc7714000},
    {0xc61b4f90,  4, 0x0000f0da, 0xc61b4000, 0xc6194000},
    {0x44b769ca,  5, 0x000065bb, 0x44b76000, 0x44b36000},
    {0x42196960,  5, 0x000050cb, 0x42196000, 0x421d6000},
    {0x3697cf00,  5, 0x0000004c, 0x36980000, 0x36d80000},
    {0xca28175c, 11, 0x0000fc00, 0xff800000, 0xc6800000},
    {0xb7ef6da0, 14, 0x000081df, 0xb7ef8000, 0xc03be000},
    {0xbde74ba2, 12, 0x0000af3a, 0xbde74000, 0xbfe74000},
    {0xb90a9596,  5, 0x00008855, 0xb90aa000, 0xb90ea000},
    {0xc4d75e8c, 12, 0x0000e6bb, 0xc4d76000, 0xc6d76000},
    {0xb9fe7d22,  4, 0x00008ff4, 0xb9fe8000, 0xb9fc8000},
    {0x43b52508,  6, 0x00005da9, 0x43b52000, 0x43bd2000},
    {0xc5e6b9b0,  8, 0x0000ef36, 0xc5e6c000, 0xc5c6c000},
};
static const struct ref_row ref_bf16[] = {
    {0xb7460950,  7, 0x0000b746, 0xb7460000, 0xb7c60000},
    {0x3bf00ed0,  4, 0x00003bf0, 0x3bf00000, 0x3be00000},
    {0x4373e650,  7, 0x00004374, 0x43740000, 0x43f40000},
    {0x3eeaf800, 11, 0x00003eeb, 0x3eeb0000, 0x36eb0000},
    {0x36db8270,  3, 0x000036dc, 0x36dc0000, 0x36d40000},
    {0x4170fe8c,  5, 0x00004171, 0x41710000, 0x41510000},
    {0xc57c2390, 11, 0x0000c57c, 0xc57c0000, 0xcd7c0000},
    {0x454f30ce,  2, 0x0000454f, 0x454f0000, 0x454b0000},
    {0xbd01742e,  7, 0x0000bd01, 0xbd010000, 0xbd810000},
    {0xc16d27a0,  1, 0x0000c16d, 0xc16d0000, 0xc16f0000},
    {0xb789ec2a, 13, 0x0000b78a, 0xb78a0000, 0x978a0000},
    {0x36d15ba6,  5, 0x000036d1, 0x36d10000, 0x36f10000},
    {0xbb9d9cd2,  6, 0x0000bb9e, 0xbb9e0000, 0xbbde0000},
    {0xbcab99f8,  7, 0x0000bcac, 0xbcac0000, 0xbc2c0000},
    {0x4078aaf4, 12, 0x00004079, 0x40790000, 0x50790000},
    {0xc9ef7698, 12, 0x0000c9ef, 0xc9ef0000, 0xd9ef0000},
};
static const struct ref_row ref_int8[] = {
    {0xbf2b2b40,  1, 0x000000f5, 0xbf2d6adc, 0xbf0de311},
    {0x408e103a,  7, 0x00000048, 0x408de311, 0xc05cb68c},
    {0xc0f02c18,  7, 0x00000086, 0xc0f06b6b, 0x3ebd2ec1},
    {0x40f4f234,  3, 0x0000007c, 0x40f45c64, 0x40e4987f},
    {0x40d2302c,  1, 0x0000006b, 0x40d2dc1d, 0x40ceeb23},
    {0xc0d56cb2,  5, 0x00000094, 0xc0d4d499, 0xc095c504},
    {0x40fa45da,  0, 0x0000007f, 0x40fa45da, 0x40f84d5e},
    {0xc0879224,  7, 0x000000bb, 0xc087f99b, 0x40688978},
    {0xc0aedcae,  3, 0x000000a7, 0xc0af6358, 0xc09f9f73},
    {0x40b423ba,  4, 0x0000005b, 0x40b35452, 0x4093cc87},
    {0xbfb232c0,  7, 0x000000e9, 0xbfb54ccf, 0x40ceeb23},
    {0x3fb53390,  5, 0x00000017, 0x3fb54ccf, 0x4058c593},
    {0xc0cf8a60,  1, 0x00000097, 0xc0ceeb23, 0xc0d2dc1d},
    {0x40a8b024,  2, 0x00000056, 0x40a979e2, 0x40a197f0},
    {0x40070bdc,  1, 0x00000022, 0x4006011e, 0x3ffc3e57},
    {0xc0783384,  0, 0x000000c1, 0xc0784d5e, 0xc07c3e57},
};

#define REF_N 16

static uint64_t lcg(uint64_t s) { return s * 6364136223846793005u + 1442695040888963407u; }

/* The script's draws(): value m * 2^e with m a 24-bit signed integer and e in
 * [-40, 0] (or fixed), exact in fp32; then a bit index. */
static void draw(uint64_t *s, int bits, int e_fixed, float *v, int *bit)
{
    *s = lcg(*s);
    int64_t m = (int64_t)(*s >> 40) - (1 << 23);
    int e = e_fixed ? e_fixed : (int)((*s >> 16) % 41) - 40;
    *v = (float)ldexp((double)m, e);
    *s = lcg(*s);
    *bit = (int)((*s >> 32) % (uint64_t)bits);
}

static void check_float_bits(float got, uint32_t want)
{
    if (isnan(bits_f32(want))) {
        assert_true(isnan(got));   /* NaN payloads may be quietened on the way */
    } else {
        assert_int_equal(f32_bits(got), want);
    }
}

static void check_table(bf_repr repr, uint64_t seed, const struct ref_row *rows, int e_fixed, float scale)
{
    uint64_t s = seed;
    float in[REF_N], golden[REF_N];
    for (int i = 0; i < REF_N; i++) {
        int bit;
        draw(&s, bf_repr_bits(repr), e_fixed, &in[i], &bit);
        /* the C draws match the Python draws */
        assert_int_equal(f32_bits(in[i]), rows[i].in);
        assert_int_equal(bit, rows[i].bit);
        assert_int_equal(bf_repr_encode(repr, in[i], scale), rows[i].stored);
        check_float_bits(bf_repr_decode(repr, rows[i].stored, scale), rows[i].golden);
        check_float_bits(bf_repr_corrupt(repr, in[i], scale, BF_FAULT_BITFLIP, 1u << bit), rows[i].flipped);
    }
    bf_qscale q = {&scale, 1, REF_N, NULL};
    bf_repr_quantize(repr, in, golden, REF_N, &q);
    for (int i = 0; i < REF_N; i++) check_float_bits(golden[i], rows[i].golden);
}

static void table_fp32(void **state) { (void)state; check_table(BF_REPR_FP32, 1, ref_fp32, 0, 1.0f); }
static void table_fp16(void **state) { (void)state; check_table(BF_REPR_FP16, 2, ref_fp16, 0, 1.0f); }
static void table_bf16(void **state) { (void)state; check_table(BF_REPR_BF16, 3, ref_bf16, 0, 1.0f); }

static void table_int8(void **state)
{
    (void)state;
    uint64_t s = 4;
    float w[REF_N], scale;
    int bit;
    for (int i = 0; i < REF_N; i++) draw(&s, 8, -20, &w[i], &bit);
    bf_repr_int8_scales(w, REF_N, REF_N, 0, &scale);
    assert_int_equal(f32_bits(scale), INT8_REF_SCALE);
    check_table(BF_REPR_INT8, 4, ref_int8, -20, scale);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names),
        cmocka_unit_test(fp32_by_hand),
        cmocka_unit_test(fp16_by_hand),
        cmocka_unit_test(fp16_bf16_every_pattern),
        cmocka_unit_test(bf16_by_hand),
        cmocka_unit_test(int8_by_hand),
        cmocka_unit_test(int8_scales),
        cmocka_unit_test(quantize_per_channel),
        cmocka_unit_test(quantize_idempotent),
        cmocka_unit_test(table_fp32),
        cmocka_unit_test(table_fp16),
        cmocka_unit_test(table_bf16),
        cmocka_unit_test(table_int8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
