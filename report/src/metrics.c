/* The task metrics of each result as a table: golden, and the mean under
 * faults with its interval and the trials it is over. A language model's
 * (perplexity, token_accuracy, choice_accuracy, and with "generate"
 * generation_match, first_divergence, edit_distance) come first, then a segmenter's (miou,
 * pixel_accuracy) and a detector's (map, map50, recall); only
 * names from this list are read, so nothing of the document's own keys is
 * printed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_impl.h"

static const char *const NAMES[] = {
    "perplexity", "token_accuracy", "choice_accuracy", "generation_match", "first_divergence", "edit_distance",
    "miou", "pixel_accuracy", "map", "map50", "recall", "accuracy",   "auc",            "logloss",         "ne",               "top1_mismatch",    "mse", "max_abs",
};
#define N_NAMES (sizeof NAMES / sizeof NAMES[0])

/* "1.337" or "-" for a missing or non-finite value */
static void num(char *out, size_t n, const json_t *v)
{
    if (json_is_number(v) && isfinite(json_number_value(v))) snprintf(out, n, "%.4g", json_number_value(v));
    else snprintf(out, n, "-");
}

int bfr__metric_rows(const bfr__set *set, bfr__metric_row *rows, int max)
{
    int n = 0;
    for (size_t d = 0; d < set->n_docs; d++) {
        const json_t *root = set->docs[d].root, *summary = json_object_get(root, "summary");
        const json_t *ms = json_object_get(summary, "metrics"), *golden = json_object_get(root, "golden");
        json_int_t trials = json_integer_value(json_object_get(summary, "trials"));
        for (size_t k = 0; k < N_NAMES && n < max; k++) {
            const json_t *m = json_object_get(ms, NAMES[k]);
            if (!json_is_object(m)) continue;
            bfr__metric_row *r = &rows[n++];
            r->doc = d;
            r->name = NAMES[k];
            num(r->golden, sizeof r->golden, json_object_get(golden, NAMES[k]));
            num(r->mean, sizeof r->mean, json_object_get(m, "mean"));
            const json_t *ci = json_object_get(m, "ci");
            char lo[24], hi[24];
            num(lo, sizeof lo, json_array_get(ci, 0));
            num(hi, sizeof hi, json_array_get(ci, 1));
            if (strcmp(lo, "-") && strcmp(hi, "-")) snprintf(r->ci, sizeof r->ci, "[%s, %s]", lo, hi);
            else snprintf(r->ci, sizeof r->ci, "-");
            json_int_t over = json_integer_value(json_object_get(m, "n"));
            if (over < trials && over >= 0)
                snprintf(r->over, sizeof r->over, "%lld of %lld", (long long)over, (long long)trials);
            else
                snprintf(r->over, sizeof r->over, "%lld", (long long)trials);
        }
    }
    return n;
}
