/* st_build.h: a safetensors file in memory, for hostile eval sets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>
#include <setjmp.h>
#include <cmocka.h>

#include "bitflip/dataset.h"
#include "bitflip/eval.h"
#include "st_build.h"

uint8_t *th_st_build(const th_st_tensor *t, int n, size_t *len)
{
    char header[2048];
    size_t off = 0, data = 0;
    off += (size_t)snprintf(header + off, sizeof header - off, "{");
    for (int i = 0; i < n; i++) {
        off += (size_t)snprintf(header + off, sizeof header - off, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                                t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            off += (size_t)snprintf(header + off, sizeof header - off, "%s%lld", d ? "," : "", (long long)t[i].dims[d]);
        off += (size_t)snprintf(header + off, sizeof header - off, "],\"data_offsets\":[%zu,%zu]}", data, data + t[i].bytes);
        data += t[i].bytes;
    }
    off += (size_t)snprintf(header + off, sizeof header - off, "}");
    while (off % 8) header[off++] = ' ';
    uint8_t *buf = malloc(8 + off + data + 1);
    assert_non_null(buf);
    uint64_t h = off;
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(h >> (8 * b));
    memcpy(buf + 8, header, off);
    size_t at = 8 + off;
    for (int i = 0; i < n; i++) {
        if (t[i].bytes) memcpy(buf + at, t[i].data, t[i].bytes);
        at += t[i].bytes;
    }
    *len = at;
    return buf;
}

int th_st_outcome(const bf_model *m, const th_st_tensor *t, int n, bf_status want, const char *needle)
{
    size_t len;
    uint8_t *buf = th_st_build(t, n, &len);
    bf_dataset *ds = NULL;
    bf_evaluator *ev = NULL;
    bf_error err = {0};
    bf_status st = bf_dataset_load_buffer(buf, len, "hostile", &ds, &err);
    if (st == BF_OK) st = bf_evaluator_create(m, ds, NULL, &ev, &err);
    if (st != want || (needle && !strstr(err.msg, needle)))
        fail_msg("wanted status %d with '%s', got %d: %s", want, needle ? needle : "", st, err.msg);
    if (st != BF_OK) printf("refused: %s\n", err.msg);
    int task = ev ? (int)bf_evaluator_task(ev) : -1;
    bf_evaluator_free(ev);
    bf_dataset_free(ds);
    free(buf);
    return task;
}
