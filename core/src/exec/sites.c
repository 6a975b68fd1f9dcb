/* Named fault sites (bitflip/sites.h): attention scores and probabilities,
 * MoE router logits, the KV cache (its walk and layout: sites_kv.c), found by walking the graph around each Softmax and
 * TopK. The walks are short and bounded (a few nodes back, one hop
 * forward), read the graph only and allocate nothing. */
#include <stdlib.h>
#include <string.h>

#include "bitflip/sites.h"
#include "exec/sites_impl.h"
#include "model/graph.h"

/* Hops a walk takes through the elementwise and reshaping ops between the
 * product and its Softmax (scale, mask, cast), or between a router and its TopK. */
#define WALK_MAX 6

static int op_is(const bf__node *n, const char *op) { return !strcmp(n->op_type, op); }

static const bf__node *producer(const bf_model *m, int v)
{
    if (v < 0 || (size_t)v >= m->n_values || m->values[v].kind != BF__VAL_NODE || m->values[v].producer < 0) return NULL;
    return &m->nodes[m->values[v].producer];
}

/* Computed from the graph's inputs at run time: not a parameter, an
 * initializer or a Constant node's output. */
static int dynamic(const bf_model *m, int v)
{
    if (v < 0) return 0;
    if (m->values[v].kind == BF__VAL_INPUT) return 1;
    const bf__node *p = producer(m, v);
    return p && !op_is(p, "Constant");
}

static int is_param(const bf_model *m, int v) { return v >= 0 && m->values[v].kind == BF__VAL_PARAM; }

/* Value v is (through the masking and scaling ops) a product of two
 * activations, Q·K^T: that product's node, else NULL. */
static const bf__node *from_qk(const bf_model *m, int v, int depth)
{
    const bf__node *n = producer(m, v);
    if (!n || depth > WALK_MAX) return NULL;
    if (op_is(n, "MatMul") || op_is(n, "Einsum")) return n->n_in >= 2 && dynamic(m, n->in[0]) && dynamic(m, n->in[1]) ? n : NULL;
    static const char *const through[] = {"Add", "Sub", "Mul", "Div", "Where", "Cast", "Reshape", "Identity"};
    int pass = 0;
    for (size_t k = 0; k < sizeof through / sizeof *through; k++) pass |= op_is(n, through[k]);
    if (!pass) return NULL;
    for (int i = 0; i < n->n_in; i++) {
        const bf__node *p = dynamic(m, n->in[i]) ? from_qk(m, n->in[i], depth + 1) : NULL;
        if (p) return p;
    }
    return NULL;
}

/* Value v is read by a MatMul or Einsum (probabilities times V), directly or
 * through one Cast, Dropout or Identity: that product's node, else NULL. */
static const bf__node *read_by_product(const bf_model *m, int v, int depth)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        const bf__node *n = &m->nodes[i];
        int reads = 0;
        for (int j = 0; j < n->n_in; j++) reads |= n->in[j] == v;
        if (!reads) continue;
        if (op_is(n, "MatMul") || op_is(n, "Einsum")) return n;
        const bf__node *p = depth == 0 && (op_is(n, "Cast") || op_is(n, "Dropout") || op_is(n, "Identity")) && n->n_out > 0
                                ? read_by_product(m, n->out[0], 1)
                                : NULL;
        if (p) return p;
    }
    return NULL;
}

/* The router's logits behind a TopK's input: the Linear's output value, or -1. */
static int router_of(const bf_model *m, int v, int depth)
{
    const bf__node *n = producer(m, v);
    if (!n || depth > WALK_MAX) return -1;
    if (op_is(n, "Gemm") || op_is(n, "MatMul")) return n->n_in >= 2 && (is_param(m, n->in[0]) || is_param(m, n->in[1])) ? v : -1;
    if (op_is(n, "Add") && n->n_in == 2) {   /* a Linear's bias after its MatMul */
        for (int i = 0; i < 2; i++)
            if (is_param(m, n->in[1 - i]) && router_of(m, n->in[i], WALK_MAX) >= 0) return v;
        return -1;
    }
    static const char *const through[] = {"Softmax", "Sigmoid", "Cast", "Reshape", "Identity"};
    for (size_t k = 0; k < sizeof through / sizeof *through; k++)
        if (op_is(n, through[k])) return router_of(m, n->in[0], depth + 1);
    return -1;
}

/* A scan over the sites: fills out (up to max) and, for the one of kind
 * `want` and index `want_index`, sets *found to its value. */
typedef struct scan {
    bf_named_site *out;
    size_t max, n;
    bf_named_site_kind want;
    int want_index;
    int64_t found;
} scan;

static void put(scan *sc, const bf_model *m, bf_named_site_kind kind, int index, int v, int operand)
{
    if (sc->n < sc->max) {
        const bf__node *p = producer(m, v);
        sc->out[sc->n] = (bf_named_site){.kind = kind, .index = index, .value = v, .value_name = m->values[v].name,
                                   .node = p ? p->name : NULL, .op = p ? p->op_type : NULL, .operand = operand};
    }
    if (kind == sc->want && index == sc->want_index) sc->found = v;
    sc->n++;
}

/* The router behind TopK node order[o], unless an earlier TopK has it too
 * (one router read by two TopKs is one site); -1 for none. */
static int new_router(const bf_model *m, size_t o)
{
    const bf__node *t = &m->nodes[m->order[o]];
    if (!op_is(t, "TopK") || t->n_in < 1) return -1;
    int v = router_of(m, t->in[0], 0);
    for (size_t e = 0; v >= 0 && e < o; e++) {
        const bf__node *u = &m->nodes[m->order[e]];
        if (op_is(u, "TopK") && u->n_in >= 1 && router_of(m, u->in[0], 0) == v) return -1;
    }
    return v;
}

/* The K and V operands behind attention Softmax s, when both products are
 * MatMuls of [.., T, D] by [.., D, T] and [.., T, D] (an Einsum's operands
 * could be laid out any way: not a KV site); -1 each otherwise. */
static void kv_operands(const bf_model *m, const bf__node *s, int *k, int *v)
{
    const bf__node *qk = from_qk(m, s->in[0], 0), *pv = read_by_product(m, s->out[0], 0);
    *k = qk && op_is(qk, "MatMul") ? qk->in[1] : -1;
    *v = pv && op_is(pv, "MatMul") && pv->n_in >= 2 ? pv->in[1] : -1;
}

static void run_scan(const bf_model *m, scan *sc)
{
    int attn = 0, routers = 0;
    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *s = &m->nodes[m->order[o]];
        if (!op_is(s, "Softmax") || s->n_in < 1 || s->n_out < 1 || s->out[0] < 0) continue;
        if (!from_qk(m, s->in[0], 0) || !read_by_product(m, s->out[0], 0)) continue;
        put(sc, m, BF_SITE_ATTN_SCORES, attn, s->in[0], -1);
        put(sc, m, BF_SITE_ATTN_PROBS, attn, s->out[0], -1);
        attn++;
    }
    for (size_t o = 0; o < m->n_nodes; o++) {
        int v = new_router(m, o);
        if (v >= 0) put(sc, m, BF_SITE_ROUTER_LOGITS, routers++, v, -1);
    }
    /* the KV cache, numbered as the attention layers: a layer whose keys or
     * values cannot be traced has neither (a site half there would be a
     * cache half described) */
    attn = 0;
    for (size_t o = 0; o < m->n_nodes; o++) {
        const bf__node *s = &m->nodes[m->order[o]];
        if (!op_is(s, "Softmax") || s->n_in < 1 || s->n_out < 1 || s->out[0] < 0) continue;
        if (!from_qk(m, s->in[0], 0) || !read_by_product(m, s->out[0], 0)) continue;
        int k, v;
        kv_operands(m, s, &k, &v);
        int kc = k >= 0 ? bf__kv_walk(m, k) : -1, vc = v >= 0 ? bf__kv_walk(m, v) : -1;
        if (kc >= 0 && vc >= 0 && kc != vc) {
            put(sc, m, BF_SITE_K_CACHE, attn, kc, k);
            put(sc, m, BF_SITE_V_CACHE, attn, vc, v);
        }
        attn++;
    }
}

size_t bf_model_named_sites(const bf_model *m, bf_named_site *out, size_t max)
{
    scan sc = {.out = out, .max = out ? max : 0, .found = -1};
    run_scan(m, &sc);
    return sc.n;
}

const char *bf_named_site_kind_name(bf_named_site_kind kind)
{
    switch (kind) {
    case BF_SITE_ATTN_SCORES: return "attn_scores";
    case BF_SITE_ATTN_PROBS: return "attn_probs";
    case BF_SITE_ROUTER_LOGITS: return "router_logits";
    case BF_SITE_K_CACHE: return "k_cache";
    case BF_SITE_V_CACHE: return "v_cache";
    }
    return NULL;
}

int64_t bf_model_named_site_value(const bf_model *m, const char *name)
{
    const char *dot = strrchr(name, '.');
    char *end;
    if (!dot || !dot[1] || dot[1] == '-' || dot[1] == '+') return -1;
    long k = strtol(dot + 1, &end, 10);
    if (*end || k < 0 || k > 1 << 20) return -1;
    scan sc = {.want_index = (int)k, .found = -1};
    for (int c = BF_SITE_ATTN_SCORES; c <= BF_SITE_V_CACHE; c++) {
        const char *kn = bf_named_site_kind_name((bf_named_site_kind)c);
        if (strlen(kn) == (size_t)(dot - name) && !strncmp(name, kn, (size_t)(dot - name))) sc.want = (bf_named_site_kind)c;
    }
    if (!sc.want) return -1;
    run_scan(m, &sc);
    return sc.found;
}
