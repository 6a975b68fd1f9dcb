/* bitflip info: what a model is made of, and where faults can land. */
#include <jansson.h>
#include <string.h>

#include "bitflip/api/summary.h"
#include "bitflip/campaign.h"
#include "cli.h"
#include "info_lm.h"

static const char help[] =
    "usage: bitflip info [--json] [--no-fuse] [--limit KEY=VALUE] MODEL.onnx\n"
    "\n"
    "Loads and checks MODEL.onnx and prints its graph inputs and outputs, the ops it\n"
    "uses, and every parameter tensor (float initializer) with its shape, element\n"
    "count and the op that reads it: the fault surface of weight-fault campaigns.\n"
    "Tables read by Gather (embeddings) are marked. For a PyTorch export, the last\n"
    "column is the PyTorch name recovered from the module scopes in the node names\n"
    "(docs/EXPORT.md), with how the tensor differs from that parameter (a BatchNorm\n"
    "folded in, transposed); campaign specs select by either name. Last, the peak\n"
    "memory of a plan (activations, folded constants, scratch, parameter copies)\n"
    "at batch 1, 64 and eval's default (256), with its largest buffer: worked\n"
    "out from shapes, nothing allocated; and the batch a campaign runs at when\n"
    "its spec gives none (64, or as little as 4 where a sample's activations are\n"
    "large: docs/CAMPAIGNS.md, batch). For a language\n"
    "model: the KV-cache entries of an export with one, and the named fault sites\n"
    "of any model (attn_scores.K, attn_probs.K, router_logits.K, and k_cache.K,\n"
    "v_cache.K: the keys and values a KV cache holds, which a campaign's\n"
    "\"target\": \"kv_cache\" faults by layer, head and position: docs/LM.md).\n"
    "\n"
    "  --json               machine-readable output\n"
    "  --dims NAME=N,...    sizes for symbolic dims past the batch (an LM's\n"
    "                       'sequence'), for the plan memory; bitflip eval and\n"
    "                       run take them from the eval set\n"
    "  --no-fuse            show the graph with the patterns PyTorch exports in\n"
    "                       several nodes (LayerNorm, GELU, Hardswish) unfused\n"
    "  --limit KEY=VALUE    a parser limit, e.g. model.graph-depth=16 (repeatable;\n"
    "                       docs/LIMITS.md lists them)\n";

static const int64_t memory_batches[] = {1, BF_CAMPAIGN_BATCH_DEFAULT, 256};

static json_t *budget_json(const bf_plan_budget *b)
{
    const bf_plan_item *it = &b->largest;
    json_t *dims = json_array();
    for (int d = 0; d < it->ndim; d++) json_array_append_new(dims, json_integer(it->dims[d]));
    json_t *largest = json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:o, s:I}", "kind", it->what, "node", it->node,
                                "op", it->op, "value", it->value,
                                "dtype", it->dtype != BF_DTYPE_INVALID ? bf_dtype_name(it->dtype) : NULL, "shape", dims,
                                "bytes", (json_int_t)it->bytes);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "batch", (json_int_t)b->batch, "total_bytes",
                     (json_int_t)b->total_bytes, "arena_bytes", (json_int_t)b->arena_bytes, "folded_bytes",
                     (json_int_t)b->folded_bytes, "scratch_bytes", (json_int_t)b->scratch_bytes,
                     "param_copy_bytes", (json_int_t)b->param_copy_bytes, "overhead_bytes",
                     (json_int_t)b->overhead_bytes, "largest", largest);
}

static void dims_text(const bf_value_info *vi, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < vi->ndim && off < len; d++) {
        if (vi->dims[d] >= 0) off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? ", " : "", (long long)vi->dims[d]);
        else off += (size_t)snprintf(buf + off, len - off, "%s%s", d ? ", " : "", vi->dim_names[d] ? vi->dim_names[d] : "?");
    }
    if (off < len) snprintf(buf + off, len - off, "]");
}

/* Op types with counts, in first-seen order. */
typedef struct { const char *op; int count; } op_count;

static size_t count_ops(const bf_model *m, op_count *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < bf_model_num_nodes(m); i++) {
        const char *op = bf_model_node_op(m, i);
        size_t k = 0;
        while (k < n && strcmp(out[k].op, op)) k++;
        if (k == n && n < max) out[n++] = (op_count){op, 0};
        if (k < n) out[k].count++;
    }
    return n;
}

/* "5 LayerNorm (9 nodes each), 2 GELU (5 nodes each)", or "" if nothing was fused. */
static void fused_text(const bf_model *m, char *buf, size_t len)
{
    size_t off = 0, count, lo, hi;
    const char *kind;
    buf[0] = 0;
    for (size_t k = 0; (kind = bf_model_fusion(m, k, &count, &lo, &hi)) && off < len; k++) {
        if (!count) continue;
        if (lo == hi)
            off += (size_t)snprintf(buf + off, len - off, "%s%zu %s (%zu nodes%s)", off ? ", " : "", count, kind, lo,
                                    count > 1 ? " each" : "");
        else
            off += (size_t)snprintf(buf + off, len - off, "%s%zu %s (%zu to %zu nodes)", off ? ", " : "", count, kind, lo, hi);
    }
}

/* Which rule chose what was fused: the exporter's record, or the patterns. */
/* A model whose float weights the file stores in another type than float32
 * (a half-precision export): said once, with what a campaign then means. */
static void info_stored_note(const bf_model *m)
{
    size_t n = 0;
    const char *type = NULL;
    for (size_t i = 0; i < bf_model_num_params(m); i++)
        if (bf_model_param(m, i)->stored) n++, type = bf_model_param(m, i)->stored;
    if (!n) return;
    if (strcmp(type, "float64") == 0) {
        printf("  %zu of these parameter%s stored as float64 in the file: bitflip holds and computes them in float32\n", n,
               n == 1 ? " is" : "s are");
        return;
    }
    printf("  %zu of these parameter%s stored as %s in the file: bitflip computes in float32 on the same values; "
           "a campaign's faults strike fp32 bits unless its spec says \"representation\": \"%s\"\n", n,
           n == 1 ? " is" : "s are", type, strcmp(type, "bfloat16") == 0 ? "bf16" : "fp16");
}

/* The parameters table: the fault surface, with what the file stores each in. */
static void print_params(const bf_model *m)
{
    char buf[256];
    long long bits = 0;
    for (size_t i = 0; i < bf_model_num_params(m); i++)
        bits += (long long)bf_tensor_numel(bf_model_param(m, i)->tensor) * (bf_model_param(m, i)->dtype == BF_F32 ? 32 : 8);
    printf("\n\nparameters (fault surface): %zu tensors, %lld elements, %lld bits\n",
           bf_model_num_params(m), (long long)bf_model_param_elements(m), bits);
    int torch = 0;
    for (size_t i = 0; i < bf_model_num_params(m); i++) torch |= bf_model_param(m, i)->torch_name != NULL;
    if (torch) printf("  %-30s %-16s %10s  %-18s pytorch name\n", "name", "shape", "elements", "read by");
    else printf("  %-30s %-16s %10s  %s\n", "name", "shape", "elements", "read by");
    for (size_t i = 0; i < bf_model_num_params(m); i++) {
        const bf_param_info *p = bf_model_param(m, i);
        char reader[64];
        bf_shape_str(p->tensor->dims, p->tensor->ndim, buf, sizeof buf);
        snprintf(reader, sizeof reader, "%s%s%s%s", p->reader_op ? p->reader_op : "(unused)",
                 p->is_embedding ? " (embedding)" : "", p->dtype != BF_F32 ? ", stored " : "",
                 p->dtype != BF_F32 ? bf_dtype_name(p->dtype) : "");
        printf("  %-30s %-16s %10lld  ", p->tensor->name, buf, (long long)bf_tensor_numel(p->tensor));
        if (!torch) printf("%s\n", reader);
        else if (!p->torch_name) printf("%-18s -\n", reader);
        else if (!p->torch_note) printf("%-18s %s\n", reader, p->torch_name);
        else printf("%-18s %s (%s)\n", reader, p->torch_name, p->torch_note);
    }
    info_stored_note(m);
}

static void print_fusion_rule(const bf_model *m)
{
    size_t calls, unrec;
    const char *rule = bf_model_fusion_rule(m, &calls, &unrec);
    if (strcmp(rule, "record") == 0)
        printf("\n  fusion: by the exporter's record (bitflip.kernels, %zu kernel calls): %zu pattern%s PyTorch "
               "ran op by op left as exported", calls, unrec, unrec == 1 ? "" : "s");
    else if (strcmp(rule, "pattern") == 0)
        printf("\n  fusion: by pattern (no exporter record: every exported pattern fused; bitflip.export "
               "records which PyTorch ran as one kernel)");
    else
        printf("\n  fusion: off (--no-fuse)");
}

static json_t *fused_json(const bf_model *m)
{
    json_t *a = json_array();
    size_t count, lo, hi;
    const char *kind;
    for (size_t k = 0; (kind = bf_model_fusion(m, k, &count, &lo, &hi)); k++)
        if (count)
            json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I}", "pattern", kind, "count", (json_int_t)count,
                                               "min_nodes", (json_int_t)lo, "max_nodes", (json_int_t)hi));
    return a;
}

#define MAX_DIMS_OPT 16

/* --dims "sequence=256,past_sequence=0" into names (pointing into text,
 * which it cuts) and sizes; the count, or -1 having printed why. */
static int parse_dims(char *text, const char **names, int64_t *sizes)
{
    int n = 0;
    for (char *tok = strtok(text, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '='), *end;
        long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
        if (!eq || eq == tok || eq[1] == '\0' || *end || v < 0 || v > (1LL << 32) || n == MAX_DIMS_OPT) {
            usage_error("info", "--dims wants NAME=SIZE[,NAME=SIZE...] (at most %d, sizes 0..2^32), got '%s'", MAX_DIMS_OPT, tok);
            return -1;
        }
        *eq = '\0';
        names[n] = tok;
        sizes[n++] = v;
    }
    return n;
}

/* The first symbolic dim past the batch of any input, or NULL. */
static const char *symbolic_dim(const bf_model *m)
{
    for (size_t i = 0; i < bf_model_num_inputs(m); i++) {
        const bf_value_info *vi = bf_model_input(m, i);
        for (int d = 1; d < vi->ndim; d++)
            if (vi->dims[d] < 0) return vi->dim_names[d] ? vi->dim_names[d] : "?";
    }
    return NULL;
}

/* A plan's memory at each of memory_batches, at the --dims sizes; a batch
 * the model cannot take (a fixed batch dimension, a symbolic dim with no
 * size) says why instead. *camp_batch: a campaign's default batch, where
 * the plans it is worked from (at 1 and 64) could be sized, else 0. 0, or
 * EXIT_USAGE having printed why. */
static int estimate_memory(const bf_model *m, char *dims_text_opt, bf_plan_budget *budgets, bf_error *berr, int *have,
                           int64_t *camp_batch)
{
    const char *dim_names[MAX_DIMS_OPT];
    int64_t dim_sizes[MAX_DIMS_OPT];
    bf_error err = {0};
    int n_dims = parse_dims(dims_text_opt, dim_names, dim_sizes);
    bf_model *sized = NULL;
    if (n_dims < 0) return EXIT_USAGE;
    if (n_dims > 0 && bf_model_with_dims(m, dim_names, dim_sizes, (size_t)n_dims, &sized, &err) != BF_OK)
        return usage_error("info", "--dims: %s", err.msg);
    const char *symbolic = sized ? NULL : symbolic_dim(m);
    for (int k = 0; k < 3; k++) {
        memset(&berr[k], 0, sizeof berr[k]);
        if (symbolic) bf_error_set(&berr[k], BF_EUNSUPPORTED, "symbolic dim '%s' (sized by the eval set; --dims %s=N shows it)",
                                   symbolic, symbolic);
        have[k] = !symbolic && bf_plan_estimate(sized ? sized : m, memory_batches[k], &budgets[k], &berr[k]) == BF_OK;
    }
    *camp_batch = have[0] && have[1] ? bf_campaign_default_batch(sized ? sized : m) : 0;
    bf_model_free(sized);
    return 0;
}

int cmd_info(int argc, char **argv)
{
    int json = 0, rc = 0;
    const char *path = NULL;
    cli_limits lim;
    cli_limits_init(&lim);
    char dims_text_opt[512] = "";
    enum { OPT_JSON = CLI_OPT_FIRST, OPT_DIMS };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'}, {"json", no_argument, NULL, OPT_JSON}, {"dims", required_argument, NULL, OPT_DIMS},
        CLI_OPTION_LIMIT, CLI_OPTION_NO_FUSE, {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    int c;
    cli_parser_init(&p, "info", argc, argv, "h", longopts);
    while ((c = cli_parser_next(&p, &v)) != CLI_END) {
        if (c == 'h') { fputs(help, stdout); return EXIT_OK; }
        else if (c == OPT_JSON) json = 1;
        else if (c == OPT_DIMS && strlen(v) >= sizeof dims_text_opt) return usage_error("info", "--dims: too long");
        else if (c == OPT_DIMS) strcpy(dims_text_opt, v);
        else if (c == CLI_ARG && !path) path = v;
        else if (c == CLI_ARG) return usage_error("info", "one model at a time (got '%s' and '%s')", path, v);
        else if (c == CLI_BAD) return EXIT_USAGE;
        else if (!cli_limit_option("info", c, v, &lim, &rc)) return EXIT_USAGE;
        if (rc) return rc;
    }
    if (!path) return usage_error("info", "which model? usage: bitflip info [--json] MODEL.onnx");

    bf_error err = {0};
    bf_model *m = NULL;
    if (bf_model_load_file_opts(path, &lim.model, &m, &err) != BF_OK) return report_error("info", &err);
    bf_plan_budget budgets[3];
    bf_error berr[3];
    int have[3];
    int64_t camp_batch = 0;
    if ((rc = estimate_memory(m, dims_text_opt, budgets, berr, have, &camp_batch)) != 0) {
        bf_model_free(m);
        return rc;
    }

    op_count ops[128];
    size_t n_ops = count_ops(m, ops, 128);
    if (json) {
        json_t *root = bf_model_summary(m);
        if (!root) { bf_model_free(m); fprintf(stderr, "bitflip info: out of memory\n"); return EXIT_INFRA; }
        json_object_set_new(root, "model", json_string(path));
        json_object_set_new(root, "fused", fused_json(m));
        size_t calls, unrec;
        const char *rule = bf_model_fusion_rule(m, &calls, &unrec);
        json_object_set_new(root, "fusion", json_pack("{s:s, s:I, s:I}", "rule", rule, "kernel_calls",
                                                      (json_int_t)calls, "unrecorded", (json_int_t)unrec));
        json_object_set_new(root, "batch_statistics", json_integer((json_int_t)bf_model_batch_statistics(m)));
        info_lm_json(m, root);
        json_t *mem = json_array();
        for (int k = 0; k < 3; k++)
            json_array_append_new(mem, have[k] ? budget_json(&budgets[k])
                                               : json_pack("{s:I, s:s}", "batch", (json_int_t)memory_batches[k],
                                                           "error", berr[k].msg));
        json_object_set_new(root, "plan_memory", mem);
        if (camp_batch) json_object_set_new(root, "campaign_batch", json_integer((json_int_t)camp_batch));
        json_dumpf(root, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(root);
    } else {
        char buf[256];
        printf("model     %s\nopset     %lld   producer: %s\n", path, (long long)bf_model_opset(m), bf_model_producer(m)[0] ? bf_model_producer(m) : "?");
        printf("\ninputs\n");
        for (size_t i = 0; i < bf_model_num_inputs(m); i++) {
            const bf_value_info *vi = bf_model_input(m, i);
            dims_text(vi, buf, sizeof buf);
            printf("  %-30s %-8s %s\n", vi->name, bf_dtype_name(vi->dtype), buf);
        }
        printf("\noutputs\n");
        for (size_t i = 0; i < bf_model_num_outputs(m); i++) {
            const bf_value_info *vi = bf_model_output(m, i);
            dims_text(vi, buf, sizeof buf);
            printf("  %-30s %-8s %s\n", vi->name, bf_dtype_name(vi->dtype), buf);
        }
        printf("\nops (%zu nodes)\n ", bf_model_num_nodes(m));
        for (size_t i = 0; i < n_ops; i++) printf(" %s x%d", ops[i].op, ops[i].count);
        char fused[512];
        fused_text(m, fused, sizeof fused);
        if (fused[0]) printf("\n  fused: %s; each runs as one op, as in PyTorch (--no-fuse: as exported)", fused);
        print_fusion_rule(m);
        size_t bstat = bf_model_batch_statistics(m);
        if (bstat)
            printf("\n  batch statistics: %zu BatchNormalization%s in training mode normalise each batch with its own "
                   "statistics: outputs depend on the batch size and on which samples share a batch, as in PyTorch "
                   "with the same batches", bstat, bstat == 1 ? "" : "s");
        print_params(m);
        info_lm_print(m);
        printf("\nplan memory (peak, from shapes)\n");
        for (int k = 0; k < 3; k++) {
            char t[32], what[320];
            if (!have[k]) { printf("  batch %-5lld  -: %s\n", (long long)memory_batches[k], berr[k].msg); continue; }
            printf("  batch %-5lld %10s   largest: %s\n", (long long)memory_batches[k],
                   bf_bytes_str(budgets[k].total_bytes, t, sizeof t), bf_plan_item_str(&budgets[k].largest, what, sizeof what));
        }
        if (camp_batch)
            printf("  a campaign whose spec has no \"batch\" runs at %lld (at most the eval set; docs/CAMPAIGNS.md, "
                   "batch)\n", (long long)camp_batch);
    }
    bf_model_free(m);
    return EXIT_OK;
}
