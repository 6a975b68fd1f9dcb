/* bitflip generate: greedy decoding of a language model over an eval set of
 * prompts, golden and under faults in weights, in the KV cache and in
 * activations at one step, with how far each fault moves the tokens. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "faults_cli.h"

static const char help[] =
    "usage: bitflip generate [OPTIONS] MODEL.onnx PROMPTS.safetensors\n"
    "\n"
    "Greedy decoding: from each prompt of the eval set (a tensor 'input_ids', int64\n"
    "[N, P]: N prompts of P tokens each), -n new tokens, each the arg-max of the\n"
    "last position's logits fed back as the next input. An export with a KV cache\n"
    "(inputs past_key_values.{i}.key/value, outputs present.{i}.key/value) runs one\n"
    "token per step over the cache; one without re-runs the whole sequence each\n"
    "step (docs/LM.md). Prints the golden tokens, then each fault as its own\n"
    "generation: its tokens and generation_match (share of prompts whose tokens\n"
    "all equal golden's), first_divergence (mean first changed position; -n for\n"
    "an unchanged prompt) and edit_distance (mean token Levenshtein distance).\n"
    "\n"
    "  -n, --new-tokens M   tokens to generate per prompt, 1 to 1024 (default 16)\n"
    "  --flip P:I:B         flip bit B of element I of parameter P (as bitflip eval\n"
    "                       takes it) for the whole generation; repeatable\n"
    "  --kv-flip L:k|v:H:POS:D:B\n"
    "                       flip bit B of the KV-cache entry of layer L, key (k) or\n"
    "                       value (v), head H, position POS, dim D, once, right\n"
    "                       after the step that writes position POS; every later\n"
    "                       step reads it. Positions: the prompt's 0..P-1, then\n"
    "                       the generated tokens' (up to P+M-2: the last token is\n"
    "                       never fed). Needs an export with a KV cache; repeatable\n"
    "  --act-flip V:STEP:I:B\n"
    "                       flip bit B of element I (within one prompt's slice at\n"
    "                       that step's shape) of node output or graph input V (its\n"
    "                       ONNX name, or a site 'bitflip info' lists, such as\n"
    "                       attn_probs.0) in step STEP's run only (0 .. M-1);\n"
    "                       repeatable\n"
    "  --prompt K           KV-cache and activation faults hit prompt K only\n"
    "                       (default: every prompt)\n"
    "  --together           all faults in one generation, not each its own\n"
    "  --no-cache           re-run the prefix even if the export has a KV cache\n"
    "  --batch N            prompts per plan run (default: all, at most 64)\n"
    "  --show N             prompts whose tokens are printed (default 4; --json: all)\n"
    "  --json               machine-readable output\n"
    CLI_LIMITS_HELP
    "\n"
    "example:\n"
    "  bitflip generate gpt_kv.onnx prompts.safetensors -n 8 --kv-flip 0:k:1:2:3:30\n";

typedef struct opts {
    const char *model_path, *data_path;
    long long new_tokens, batch, show, prompt;
    int json, together, no_cache;
    cli_limits lim;
    const char **flip, **kv, **act;
    size_t n_flip, n_kv, n_act;
} opts;

static int parse_args(int argc, char **argv, opts *o)
{
    enum { OPT_JSON = CLI_OPT_FIRST, OPT_FLIP, OPT_KV, OPT_ACT, OPT_PROMPT, OPT_TOGETHER, OPT_NO_CACHE, OPT_BATCH,
           OPT_SHOW };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},           {"new-tokens", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, OPT_JSON},      {"flip", required_argument, NULL, OPT_FLIP},
        {"kv-flip", required_argument, NULL, OPT_KV}, {"act-flip", required_argument, NULL, OPT_ACT},
        {"prompt", required_argument, NULL, OPT_PROMPT}, {"together", no_argument, NULL, OPT_TOGETHER},
        {"no-cache", no_argument, NULL, OPT_NO_CACHE}, {"batch", required_argument, NULL, OPT_BATCH},
        {"show", required_argument, NULL, OPT_SHOW}, CLI_LIMITS_OPTIONS,
        {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    int c, rc = 0;
    cli_parser_init(&p, "generate", argc, argv, "hn:", longopts);
    while ((c = cli_parser_next(&p, &v)) != CLI_END) {
        switch (c) {
        case 'h': fputs(help, stdout); return -1;
        case 'n': rc = parse_count("generate", "--new-tokens", v, 1, BF_GEN_MAX_NEW_TOKENS, &o->new_tokens); break;
        case OPT_JSON: o->json = 1; break;
        case OPT_FLIP: o->flip[o->n_flip++] = v; break;
        case OPT_KV: o->kv[o->n_kv++] = v; break;
        case OPT_ACT: o->act[o->n_act++] = v; break;
        case OPT_PROMPT: rc = parse_count("generate", "--prompt", v, 0, INT64_MAX, &o->prompt); break;
        case OPT_TOGETHER: o->together = 1; break;
        case OPT_NO_CACHE: o->no_cache = 1; break;
        case OPT_BATCH: rc = parse_count("generate", "--batch", v, 1, 1 << 16, &o->batch); break;
        case OPT_SHOW: rc = parse_count("generate", "--show", v, 0, 1 << 20, &o->show); break;
        case CLI_ARG:
            if (!o->model_path) o->model_path = v;
            else if (!o->data_path) o->data_path = v;
            else return usage_error("generate", "unexpected argument '%s'", v);
            break;
        case CLI_BAD: return EXIT_USAGE;
        default:
            if (!cli_limit_option("generate", c, v, &o->lim, &rc)) return EXIT_USAGE;
        }
        if (rc) return rc;
    }
    if (!o->model_path || !o->data_path)
        return usage_error("generate", "needs a model and prompts: bitflip generate MODEL.onnx PROMPTS.safetensors");
    return 0;
}

/* One generation's faults, as given, with what to call it. */
typedef struct run_spec {
    bf_gen_faults f;
    char what[256];
    json_t *desc;             /* --json: the fault's fields */
} run_spec;

static json_t *tokens_json(const int64_t *t, int64_t n, int64_t m)
{
    json_t *rows = json_array();
    for (int64_t i = 0; i < n; i++) {
        json_t *r = json_array();
        for (int64_t s = 0; s < m; s++) json_array_append_new(r, json_integer(t[i * m + s]));
        json_array_append_new(rows, r);
    }
    return rows;
}

/* "  prompt 2: 5 9 [12 3 3]": from the first token that differs from golden on, in brackets. */
static void print_tokens(const char *label, const int64_t *t, const int64_t *golden, int64_t m)
{
    int64_t k = 0;
    while (golden && k < m && t[k] == golden[k]) k++;
    printf("    %-9s", label);
    for (int64_t s = 0; s < m; s++) printf("%s%s%lld%s", s ? " " : "", golden && s == k ? "[" : "", (long long)t[s],
                                           golden && k < m && s == m - 1 ? "]" : "");
    fputc('\n', stdout);
}

static void describe_flip(const bf_model *m, const bf_bitflip *f, run_spec *r, int json)
{
    const bf_param_info *p = bf_model_param(m, f->param);
    float old = p->dtype == BF_F32 ? ((const float *)p->tensor->data)[f->index] : NAN;
    float now = p->dtype == BF_F32 ? bf_flip_f32(old, f->bit) : NAN;
    snprintf(r->what, sizeof r->what, "weight %s[%lld] bit %d  (%.7g -> %.7g)", p->tensor->name, (long long)f->index,
             f->bit, old, now);
    if (json)
        r->desc = json_pack("{s:s, s:s, s:I, s:i, s:o, s:o}", "kind", "weight", "param", p->tensor->name, "index",
                            (json_int_t)f->index, "bit", f->bit, "old", isfinite(old) ? json_real(old) : json_null(),
                            "new", isfinite(now) ? json_real(now) : json_null());
}

static void describe_kv(const bf_kv_fault *k, run_spec *r, int json)
{
    snprintf(r->what, sizeof r->what, "kv layer %d %s head %lld pos %lld dim %lld bit %d%s", k->layer,
             k->value ? "value" : "key", (long long)k->head, (long long)k->pos, (long long)k->dim, k->bit,
             k->prompt >= 0 ? " (one prompt)" : "");
    if (json)
        r->desc = json_pack("{s:s, s:i, s:s, s:I, s:I, s:I, s:i, s:I}", "kind", "kv", "layer", k->layer, "kv",
                            k->value ? "v" : "k", "head", (json_int_t)k->head, "pos", (json_int_t)k->pos, "dim",
                            (json_int_t)k->dim, "bit", k->bit, "prompt", (json_int_t)k->prompt);
}

/* The ONNX name of a site's value ("attn_probs.0" -> its node output), or NULL. */
static const char *site_value_name(const bf_model *m, int64_t value)
{
    bf_named_site sites[256];
    size_t n = bf_model_named_sites(m, sites, 256);
    for (size_t i = 0; i < n && i < 256; i++)
        if (sites[i].value == value) return sites[i].value_name;
    return NULL;
}

static void describe_act(const bf_model *m, const char *spec, const bf_gen_value_fault *a, run_spec *r, int json)
{
    int bit = 0;
    while (bit < 31 && !(a->fault.mask >> bit & 1)) bit++;
    char name[256];
    snprintf(name, sizeof name, "%s", spec);
    for (int k = 0; k < 3; k++) {   /* VALUE:STEP:INDEX:BIT -> VALUE */
        char *c = strrchr(name, ':');
        if (c) *c = '\0';
    }
    snprintf(r->what, sizeof r->what, "activation %.120s step %lld [%lld] bit %d%s", name, (long long)a->step,
             (long long)a->fault.index, bit, a->fault.sample >= 0 ? " (one prompt)" : "");
    if (json) {
        const char *value = bf_model_find_value(m, name) >= 0 ? name : site_value_name(m, a->fault.value);
        r->desc = json_pack("{s:s, s:s, s:s?, s:I, s:I, s:i, s:I}", "kind", "activation", "site", name, "value", value,
                            "step", (json_int_t)a->step, "index", (json_int_t)a->fault.index, "bit", bit, "prompt",
                            (json_int_t)a->fault.sample);
    }
}

/* The faults as parsed, into the generations to run: each its own, or
 * (--together) one holding them all. */
static int make_runs(const opts *o, const bf_model *m, bf_bitflip *flips, bf_kv_fault *kv, bf_gen_value_fault *act,
                     run_spec *runs, size_t *n_runs)
{
    size_t n = 0;
    for (size_t i = 0; i < o->n_flip; i++) {
        runs[n] = (run_spec){.f = {.flips = &flips[i], .n_flips = 1}};
        describe_flip(m, &flips[i], &runs[n++], o->json);
    }
    for (size_t i = 0; i < o->n_kv; i++) {
        runs[n] = (run_spec){.f = {.kv = &kv[i], .n_kv = 1}};
        describe_kv(&kv[i], &runs[n++], o->json);
    }
    for (size_t i = 0; i < o->n_act; i++) {
        runs[n] = (run_spec){.f = {.values = &act[i], .n_values = 1}};
        describe_act(m, o->act[i], &act[i], &runs[n++], o->json);
    }
    if (o->together && n > 1) {   /* one generation: the descriptions listed in it */
        json_t *all = o->json ? json_array() : NULL;
        for (size_t i = 0; i < n; i++)
            if (all) json_array_append_new(all, runs[i].desc);
        runs[0] = (run_spec){.f = {.flips = flips, .n_flips = o->n_flip, .kv = kv, .n_kv = o->n_kv, .values = act,
                                   .n_values = o->n_act},
                             .desc = all ? json_pack("{s:s, s:o}", "kind", "together", "faults", all) : NULL};
        snprintf(runs[0].what, sizeof runs[0].what, "%zu faults together", n);
        n = 1;
    }
    *n_runs = n;
    return 0;
}

static int parse_faults(opts *o, const bf_model *m, bf_bitflip *flips, bf_kv_fault *kv, bf_gen_value_fault *act)
{
    int rc;
    for (size_t i = 0; i < o->n_flip; i++)
        if ((rc = cli_parse_flip("generate", m, o->flip[i], &flips[i])) != 0) return rc;
    for (size_t i = 0; i < o->n_kv; i++) {
        if ((rc = cli_parse_kv_flip("generate", o->kv[i], &kv[i])) != 0) return rc;
        kv[i].prompt = o->prompt;
    }
    for (size_t i = 0; i < o->n_act; i++) {
        if ((rc = cli_parse_act_flip("generate", m, o->act[i], &act[i])) != 0) return rc;
        act[i].fault.sample = o->prompt;
    }
    return 0;
}

static void print_header(const opts *o, bf_generator *g, double build_s, double gold_s)
{
    bf_kv_layout kv = bf_generator_kv(g);
    char b[32];
    printf("model    %s (", o->model_path);
    if (kv.layers) printf("KV cache: %d layers, %lld heads of %lld)\n", kv.layers, (long long)kv.heads, (long long)kv.head_dim);
    else printf("%s)\n", o->no_cache ? "--no-cache: the prefix re-run each step" : "no KV cache: the prefix re-run each step");
    printf("prompts  %s: %lld prompts of %lld tokens, %lld new tokens each, vocabulary %lld\n", o->data_path,
           (long long)bf_generator_prompts(g), (long long)bf_generator_prompt_len(g), (long long)bf_generator_new_tokens(g),
           (long long)bf_generator_vocab(g));
    printf("plans    %lld (one per step, batch %lld): %s, built in %.1f ms\n", (long long)bf_generator_new_tokens(g),
           (long long)bf_generator_batch(g), bf_bytes_str(bf_generator_plan_bytes(g), b, sizeof b), build_s * 1e3);
    printf("golden   generated in %.1f ms\n", gold_s * 1e3);
}

static json_t *json_header(const opts *o, bf_generator *g, double build_s, double gold_s, const int64_t *golden)
{
    bf_kv_layout kv = bf_generator_kv(g);
    int64_t n = bf_generator_prompts(g), m = bf_generator_new_tokens(g);
    json_t *root = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "model", o->model_path, "prompts",
                             o->data_path, "samples", (json_int_t)n, "prompt_len", (json_int_t)bf_generator_prompt_len(g),
                             "new_tokens", (json_int_t)m, "vocab", (json_int_t)bf_generator_vocab(g), "batch",
                             (json_int_t)bf_generator_batch(g), "plan_bytes", (json_int_t)bf_generator_plan_bytes(g),
                             "plan_build_seconds", build_s, "golden_seconds", gold_s);
    if (!root) return NULL;
    json_object_set_new(root, "kv_cache", kv.layers ? json_pack("{s:i, s:I, s:I}", "layers", kv.layers, "heads",
                                                                (json_int_t)kv.heads, "head_dim", (json_int_t)kv.head_dim)
                                                    : json_null());
    json_object_set_new(root, "golden", tokens_json(golden, n, m));
    return root;
}

/* One fault's generation: its metrics and tokens printed or added to jfaults. */
static int report_run(const opts *o, bf_generator *g, run_spec *r, const int64_t *golden, int64_t *tokens,
                      json_t *jfaults)
{
    bf_error err = {0};
    int64_t n = bf_generator_prompts(g), m = bf_generator_new_tokens(g);
    bf_gen_metrics mt;
    if (bf_generator_run(g, &r->f, tokens, &err) != BF_OK) return report_error("generate", &err);
    if (bf_gen_compare(golden, tokens, n, m, NULL, &mt, &err) != BF_OK) return report_error("generate", &err);
    if (o->json) {
        json_t *f = r->desc ? r->desc : json_object();
        r->desc = NULL;
        json_object_set_new(f, "generation_match", json_real(mt.generation_match));
        json_object_set_new(f, "first_divergence", json_real(mt.first_divergence));
        json_object_set_new(f, "edit_distance", json_real(mt.edit_distance));
        json_object_set_new(f, "tokens", tokens_json(tokens, n, m));
        json_array_append_new(jfaults, f);
        return 0;
    }
    printf("  %s\n    generation_match %.4f   first_divergence %.3f   edit_distance %.3f\n", r->what,
           mt.generation_match, mt.first_divergence, mt.edit_distance);
    for (int64_t i = 0; i < n && i < o->show; i++) {
        char label[32];
        snprintf(label, sizeof label, "prompt %lld", (long long)i);
        print_tokens(label, tokens + i * m, golden + i * m, m);
    }
    return 0;
}

int cmd_generate(int argc, char **argv)
{
    opts o = {.new_tokens = 16, .show = 4, .prompt = -1};
    cli_limits_init(&o.lim);
    int rc = EXIT_OK;
    bf_error err = {0};
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_generator *g = NULL;
    bf_bitflip *flips = NULL;
    bf_kv_fault *kv = NULL;
    bf_gen_value_fault *act = NULL;
    run_spec *runs = NULL;
    int64_t *golden = NULL, *tokens = NULL;
    json_t *root = NULL, *jfaults = NULL;
    size_t n_runs = 0, cap = (size_t)argc + 1;

    o.flip = calloc(cap, sizeof *o.flip), o.kv = calloc(cap, sizeof *o.kv), o.act = calloc(cap, sizeof *o.act);
    flips = calloc(cap, sizeof *flips), kv = calloc(cap, sizeof *kv), act = calloc(cap, sizeof *act);
    runs = calloc(3 * cap, sizeof *runs);
    if (!o.flip || !o.kv || !o.act || !flips || !kv || !act || !runs) { rc = EXIT_INFRA; fprintf(stderr, "bitflip generate: out of memory\n"); goto out; }
    if ((rc = parse_args(argc, argv, &o)) != 0) { rc = rc < 0 ? EXIT_OK : rc; goto out; }
    if (bf_model_load_file_opts(o.model_path, &o.lim.model, &m, &err) != BF_OK) { rc = report_error("generate", &err); goto out; }
    if (bf_dataset_load_file_opts(o.data_path, &o.lim.data, &ds, &err) != BF_OK) { rc = report_error("generate", &err); goto out; }
    const bf_tensor *ids = bf_dataset_find(ds, "input_ids");
    if (!ids) {
        fprintf(stderr, "bitflip generate: %s has no tensor 'input_ids' (the prompts: int64 [N, P])\n", o.data_path);
        rc = EXIT_INFRA;
        goto out;
    }
    if (o.prompt >= bf_dataset_num_samples(ds)) {
        rc = usage_error("generate", "--prompt %lld: %s has %lld prompts (0 .. %lld)", o.prompt, o.data_path,
                         (long long)bf_dataset_num_samples(ds), (long long)bf_dataset_num_samples(ds) - 1);
        goto out;
    }
    if ((rc = parse_faults(&o, m, flips, kv, act)) != 0) goto out;

    bf_gen_opts go = {.new_tokens = o.new_tokens, .batch = o.batch, .no_cache = o.no_cache,
                      .max_bytes = (uint64_t)o.lim.job_memory};
    double t0 = cli_now();
    if (bf_generator_create(m, ids, &go, &g, &err) != BF_OK) {
        bf_error_prefix(&err, "%s with %s", o.model_path, o.data_path);
        if (err.status == BF_ELIMIT) {   /* the plans over --job-memory: the flag named */
            fprintf(stderr, "bitflip generate: %s (--job-memory)\n", err.msg);
            rc = EXIT_INFRA;
            goto out;
        }
        rc = report_error("generate", &err);
        goto out;
    }
    double build_s = cli_now() - t0;
    make_runs(&o, m, flips, kv, act, runs, &n_runs);
    for (size_t i = 0; i < n_runs; i++)   /* every fault checked before the first generation */
        if (bf_generator_check(g, &runs[i].f, &err) != BF_OK) { rc = usage_error("generate", "%s: %s", runs[i].what, err.msg); goto out; }
    int64_t n = bf_generator_prompts(g), mt = bf_generator_new_tokens(g);
    golden = calloc((size_t)(n * mt), sizeof *golden), tokens = calloc((size_t)(n * mt), sizeof *tokens);
    if (!golden || !tokens) { rc = EXIT_INFRA; fprintf(stderr, "bitflip generate: out of memory\n"); goto out; }
    t0 = cli_now();
    if (bf_generator_run(g, NULL, golden, &err) != BF_OK) { rc = report_error("generate", &err); goto out; }
    double gold_s = cli_now() - t0;

    if (o.json) {
        if (!(root = json_header(&o, g, build_s, gold_s, golden)) || !(jfaults = json_array())) { rc = EXIT_INFRA; goto out; }
    } else {
        print_header(&o, g, build_s, gold_s);
        for (int64_t i = 0; i < n && i < o.show; i++) {
            char label[32];
            snprintf(label, sizeof label, "prompt %lld", (long long)i);
            print_tokens(label, golden + i * mt, NULL, mt);
        }
        if (n_runs) printf("\nfaults (%s; vs golden, tokens from the first change on in [])\n",
                           o.together ? "together, one generation" : "each its own generation");
    }
    for (size_t i = 0; i < n_runs; i++)
        if ((rc = report_run(&o, g, &runs[i], golden, tokens, jfaults)) != 0) goto out;
    if (o.json) {
        json_object_set_new(root, "faults", jfaults);
        jfaults = NULL;
        json_dumpf(root, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
out:
    for (size_t i = 0; runs && i < n_runs; i++) json_decref(runs[i].desc);
    json_decref(jfaults);
    json_decref(root);
    free(golden), free(tokens), free(runs), free(flips), free(kv), free(act);
    free(o.flip), free(o.kv), free(o.act);
    bf_generator_free(g);
    bf_dataset_free(ds);
    bf_model_free(m);
    return rc;
}
