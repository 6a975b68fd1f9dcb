/* bitflip info: what a model is made of, and where faults can land. */
#include <jansson.h>
#include <string.h>

#include "bitflip/api/summary.h"
#include "cli.h"

static const char help[] =
    "usage: bitflip info [--json] MODEL.onnx\n"
    "\n"
    "Loads and checks MODEL.onnx and prints its graph inputs and outputs, the ops it\n"
    "uses, and every parameter tensor (float initializer) with its shape, element\n"
    "count and the op that reads it: the fault surface of weight-fault campaigns.\n"
    "Tables read by Gather (embeddings) are marked.\n"
    "\n"
    "  --json    machine-readable output\n";

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

int cmd_info(int argc, char **argv)
{
    int json = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(help, stdout); return EXIT_OK; }
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (argv[i][0] == '-' && argv[i][1]) return usage_error("info", "unknown option '%s'", argv[i]);
        else if (!path) path = argv[i];
        else return usage_error("info", "one model at a time (got '%s' and '%s')", path, argv[i]);
    }
    if (!path) return usage_error("info", "which model? usage: bitflip info [--json] MODEL.onnx");

    bf_error err = {0};
    bf_model *m = NULL;
    if (bf_model_load_file(path, &m, &err) != BF_OK) return report_error("info", &err);

    op_count ops[128];
    size_t n_ops = count_ops(m, ops, 128);
    if (json) {
        json_t *root = bf_model_summary(m);
        if (!root) { bf_model_free(m); fprintf(stderr, "bitflip info: out of memory\n"); return EXIT_INFRA; }
        json_object_set_new(root, "model", json_string(path));
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
        printf("\n\nparameters (fault surface): %zu tensors, %lld elements, %lld bits\n",
               bf_model_num_params(m), (long long)bf_model_param_elements(m), (long long)bf_model_param_elements(m) * 32);
        printf("  %-30s %-16s %10s  %s\n", "name", "shape", "elements", "read by");
        for (size_t i = 0; i < bf_model_num_params(m); i++) {
            const bf_param_info *p = bf_model_param(m, i);
            bf_shape_str(p->tensor->dims, p->tensor->ndim, buf, sizeof buf);
            printf("  %-30s %-16s %10lld  %s%s\n", p->tensor->name, buf, (long long)bf_tensor_numel(p->tensor),
                   p->reader_op ? p->reader_op : "(unused)", p->is_embedding ? " (embedding)" : "");
        }
    }
    bf_model_free(m);
    return EXIT_OK;
}
