/* The tensors of one result that were hit, most critical first: the order
 * of the bar chart, of the heatmap's rows and of the headline's "holds";
 * and the rows of the other figures that read a document's groups (PVF,
 * IVMOD), collected and sorted the same way. */
#include <stdlib.h>
#include <string.h>

#include "bitflip/campaign.h"
#include "report_impl.h"

static int by_rate_desc(const void *a, const void *b)
{
    const bfr__tensor_row *x = a, *y = b;
    if (x->rate != y->rate) return x->rate < y->rate ? 1 : -1;
    if (x->lo != y->lo) return x->lo < y->lo ? 1 : -1;   /* the surer one first */
    if (x->trials != y->trials) return x->trials < y->trials ? 1 : -1;
    return strcmp(bfr__tensor_name(x->group, NULL, 0), bfr__tensor_name(y->group, NULL, 0));
}

double bfr__confidence(const bfr__set *set, size_t d)
{
    double conf = json_number_value(json_object_get(set->docs[d].campaign, "confidence"));
    return conf > 0 && conf < 1 ? conf : 0.95;
}

void *bfr__rows(const json_t *arr, size_t size, int (*fill)(void *row, const json_t *g, const void *ctx),
                const void *ctx, int (*cmp)(const void *, const void *), size_t *n, int *oom)
{
    size_t cap = json_array_size(arr), k = 0, i;
    const json_t *g;
    *n = 0;
    if (!cap) return NULL;
    char *rows = malloc(cap * size);
    if (!rows) { *oom = 1; return NULL; }
    json_array_foreach(arr, i, g) k += (size_t)fill(rows + k * size, g, ctx);
    if (!k) { free(rows); return NULL; }
    qsort(rows, k, size, cmp);
    *n = k;
    return rows;
}

/* a by_tensor entry with trials, its interval from the document or (counts
 * only) Wilson's at the campaign's confidence (ctx) */
static int tensor_row(void *row, const json_t *g, const void *ctx)
{
    json_int_t t = json_integer_value(json_object_get(g, "trials"));
    if (t <= 0) return 0;
    bfr__tensor_row *r = row;
    r->group = g;
    r->trials = t;
    r->critical = json_integer_value(json_object_get(json_object_get(g, "outcomes"), "critical"));
    const json_t *c = json_object_get(g, "critical"), *ci = json_object_get(c, "ci");
    r->rate = json_is_number(json_object_get(c, "rate")) ? json_number_value(json_object_get(c, "rate")) : (double)r->critical / (double)t;
    if (json_is_number(json_array_get(ci, 0)) && json_is_number(json_array_get(ci, 1))) {
        r->lo = json_number_value(json_array_get(ci, 0));
        r->hi = json_number_value(json_array_get(ci, 1));
    } else {   /* a document with counts only: the interval from them */
        bf_wilson(r->critical < 0 ? 0 : r->critical > t ? t : r->critical, t, *(const double *)ctx, &r->lo, &r->hi);
    }
    return 1;
}

bfr__tensor_row *bfr__tensor_rows(const bfr__set *set, size_t doc, size_t *n, int *oom)
{
    double conf = bfr__confidence(set, doc);
    return bfr__rows(json_object_get(set->docs[doc].root, "by_tensor"), sizeof(bfr__tensor_row), tensor_row, &conf,
                     by_rate_desc, n, oom);
}
