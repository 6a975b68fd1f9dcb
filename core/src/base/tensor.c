#include "bitflip/tensor.h"

#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

size_t bf_dtype_size(bf_dtype dtype)
{
    switch (dtype) {
    case BF_F32: case BF_I32: return 4;
    case BF_I64: return 8;
    case BF_F16: case BF_BF16: return 2;
    case BF_BOOL: case BF_U8: case BF_I8: return 1;
    case BF_DTYPE_INVALID: break;
    }
    return 0;
}

const char *bf_dtype_name(bf_dtype dtype)
{
    switch (dtype) {
    case BF_F32: return "float32";
    case BF_I64: return "int64";
    case BF_I32: return "int32";
    case BF_BOOL: return "bool";
    case BF_F16: return "float16";
    case BF_BF16: return "bfloat16";
    case BF_U8: return "uint8";
    case BF_I8: return "int8";
    case BF_DTYPE_INVALID: break;
    }
    return "invalid";
}

int64_t bf_tensor_numel(const bf_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

size_t bf_tensor_nbytes(const bf_tensor *t)
{
    return (size_t)bf_tensor_numel(t) * bf_dtype_size(t->dtype);
}

char *bf_shape_str(const int64_t *dims, int ndim, char *buf, size_t len)
{
    size_t off = 0;
    if (len == 0) return buf;
    buf[0] = '\0';
    off += (size_t)snprintf(buf + off, len - off, "[");
    for (int i = 0; i < ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? ", %lld" : "%lld", (long long)dims[i]);
    if (off < len) snprintf(buf + off, len - off, "]");
    return buf;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float bf_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24, exact in fp32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t bf_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
    uint32_t exp = (u >> 23) & 0xff, man = u & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        /* subnormal: shift the full mantissa (with implicit 1) into place, round half even */
        uint32_t m = man | 0x800000;
        int shift = 14 - e;
        uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1), r = m >> shift;
        if (rest > half || (rest == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) r++;   /* may carry into exp: correct */
    return (uint16_t)(sign | r);
}

float bf_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t bf_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffff)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* Reads element i of any dtype as double (exact for every dtype but int64
 * beyond 2^53, which only reaches here for index-like data). */
static double get_f64(const void *p, bf_dtype dt, size_t i)
{
    switch (dt) {
    case BF_F32: return ((const float *)p)[i];
    case BF_I64: return (double)((const int64_t *)p)[i];
    case BF_I32: return ((const int32_t *)p)[i];
    case BF_BOOL: case BF_U8: return ((const uint8_t *)p)[i];
    case BF_I8: return ((const int8_t *)p)[i];
    case BF_F16: return bf_f16_to_f32(((const uint16_t *)p)[i]);
    case BF_BF16: return bf_bf16_to_f32(((const uint16_t *)p)[i]);
    case BF_DTYPE_INVALID: break;
    }
    return 0;
}

static int is_int(bf_dtype dt) { return dt == BF_I64 || dt == BF_I32 || dt == BF_U8 || dt == BF_I8; }

bf_status bf_convert(void *dst, bf_dtype ddt, const void *src, bf_dtype sdt, size_t count,
                     bf_error *err)
{
    if (!bf_dtype_size(ddt) || !bf_dtype_size(sdt))
        return bf_error_set(err, BF_EUNSUPPORTED, "cannot convert %s to %s", bf_dtype_name(sdt),
                            bf_dtype_name(ddt));
    if (ddt == sdt) { memcpy(dst, src, count * bf_dtype_size(ddt)); return BF_OK; }
    /* int64 to int64-like stays in integers so large indices survive */
    if (is_int(sdt) && (ddt == BF_I64 || ddt == BF_I32)) {
        for (size_t i = 0; i < count; i++) {
            int64_t v = sdt == BF_I64 ? ((const int64_t *)src)[i] : (int64_t)get_f64(src, sdt, i);
            if (ddt == BF_I64) ((int64_t *)dst)[i] = v; else ((int32_t *)dst)[i] = (int32_t)v;
        }
        return BF_OK;
    }
    for (size_t i = 0; i < count; i++) {
        double v = get_f64(src, sdt, i);
        switch (ddt) {
        case BF_F32: ((float *)dst)[i] = (float)v; break;
        case BF_F16: ((uint16_t *)dst)[i] = bf_f32_to_f16((float)v); break;
        case BF_BF16: ((uint16_t *)dst)[i] = bf_f32_to_bf16((float)v); break;
        case BF_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
        /* float -> int: truncation toward zero; NaN and out-of-range are
         * undefined in ONNX, we saturate to stay free of C undefined behaviour */
        case BF_I64: ((int64_t *)dst)[i] = isnan(v) ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v; break;
        case BF_I32: ((int32_t *)dst)[i] = isnan(v) ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v; break;
        case BF_U8: ((uint8_t *)dst)[i] = isnan(v) || v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v; break;
        case BF_I8: ((int8_t *)dst)[i] = isnan(v) ? 0 : v >= 127 ? 127 : v <= -128 ? -128 : (int8_t)v; break;
        case BF_DTYPE_INVALID: break;
        }
    }
    return BF_OK;
}

char *bf_bytes_str(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) { v /= 1024; u++; }
    if (u == 0) snprintf(buf, len, "%" PRIu64 " B", bytes);
    else snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}
