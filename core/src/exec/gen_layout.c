/* Generation: what each graph input and output of a language model is for
 * (the token ids, the mask, the positions, the KV cache, the logits), found
 * by name and checked by shape before any plan is built (bitflip/generate.h). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/gen_impl.h"

static int find_input(const bf_model *m, const char *name)
{
    for (size_t i = 0; i < bf_model_num_inputs(m); i++)
        if (!strcmp(bf_model_input(m, i)->name, name)) return (int)i;
    return -1;
}

static int find_output(const bf_model *m, const char *name)
{
    for (size_t i = 0; i < bf_model_num_outputs(m); i++)
        if (!strcmp(bf_model_output(m, i)->name, name)) return (int)i;
    return -1;
}

/* A cache tensor: float32, rank 4, heads and head size fixed and equal to
 * layer 0's (h and d -1 until layer 0 sets them). */
static bf_status check_cache(const bf_model *m, const bf_value_info *vi, const char *what, int64_t *h, int64_t *d,
                             bf_error *err)
{
    char shape[96];
    if (vi->dtype != BF_F32 || vi->ndim != 4 || vi->dims[1] < 1 || vi->dims[3] < 1)
        return bf_error_set(err, BF_EFORMAT,
                            "%s '%s' is %s %s; a KV cache is float32 [batch, heads, length, head size] with the "
                            "heads and the head size fixed",
                            what, vi->name, bf_dtype_name(vi->dtype), bf_shape_str(vi->dims, vi->ndim, shape, sizeof shape));
    if (*h < 0) *h = vi->dims[1], *d = vi->dims[3];
    if (vi->dims[1] != *h || vi->dims[3] != *d)
        return bf_error_set(err, BF_EFORMAT, "%s '%s' has %lld heads of %lld, layer 0's cache %lld of %lld", what,
                            vi->name, (long long)vi->dims[1], (long long)vi->dims[3], (long long)*h, (long long)*d);
    (void)m;
    return BF_OK;
}

/* Layer i's four names, or a refusal naming what is missing. kv: the input
 * and output indices, [4 * i + {past key, past value, present key, present value}]. */
static bf_status find_layer(const bf_model *m, int i, int *idx, int64_t *h, int64_t *d, bf_error *err)
{
    static const char *const kinds[2] = {"key", "value"};
    char name[64];
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "past_key_values.%d.%s", i, kinds[k]);
        idx[k] = find_input(m, name);
        snprintf(name, sizeof name, "present.%d.%s", i, kinds[k]);
        idx[2 + k] = find_output(m, name);
    }
    int any = 0, all = 1;
    for (int k = 0; k < 4; k++) any |= idx[k] >= 0, all &= idx[k] >= 0;
    if (!any) return BF_ENOTFOUND;
    if (!all) {
        static const char *const what[4] = {"graph input 'past_key_values.%d.key'", "graph input 'past_key_values.%d.value'",
                                            "graph output 'present.%d.key'", "graph output 'present.%d.value'"};
        for (int k = 0; k < 4; k++)
            if (idx[k] < 0) {
                char w[80];
                snprintf(w, sizeof w, what[k], i);
                return bf_error_set(err, BF_EFORMAT,
                                    "the KV cache of layer %d is incomplete: %s is missing (a cache export has "
                                    "past_key_values.{i}.key/value inputs and present.{i}.key/value outputs)",
                                    i, w);
            }
    }
    bf_status st;
    for (int k = 0; k < 2; k++) {
        if ((st = check_cache(m, bf_model_input(m, (size_t)idx[k]), "graph input", h, d, err)) != BF_OK) return st;
        if ((st = check_cache(m, bf_model_output(m, (size_t)idx[2 + k]), "graph output", h, d, err)) != BF_OK) return st;
    }
    return BF_OK;
}

bf_status bf__gen_find_kv(const bf_model *m, bf_kv_layout *out, int *idx, bf_error *err)
{
    int64_t h = -1, d = -1;
    int layers = 0, scratch[4];
    memset(out, 0, sizeof *out);
    for (;; layers++) {
        bf_status st = find_layer(m, layers, idx ? idx + 4 * layers : scratch, &h, &d, err);
        if (st == BF_ENOTFOUND) break;
        if (st != BF_OK) return st;
        if (layers >= BF__GEN_MAX_LAYERS)
            return bf_error_set(err, BF_EUNSUPPORTED, "the KV cache has more than %d layers", BF__GEN_MAX_LAYERS);
    }
    /* a layer past the first gap: the cache's names do not count from 0 without a hole */
    for (size_t i = 0; i < bf_model_num_inputs(m); i++) {
        const char *n = bf_model_input(m, i)->name;
        int l;
        if (sscanf(n, "past_key_values.%d.", &l) == 1 && (l < 0 || l >= layers))
            return bf_error_set(err, BF_EFORMAT,
                                "graph input '%s' names layer %d, but the KV cache's layers run 0 .. %d without a gap",
                                n, l, layers - 1);
    }
    out->layers = layers;
    out->heads = layers ? h : 0;
    out->head_dim = layers ? d : 0;
    return BF_OK;
}

bf_status bf_model_kv_layout(const bf_model *model, bf_kv_layout *out, bf_error *err)
{
    return bf__gen_find_kv(model, out, NULL, err);
}

static int is_int(bf_dtype t) { return t == BF_I64 || t == BF_I32; }

bf_status bf__gen_roles(const bf_model *m, int use_cache, bf__genio *r, bf_error *err)
{
    bf_status st;
    char shape[96];
    memset(r, 0, sizeof *r);
    r->ids = find_input(m, "input_ids");
    r->mask = find_input(m, "attention_mask");
    r->pos = find_input(m, "position_ids");
    if ((st = bf__gen_find_kv(m, &r->kv, r->kv_idx, err)) != BF_OK) return st;
    r->cache = r->kv.layers > 0 && use_cache;
    size_t n_in = bf_model_num_inputs(m);
    if (r->ids < 0) {
        /* the model's one input that is not the cache, the mask or the positions */
        for (size_t i = 0; i < n_in; i++) {
            const char *n = bf_model_input(m, i)->name;
            if ((int)i == r->mask || (int)i == r->pos || !strncmp(n, "past_key_values.", 16)) continue;
            if (r->ids >= 0) {
                r->ids = -1;
                break;
            }
            r->ids = (int)i;
        }
        if (r->ids < 0)
            return bf_error_set(err, BF_EFORMAT,
                                "the model has no graph input 'input_ids' (the token ids a generation feeds)");
    }
    const bf_value_info *ids = bf_model_input(m, (size_t)r->ids);
    if (!is_int(ids->dtype) || ids->ndim != 2)
        return bf_error_set(err, BF_EFORMAT, "graph input '%s' is %s %s; the token ids are int64 or int32 [batch, length]",
                            ids->name, bf_dtype_name(ids->dtype), bf_shape_str(ids->dims, ids->ndim, shape, sizeof shape));
    const int extra[2] = {r->mask, r->pos};
    for (int k = 0; k < 2; k++) {
        if (extra[k] < 0) continue;
        const bf_value_info *vi = bf_model_input(m, (size_t)extra[k]);
        if (vi->ndim != 2 || (k == 1 && !is_int(vi->dtype)) ||
            (k == 0 && !is_int(vi->dtype) && vi->dtype != BF_F32 && vi->dtype != BF_BOOL))
            return bf_error_set(err, BF_EFORMAT, "graph input '%s' is %s %s; a generation fills it as [batch, %s]",
                                vi->name, bf_dtype_name(vi->dtype), bf_shape_str(vi->dims, vi->ndim, shape, sizeof shape),
                                k == 0 ? "past + length] of ones (int64, int32, float or bool)" : "length] of positions (int64 or int32)");
    }
    for (size_t i = 0; i < n_in; i++) {
        int known = (int)i == r->ids || (int)i == r->mask || (int)i == r->pos;
        for (int l = 0; l < r->kv.layers; l++) known |= (int)i == r->kv_idx[4 * l] || (int)i == r->kv_idx[4 * l + 1];
        if (!known)
            return bf_error_set(err, BF_EUNSUPPORTED,
                                "graph input '%s' is none a generation fills (input_ids, attention_mask, position_ids, "
                                "past_key_values.{i}.key/value)",
                                bf_model_input(m, i)->name);
    }
    r->logits = find_output(m, "logits");
    if (r->logits < 0) r->logits = 0;
    const bf_value_info *lo = bf_model_output(m, (size_t)r->logits);
    if (lo->dtype != BF_F32 || (lo->ndim != 3 && lo->ndim != 2))
        return bf_error_set(err, BF_EFORMAT, "graph output '%s' is %s %s; the logits are float32 [batch, length, vocab] "
                            "or [batch, vocab]",
                            lo->name, bf_dtype_name(lo->dtype), bf_shape_str(lo->dims, lo->ndim, shape, sizeof shape));
    return BF_OK;
}
