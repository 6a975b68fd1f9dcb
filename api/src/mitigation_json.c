/* Paired mitigation results: each configuration's rendered result, and
 * what it recovers and costs against "none" (the first run).
 *
 * recovery = (m_mitigated - m_faulty) / (m_golden - m_faulty) on the task
 * metric (AUC, else accuracy): m_golden the unprotected golden pass, m_faulty
 * and m_mitigated the means over the trials of "none" and of the
 * configuration. Its interval is a paired bootstrap: the same resampled
 * trials for both means (the trials are paired: the same faults), the
 * percentiles of the ratio. Deterministic (a fixed generator seed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/result.h"
#include "bitflip/rng.h"

#define BOOTSTRAP 2000

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The means of base and mine over trials with rate index `rate` (-1: all). */
static int means(const double *base, const double *mine, const int *rates, int rate, const int64_t *pick,
                 int64_t n_pick, double *mb, double *mm)
{
    double sb = 0, sm = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < n_pick; i++) {
        int64_t t = pick ? pick[i] : i;
        if (rate >= 0 && rates[t] != rate) continue;
        if (!isfinite(base[t]) || !isfinite(mine[t])) continue;
        sb += base[t];
        sm += mine[t];
        k++;
    }
    if (!k) return 0;
    *mb = sb / (double)k;
    *mm = sm / (double)k;
    return 1;
}

static json_t *recovery_json(const char *metric, double golden, const double *base, const double *mine, const int *rates,
                             int64_t n, int rate, double conf, int is_base)
{
    double mf, mm;
    json_t *o = json_object();
    json_object_set_new(o, "metric", json_string(metric));
    if (!means(base, mine, rates, rate, NULL, n, &mf, &mm)) return o;
    json_object_set_new(o, "golden", num(golden));
    json_object_set_new(o, "faulty", num(mf));
    json_object_set_new(o, "mitigated", num(mm));
    double lost = golden - mf;
    if (is_base || !(lost > 1e-12)) {
        /* faults that left the metric as it was, or raised it: no loss to
         * take a share of */
        json_object_set_new(o, "value", json_null());
        json_object_set_new(o, "note", json_string(is_base ? "the baseline" : "the faults did not lower the metric"));
        return o;
    }
    json_object_set_new(o, "value", num((mm - mf) / lost));
    /* the trials of this rate, resampled with replacement */
    int64_t m = 0;
    for (int64_t t = 0; t < n; t++) m += rate < 0 || rates[t] == rate;
    int64_t *idx = malloc((size_t)m * sizeof *idx + 1), *pick = malloc((size_t)m * sizeof *pick + 1);
    double *r = malloc(BOOTSTRAP * sizeof *r);
    int64_t n_r = 0;
    if (idx && pick && r) {
        int64_t j = 0;
        for (int64_t t = 0; t < n; t++)
            if (rate < 0 || rates[t] == rate) idx[j++] = t;
        bf_rng g = bf_rng_make(0x6d69746967617465ULL, (uint64_t)(rate + 1));
        for (int b = 0; b < BOOTSTRAP; b++) {
            for (int64_t i = 0; i < m; i++) pick[i] = idx[bf_rng_below(&g, (uint64_t)m)];
            double bf_, bm;
            if (!means(base, mine, rates, -1, pick, m, &bf_, &bm)) continue;
            double l = golden - bf_;
            if (l > 1e-12) r[n_r++] = (bm - bf_) / l;
        }
        qsort(r, (size_t)n_r, sizeof *r, cmp_double);
    }
    if (n_r >= 100) {
        double a = (1 - conf) / 2;
        json_object_set_new(o, "ci", json_pack("[o, o]", num(r[(int64_t)(a * (double)(n_r - 1))]),
                                               num(r[(int64_t)((1 - a) * (double)(n_r - 1))])));
    } else {
        json_object_set_new(o, "ci", json_pack("[n, n]"));
    }
    free(idx);
    free(pick);
    free(r);
    return o;
}

static json_t *protections_json(const bf_mitigation *m)
{
    json_t *o = json_object();
    if (m->clip.enabled) {
        json_t *c = json_object();
        if (m->clip.bounds == BF_CLIP_FIXED) json_object_set_new(c, "bounds", json_pack("[f, f]", m->clip.lo, m->clip.hi));
        else json_object_set_new(c, "bounds", json_string("profile"));
        if (m->clip.bounds == BF_CLIP_PROFILE) json_object_set_new(c, "percentile", json_real(m->clip.percentile > 0 ? m->clip.percentile : 100));
        json_object_set_new(c, "mode", json_string(m->clip.zero ? "zero" : "clamp"));
        json_object_set_new(c, "nan_to_zero", json_boolean(m->clip.nan_to_zero));
        if (m->clip.n_at) {
            json_t *at = json_array();
            for (size_t i = 0; i < m->clip.n_at; i++) json_array_append_new(at, json_string(m->clip.at[i]));
            json_object_set_new(c, "at", at);
        }
        json_object_set_new(o, "clip", c);
    }
    if (m->abft.enabled)
        json_object_set_new(o, "abft", json_pack("{s:s, s:f}", "mode", m->abft.correct ? "correct" : "detect", "k",
                                                 m->abft.k > 0 ? m->abft.k : BF_ABFT_K_DEFAULT));
    if (m->sbp.enabled) {
        json_t *s = json_object(), *bits = json_array();
        for (int i = 0; i < m->sbp.n_positions; i++) json_array_append_new(bits, json_integer(m->sbp.positions[i]));
        json_object_set_new(s, "bits", m->sbp.n_positions ? bits : (json_decref(bits), json_string("sign and exponent")));
        json_object_set_new(o, "sbp", s);
    }
    if (m->ecc.enabled) {
        json_t *e = json_pack("{s:s, s:b}", "code", "hsiao(72,64) secded", "check_bits_faulty",
                              m->ecc.check_bits_faulty == BF_ECC_CHECK_FAULTY);
        if (m->ecc.n_tensors) {
            json_t *t = json_array();
            for (size_t i = 0; i < m->ecc.n_tensors; i++) json_array_append_new(t, json_string(m->ecc.tensors[i]));
            json_object_set_new(e, "tensors", t);
        }
        json_object_set_new(o, "ecc", e);
    }
    if (m->range.enabled) {
        json_t *r = json_object();
        if (m->range.declared) json_object_set_new(r, "bounds", json_pack("[f, f]", m->range.lo, m->range.hi));
        else json_object_set_new(r, "bounds", json_string("profile"));
        json_object_set_new(r, "action", json_string(m->range.flag ? "flag" : "zero"));
        json_object_set_new(o, "range", r);
    }
    return o;
}

static json_t *share(int64_t k, int64_t n, double conf)
{
    double lo = NAN, hi = NAN;
    if (n > 0) bf_wilson(k, n, conf, &lo, &hi);
    return json_pack("{s:I, s:o, s:[o, o]}", "count", (json_int_t)k, "rate", n > 0 ? json_real((double)k / (double)n) : json_null(),
                     "ci", num(lo), num(hi));
}

/* Of the trials the unprotected model does not mask (the effective
 * faults), those this configuration detects (DUE) and those it leaves
 * harmless (masked or tolerable): paired, trial by trial. */
static json_t *coverage_json(const bf_mitigation_run *base, const bf_mitigation_run *r, const char *fault_model, double conf)
{
    int64_t eff = 0, det = 0, ok = 0;
    for (int64_t t = 0; t < r->n && t < base->n && base->outcome && r->outcome; t++) {
        if (base->outcome[t] == BF_OUTCOME_MASKED) continue;
        eff++;
        det += r->outcome[t] == BF_OUTCOME_DUE;
        ok += r->outcome[t] == BF_OUTCOME_MASKED || r->outcome[t] == BF_OUTCOME_TOLERABLE;
    }
    return json_pack("{s:s, s:I, s:o, s:o}", "fault_model", fault_model ? fault_model : "", "effective", (json_int_t)eff,
                     "detected", share(det, eff, conf), "harmless", share(ok, eff, conf));
}

json_t *bf_mitigations_render(const bf_mitigation_run *runs, size_t n_runs, double conf)
{
    json_t *arr = json_array();
    if (!n_runs) return arr;
    const json_t *g0 = json_object_get(runs[0].doc, "golden");
    /* the task's higher-is-better metric (cmd_run.c keeps each trial's) */
    const char *metric = json_object_get(g0, "auc") ? "auc" : json_object_get(g0, "token_accuracy") ? "token_accuracy"
                       : json_object_get(g0, "miou") ? "miou" : "accuracy";
    double golden = json_number_value(json_object_get(g0, metric));
    for (size_t k = 0; k < n_runs; k++) {
        const bf_mitigation_run *r = &runs[k];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(r->mit->name ? r->mit->name : ""));
        json_object_set_new(o, "protections", protections_json(r->mit));
        json_object_set_new(o, "golden", json_incref(json_object_get(r->doc, "golden")));
        json_object_set_new(o, "summary", json_incref(json_object_get(r->doc, "summary")));
        json_object_set_new(o, "by_bit", json_incref(json_object_get(r->doc, "by_bit")));
        json_object_set_new(o, "recovery",
                            recovery_json(metric, golden, runs[0].metric, r->metric, r->rate, r->n, -1, conf, k == 0));
        const json_t *br = json_object_get(r->doc, "by_rate");
        if (br) {
            json_t *by_rate = json_deep_copy(br);
            for (size_t i = 0; i < json_array_size(by_rate); i++)
                json_object_set_new(json_array_get(by_rate, i), "recovery",
                                    recovery_json(metric, golden, runs[0].metric, r->metric, r->rate, r->n, (int)i, conf,
                                                  k == 0));
            json_object_set_new(o, "by_rate", by_rate);
        }
        json_object_set_new(o, "coverage",
                            coverage_json(&runs[0], r,
                                          json_string_value(json_object_get(json_object_get(r->doc, "campaign"), "fault_model")),
                                          conf));
        json_object_set_new(o, "cost", json_pack("{s:o, s:o, s:f}", "golden_seconds", num(r->golden_seconds), "time_ratio",
                                                 num(r->golden_seconds / runs[0].golden_seconds), "storage_overhead",
                                                 r->storage));
        json_array_append_new(arr, o);
    }
    return arr;
}
