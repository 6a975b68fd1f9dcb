/* The large raw_data fields of a model's initializers, cut out of the
 * protobuf before protobuf-c unpacks it. protobuf-c copies every bytes field
 * onto the heap, so unpacking a 645 MiB model holds the file plus a second
 * copy of every weight, before our conversion makes a third. Here the
 * wire format is walked by hand (protobuf-c has no lazy or zero-copy bytes
 * field, hence a hand-written walk): the result is the model without those
 * fields (kilobytes) plus where each one's bytes lie in the original buffer,
 * which the loader then converts tensor by tensor straight into the weights
 * arena (base/warena.h).
 *
 * Only ModelProto.graph (7) -> GraphProto.initializer (5) ->
 * TensorProto.raw_data (9) is cut, and only when at least STRIP_MIN bytes
 * long (low: the fuzzer's small inputs then take this path too): what stays
 * is unpacked by protobuf-c exactly as before. Anything this
 * walk does not understand (a truncated length, a bad tag) makes it give up,
 * and the loader unpacks the original buffer, which reports the problem as
 * it always has (onnx_wire.c). Every length is checked against the bytes
 * that remain before it is used; ranges cannot overlap, since each is the
 * body of a field the walk steps over once. */
#include <string.h>

#include "base/alloc.h"
#include "base/grow.h"
#include "model/onnx_load.h"

#define STRIP_MIN 64

typedef struct walker {
    const uint8_t *in;
    uint8_t *out;
    size_t n_out;
    bf__raw_range *ranges;
    size_t n_ranges, cap_ranges;
    int oom;
} walker;

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

static void emit(walker *w, size_t from, size_t to)
{
    memcpy(w->out + w->n_out, w->in + from, to - from);
    w->n_out += to - from;
}

/* depth 0: ModelProto, 1: GraphProto, 2: TensorProto (an initializer). Copies
 * [start, end) to the output, cutting what the file comment says; 0 when the
 * wire format is broken. The output never outgrows the input: a cut field
 * loses its bytes, and a shortened length needs no more varint bytes. */
static int walk(walker *w, size_t start, size_t end, int depth, bf__raw_range *tensor)
{
    size_t pos = start;
    while (pos < end) {
        size_t at = pos;
        uint64_t key, v;
        if (!bf__pb_varint(w->in, end, &pos, &key)) return 0;
        uint64_t field = key >> 3, wt = key & 7;
        if (field == 0) return 0;
        switch (wt) {
        case 0:
            if (!bf__pb_varint(w->in, end, &pos, &v)) return 0;
            emit(w, at, pos);
            break;
        case 1: case 5: {
            size_t sz = wt == 1 ? 8 : 4;
            if (end - pos < sz) return 0;
            pos += sz;
            emit(w, at, pos);
            break;
        }
        case 2: {
            if (!bf__pb_varint(w->in, end, &pos, &v) || v > end - pos) return 0;
            size_t body = pos, body_end = pos + (size_t)v;
            pos = body_end;
            if (depth == 2 && field == 9) {
                /* protobuf keeps the last of repeated scalar fields */
                tensor->off = body;
                tensor->len = (size_t)v;
                tensor->cut = v >= STRIP_MIN;
                if (tensor->cut) break;
                emit(w, at, body_end);
                break;
            }
            int into = (depth == 0 && field == 7) || (depth == 1 && field == 5);
            if (!into) { emit(w, at, body_end); break; }
            /* the key, then the body (shortened) after room for its length:
             * a varint of at most 10 bytes, closed up once it is known */
            size_t key_at = w->n_out, len_at = key_at + put_varint(w->out + key_at, key), body_at = len_at + 10;
            w->n_out = body_at;
            bf__raw_range r = {0};
            if (!walk(w, body, body_end, depth + 1, &r)) return 0;
            if (depth == 1) {
                if (!bf__grow(&w->ranges, &w->cap_ranges, w->n_ranges + 1, sizeof *w->ranges, 64)) {
                    w->oom = 1;
                    return 0;
                }
                w->ranges[w->n_ranges++] = r;
            }
            size_t inner = w->n_out - body_at;
            uint8_t lv[10];
            size_t ll = put_varint(lv, inner);
            memcpy(w->out + len_at, lv, ll);
            memmove(w->out + len_at + ll, w->out + body_at, inner);
            w->n_out = len_at + ll + inner;
            break;
        }
        default:
            return 0;
        }
    }
    return 1;
}

bf_status bf__onnx_strip(const uint8_t *buf, size_t len, bf__stripped *out, bf_error *err)
{
    memset(out, 0, sizeof *out);
    walker w = {.in = buf};
    /* The output is never longer than the input, though a message's body is
     * written 10 bytes after its key before its length is closed up, at most
     * 9 bytes ahead of the input per level (two levels): one buffer of the
     * input's size and some slack, of which only the kept bytes are touched
     * (and so resident). */
    w.out = bf__malloc(len + 64);
    if (!w.out) return bf_error_set(err, BF_ENOMEM, "out of memory reading the model (%zu bytes)", len);
    if (!walk(&w, 0, len, 0, NULL)) {
        bf__free(w.out);
        bf__free(w.ranges);
        if (w.oom) return bf_error_set(err, BF_ENOMEM, "out of memory reading the model's initializers");
        return BF_OK;   /* broken: out->buf stays NULL, the caller unpacks the original */
    }
    out->buf = w.out;
    out->len = w.n_out;
    out->ranges = w.ranges;
    out->n_ranges = w.n_ranges;
    return BF_OK;
}

void bf__onnx_stripped_free(bf__stripped *s)
{
    bf__free(s->buf);
    bf__free(s->ranges);
    memset(s, 0, sizeof *s);
}
