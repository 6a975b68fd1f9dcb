/* A result document rendered for people and pipelines: the text table
 * (bitflip run, bitflip report), CSV, and the values CI gates read. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/result.h"
#include "bitflip/bitflip.h"
#include "result_table.h"

static double rate_of(const json_t *g, const char *which, double *lo, double *hi)
{
    const json_t *r = json_object_get(g, which);
    const json_t *ci = json_object_get(r, "ci");
    *lo = json_number_value(json_array_get(ci, 0));
    *hi = json_number_value(json_array_get(ci, 1));
    return json_number_value(json_object_get(r, "rate"));
}

/* Indices of `arr`'s entries by descending critical rate (ties: order). */
static size_t *rank_by_critical(const json_t *arr, size_t *n)
{
    *n = json_array_size(arr);
    size_t *idx = malloc((*n + 1) * sizeof *idx);
    if (!idx) return NULL;
    for (size_t i = 0; i < *n; i++) idx[i] = i;
    for (size_t i = 1; i < *n; i++)       /* insertion sort: stable, lists are short */
        for (size_t j = i; j > 0; j--) {
            double a = json_number_value(json_object_get(json_object_get(json_array_get(arr, idx[j]), "critical"), "rate"));
            double b = json_number_value(json_object_get(json_object_get(json_array_get(arr, idx[j - 1]), "critical"), "rate"));
            if (a <= b) break;
            size_t t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t;
        }
    return idx;
}

/* The groups with trials, most critical first; nothing if none has any. */
static void print_group_rows(FILE *f, const json_t *arr, const char *key, const char *title, size_t limit)
{
    size_t n, shown = 0, with_trials = 0;
    size_t *idx = rank_by_critical(arr, &n);
    if (!idx) return;
    int torch = 0;   /* a last column with the PyTorch names, when there are any */
    for (size_t k = 0; k < n; k++) {
        with_trials += json_integer_value(json_object_get(json_array_get(arr, k), "trials")) > 0;
        torch |= json_object_get(json_array_get(arr, k), "torch_name") != NULL;
    }
    if (with_trials)
        fprintf(f, "\n%s\n  %-32s %7s  %7s %7s %7s %7s   %7s  %s%s\n", title, key, "trials", "masked", "toler.", "crit.",
                "due", "crit%", torch ? "interval           " : "interval", torch ? "pytorch name" : "");
    for (size_t k = 0; k < n && shown < limit; k++) {
        const json_t *g = json_array_get(arr, idx[k]);
        if (json_integer_value(json_object_get(g, "trials")) <= 0) continue;
        shown++;
        double lo, hi, cr = rate_of(g, "critical", &lo, &hi);
        char label[168];
        const json_t *kv = json_object_get(g, key);
        /* a fault group 1..'s row says which group (group 0's as before) */
        json_int_t gr = json_integer_value(json_object_get(g, "group"));
        char gl[40] = "";
        if (gr > 0) snprintf(gl, sizeof gl, "[group %lld] ", (long long)gr);
        if (json_is_string(kv)) snprintf(label, sizeof label, "%s%s", gl, json_string_value(kv));
        else if (json_is_integer(kv)) snprintf(label, sizeof label, "%sbit %lld", gl, (long long)json_integer_value(kv));
        else snprintf(label, sizeof label, "%s%g", gl, json_number_value(kv));
        const json_t *o = json_object_get(g, "outcomes");
        char interval[48];
        snprintf(interval, sizeof interval, "[%.2f%%, %.2f%%]", 100 * lo, 100 * hi);
        fprintf(f, "  %-32.32s %7lld  %7lld %7lld %7lld %7lld   %6.2f%%  ", label,
                (long long)json_integer_value(json_object_get(g, "trials")),
                (long long)json_integer_value(json_object_get(o, "masked")), (long long)json_integer_value(json_object_get(o, "tolerable")),
                (long long)json_integer_value(json_object_get(o, "critical")), (long long)json_integer_value(json_object_get(o, "due")),
                100 * cr);
        const json_t *tn = json_object_get(g, "torch_name");
        if (torch) fprintf(f, "%-18s %s\n", interval, json_is_string(tn) ? json_string_value(tn) : "-");
        else fprintf(f, "%s\n", interval);
    }
    if (with_trials > shown) fprintf(f, "  ... %zu more (all in the JSON result)\n", with_trials - shown);
    free(idx);
}

void bf_result_print_table(FILE *f, const json_t *doc)
{
    const json_t *camp = json_object_get(doc, "campaign"), *golden = json_object_get(doc, "golden");
    const json_t *summary = json_object_get(doc, "summary");
    double conf = bf__result_confidence(doc);
    fprintf(f, "campaign  %s on %s: %s faults (%s, %s), %s sampling, seed %lld\n",
            json_string_value(json_object_get(camp, "model")), json_string_value(json_object_get(camp, "dataset")),
            json_string_value(json_object_get(camp, "fault_model")), json_string_value(json_object_get(camp, "representation")),
            json_string_value(json_object_get(camp, "target")), json_string_value(json_object_get(camp, "sampling")),
            (long long)json_integer_value(json_object_get(camp, "seed")));
    fprintf(f, "golden    %s, %lld samples", json_string_value(json_object_get(golden, "task")),
            (long long)json_integer_value(json_object_get(golden, "samples")));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)golden, k, v)
        if (json_is_real(v)) fprintf(f, ", %s %.4f", k, json_real_value(v));
    fprintf(f, "\ntrials    %lld of %lld%s, fault population %.4g\n\n", (long long)json_integer_value(json_object_get(summary, "trials")),
            (long long)json_integer_value(json_object_get(summary, "planned")),
            json_is_true(json_object_get(summary, "stopped_early")) ? " (stopped early: intervals within the margin)" : "",
            json_number_value(json_object_get(camp, "population")));
    fprintf(f, "outcomes (%.0f%% Wilson intervals)\n", 100 * conf);
    const json_t *rates = json_object_get(summary, "rates");
    for (int i = 0; i < BF_OUTCOME_COUNT; i++) {
        double lo, hi, r = rate_of(rates, bf__outcome_keys[i], &lo, &hi);
        fprintf(f, "  %-10s %8lld   %6.2f%%  [%.2f%%, %.2f%%]\n", bf__outcome_keys[i],
                (long long)json_integer_value(json_object_get(json_object_get(summary, "outcomes"), bf__outcome_keys[i])),
                100 * r, 100 * lo, 100 * hi);
    }
    const json_t *metrics = json_object_get(summary, "metrics");
    if (json_object_size(metrics)) {
        int64_t trials = json_integer_value(json_object_get(summary, "trials"));
        fprintf(f, "\nmetrics under faults (mean, std, %.0f%% interval of the mean)\n", 100 * conf);
        json_object_foreach((json_t *)metrics, k, v) {
            int64_t n = json_integer_value(json_object_get(v, "n"));
            fprintf(f, "  %-16s %.6g  std %.4g  [%.6g, %.6g]", k, json_number_value(json_object_get(v, "mean")),
                    json_number_value(json_object_get(v, "std")), json_number_value(json_array_get(json_object_get(v, "ci"), 0)),
                    json_number_value(json_array_get(json_object_get(v, "ci"), 1)));
            if (n < trials) fprintf(f, "  over %lld of %lld trials (the rest gave no finite value)", (long long)n, (long long)trials);
            fputc('\n', f);
        }
    }
    const json_t *br = json_object_get(doc, "by_rate");
    if (json_array_size(br)) {
        fprintf(f, "\nby bit error rate\n  %-12s %7s  %-40s\n", "rate", "trials", "metric mean [interval]");
        size_t i;
        const json_t *g;
        json_array_foreach(br, i, g) {
            fprintf(f, "  %-12.3g %7lld ", json_number_value(json_object_get(g, "rate")),
                    (long long)json_integer_value(json_object_get(g, "trials")));
            json_object_foreach(json_object_get(g, "metrics"), k, v) {
                if (strcmp(k, "accuracy") && strcmp(k, "auc")) continue;
                fprintf(f, " %s %.4f [%.4f, %.4f]", k, json_number_value(json_object_get(v, "mean")),
                        json_number_value(json_array_get(json_object_get(v, "ci"), 0)),
                        json_number_value(json_array_get(json_object_get(v, "ci"), 1)));
            }
            double lo, hi, cr = rate_of(g, "critical", &lo, &hi), dr = rate_of(g, "due", &lo, &hi);
            fprintf(f, "  critical %.1f%%  due (NaN/Inf) %.1f%%\n", 100 * cr, 100 * dr);
        }
    }
    print_group_rows(f, json_object_get(doc, "by_tensor"), "tensor", "tensors that matter most (by critical rate)", 10);
    print_group_rows(f, json_object_get(doc, "by_bit"), "bit", "bits that matter most (by critical rate)", 8);
    bf__print_mitigations(f, json_object_get(doc, "mitigations"), conf);
}

static void csv_rows(FILE *f, const char *section, const json_t *arr, const char *key)
{
    size_t i;
    const json_t *g;
    json_array_foreach(arr, i, g) {
        const json_t *kv = json_object_get(g, key), *o = json_object_get(g, "outcomes");
        double lo, hi, cr = rate_of(g, "critical", &lo, &hi);
        if (json_integer_value(json_object_get(g, "trials")) <= 0) continue;   /* no rate to report */
        json_int_t gr = json_integer_value(json_object_get(g, "group"));
        if (gr > 0) fprintf(f, "%s.group%lld,", section, (long long)gr);   /* fault group 1..'s row */
        else fprintf(f, "%s,", section);
        if (json_is_string(kv)) fprintf(f, "\"%s\"", json_string_value(kv));
        else if (json_is_integer(kv)) fprintf(f, "%lld", (long long)json_integer_value(kv));
        else fprintf(f, "%.6g", json_number_value(kv));
        fprintf(f, ",%lld,%lld,%lld,%lld,%lld,%.17g,%.17g,%.17g\n", (long long)json_integer_value(json_object_get(g, "trials")),
                (long long)json_integer_value(json_object_get(o, "masked")), (long long)json_integer_value(json_object_get(o, "tolerable")),
                (long long)json_integer_value(json_object_get(o, "critical")), (long long)json_integer_value(json_object_get(o, "due")),
                cr, lo, hi);
    }
}

void bf_result_print_csv(FILE *f, const json_t *doc)
{
    const json_t *summary = json_object_get(doc, "summary"), *o = json_object_get(summary, "outcomes");
    double lo, hi, cr = rate_of(json_object_get(summary, "rates"), "critical", &lo, &hi);
    fprintf(f, "section,key,trials,masked,tolerable,critical,due,critical_rate,critical_lo,critical_hi\n");
    fprintf(f, "total,all,%lld,%lld,%lld,%lld,%lld,%.17g,%.17g,%.17g\n", (long long)json_integer_value(json_object_get(summary, "trials")),
            (long long)json_integer_value(json_object_get(o, "masked")), (long long)json_integer_value(json_object_get(o, "tolerable")),
            (long long)json_integer_value(json_object_get(o, "critical")), (long long)json_integer_value(json_object_get(o, "due")),
            cr, lo, hi);
    csv_rows(f, "tensor", json_object_get(doc, "by_tensor"), "tensor");
    csv_rows(f, "bit", json_object_get(doc, "by_bit"), "bit");
    csv_rows(f, "rate", json_object_get(doc, "by_rate"), "rate");
    /* a paired comparison: each configuration's totals */
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(doc, "mitigations"), i, m) {
        const json_t *ms = json_object_get(m, "summary"), *mo = json_object_get(ms, "outcomes");
        double l, h, c = rate_of(json_object_get(ms, "rates"), "critical", &l, &h);
        fprintf(f, "mitigation,\"%s\",%lld,%lld,%lld,%lld,%lld,%.17g,%.17g,%.17g\n", json_string_value(json_object_get(m, "name")),
                (long long)json_integer_value(json_object_get(ms, "trials")),
                (long long)json_integer_value(json_object_get(mo, "masked")), (long long)json_integer_value(json_object_get(mo, "tolerable")),
                (long long)json_integer_value(json_object_get(mo, "critical")), (long long)json_integer_value(json_object_get(mo, "due")),
                c, l, h);
    }
}

/* --- gates ------------------------------------------------------------ */

const char *bf_result_gate_names(void)
{
    return "critical_rate, due_rate, masked_rate, tolerable_rate (each also _upper and _lower: its interval's "
           "bounds), accuracy, top1_mismatch, auc, logloss, ne, mse, max_abs, perplexity, token_accuracy, "
           "choice_accuracy, generation_match, first_divergence, edit_distance, miou, pixel_accuracy, map, map50, recall "
           "(means under faults), "
           "golden_<metric>, and with mitigations mitigation.NAME.<any of these> or mitigation.NAME.recovery "
           "(_lower, _upper), .time_ratio, .storage_overhead";
}

/* mitigation.NAME.GATE: GATE on configuration NAME of a paired comparison
 * (NAME may hold dots: GATE is what follows the last one). */
static int mitigation_gate(const json_t *doc, const char *name, double *value)
{
    const char *spec = name + 11, *dot = strrchr(spec, '.');
    if (!dot || dot == spec) return -1;
    const char *gate = dot + 1;
    size_t i;
    const json_t *m, *hit = NULL;
    json_array_foreach(json_object_get(doc, "mitigations"), i, m) {
        const char *n = json_string_value(json_object_get(m, "name"));
        if (n && strlen(n) == (size_t)(dot - spec) && !strncmp(n, spec, (size_t)(dot - spec))) hit = m;
    }
    if (!hit) return 1;
    const json_t *rec = json_object_get(hit, "recovery"), *cost = json_object_get(hit, "cost"), *v = NULL;
    if (!strcmp(gate, "recovery")) v = json_object_get(rec, "value");
    else if (!strcmp(gate, "recovery_lower")) v = json_array_get(json_object_get(rec, "ci"), 0);
    else if (!strcmp(gate, "recovery_upper")) v = json_array_get(json_object_get(rec, "ci"), 1);
    else if (!strcmp(gate, "time_ratio") || !strcmp(gate, "storage_overhead")) v = json_object_get(cost, gate);
    else {
        json_t *sub = json_pack("{s:O, s:O}", "summary", json_object_get(hit, "summary"), "golden", json_object_get(hit, "golden"));
        int k = sub ? bf_result_gate_value(sub, gate, value) : 1;
        json_decref(sub);
        return k;
    }
    if (!json_is_number(v)) return 1;
    *value = json_number_value(v);
    return 0;
}

int bf_result_gate_value(const json_t *doc, const char *name, double *value)
{
    if (!strncmp(name, "mitigation.", 11)) return mitigation_gate(doc, name, value);
    const json_t *summary = json_object_get(doc, "summary");
    for (int i = 0; i < BF_OUTCOME_COUNT; i++) {
        size_t kl = strlen(bf__outcome_keys[i]);
        if (strncmp(name, bf__outcome_keys[i], kl) || strncmp(name + kl, "_rate", 5)) continue;
        const char *rest = name + kl + 5;
        const json_t *r = json_object_get(json_object_get(summary, "rates"), bf__outcome_keys[i]);
        const json_t *v = !*rest ? json_object_get(r, "rate")
                          : !strcmp(rest, "_lower") ? json_array_get(json_object_get(r, "ci"), 0)
                          : !strcmp(rest, "_upper") ? json_array_get(json_object_get(r, "ci"), 1) : NULL;
        if (*rest && strcmp(rest, "_lower") && strcmp(rest, "_upper")) return -1;
        if (!json_is_number(v)) return 1;
        *value = json_number_value(v);
        return 0;
    }
    int golden = !strncmp(name, "golden_", 7);
    int m = bf_metric_parse(golden ? name + 7 : name);
    if (m < 0) return -1;
    const json_t *v = golden ? json_object_get(json_object_get(doc, "golden"), name + 7)
                             : json_object_get(json_object_get(json_object_get(summary, "metrics"), name), "mean");
    if (!json_is_number(v)) return 1;
    *value = json_number_value(v);
    return 0;
}
