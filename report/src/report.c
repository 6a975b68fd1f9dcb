/* bfr_figures: the headline and the figures of a set of results, as JSON
 * for bitflipd's page and for the writers (write.c). */
#include <stdlib.h>

#include "report_impl.h"

int bfr__fig_add(json_t *figs, const char *name, const char *title, const char *alt, char *svg)
{
    json_t *f = json_pack("{s:s, s:s, s:s, s:s}", "name", name, "title", title, "alt", alt, "svg", svg);
    free(svg);
    if (!f) return 1;
    return json_array_append_new(figs, f) != 0;
}

json_t *bfr_figures(const bfr_input *in, size_t n, bf_error *err) { return bfr_figures_opts(in, n, NULL, err); }

json_t *bfr_figures_opts(const bfr_input *in, size_t n, const bfr_options *opt, bf_error *err)
{
    bfr__set set;
    bf_status st = bfr__set_read(in, n, opt, &set, err);
    if (st != BF_OK) return NULL;
    json_t *figs = json_array(), *doc = NULL;
    char *headline = bfr__headline(&set);
    /* the order a reviewer reads in: the curve, what happened, where, what helps */
    if (!figs || !headline || bfr__fig_ber(&set, figs) || bfr__fig_outcomes(&set, figs) || bfr__fig_tensors(&set, figs) ||
        bfr__fig_pvf(&set, figs) || bfr__fig_heatmap(&set, figs) || bfr__fig_ivmod(&set, figs) || bfr__fig_mitigation(&set, figs))
        goto oom;
    size_t i;
    const json_t *f;
    json_array_foreach(opt ? opt->extra_figures : NULL, i, f)
        if (json_array_append(figs, (json_t *)f) != 0) goto oom;
    doc = json_pack("{s:s, s:o}", "headline", headline, "figures", figs);
    figs = NULL;
    if (!doc) goto oom;
    free(headline);
    bfr__set_free(&set);
    return doc;
oom:
    json_decref(figs);
    free(headline);
    bfr__set_free(&set);
    bf_error_set(err, BF_ENOMEM, "report: out of memory drawing the figures");
    return NULL;
}
