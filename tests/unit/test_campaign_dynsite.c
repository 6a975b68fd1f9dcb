/* Faults after NMS: activation sites on a value a dynamic step computes
 * (its element count is data), checked fault by fault against PyTorch.
 * tests/fixtures/dynsite/make_dynsite.py exports a one-image detector and
 * flips, through a forward hook, every bit listed of every element of its
 * post-NMS boxes in every image; each trial of a campaign on that value
 * must report the element it struck in the image it hit, and give that
 * image PyTorch's outputs for that (element, bit) and every other image
 * golden's. Image 3 has no detection: a fault there does nothing, and its
 * record says so (index -1, run_elements 0, old/new NaN, masked). Also: the
 * site's weight (the golden mean of elements per image), explicit list
 * faults past a run's elements, the draw's scaling to a run's elements
 * (exec/plan.c), and BER refused on such a site. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"
#include "exec/plan_impl.h"
#include "campaign_check.h"

#define FIX BF_FIXTURES "/dynsite/"
#define TRIALS 150

typedef struct fx {
    bf_model *m;
    bf_dataset *ds;
    json_t *ref;
    const char *value;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    bf_error err = {0};
    json_error_t jerr;
    if (!f || bf_model_load_file(FIX "postnms.onnx", &f->m, &err) ||
        bf_dataset_load_file(FIX "postnms.eval.safetensors", &f->ds, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    if (!(f->ref = json_load_file(FIX "postnms.ref.json", 0, &jerr))) {
        fprintf(stderr, "setup: %s\n", jerr.text);
        return -1;
    }
    f->value = json_string_value(json_object_get(f->ref, "value"));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    bf_model_free(f->m);
    bf_dataset_free(f->ds);
    json_decref(f->ref);
    free(f);
    return 0;
}

static double num(const json_t *j)
{
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        return strcmp(s, "NaN") == 0 ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
    }
    return json_number_value(j);
}

/* PyTorch and bitflip sum the Conv in other orders: within 2e-5 relative
 * (1e-5 absolute); NaN and infinities exactly */
static int close_to(double got, double want)
{
    if (isnan(want) || isnan(got) || isinf(want) || isinf(got)) return (isnan(want) && isnan(got)) || got == want;
    return fabs(got - want) <= 1e-5 + 2e-5 * fabs(want);
}

static int64_t golden_elements(const fx *f, int64_t s)
{
    return (int64_t)json_array_size(json_object_get(json_array_get(json_object_get(f->ref, "golden"), (size_t)s), "boxes"));
}

typedef struct check {
    const fx *f;
    bf_trial_record rec;
    int64_t trials, empty_hits, struck, bad;
    unsigned char seen[64][3];   /* (element, bit index) struck in image 1 */
} check;

static void on_trial(void *user, const bf_trial_record *rec)
{
    ((check *)user)->rec = *rec;
}

/* image s of a trial's outputs against want (by output name) */
static int same_outputs(const bf_ragged_output *outs, size_t n, int64_t s, const json_t *want)
{
    for (size_t k = 0; k < n; k++) {
        const json_t *w = json_object_get(want, outs[k].name);
        size_t len = (size_t)(outs[k].offsets[s + 1] - outs[k].offsets[s]);
        if (!w || json_array_size(w) != len) return 0;
        for (size_t i = 0; i < len; i++)
            if (!close_to(outs[k].data[outs[k].offsets[s] + (int64_t)i], num(json_array_get(w, i)))) return 0;
    }
    return 1;
}

static void on_ragged(void *user, int64_t trial, const bf_ragged_output *outs, size_t n, int64_t samples)
{
    check *c = user;
    const bf_trial_record *r = &c->rec;
    const json_t *golden = json_object_get(c->f->ref, "golden");
    c->trials++;
    if (r->trial != trial || r->n_kept != 1) { c->bad++; return; }
    const bf_applied_fault *a = &r->faults[0];
    int64_t s = a->sample, n_el = golden_elements(c->f, s);
    if (a->run_elements != n_el) {
        fprintf(stderr, "trial %lld: image %lld: run_elements %lld, PyTorch's value has %lld\n", (long long)trial,
                (long long)s, (long long)a->run_elements, (long long)n_el);
        c->bad++;
        return;
    }
    const json_t *want = json_array_get(golden, (size_t)s);
    if (n_el == 0) {   /* no detection: the fault does nothing, and says so */
        c->empty_hits++;
        if (a->index != -1 || !isnan(a->old_value) || !isnan(a->new_value) || r->outcome != BF_OUTCOME_MASKED) {
            fprintf(stderr, "trial %lld: a fault on an empty value: index %lld, old %g, new %g, outcome %d\n",
                    (long long)trial, (long long)a->index, a->old_value, a->new_value, (int)r->outcome);
            c->bad++;
        }
    } else {
        int bit = -1;
        for (int b = 0; b < 32; b++)
            if (a->mask == (UINT32_C(1) << b)) bit = b;
        char key[16];
        snprintf(key, sizeof key, "%d", bit);
        const json_t *e = json_array_get(json_object_get(json_array_get(json_object_get(c->f->ref, "faults"), (size_t)s), key),
                                         (size_t)a->index);
        if (a->index < 0 || a->index >= n_el || !e) {
            fprintf(stderr, "trial %lld: element %lld bit %d of image %lld: not in the reference\n", (long long)trial,
                    (long long)a->index, bit, (long long)s);
            c->bad++;
            return;
        }
        c->struck++;
        const json_t *bits = json_object_get(c->f->ref, "bits");
        for (size_t bi = 0; s == 1 && bi < json_array_size(bits) && bi < 3; bi++)
            if (json_integer_value(json_array_get(bits, bi)) == bit) c->seen[a->index][bi] = 1;
        if (!close_to(a->old_value, num(json_object_get(e, "old"))) || !close_to(a->new_value, num(json_object_get(e, "new")))) {
            fprintf(stderr, "trial %lld: old/new %.9g/%.9g, PyTorch's %.9g/%.9g\n", (long long)trial, a->old_value,
                    a->new_value, num(json_object_get(e, "old")), num(json_object_get(e, "new")));
            c->bad++;
        }
        want = json_object_get(e, "outputs");
    }
    for (int64_t i = 0; i < samples; i++)
        if (!same_outputs(outs, n, i, i == s ? want : json_array_get(golden, (size_t)i))) {
            fprintf(stderr, "trial %lld (image %lld, element %lld): image %lld's outputs differ from PyTorch's\n",
                    (long long)trial, (long long)s, (long long)a->index, (long long)i);
            c->bad++;
            return;
        }
}

static bf_campaign_spec spec_of(fx *f, char **tensors)
{
    bf_campaign_spec s = tc_uniform_spec(0);
    tensors[0] = (char *)f->value;
    s.seed = 11;
    s.trials = TRIALS;
    s.target = BF_TARGET_ACTIVATIONS;
    s.persistence = BF_PERSIST_TRANSIENT;
    s.tensors = tensors;
    const json_t *bits = json_object_get(f->ref, "bits");
    for (size_t i = 0; i < json_array_size(bits); i++) s.positions[s.n_positions++] = (int)json_integer_value(json_array_get(bits, i));
    return s;
}

static void against_pytorch(void **state)
{
    fx *f = *state;
    char *tensors[1];
    bf_campaign_spec s = spec_of(f, tensors);
    bf_campaign *c = NULL;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_OK);
    /* the site's weight: the golden elements per image, their mean, rounded */
    int64_t total = 0, n = (int64_t)json_array_size(json_object_get(f->ref, "golden"));
    for (int64_t i = 0; i < n; i++) total += golden_elements(f, i);
    assert_int_equal(bf_campaign_num_sites(c), 1);
    const bf_site *site = bf_campaign_site(c, 0);
    assert_true(site->dynamic);
    assert_int_equal(site->elements, (2 * total + n) / (2 * n));
    check ck = {.f = f};
    bf_campaign_opts o = {.threads = 2, .on_trial = on_trial, .on_ragged = on_ragged, .user = &ck};
    bf_campaign_result res = {0};
    assert_int_equal(bf_campaign_run(c, &o, &res, &err), BF_OK);
    assert_int_equal(ck.trials, TRIALS);
    assert_int_equal(ck.bad, 0);
    assert_true(ck.empty_hits > 0);   /* image 3 was hit, and nothing happened */
    assert_int_equal(ck.empty_hits + ck.struck, TRIALS);
    /* the draw reaches the elements: image 1's (16 x 3 bits) at least a third of them */
    int seen = 0;
    for (int e = 0; e < 64; e++) seen += ck.seen[e][0] + ck.seen[e][1] + ck.seen[e][2];
    assert_true(seen >= 16);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

/* Explicit faults name the element: one past the image's elements, or in an
 * image with none, does nothing (index -1, old and new NaN, masked). */
typedef struct kept {
    bf_trial_record r[3];
    int n;
} kept;

static void keep(void *user, const bf_trial_record *rec)
{
    kept *k = user;
    if (k->n < 3) k->r[k->n++] = *rec;
}

static void list_faults(void **state)
{
    fx *f = *state;
    char *tensors[1];
    bf_campaign_spec s = spec_of(f, tensors);
    int64_t n0 = golden_elements(f, 0);
    bf_fault_entry list[3] = {{(char *)f->value, 5, 30, 0}, {(char *)f->value, n0, 30, 0}, {(char *)f->value, 0, 30, 3}};
    s.sampling = BF_SAMPLE_LIST;
    s.list = list;
    s.n_list = 3;
    s.n_positions = 0;
    bf_campaign *c = NULL;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_OK);
    kept k = {0};
    bf_campaign_opts o = {.threads = 1, .on_trial = keep, .user = &k};
    bf_campaign_result res = {0};
    assert_int_equal(bf_campaign_run(c, &o, &res, &err), BF_OK);
    assert_int_equal(k.n, 3);
    const json_t *e = json_array_get(json_object_get(json_array_get(json_object_get(f->ref, "faults"), 0), "30"), 5);
    assert_int_equal(k.r[0].faults[0].index, 5);
    assert_int_equal(k.r[0].faults[0].run_elements, n0);
    assert_true(close_to(k.r[0].faults[0].old_value, num(json_object_get(e, "old"))));
    assert_true(close_to(k.r[0].faults[0].new_value, num(json_object_get(e, "new"))));
    for (int t = 1; t < 3; t++) {
        const bf_applied_fault *a = &k.r[t].faults[0];
        assert_int_equal(a->index, -1);
        assert_int_equal(a->run_elements, t == 1 ? n0 : 0);
        assert_true(isnan(a->old_value) && isnan(a->new_value));
        assert_int_equal(k.r[t].outcome, BF_OUTCOME_MASKED);
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
}

/* A drawn fault's element is floor(draw * n / 2^62) of the run's n. */
static void draw_scaling(void **state)
{
    fx *f = *state;
    bf_plan *p = NULL;
    bf_error err = {0};
    bf_plan_opts po = {.unbatched = 1};
    assert_int_equal(bf_plan_create_opts(f->m, 1, &po, &p, &err), BF_OK);
    const bf_tensor *x = bf_dataset_find(f->ds, "images");
    bf_tensor *in = bf_plan_input(p, 0);
    int64_t n = golden_elements(f, 0), v = bf_model_find_value(f->m, f->value);
    memcpy(in->data, x->data, (size_t)bf_tensor_numel(in) * sizeof(float));
    const int64_t q = BF_VALUE_FAULT_DRAWS / n;
    int64_t draws[5] = {0, q - 1, q, 3 * q + 7, BF_VALUE_FAULT_DRAWS - 1};
    int64_t want[5] = {0, 0, 1, 3, n - 1};
    for (int k = 0; k < 5; k++) {
        bf_value_fault vf = {.value = v, .sample = 0, .index = draws[k], .model = BF_FAULT_BITFLIP, .mask = 1u << 3,
                             .repr = BF_REPR_FP32, .drawn = 1};
        assert_int_equal(bf_plan_set_value_faults(p, &vf, 1, &err), BF_OK);
        assert_int_equal(bf_plan_run(p, &err), BF_OK);
        int64_t at, el;
        bf__plan_value_fault_at(p, 0, &at, &el);
        assert_int_equal(el, n);
        assert_int_equal(at, want[k]);
    }
    bf_value_fault bad = {.value = v, .sample = 0, .index = BF_VALUE_FAULT_DRAWS, .model = BF_FAULT_BITFLIP, .mask = 1,
                          .repr = BF_REPR_FP32, .drawn = 1};
    assert_int_equal(bf_plan_set_value_faults(p, &bad, 1, &err), BF_ERANGE);
    bf_plan_free(p);
}

static void ber_refused(void **state)
{
    fx *f = *state;
    char *tensors[1];
    bf_campaign_spec s = spec_of(f, tensors);
    double rates[1] = {1e-3};
    s.model_kind = BF_FAULT_BER;
    s.rates = rates;
    s.n_rates = 1;
    s.repeats = 2;
    bf_campaign *c = NULL;
    bf_error err = {0};
    assert_int_equal(bf_campaign_create(f->m, f->ds, &s, &c, &err), BF_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "a dynamic step computes it"));
    assert_non_null(strstr(err.msg, f->value));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(against_pytorch),
        cmocka_unit_test(list_faults),
        cmocka_unit_test(draw_scaling),
        cmocka_unit_test(ber_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
