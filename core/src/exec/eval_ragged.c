/* Per-sample outputs of one-sample graphs (eval_ragged.h). A detector's
 * outputs change size from image to image, so a pass cannot write them at
 * fixed rows as batched outputs are: each sample's value goes to a slot of
 * its own (threads take samples in any order), and the pass's result lays
 * them end to end in eval order once every worker is done. Slots keep their
 * room across passes, so a campaign's passes stop allocating once every
 * sample has seen its largest output. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/eval_ragged.h"
#include "model/graph.h"

static bf_status oom(bf_error *err) { return bf_error_set(err, BF_ENOMEM, "out of memory for per-sample outputs"); }

bf_status bf__ragged_init(bf__ragged *r, const bf_model *m, int64_t samples, bf_error *err)
{
    memset(r, 0, sizeof *r);
    r->n_out = m->n_outputs;
    r->samples = samples;
    size_t slots = r->n_out * (size_t)samples;
    r->buf = bf__calloc(slots, sizeof *r->buf);
    r->len = bf__calloc(slots, sizeof *r->len);
    r->cap = bf__calloc(slots, sizeof *r->cap);
    r->rows = bf__calloc(slots, sizeof *r->rows);
    r->view = bf__calloc(r->n_out, sizeof *r->view);
    r->offsets = bf__calloc(r->n_out * (size_t)(samples + 1), sizeof *r->offsets);
    r->flat = bf__calloc(r->n_out, sizeof *r->flat);
    r->flat_cap = bf__calloc(r->n_out, sizeof *r->flat_cap);
    if (!r->buf || !r->len || !r->cap || !r->rows || !r->view || !r->offsets || !r->flat || !r->flat_cap) return oom(err);
    for (size_t k = 0; k < r->n_out; k++) {
        r->view[k].name = m->outputs[k].name;
        r->view[k].offsets = r->offsets + k * (size_t)(samples + 1);
    }
    return BF_OK;
}

void bf__ragged_free(bf__ragged *r)
{
    if (r->buf)
        for (size_t i = 0; i < r->n_out * (size_t)r->samples; i++) bf__free(r->buf[i]);
    for (size_t k = 0; r->flat && k < r->n_out; k++) bf__free(r->flat[k]);
    bf__free(r->buf);
    bf__free(r->len);
    bf__free(r->cap);
    bf__free(r->rows);
    bf__free(r->view);
    bf__free(r->offsets);
    bf__free(r->flat);
    bf__free(r->flat_cap);
    memset(r, 0, sizeof *r);
}

static bf_status reserve(float **buf, int64_t *cap, int64_t n, bf_error *err)
{
    if (n <= *cap) return BF_OK;
    int64_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    float *b = bf__realloc(*buf, (size_t)c * sizeof *b);
    if (!b) return oom(err);
    *buf = b;
    *cap = c;
    return BF_OK;
}

bf_status bf__ragged_put(bf__ragged *r, size_t k, int64_t s, const bf_tensor *t, bf_error *err)
{
    size_t i = k * (size_t)r->samples + (size_t)s;
    int64_t n = bf_tensor_numel(t);
    bf_status st = reserve(&r->buf[i], &r->cap[i], n, err);
    if (st != BF_OK) return st;
    if (n > 0 && (st = bf_convert(r->buf[i], BF_F32, t->data, t->dtype, (size_t)n, err)) != BF_OK) {
        if (err) bf_error_prefix(err, "output '%s'", r->view[k].name);
        return st;
    }
    r->len[i] = n;
    r->rows[i] = t->ndim >= 1 ? t->dims[0] : 1;
    return BF_OK;
}

bf_status bf__ragged_lay_out(bf__ragged *r, bf_error *err)
{
    for (size_t k = 0; k < r->n_out; k++) {
        int64_t *off = r->offsets + k * (size_t)(r->samples + 1), row = -1, total = 0;
        const int64_t *len = r->len + k * (size_t)r->samples, *rows = r->rows + k * (size_t)r->samples;
        off[0] = 0;
        for (int64_t s = 0; s < r->samples; s++) {
            if (rows[s] > 0) {
                int64_t w = len[s] / rows[s];
                if (row >= 0 && w != row)
                    return bf_error_set(err, BF_ESHAPE,
                                        "output '%s' has rows of %lld elements for sample %lld but %lld before it: only its "
                                        "dim 0 may change from sample to sample",
                                        r->view[k].name, (long long)w, (long long)s, (long long)row);
                row = w;
            }
            total += len[s];
            off[s + 1] = total;
        }
        bf_status st = reserve(&r->flat[k], &r->flat_cap[k], total, err);
        if (st != BF_OK) return st;
        for (int64_t s = 0; s < r->samples; s++)
            if (len[s]) memcpy(r->flat[k] + off[s], r->buf[k * (size_t)r->samples + (size_t)s], (size_t)len[s] * sizeof(float));
        r->view[k].row_elems = row < 0 ? 1 : row;
        r->view[k].data = r->flat[k];
    }
    return BF_OK;
}

bf_status bf__ragged_copy_sample(bf__ragged *r, const bf_ragged_output *base, int64_t s, bf_error *err)
{
    for (size_t k = 0; k < r->n_out; k++) {
        size_t i = k * (size_t)r->samples + (size_t)s;
        int64_t a = base[k].offsets[s], n = base[k].offsets[s + 1] - a;
        bf_status st = reserve(&r->buf[i], &r->cap[i], n, err);
        if (st != BF_OK) return st;
        if (n) memcpy(r->buf[i], base[k].data + a, (size_t)n * sizeof(float));
        r->len[i] = n;
        r->rows[i] = n / (base[k].row_elems > 0 ? base[k].row_elems : 1);
    }
    return BF_OK;
}

bf_status bf__ragged_copy_slot(bf__ragged *r, const bf__ragged *src, int64_t s, bf_error *err)
{
    for (size_t k = 0; k < r->n_out; k++) {
        size_t i = k * (size_t)r->samples + (size_t)s, j = k * (size_t)src->samples + (size_t)s;
        bf_status st = reserve(&r->buf[i], &r->cap[i], src->len[j], err);
        if (st != BF_OK) return st;
        if (src->len[j]) memcpy(r->buf[i], src->buf[j], (size_t)src->len[j] * sizeof(float));
        r->len[i] = src->len[j];
        r->rows[i] = src->rows[j];
    }
    return BF_OK;
}

bf_status bf__ragcopy_set(bf__ragcopy *c, const bf_ragged_output *src, size_t n, int64_t samples, bf_error *err)
{
    size_t offs = n * (size_t)(samples + 1), elems = 0;
    for (size_t k = 0; k < n; k++) elems += (size_t)src[k].offsets[samples];
    if (n > c->view_cap) {
        bf_ragged_output *v = bf__realloc(c->view, n * sizeof *v);
        if (!v) return oom(err);
        c->view = v;
        c->view_cap = n;
    }
    if (offs > c->off_cap) {
        int64_t *o = bf__realloc(c->off, offs * sizeof *o);
        if (!o) return oom(err);
        c->off = o;
        c->off_cap = offs;
    }
    if (elems + 1 > c->data_cap) {
        size_t cap = c->data_cap ? c->data_cap : 64;
        while (cap < elems + 1) cap *= 2;
        float *d = bf__realloc(c->data, cap * sizeof *d);
        if (!d) return oom(err);
        c->data = d;
        c->data_cap = cap;
    }
    c->n = n;
    c->samples = samples;
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        int64_t *off = c->off + k * (size_t)(samples + 1), total = src[k].offsets[samples];
        memcpy(off, src[k].offsets, (size_t)(samples + 1) * sizeof *off);
        if (total) memcpy(c->data + at, src[k].data, (size_t)total * sizeof(float));
        c->view[k] = (bf_ragged_output){.name = src[k].name, .row_elems = src[k].row_elems, .offsets = off,
                                        .data = c->data + at};
        at += (size_t)total;
    }
    return BF_OK;
}

void bf__ragcopy_free(bf__ragcopy *c)
{
    bf__free(c->view);
    bf__free(c->off);
    bf__free(c->data);
    memset(c, 0, sizeof *c);
}

int bf__ragged_sample_same(const bf_ragged_output *a, const bf_ragged_output *b, size_t n, int64_t s)
{
    for (size_t k = 0; k < n; k++) {
        int64_t la = a[k].offsets[s + 1] - a[k].offsets[s], lb = b[k].offsets[s + 1] - b[k].offsets[s];
        if (la != lb || (la && memcmp(a[k].data + a[k].offsets[s], b[k].data + b[k].offsets[s], (size_t)la * sizeof(float))))
            return 0;
    }
    return 1;
}

int bf__ragged_sample_nonfinite(const bf_ragged_output *a, size_t n, int64_t s)
{
    for (size_t k = 0; k < n; k++)
        for (int64_t i = a[k].offsets[s]; i < a[k].offsets[s + 1]; i++)
            if (!isfinite(a[k].data[i])) return 1;
    return 0;
}
