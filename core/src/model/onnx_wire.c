/* A diagnostic walk over protobuf wire format, used once a buffer is known to
 * be broken (by the door check, onnx_limits.c, or by protobuf-c), to tell the
 * user where. Its recursion is two levels deep at most. It decodes
 * nothing: it follows tags and lengths, recursing into the fields of
 * ModelProto.graph (7) and GraphProto.node / initializer (1, 5). Its
 * varint reader is the one every wire-level reader in model/ uses. */
#include <stdio.h>
#include <string.h>

#include "model/onnx_load.h"

int bf__pb_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= len) return 0;
        uint8_t b = buf[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *v = r; return 1; }
    }
    return 0;
}

static const char *field_name(int depth, uint64_t field)
{
    if (depth == 0) {
        switch (field) {
        case 1: return "ModelProto.ir_version";
        case 2: return "ModelProto.producer_name";
        case 7: return "ModelProto.graph";
        case 8: return "ModelProto.opset_import";
        default: return "a ModelProto field";
        }
    }
    if (depth >= 2) return "a field";
    switch (field) {
    case 1: return "GraphProto.node";
    case 5: return "GraphProto.initializer";
    case 11: return "GraphProto.input";
    case 12: return "GraphProto.output";
    default: return "a GraphProto field";
    }
}

/* Returns 1 and writes a description if a problem is found in [start, end). */
static int walk(const uint8_t *buf, size_t start, size_t end, int depth, char *out, size_t n)
{
    size_t pos = start;
    long count[32] = {0};
    while (pos < end) {
        size_t at = pos;
        uint64_t key, v;
        if (!bf__pb_varint(buf, end, &pos, &key)) {
            snprintf(out, n, "byte offset %zu: a field tag is cut short", at);
            return 1;
        }
        uint64_t field = key >> 3, wt = key & 7;
        if (field == 0) {
            snprintf(out, n, "byte offset %zu: invalid field number 0 (not protobuf, or corrupt)", at);
            return 1;
        }
        switch (wt) {
        case 0:
            if (!bf__pb_varint(buf, end, &pos, &v)) {
                snprintf(out, n, "byte offset %zu: %s is cut short", at, field_name(depth, field));
                return 1;
            }
            break;
        case 1: case 5: {
            size_t w = wt == 1 ? 8 : 4;
            if (end - pos < w) {
                snprintf(out, n, "byte offset %zu: %s needs %zu bytes, %zu remain", at,
                         field_name(depth, field), w, end - pos);
                return 1;
            }
            pos += w;
            break;
        }
        case 2:
            if (!bf__pb_varint(buf, end, &pos, &v)) {
                snprintf(out, n, "byte offset %zu: the length of %s is cut short", at, field_name(depth, field));
                return 1;
            }
            if (v > end - pos) {
                snprintf(out, n, "byte offset %zu: %s declares %llu bytes but only %zu remain (truncated file?)",
                         at, field_name(depth, field), (unsigned long long)v, end - pos);
                return 1;
            }
            if ((depth == 0 && field == 7) || (depth == 1 && (field == 1 || field == 5))) {
                char inner[256];
                if (walk(buf, pos, pos + (size_t)v, depth + 1, inner, sizeof inner)) {
                    if (depth == 1)
                        snprintf(out, n, "in %s #%ld: %s", field_name(depth, field),
                                 field < 32 ? count[field] : 0L, inner);
                    else
                        snprintf(out, n, "%s", inner);
                    return 1;
                }
            }
            pos += (size_t)v;
            break;
        default:
            snprintf(out, n, "byte offset %zu: wire type %llu is not valid protobuf (corrupt data)", at,
                     (unsigned long long)wt);
            return 1;
        }
        if (field < 32) count[field]++;
    }
    return 0;
}

void bf__onnx_diagnose(const uint8_t *buf, size_t len, char *out, size_t out_len)
{
    if (len == 0) { snprintf(out, out_len, "the file is empty"); return; }
    if (!walk(buf, 0, len, 0, out, out_len))
        snprintf(out, out_len, "the wire structure is intact, but a field holds a value of the wrong "
                                "kind (corrupt data)");
}
