/* Generation's runs: the faults checked, the steps of each batch fed and run
 * in order, the KV cache carried from one step's plan to the next, and the
 * faults applied where they strike (bitflip/generate.h). */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/metrics.h"
#include "exec/gen_impl.h"

static bf_status check_kv(const bf_generator *g, const bf_kv_fault *f, size_t i, bf_error *err)
{
    const bf_kv_layout *kv = &g->io.kv;
    if (!g->io.cache)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "KV-cache fault %zu: %s; a KV-cache fault needs an export with past_key_values.{i}.key/value "
                            "inputs and present.{i}.key/value outputs (docs/LM.md)",
                            i, kv->layers ? "the generation re-runs the prefix (no cache)" : "this export has no KV cache");
    int64_t last = g->p + g->mnew - 2;
    if (f->layer < 0 || f->layer >= kv->layers)
        return bf_error_set(err, BF_ERANGE, "KV-cache fault %zu: layer %d does not exist (the cache has layers 0 .. %d)",
                            i, f->layer, kv->layers - 1);
    if (f->value != 0 && f->value != 1)
        return bf_error_set(err, BF_EINVAL, "KV-cache fault %zu: neither the key nor the value cache (%d)", i, f->value);
    if (f->head < 0 || f->head >= kv->heads)
        return bf_error_set(err, BF_ERANGE, "KV-cache fault %zu: head %lld does not exist (0 .. %lld)", i,
                            (long long)f->head, (long long)kv->heads - 1);
    if (f->dim < 0 || f->dim >= kv->head_dim)
        return bf_error_set(err, BF_ERANGE, "KV-cache fault %zu: dim %lld does not exist (0 .. %lld)", i,
                            (long long)f->dim, (long long)kv->head_dim - 1);
    if (f->pos < 0 || f->pos > last)
        return bf_error_set(err, BF_ERANGE,
                            "KV-cache fault %zu: position %lld is never written: %lld new tokens from prompts of %lld "
                            "write the cache at positions 0 .. %lld (the last token is not fed back)",
                            i, (long long)f->pos, (long long)g->mnew, (long long)g->p, (long long)last);
    if (f->bit < 0 || f->bit > 31)
        return bf_error_set(err, BF_ERANGE, "KV-cache fault %zu: bit %d of a float32 does not exist (0 .. 31)", i, f->bit);
    if (f->prompt < -1 || f->prompt >= g->n)
        return bf_error_set(err, BF_ERANGE, "KV-cache fault %zu: prompt %lld does not exist (0 .. %lld, or -1: all)", i,
                            (long long)f->prompt, (long long)g->n - 1);
    return BF_OK;
}

bf_status bf_generator_check(const bf_generator *g, const bf_gen_faults *f, bf_error *err)
{
    bf_status st;
    if (!f) return BF_OK;
    for (size_t i = 0; i < f->n_flips; i++)
        if ((st = bf_bitflip_check(g->m, &f->flips[i], err)) != BF_OK) return bf_error_prefix(err, "weight fault %zu", i);
    for (size_t i = 0; i < f->n_kv; i++)
        if ((st = check_kv(g, &f->kv[i], i, err)) != BF_OK) return st;
    for (size_t i = 0; i < f->n_values; i++) {
        const bf_gen_value_fault *v = &f->values[i];
        if (v->step < 0 || v->step >= g->mnew)
            return bf_error_set(err, BF_ERANGE, "value fault %zu: step %lld does not exist (0 .. %lld)", i,
                                (long long)v->step, (long long)g->mnew - 1);
        if (v->fault.sample < -1 || v->fault.sample >= g->n)
            return bf_error_set(err, BF_ERANGE, "value fault %zu: prompt %lld does not exist (0 .. %lld, or -1: all)", i,
                                (long long)v->fault.sample, (long long)g->n - 1);
        /* the value, its type and the element, against the plan of its step */
        bf_value_fault one = v->fault;
        one.sample = -1;
        bf_plan *plan = g->steps[v->step].plan;
        st = bf_plan_set_value_faults(plan, &one, 1, err);
        bf_plan_set_value_faults(plan, NULL, 0, NULL);
        if (st != BF_OK) return bf_error_prefix(err, "value fault %zu at step %lld", i, (long long)v->step);
    }
    return BF_OK;
}

static void set_int(bf_tensor *t, int64_t i, int64_t v)
{
    if (t->dtype == BF_I64) ((int64_t *)t->data)[i] = v;
    else ((int32_t *)t->data)[i] = (int32_t)v;
}

/* The token ids, mask and positions of step s for the batch in g->seq. */
static void feed_tokens(bf_generator *g, int64_t s)
{
    const bf__gen_step *st = &g->steps[s];
    bf_plan *plan = st->plan;
    int64_t width = g->p + g->mnew, first = st->past;   /* the first position fed */
    bf_tensor *ids = bf_plan_input(plan, (size_t)g->io.ids);
    for (int64_t r = 0; r < g->batch; r++)
        for (int64_t t = 0; t < st->seq; t++) set_int(ids, r * st->seq + t, g->seq[r * width + first + t]);
    if (g->io.mask >= 0) {
        bf_tensor *mk = bf_plan_input(plan, (size_t)g->io.mask);
        int64_t n = bf_tensor_numel(mk);
        for (int64_t i = 0; i < n; i++) {
            if (mk->dtype == BF_F32) ((float *)mk->data)[i] = 1.0f;
            else if (mk->dtype == BF_BOOL) ((unsigned char *)mk->data)[i] = 1;
            else set_int(mk, i, 1);
        }
    }
    if (g->io.pos >= 0) {
        bf_tensor *ps = bf_plan_input(plan, (size_t)g->io.pos);
        for (int64_t r = 0; r < g->batch; r++)
            for (int64_t t = 0; t < st->seq; t++) set_int(ps, r * st->seq + t, first + t);
    }
}

/* The past of step s: what step s-1 returned, with the KV-cache faults on the
 * positions step s-1 wrote flipped in it (and carried on from here, as every
 * later present holds this past). Step 0's past, and every past without the
 * cache, is empty. */
static void feed_past(bf_generator *g, int64_t s, int64_t b0, const bf_gen_faults *f)
{
    if (!g->io.cache || s == 0) return;
    const bf__gen_step *prev = &g->steps[s - 1];
    bf_plan *plan = g->steps[s].plan;
    int64_t len = g->steps[s].past, h = g->io.kv.heads, d = g->io.kv.head_dim;
    for (int l = 0; l < g->io.kv.layers; l++)
        for (int k = 0; k < 2; k++) {
            bf_tensor *dst = bf_plan_input(plan, (size_t)g->io.kv_idx[4 * l + k]);
            const bf_tensor *src = bf_plan_output(prev->plan, (size_t)g->io.kv_idx[4 * l + 2 + k]);
            memcpy(dst->data, src->data, bf_tensor_nbytes(dst));   /* shapes checked at build */
        }
    for (size_t i = 0; f && i < f->n_kv; i++) {
        const bf_kv_fault *kf = &f->kv[i];
        if (kf->pos < prev->past || kf->pos >= prev->past + prev->seq) continue;   /* not written by step s-1 */
        float *t = bf_plan_input(plan, (size_t)g->io.kv_idx[4 * kf->layer + kf->value])->data;
        for (int64_t r = 0; r < g->batch; r++) {
            if (kf->prompt >= 0 && kf->prompt != b0 + r) continue;
            int64_t at = ((r * h + kf->head) * len + kf->pos) * d + kf->dim;
            t[at] = bf_flip_f32(t[at], kf->bit);
        }
    }
}

/* Step s's value faults that hit this batch, its rows for their prompts. */
static bf_status set_values(bf_generator *g, int64_t s, int64_t b0, int64_t real, const bf_gen_faults *f, size_t *n,
                            bf_error *err)
{
    *n = 0;
    for (size_t i = 0; f && i < f->n_values; i++) {
        const bf_gen_value_fault *v = &f->values[i];
        if (v->step != s || (v->fault.sample >= 0 && (v->fault.sample < b0 || v->fault.sample >= b0 + real))) continue;
        g->vf[*n] = v->fault;
        g->vf[*n].sample = v->fault.sample < 0 ? -1 : v->fault.sample - b0;
        (*n)++;
    }
    if (!*n) return BF_OK;
    return bf_plan_set_value_faults(g->steps[s].plan, g->vf, *n, err);
}

static bf_status run_batch(bf_generator *g, int64_t b0, const bf_gen_faults *f, int64_t *tokens, bf_error *err)
{
    int64_t width = g->p + g->mnew, real = g->n - b0 < g->batch ? g->n - b0 : g->batch;
    for (int64_t r = 0; r < g->batch; r++)   /* past the last prompt: copies of it, run and dropped */
        memcpy(g->seq + r * width, g->prompts + (r < real ? b0 + r : b0 + real - 1) * g->p, (size_t)g->p * sizeof *g->seq);
    for (int64_t s = 0; s < g->mnew; s++) {
        bf__gen_step *st = &g->steps[s];
        size_t nv;
        bf_status rc;
        feed_tokens(g, s);
        feed_past(g, s, b0, f);
        if ((rc = set_values(g, s, b0, real, f, &nv, err)) != BF_OK) return rc;
        rc = bf_plan_run(st->plan, err);
        if (nv) bf_plan_set_value_faults(st->plan, NULL, 0, NULL);
        if (rc != BF_OK) return bf_error_prefix(err, "step %lld", (long long)s);
        const bf_tensor *lo = bf_plan_output(st->plan, (size_t)g->io.logits);
        int64_t rows = lo->ndim == 3 ? st->seq : 1;
        for (int64_t r = 0; r < g->batch; r++) {
            const float *row = (const float *)lo->data + ((r * rows) + rows - 1) * g->vocab;
            int64_t tok = bf_argmax_nan_wins(row, g->vocab);   /* torch.argmax: bitflip/metrics.h */
            g->seq[r * width + g->p + s] = tok;
            if (r < real) tokens[(b0 + r) * g->mnew + s] = tok;
        }
    }
    return BF_OK;
}

/* Flips (or, again, restores: a flip is its own inverse) the weight faults
 * 0 .. n-1 in every step's plan. */
static bf_status flip_all(bf_generator *g, const bf_gen_faults *f, size_t n, bf_error *err)
{
    for (int64_t s = 0; s < g->mnew; s++)
        for (size_t i = n; i-- > 0;) {
            bf_status st = bf_plan_flip_bit(g->steps[s].plan, &f->flips[i], NULL, NULL, err);
            if (st != BF_OK) {   /* only allocation fails here (checked before): undo this plan's */
                for (size_t j = i + 1; j < n; j++) bf_plan_flip_bit(g->steps[s].plan, &f->flips[j], NULL, NULL, NULL);
                for (int64_t t = 0; t < s; t++)
                    for (size_t j = 0; j < n; j++) bf_plan_flip_bit(g->steps[t].plan, &f->flips[j], NULL, NULL, NULL);
                return st;
            }
        }
    return BF_OK;
}

bf_status bf_generator_run(bf_generator *g, const bf_gen_faults *f, int64_t *tokens, bf_error *err)
{
    bf_status st = bf_generator_check(g, f, err);
    if (st != BF_OK) return st;
    size_t nv = f ? f->n_values : 0, nf = f ? f->n_flips : 0;
    if (nv > g->vf_cap) {
        bf_value_fault *v = bf__realloc(g->vf, nv * sizeof *v);
        if (!v) return bf_error_set(err, BF_ENOMEM, "out of memory");
        g->vf = v;
        g->vf_cap = nv;
    }
    if (nf && (st = flip_all(g, f, nf, err)) != BF_OK) return st;
    for (int64_t b0 = 0; b0 < g->n && st == BF_OK; b0 += g->batch) st = run_batch(g, b0, f, tokens, err);
    /* restored whatever happened: a copy a flip made is still there, so nothing allocates */
    if (nf) flip_all(g, f, nf, NULL);
    return st;
}
