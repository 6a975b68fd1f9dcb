/* Loading a model: the model layer parses the ONNX file into a graph
 * (model/onnx_load.c); this binds each node to the op that runs it. It lives
 * in exec, above the parser, so that the parser never reaches into the ops.
 *
 * Between the two, exec/fuse.c runs the patterns PyTorch exports in several
 * nodes as the one op PyTorch ran.
 *
 * Every unsupported op of the model is named in one error, with a node of
 * each: a user who exports a new architecture learns in one try everything
 * bitflip lacks, instead of one op per attempt. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "exec/fuse.h"
#include "exec/fuse_loop.h"
#include "exec/op.h"
#include "exec/step_access.h"
#include "model/graph.h"

#define MAX_LISTED 16

/* If and Loop read values of the graph around them from their subgraphs:
 * those become extra inputs of the node, after its ONNX inputs, each once,
 * so that a plan computes them before the node and keeps them until it has
 * run (exec/plan_sub.c reads them from the plan's values). */
/* the main-graph values node sn's subgraphs read, at any depth, into extra
 * (*k so far) unless n already reads them */
static bf_status collect_outer(bf_model *m, const bf__node *n, const bf__node *sn, int *extra, int *k, int depth,
                               bf_error *err)
{
    for (size_t a = 0; a < sn->n_attrs; a++) {
        const bf__subgraph *g = sn->attrs[a].type == BF__ATTR_GRAPH ? sn->attrs[a].g : NULL;
        for (size_t i = 0; g && i <= g->n_nodes; i++) {
            int cnt = i < g->n_nodes ? g->nodes[i].n_in : g->n_out;
            const int *refs = i < g->n_nodes ? g->nodes[i].in : g->out;
            for (int j = 0; j < cnt; j++) {
                int r = refs[j], seen = 0;
                if (r < 0) continue;
                for (int q = 0; q < n->n_in && !seen; q++) seen = n->in[q] == r;
                for (int q = 0; q < *k && !seen; q++) seen = extra[q] == r;
                if (seen) continue;
                if (n->n_in + *k >= BF__MAX_IO)
                    return bf_error_set(err, BF_EUNSUPPORTED, "%s: node '%s' (%s): its subgraphs and inputs read more "
                                        "than %d values", m->label, n->name, n->op_type, BF__MAX_IO);
                extra[(*k)++] = r;
            }
            /* the loader's graph-depth limit bounds this recursion */
            bf_status st = i < g->n_nodes && depth < 64 ? collect_outer(m, n, &g->nodes[i], extra, k, depth + 1, err)
                                                        : BF_OK;
            if (st != BF_OK) return st;
        }
    }
    return BF_OK;
}

static bf_status capture_outer(bf_model *m, bf__node *n, bf_error *err)
{
    int extra[BF__MAX_IO];
    int k = 0;
    bf_status st = collect_outer(m, n, n, extra, &k, 0, err);
    if (st != BF_OK) return st;
    if (!k) return BF_OK;
    int *in = bf__realloc(n->in, ((size_t)n->n_in + (size_t)k + 1) * sizeof *in);
    if (!in) return bf_error_set(err, BF_ENOMEM, "%s: out of memory while loading the model", m->label);
    memcpy(in + n->n_in, extra, (size_t)k * sizeof *in);
    n->in = in;
    n->n_in += k;
    return BF_OK;
}

/* The op of node n (NULL: unsupported, listed by the caller), its counts of
 * inputs and outputs checked. */
static bf_status bind_node(bf_model *m, bf__node *n, const char *where, bf_error *err)
{
    n->op = bf__op_find(n->op_type);
    if (!n->op) return BF_OK;
    int max_in = n->op->max_inputs < 0 ? BF__MAX_IO : n->op->max_inputs;
    if (n->n_in < n->op->min_inputs || n->n_in > max_in || n->n_out < n->op->min_outputs ||
        n->n_out > n->op->max_outputs)
        return bf_error_set(err, BF_EFORMAT,
                            "%s: node '%s' (%s)%s has %d inputs and %d outputs; the op takes %d to %d inputs and %d to %d "
                            "outputs", m->label, n->name, n->op_type, where, n->n_in, n->n_out, n->op->min_inputs, max_in,
                            n->op->min_outputs, n->op->max_outputs);
    return BF_OK;
}

static void note_missing(const bf__node *n, const char **missing, const char **where, size_t *n_missing,
                         size_t *n_nodes_missing)
{
    (*n_nodes_missing)++;
    size_t k = 0;
    while (k < *n_missing && strcmp(missing[k], n->op_type) != 0) k++;
    if (k == *n_missing && *n_missing < MAX_LISTED) {
        missing[*n_missing] = n->op_type;
        where[(*n_missing)++] = n->name;
    }
}

static bf_status bind_ops(bf_model *m, bf_error *err)
{
    const char *missing[MAX_LISTED];
    const char *where[MAX_LISTED];
    size_t n_missing = 0, n_nodes_missing = 0;
    bf_status st;
    int resort = 0;

    for (size_t i = 0; i < m->n_nodes; i++) {
        bf__node *n = &m->nodes[i];
        int control = strcmp(n->op_type, "If") == 0 || strcmp(n->op_type, "Loop") == 0;
        int n_in0 = n->n_in;
        if (control && (st = capture_outer(m, n, err)) != BF_OK) return st;
        resort |= n->n_in != n_in0;
        /* the subgraphs' nodes (an If's inside them too): bound as the graph's,
         * their unsupported ops listed with them */
        for (size_t a = 0; control && a < n->n_attrs; a++) {
            bf__subgraph *g = n->attrs[a].type == BF__ATTR_GRAPH ? n->attrs[a].g : NULL;
            for (size_t s = 0; g && s < g->n_nodes; s++) {
                bf__node *sn = &g->nodes[s];
                char in_what[200];
                snprintf(in_what, sizeof in_what, " in the subgraph of node '%.100s'", n->name);
                if ((st = bind_node(m, sn, in_what, err)) != BF_OK) return st;
                if (!sn->op) note_missing(sn, missing, where, &n_missing, &n_nodes_missing);
                for (size_t a2 = 0; a2 < sn->n_attrs; a2++) {
                    bf__subgraph *g2 = sn->attrs[a2].type == BF__ATTR_GRAPH ? sn->attrs[a2].g : NULL;
                    for (size_t s2 = 0; g2 && s2 < g2->n_nodes; s2++) {
                        bf__node *sn2 = &g2->nodes[s2];
                        if ((st = bind_node(m, sn2, in_what, err)) != BF_OK) return st;
                        if (!sn2->op) note_missing(sn2, missing, where, &n_missing, &n_nodes_missing);
                    }
                }
            }
        }
        if ((st = bind_node(m, n, "", err)) != BF_OK) return st;
        if (!n->op) note_missing(n, missing, where, &n_missing, &n_nodes_missing);
    }
    if (n_missing == 0) {
        if (!resort) return BF_OK;
        /* captured values a nested subgraph reads: the order must have them first */
        bf__free(m->order);
        m->order = NULL;
        return bf__graph_sort(m, err);
    }

    size_t n_ops = bf__op_names(NULL, 0);
    char list[1024];
    size_t len = 0;
    list[0] = '\0';
    for (size_t k = 0; k < n_missing && len < sizeof list; k++) {
        int w = snprintf(list + len, sizeof list - len, "%s%s (node '%s')", k ? ", " : "", missing[k], where[k]);
        if (w < 0) break;
        len += (size_t)w;
    }
    if (n_missing == 1)
        return bf_error_set(err, BF_EUNSUPPORTED,
                            "%s: node '%s' uses op %s, which bitflip does not support (%zu node%s); 'bitflip ops' "
                            "lists the %zu ops it runs, docs/OPS.md their forms",
                            m->label, where[0], missing[0], n_nodes_missing, n_nodes_missing == 1 ? "" : "s", n_ops);
    return bf_error_set(err, BF_EUNSUPPORTED,
                        "%s: %zu ops that bitflip does not support, in %zu nodes: %s%s; 'bitflip ops' lists the %zu "
                        "ops it runs, docs/OPS.md their forms", m->label,
                        n_missing, n_nodes_missing, list, n_missing == MAX_LISTED ? ", ..." : "", n_ops);
}

size_t bf_supported_ops(const char **names, size_t max) { return bf__op_names(names, max); }

/* What every load does after parsing (st: the parse's status), from a
 * buffer or a path alike: the fusions (unless lim says no_fuse) and each
 * node's op bound; *out the model, or NULL with m freed on any failure. */
static bf_status finish_load(bf_status st, bf_model *m, const bf_load_limits *lim, bf_model **out, bf_error *err)
{
    if (st == BF_OK && !(lim && lim->no_fuse)) st = bf__fuse(m, err);
    if (st == BF_OK) st = bf__fuse_loops(m, err);
    if (st == BF_OK) st = bind_ops(m, err);
    if (st != BF_OK) {
        bf_model_free(m);
        return st;
    }
    *out = m;
    return BF_OK;
}

bf_status bf_model_load_buffer_opts(const void *buf, size_t len, const char *label, const bf_load_limits *lim,
                                    bf_model **out, bf_error *err)
{
    bf_model *m = NULL;
    *out = NULL;
    bf_status st = bf__model_parse(buf, len, label, lim, &m, err);
    return finish_load(st, m, lim, out, err);
}

bf_status bf_model_load_buffer(const void *buf, size_t len, const char *label, bf_model **out, bf_error *err)
{
    return bf_model_load_buffer_opts(buf, len, label, NULL, out, err);
}

bf_status bf_model_load_file_opts(const char *path, const bf_load_limits *lim, bf_model **out, bf_error *err)
{
    bf_model *m = NULL;
    *out = NULL;
    bf_status st = bf__model_parse_file(path, lim, &m, err);
    return finish_load(st, m, lim, out, err);
}

bf_status bf_model_load_file(const char *path, bf_model **out, bf_error *err)
{
    return bf_model_load_file_opts(path, NULL, out, err);
}

/* Most symbolic dims a model's inputs may name: more inputs than a KV cache
 * of 64 layers have are not sized from an eval set. */
#define MAX_BOUND_DIMS 256

/* A graph that takes a batch ([1, 3, H, W] or [batch, 3, H, W] against the
 * eval set's [N, 3, H, W]) whose outputs' sizes are data (a detector
 * exported by torch.onnx.export around a wrapper: its boxes are [K, 4]
 * whatever the batch) cannot run a batch of images; it runs one image per
 * call, fed as a batch of one (bf__model_per_call). */
static bf_status bind_per_call(bf_model **model, const bf_dataset *ds, bf_error *err)
{
    bf_model *m = *model;
    if (m->per_call || m->n_inputs == 0) return BF_OK;
    for (size_t i = 0; i < m->n_inputs; i++) {
        const bf_value_info *vi = &m->inputs[i];
        const bf_tensor *t = bf_dataset_find(ds, vi->name);
        if (!t || vi->ndim < 1 || t->ndim != vi->ndim || (vi->dims[0] >= 0 && vi->dims[0] != 1)) return BF_OK;
    }
    int data = 0;
    bf_status st = bf__model_data_shaped(m, &data, err);
    if (st != BF_OK || !data) return st;
    bf_model *one = NULL;
    if ((st = bf__model_per_call(m, &one, err)) != BF_OK) return st;
    one->owns_base = 1;
    *model = one;
    return BF_OK;
}

bf_status bf_model_bind_dims(bf_model **model, const bf_dataset *ds, bf_error *err)
{
    bf_status pst = bind_per_call(model, ds, err);
    if (pst != BF_OK) return pst;
    bf_model *m = *model;
    int64_t zero[BF_MAX_DIMS] = {0};
    const int64_t **shapes = bf__calloc(m->n_inputs + 1, sizeof *shapes);
    int *ndims = bf__calloc(m->n_inputs + 1, sizeof *ndims);
    const char *names[MAX_BOUND_DIMS];
    int64_t sizes[MAX_BOUND_DIMS];
    size_t n = 0;
    bf_status st = BF_OK;
    if (!shapes || !ndims) {
        st = bf_error_set(err, BF_ENOMEM, "out of memory sizing input dims");
        goto out;
    }
    int symbolic = 0;
    /* a one-sample graph ([3, H, W] against the eval set's [N, 3, H, W],
     * bf__eval_set_unbatched): each input is fed one sample's slice, the
     * eval tensor's dims past its first */
    int one = bf__eval_set_unbatched(m, ds) && !m->per_call;   /* per call: [1, ...] against [N, ...] */
    for (size_t i = 0; i < m->n_inputs; i++) {
        const bf_value_info *vi = &m->inputs[i];
        const bf_tensor *t = bf_dataset_find(ds, vi->name);
        for (int d = 1; d < vi->ndim; d++) symbolic |= vi->dims[d] < 0;
        if (!t || t->ndim != vi->ndim + one) goto out;   /* evaluation names the tensor */
        shapes[i] = vi->ndim ? t->dims + one : zero;
        ndims[i] = vi->ndim;
    }
    if (!symbolic) goto out;
    if ((st = bf_plan_dims_from(m, shapes, ndims, names, sizes, MAX_BOUND_DIMS, &n, err)) != BF_OK) goto out;
    bf_model *bound = NULL;
    if ((st = bf_model_with_dims(m, names, sizes, n, &bound, err)) != BF_OK) goto out;
    bound->owns_base = 1;
    *model = bound;
out:
    bf__free(shapes);
    bf__free(ndims);
    return st;
}
