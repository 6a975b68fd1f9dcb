/* bitflip — the one error convention of the project.
 *
 * Every fallible function returns a bf_status: 0 on success, a negative code on
 * failure. It may also take a `bf_error *` (NULL allowed) that receives a human
 * message naming the thing at fault: the ONNX node and op, the tensor, the file
 * offset. Nothing in core prints or exits; callers decide what to show. */
#ifndef BITFLIP_ERROR_H
#define BITFLIP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_status {
    BF_OK = 0,
    BF_ENOMEM = -1,        /* an allocation failed */
    BF_EINVAL = -2,        /* a caller passed an invalid argument */
    BF_EIO = -3,           /* reading or writing a file failed */
    BF_EFORMAT = -4,       /* a file is truncated, corrupt or not what it claims */
    BF_EUNSUPPORTED = -5,  /* valid, but outside what bitflip implements */
    BF_ESHAPE = -6,        /* tensor shapes or types do not fit together */
    BF_ERANGE = -7,        /* an index or value is out of range */
    BF_ENOTFOUND = -8,     /* a named thing does not exist */
    BF_ECANCELED = -9,     /* the caller asked to stop */
    BF_EDETECTED = -10,    /* an error detector (ABFT, a range check) fired: the pass's outputs are not to be used */
    BF_ELIMIT = -11        /* past a configured limit (bitflip/limits.h, a plan's memory budget): refused before the work or the allocation */
} bf_status;

#define BF_ERROR_MSG_MAX 512

typedef struct bf_error {
    bf_status status;
    char msg[BF_ERROR_MSG_MAX];
} bf_error;

/* A short, static description of a status code ("out of memory", ...). */
const char *bf_strerror(bf_status status);

/* Records `status` and a printf-style message in `err` (if not NULL) and returns
 * `status`, so that `return bf_error_set(err, BF_EINVAL, "...")` reads naturally. */
bf_status bf_error_set(bf_error *err, bf_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prepends "prefix: " to the message already in `err`; returns err->status (or
 * BF_EINVAL if err is NULL). Used to add context as an error travels up. */
bf_status bf_error_prefix(bf_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
