/* The spec's "mitigations" (docs/MITIGATIONS.md): configurations of
 * protections to compare on the same faults. Problems are reported like
 * every other field's (spec_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "bitflip/campaign.h"
#include "spec_impl.h"

static const char *const MIT_NAMES[] = {"name", "clip", "abft", "sbp", "range", "ecc"};
static const char *const MIT_SHORT[] = {"none", "clip", "abft", "sbp", "range", "ecc"};
static const char *const CLIP_NAMES[] = {"bounds", "percentile", "mode", "nan_to_zero", "at"};
static const char *const CLIP_MODES[] = {"clamp", "zero"};
static const char *const ABFT_NAMES[] = {"mode", "k"};
static const char *const ABFT_MODES[] = {"detect", "correct"};
static const char *const SBP_NAMES[] = {"bits", "tensors"};
static const char *const RANGE_NAMES[] = {"bounds", "action"};
static const char *const RANGE_ACTIONS[] = {"zero", "flag"};
static const char *const ECC_NAMES[] = {"check_bits_faulty", "tensors"};

/* "bounds": "profile" or [lo, hi]. */
static bool get_bounds(ctx *c, json_t *v, const char *ptr, int *fixed, float *lo, float *hi)
{
    if (json_is_string(v) && strcmp(json_string_value(v), "profile") == 0) {
        *fixed = 0;
        return true;
    }
    double a, b;
    if (json_is_array(v) && json_array_size(v) == 2 && json_is_number(json_array_get(v, 0)) &&
        json_is_number(json_array_get(v, 1))) {
        a = json_number_value(json_array_get(v, 0));
        b = json_number_value(json_array_get(v, 1));
        if (!(a <= b)) {
            bf__spec_problem(c, ptr, "[lo, hi] needs lo <= hi, got %s", bf__spec_describe(v).s);
            return false;
        }
        *fixed = 1;
        *lo = (float)a;
        *hi = (float)b;
        return true;
    }
    bf__spec_problem(c, ptr, "must be \"profile\" (from the golden pass) or [lo, hi], got %s", bf__spec_describe(v).s);
    return false;
}

static bool get_strings(ctx *c, json_t *v, const char *ptr, const char *of, char ***out, size_t *n_out)
{
    size_t n;
    if (!bf__spec_get_array(c, v, ptr, of, &n)) return false;
    if (!(*out = calloc(n, sizeof **out))) {
        c->nomem = true;
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        ptrbuf p = bf__spec_ptr_index(ptr, i);
        char *t = NULL;
        if (bf__spec_dup_string(c, json_array_get(v, i), p.s, &t)) (*out)[(*n_out)++] = t;
    }
    return true;
}

/* A protection's object (or true: its defaults); false if absent or bad. */
static bool protection(ctx *c, json_t *v, const char *ptr, const char *const *names, size_t n, json_t **slots)
{
    for (size_t i = 0; i < n; i++) slots[i] = NULL;
    if (json_is_true(v)) return true;
    if (!json_is_object(v)) {
        bf__spec_wrong_type(c, ptr, "an object (or true, for the defaults)", v);
        return false;
    }
    fieldset fs = {names, n, NULL, 0, NULL};
    bf__spec_take_fields(c, v, ptr, &fs, slots);
    return true;
}

static void parse_clip(ctx *c, json_t *v, const char *base, bf_clip_opts *o)
{
    ptrbuf ptr = bf__spec_ptr_at(base, "clip");
    json_t *f[COUNT(CLIP_NAMES)];
    if (!protection(c, v, ptr.s, CLIP_NAMES, COUNT(CLIP_NAMES), f)) return;
    o->enabled = 1;
    o->percentile = 100;
    int fixed = 0;
    if (f[0] && get_bounds(c, f[0], bf__spec_ptr_at(ptr.s, "bounds").s, &fixed, &o->lo, &o->hi))
        o->bounds = fixed ? BF_CLIP_FIXED : BF_CLIP_PROFILE;
    double d;
    if (f[1] && fixed) bf__spec_problem(c, bf__spec_ptr_at(ptr.s, "percentile").s, "only with \"bounds\": \"profile\"");
    else if (f[1] && bf__spec_get_number(c, f[1], bf__spec_ptr_at(ptr.s, "percentile").s, &d)) {
        if (d > 50 && d <= 100) o->percentile = d;
        else bf__spec_problem(c, bf__spec_ptr_at(ptr.s, "percentile").s, "must be in (50, 100], got %s", bf__spec_describe(f[1]).s);
    }
    if (f[2]) {
        int k = bf__spec_get_enum(c, f[2], bf__spec_ptr_at(ptr.s, "mode").s, CLIP_MODES, COUNT(CLIP_MODES));
        if (k >= 0) o->zero = k == 1;
    }
    if (f[3]) bf__spec_get_bool(c, f[3], bf__spec_ptr_at(ptr.s, "nan_to_zero").s, &o->nan_to_zero);
    if (f[4]) get_strings(c, f[4], bf__spec_ptr_at(ptr.s, "at").s, "node output names, globs or 'op:Type'", &o->at, &o->n_at);
}

static void parse_abft(ctx *c, json_t *v, const char *base, bf_abft_opts *o)
{
    ptrbuf ptr = bf__spec_ptr_at(base, "abft");
    json_t *f[COUNT(ABFT_NAMES)];
    if (!protection(c, v, ptr.s, ABFT_NAMES, COUNT(ABFT_NAMES), f)) return;
    o->enabled = 1;
    if (f[0]) {
        int k = bf__spec_get_enum(c, f[0], bf__spec_ptr_at(ptr.s, "mode").s, ABFT_MODES, COUNT(ABFT_MODES));
        if (k >= 0) o->correct = k == 1;
    }
    double d;
    if (f[1] && bf__spec_get_number(c, f[1], bf__spec_ptr_at(ptr.s, "k").s, &d)) {
        if (d >= 0.5 && d <= 1e6) o->k = d;
        else bf__spec_problem(c, bf__spec_ptr_at(ptr.s, "k").s, "must be in [0.5, 1e6] (the tolerance factor; default 2), got %s",
                     bf__spec_describe(f[1]).s);
    }
}

static void parse_sbp(ctx *c, json_t *v, const char *base, bf_sbp_opts *o)
{
    ptrbuf ptr = bf__spec_ptr_at(base, "sbp");
    json_t *f[COUNT(SBP_NAMES)];
    if (!protection(c, v, ptr.s, SBP_NAMES, COUNT(SBP_NAMES), f)) return;
    o->enabled = 1;
    size_t n;
    if (f[0] && bf__spec_get_array(c, f[0], bf__spec_ptr_at(ptr.s, "bits").s, "bit positions", &n)) {
        for (size_t i = 0; i < n && i < 64; i++) {
            int64_t b;
            ptrbuf p = bf__spec_ptr_index(bf__spec_ptr_at(ptr.s, "bits").s, i);
            if (bf__spec_get_int(c, json_array_get(f[0], i), p.s, 0, 31, "", &b)) o->positions[o->n_positions++] = (int)b;
        }
    }
    if (f[1]) get_strings(c, f[1], bf__spec_ptr_at(ptr.s, "tensors").s, "tensor names, globs or 'op:Type'", &o->tensors, &o->n_tensors);
}

static void parse_range(ctx *c, json_t *v, const char *base, bf_range_opts *o)
{
    ptrbuf ptr = bf__spec_ptr_at(base, "range");
    json_t *f[COUNT(RANGE_NAMES)];
    if (!protection(c, v, ptr.s, RANGE_NAMES, COUNT(RANGE_NAMES), f)) return;
    o->enabled = 1;
    if (f[0]) get_bounds(c, f[0], bf__spec_ptr_at(ptr.s, "bounds").s, &o->declared, &o->lo, &o->hi);
    if (f[1]) {
        int k = bf__spec_get_enum(c, f[1], bf__spec_ptr_at(ptr.s, "action").s, RANGE_ACTIONS, COUNT(RANGE_ACTIONS));
        if (k >= 0) o->flag = k == 1;
    }
}

/* "ecc": SECDED over 64-bit words; its check bits take faults by default
 * with model "ber" (the only one that can put them there). */
static void parse_ecc(ctx *c, json_t *v, const char *base, bf_ecc_opts *o)
{
    ptrbuf ptr = bf__spec_ptr_at(base, "ecc");
    json_t *f[COUNT(ECC_NAMES)];
    if (!protection(c, v, ptr.s, ECC_NAMES, COUNT(ECC_NAMES), f)) return;
    o->enabled = 1;
    int on;
    if (f[0] && bf__spec_get_bool(c, f[0], bf__spec_ptr_at(ptr.s, "check_bits_faulty").s, &on))
        o->check_bits_faulty = on ? BF_ECC_CHECK_FAULTY : BF_ECC_CHECK_CLEAN;
    if (f[1]) get_strings(c, f[1], bf__spec_ptr_at(ptr.s, "tensors").s, "tensor names, globs or 'op:Type'", &o->tensors, &o->n_tensors);
}

/* What ecc needs of the faults: stored weights, and check bits that take
 * faults only under BER; the default made explicit for the results. */
static void check_ecc(ctx *c, bf_ecc_opts *o, const char *base, const bf_campaign_spec *s, const faults_info *fi)
{
    ptrbuf ptr = bf__spec_ptr_at(base, "ecc");
    if (fi->target_ok && s->target != BF_TARGET_WEIGHTS)
        bf__spec_problem(c, ptr.s, "protects stored weights: it needs /faults/target 'weights'");
    if (!fi->model_ok) return;
    if (o->check_bits_faulty == BF_ECC_CHECK_FAULTY && s->model_kind != BF_FAULT_BER)
        bf__spec_problem(c, bf__spec_ptr_at(ptr.s, "check_bits_faulty").s,
                         "true needs /faults/model 'ber' (check bits flip at its rate); a %s fault is drawn in a weight's bits",
                         bf_fault_model_name(s->model_kind));
    if (o->check_bits_faulty == BF_ECC_CHECK_DEFAULT)
        o->check_bits_faulty = s->model_kind == BF_FAULT_BER ? BF_ECC_CHECK_FAULTY : BF_ECC_CHECK_CLEAN;
}

/* "mitigations": ["none", "clip", {"name": ..., "clip": {...}, ...}, ...].
 * A name alone is that protection with its defaults; "none" (the
 * unprotected model, which recovery is measured against) comes first,
 * added if the list lacks it. */
void bf__spec_mitigations(ctx *c, json_t *v, bf_campaign_spec *s, const faults_info *fi)
{
    size_t n;
    if (!bf__spec_get_array(c, v, "/mitigations", "mitigation names or {\"name\": ..., \"clip\"|\"abft\"|\"sbp\"|\"range\"|\"ecc\": ...}", &n))
        return;
    if (!(s->mitigations = calloc(n + 1, sizeof *s->mitigations))) {
        c->nomem = true;
        return;
    }
    bf_mitigation *none = &s->mitigations[0];
    s->n_mitigations = 1;
    if (!(none->name = strdup("none"))) {
        c->nomem = true;
        return;
    }
    for (size_t i = 0; i < n && !c->nomem; i++) {
        json_t *e = json_array_get(v, i);
        ptrbuf p = bf__spec_ptr_index("/mitigations", i);
        bf_mitigation m = {0};
        if (json_is_string(e)) {
            int k = bf__spec_get_enum(c, e, p.s, MIT_SHORT, COUNT(MIT_SHORT));
            if (k < 0) continue;
            if (!(m.name = strdup(MIT_SHORT[k]))) {
                c->nomem = true;
                break;
            }
            m.clip.enabled = k == 1;
            m.clip.percentile = 100;
            m.abft.enabled = k == 2;
            m.sbp.enabled = k == 3;
            m.range.enabled = k == 4;
            m.ecc.enabled = k == 5;
        } else if (json_is_object(e)) {
            static const fieldset fs = {MIT_NAMES, COUNT(MIT_NAMES), NULL, 0, NULL};
            json_t *f[COUNT(MIT_NAMES)];
            bf__spec_take_fields(c, e, p.s, &fs, f);
            if (!f[0]) bf__spec_problem(c, bf__spec_ptr_at(p.s, "name").s, "required: what the results call this configuration");
            else bf__spec_dup_string(c, f[0], bf__spec_ptr_at(p.s, "name").s, &m.name);
            if (f[1]) parse_clip(c, f[1], p.s, &m.clip);
            if (f[2]) parse_abft(c, f[2], p.s, &m.abft);
            if (f[3]) parse_sbp(c, f[3], p.s, &m.sbp);
            if (f[4]) parse_range(c, f[4], p.s, &m.range);
            if (f[5]) parse_ecc(c, f[5], p.s, &m.ecc);
            if (m.name && strcmp(m.name, "none") != 0 && !f[1] && !f[2] && !f[3] && !f[4] && !f[5])
                bf__spec_problem(c, p.s, "names no protection: give one or more of \"clip\", \"abft\", \"sbp\", \"range\", "
                                "\"ecc\" (or call it \"none\")");
        } else {
            bf__spec_problem(c, p.s, "must be a mitigation name (none, clip, abft, sbp, range, ecc) or an object "
                            "{\"name\": ..., \"clip\": {...}, ...}, got %s", bf__spec_describe(e).s);
            continue;
        }
        if (!m.name) {
            bf_mitigation_free(&m);
            continue;
        }
        if (m.range.enabled && fi->target_ok && s->target != BF_TARGET_WEIGHTS)
            bf__spec_problem(c, bf__spec_ptr_at(p.s, "range").s, "checks stored weights: it needs /faults/target 'weights'");
        if (m.ecc.enabled) check_ecc(c, &m.ecc, p.s, s, fi);
        int dup = -1;
        for (size_t j = 0; j < s->n_mitigations; j++)
            if (strcmp(s->mitigations[j].name, m.name) == 0) dup = (int)j;
        if (dup == 0 && strcmp(m.name, "none") == 0 && !m.clip.enabled && !m.abft.enabled && !m.sbp.enabled &&
            !m.range.enabled && !m.ecc.enabled) {
            bf_mitigation_free(&m);   /* "none" listed: it is already first */
            continue;
        }
        if (dup >= 0) {
            bf__spec_problem(c, p.s, "the name '%s' is used twice; each configuration needs its own", m.name);
            bf_mitigation_free(&m);
            continue;
        }
        s->mitigations[s->n_mitigations++] = m;
    }
}

