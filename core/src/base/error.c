#include "bitflip/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *bf_strerror(bf_status status)
{
    switch (status) {
    case BF_OK: return "ok";
    case BF_ENOMEM: return "out of memory";
    case BF_EINVAL: return "invalid argument";
    case BF_EIO: return "input/output error";
    case BF_EFORMAT: return "malformed file";
    case BF_EUNSUPPORTED: return "not supported";
    case BF_ESHAPE: return "shape mismatch";
    case BF_ERANGE: return "out of range";
    case BF_ENOTFOUND: return "not found";
    case BF_ECANCELED: return "canceled";
    case BF_EDETECTED: return "error detected";
    case BF_ELIMIT: return "over a limit";
    }
    return "unknown error";
}

bf_status bf_error_set(bf_error *err, bf_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

bf_status bf_error_prefix(bf_error *err, const char *fmt, ...)
{
    if (!err) return BF_EINVAL;
    char prefix[BF_ERROR_MSG_MAX], old[BF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* both halves are bounded so the sum fits; a long message loses its tail */
    snprintf(err->msg, sizeof err->msg, "%.200s: %.300s", prefix, old);
    return err->status;
}
