/* bitflip — tensors: a dtype, a shape and a buffer.
 *
 * The engine computes in fp32; int64 and int32 carry indices and shapes; bool
 * (one byte per element) carries masks. F16, BF16 and U8 appear only in eval
 * sets and are converted when rows are copied into a plan's inputs. */
#ifndef BITFLIP_TENSOR_H
#define BITFLIP_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BF_MAX_DIMS 8

typedef enum bf_dtype {
    BF_DTYPE_INVALID = 0,
    BF_F32,
    BF_I64,
    BF_I32,
    BF_BOOL,
    BF_F16,
    BF_BF16,
    BF_U8,
    BF_I8
} bf_dtype;

typedef struct bf_tensor {
    const char *name;        /* not owned; may be NULL */
    bf_dtype dtype;
    int ndim;                /* 0 for a scalar */
    int64_t dims[BF_MAX_DIMS];
    void *data;              /* not owned by the struct: see who created it */
} bf_tensor;

size_t bf_dtype_size(bf_dtype dtype);
const char *bf_dtype_name(bf_dtype dtype);      /* "float32", "int64", ... */

/* Number of elements (1 for a scalar). Callers have checked shapes; the
 * loaders guarantee the product fits in int64. */
int64_t bf_tensor_numel(const bf_tensor *t);
size_t bf_tensor_nbytes(const bf_tensor *t);

/* Writes "[4, 13]" into buf (always NUL-terminated); returns buf. */
char *bf_shape_str(const int64_t *dims, int ndim, char *buf, size_t len);
/* "4.0 GiB", "512.0 MiB", "12.3 KiB", "100 B"; returns buf. */
char *bf_bytes_str(uint64_t bytes, char *buf, size_t len);

/* Element conversions for storage formats the engine reads. */
float bf_f16_to_f32(uint16_t h);
uint16_t bf_f32_to_f16(float f);       /* round to nearest even */
float bf_bf16_to_f32(uint16_t h);
uint16_t bf_f32_to_bf16(float f);      /* round to nearest even */

/* Copies `count` elements from src (dtype sdt) to dst (dtype ddt), converting.
 * Float to integer truncates toward zero, as ONNX Cast does. Fails with
 * BF_EUNSUPPORTED for a pair it cannot convert. */
bf_status bf_convert(void *dst, bf_dtype ddt, const void *src, bf_dtype sdt, size_t count,
                     bf_error *err);

#ifdef __cplusplus
}
#endif
#endif
