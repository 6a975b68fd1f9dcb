/* bitflip info's language-model part: the KV-cache entries of a cache
 * export and the named fault sites (attention scores and probabilities,
 * MoE router logits, the KV cache's keys and values) of any model, where faults can be aimed by name. */
#include <jansson.h>
#include <string.h>

#include "cli.h"
#include "info_lm.h"

#define SITES_MAX 4096

void info_lm_print(const bf_model *m)
{
    bf_kv_layout kv;
    bf_error err = {0};
    if (bf_model_kv_layout(m, &kv, &err) != BF_OK) printf("\nKV cache: not usable: %s\n", err.msg);
    else if (kv.layers) {
        printf("\nKV cache (fault sites of 'bitflip generate --kv-flip LAYER:k|v:HEAD:POS:DIM:BIT')\n");
        printf("  %d layers x key, value x %lld heads x %lld dims, at positions 0 .. P+M-2 of a generation of M\n"
               "  tokens from prompts of P (the prompt's, then each fed token's)\n",
               kv.layers, (long long)kv.heads, (long long)kv.head_dim);
        for (int l = 0; l < kv.layers; l++)
            printf("  layer %-3d k: past_key_values.%d.key -> present.%d.key   v: past_key_values.%d.value -> "
                   "present.%d.value\n", l, l, l, l, l);
    }
    static bf_named_site sites[SITES_MAX];   /* the CLI's own, one model at a time */
    size_t n = bf_model_named_sites(m, sites, SITES_MAX);
    if (!n) return;
    printf("\nnamed fault sites (node outputs, per sample: 'bitflip generate --act-flip NAME:STEP:INDEX:BIT',\n"
           "or the ONNX value in a campaign's activation selector; k_cache.K and v_cache.K, the KV cache's\n"
           "keys and values, are also what a campaign's \"target\": \"kv_cache\" faults by head and position)\n");
    printf("  %-18s %-40s %s\n", "name", "ONNX value", "op");
    for (size_t i = 0; i < n && i < SITES_MAX; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s.%d", bf_named_site_kind_name(sites[i].kind), sites[i].index);
        printf("  %-18s %-40s %s\n", name, sites[i].value_name, sites[i].op ? sites[i].op : "-");
    }
    if (n > SITES_MAX) printf("  ... and %zu more\n", n - SITES_MAX);
}

void info_lm_json(const bf_model *m, json_t *root)
{
    bf_kv_layout kv;
    bf_error err = {0};
    if (bf_model_kv_layout(m, &kv, &err) != BF_OK)
        json_object_set_new(root, "kv_cache", json_pack("{s:s}", "error", err.msg));
    else if (!kv.layers)
        json_object_set_new(root, "kv_cache", json_null());
    else {
        json_t *layers = json_array();
        char names[4][64];
        for (int l = 0; l < kv.layers; l++) {
            snprintf(names[0], sizeof names[0], "past_key_values.%d.key", l);
            snprintf(names[1], sizeof names[1], "present.%d.key", l);
            snprintf(names[2], sizeof names[2], "past_key_values.%d.value", l);
            snprintf(names[3], sizeof names[3], "present.%d.value", l);
            json_array_append_new(layers, json_pack("{s:i, s:{s:s, s:s}, s:{s:s, s:s}}", "layer", l, "k", "input", names[0],
                                                    "output", names[1], "v", "input", names[2], "output", names[3]));
        }
        json_object_set_new(root, "kv_cache", json_pack("{s:i, s:I, s:I, s:o}", "layers", kv.layers, "heads",
                                                        (json_int_t)kv.heads, "head_dim", (json_int_t)kv.head_dim,
                                                        "entries", layers));
    }
    static bf_named_site sites[SITES_MAX];
    size_t n = bf_model_named_sites(m, sites, SITES_MAX);
    json_t *a = json_array();
    for (size_t i = 0; i < n && i < SITES_MAX; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s.%d", bf_named_site_kind_name(sites[i].kind), sites[i].index);
        json_array_append_new(a, json_pack("{s:s, s:s, s:i, s:s, s:s?, s:s?}", "name", name, "kind",
                                           bf_named_site_kind_name(sites[i].kind), "index", sites[i].index, "value",
                                           sites[i].value_name, "node", sites[i].node, "op", sites[i].op));
    }
    json_object_set_new(root, "sites", a);
}
