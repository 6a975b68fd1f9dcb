/* The PyTorch names of parameters, recovered from a torch.onnx.export file.
 *
 * What the exporter (torch 1.13) leaves to go on:
 * - a parameter used as is keeps its state_dict key as initializer name
 *   ("layer1.0.bn1.weight", "fc.bias");
 * - a parameter the exporter computed gets an anonymous "onnx::Op_N": a
 *   Conv weight with an eval-mode BatchNorm folded in, a Linear weight
 *   transposed for MatMul, LSTM/GRU/RNN weights with gates reordered and
 *   biases concatenated;
 * - every node's name carries the module call stack it came from,
 *   "/layer1/layer1.0/conv1/Conv", one component per module: that module's
 *   name from its last non-numeric atom on ("conv.0.0" for
 *   features.1.conv.0.0, "layer1.0" for layer1.0);
 * - equal tensors are merged into one, each former name becoming the output
 *   of an Identity that reads it.
 *
 * So an anonymous parameter is named by the module of the node that reads it
 * and the input it feeds (Conv input 1 is that module's weight). Nothing is
 * guessed past that: a tensor read from several modules, or from a module
 * whose op does not say which parameter an input is, gets the module path
 * alone or no name. Files from other exporters get no names at all. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "model/graph.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_ident(char c) { return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* A dotted path of `len` bytes whose atoms are Python identifiers or
 * numbers: a module's name as named_modules() gives it ("features.1",
 * "conv", or "0" for a child of a Sequential at the root). */
static int is_torch_path(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t a = i;
        while (i < len && s[i] != '.') {
            if (!is_ident(s[i])) return 0;
            i++;
        }
        if (i == a) return 0;   /* empty atom */
        for (size_t k = a; is_digit(s[a]) && k < i; k++)
            if (!is_digit(s[k])) return 0;   /* "0a": neither */
        if (i < len && ++i == len) return 0;   /* a trailing dot */
    }
    return len > 0;
}

/* A state_dict key: a path whose last atom (the parameter's own name) is an
 * identifier, "layers.0.norm1.weight", "0.bias"; not a number such as the
 * "297" the exporter gives unnamed values. */
static int is_torch_key(const char *s)
{
    if (!s) return 0;
    size_t len = strlen(s);
    const char *dot = strrchr(s, '.');
    const char *last = dot ? dot + 1 : s;
    return is_torch_path(s, len) && *last && !is_digit(*last);
}

/* "...", then only digits and dots: `c` names a child of container `prev`
 * (the components "features" then "features.1"). */
static int extends(const char *c, size_t cl, const char *prev, size_t pl)
{
    if (pl == 0 || cl <= pl + 1 || memcmp(c, prev, pl) != 0 || c[pl] != '.') return 0;
    for (size_t i = pl + 1; i < cl; i++)
        if (!is_digit(c[i]) && c[i] != '.') return 0;
    return 1;
}

/* Length of `c` (cl bytes) without a "_N" call count: the exporter names
 * a module's second call "relu_1", its third "relu_2". */
static size_t strip_call(const char *c, size_t cl)
{
    size_t i = cl;
    while (i > 0 && is_digit(c[i - 1])) i--;
    return i > 1 && i < cl && c[i - 1] == '_' ? i - 1 : cl;
}

/* The module path of a node from its scoped name: "/layer1/layer1.0/conv1/Conv"
 * -> "layer1.0.conv1"; "" for a node of the root module ("/Flatten"); NULL
 * (and *oom untouched) when the name is not scoped. With `calls` 0, each
 * component loses its call count ("/fc_1/MatMul" -> "fc"): what tells two
 * calls of one module from two modules. A component is kept as written
 * otherwise (a module may be called "conv_1"), unless only the count
 * makes it unreadable ("layer1.0_1"). */
static char *module_path(const char *name, int calls, int *oom)
{
    if (!name || name[0] != '/') return NULL;
    size_t n = strlen(name);
    char *out = bf__malloc(n + 1);
    if (!out) { *oom = 1; return NULL; }
    size_t len = 0, prev_at = 0, prev_len = 0;
    const char *prev = NULL;
    const char *s = name + 1;
    for (;;) {
        const char *slash = strchr(s, '/');
        if (!slash) break;   /* the last component is the node's own ("Conv_1") */
        size_t cl = (size_t)(slash - s);
        if (!calls || !is_torch_path(s, cl)) cl = strip_call(s, cl);
        if (!is_torch_path(s, cl)) { bf__free(out); return NULL; }
        if (prev && extends(s, cl, prev, prev_len)) len = prev_at;   /* replaces its container */
        else if (len) out[len++] = '.';
        prev_at = len;
        memcpy(out + len, s, cl);
        len += cl;
        prev = s, prev_len = cl;
        s = slash + 1;
    }
    if (!*s) { bf__free(out); return NULL; }   /* "/a/": no op name */
    out[len] = '\0';
    return out;
}

/* What a torch export calls the tensor feeding input `slot` of an `op`
 * node, within the node's module; NULL when the op does not say. MatMul and
 * the recurrent ops are named by the caller. */
static const char *slot_leaf(const char *op, int slot)
{
    static const struct { const char *op; const char *leaf[5]; } table[] = {
        {"Conv", {NULL, "weight", "bias"}},
        {"ConvTranspose", {NULL, "weight", "bias"}},
        {"Gemm", {NULL, "weight", "bias"}},
        {"BatchNormalization", {NULL, "weight", "bias", "running_mean", "running_var"}},
        {"LayerNormalization", {NULL, "weight", "bias"}},
        {"InstanceNormalization", {NULL, "weight", "bias"}},
        {"PRelu", {NULL, "weight"}},
        {"Gather", {"weight"}},   /* nn.Embedding: the table is the data input */
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].op, op) == 0) return slot >= 0 && slot < 5 ? table[i].leaf[slot] : NULL;
    return NULL;
}

typedef struct names_ctx {
    bf_model *m;
    char **mod;       /* per node (index into m->nodes): module path, or NULL */
    char **module;    /* ... and without call counts: the module itself */
    int *src;         /* per value: the parameter it is (directly or through Identity), or -1 */
    /* per parameter: */
    int *first, *first_slot;   /* its first reader in a module (node index, input), or -1 */
    unsigned char *shared;     /* read in several modules */
    unsigned char *aliased;    /* an Identity forwards it under another name */
    int *derived;              /* its name was made from a module path and an input */
    const char **modp;         /* the module path its name was made from */
    int oom;
} names_ctx;

static int is_param_named(const names_ctx *c, int p)
{
    return is_torch_key(c->m->params[p].tensor->name);
}

static char *join(const char *a, const char *b, int *oom)
{
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *s = bf__malloc(la + lb + 2);
    if (!s) { *oom = 1; return NULL; }
    memcpy(s, a, la);
    if (b) { s[la] = '.'; memcpy(s + la + 1, b, lb + 1); }
    else s[la] = '\0';
    return s;
}

static char *dup(const char *s, int *oom)
{
    char *d = bf__strdup(s);
    if (!d) *oom = 1;
    return d;
}

/* Does a node of type `op` read value `v`? */
static int read_by(const bf_model *m, int v, const char *op)
{
    for (size_t i = 0; v >= 0 && i < m->n_nodes; i++) {
        const bf__node *n = &m->nodes[i];
        for (int j = 0; !strcmp(n->op_type, op) && j < n->n_in; j++)
            if (n->in[j] == v) return 1;
    }
    return 0;
}

static int param_of(const names_ctx *c, const bf__node *n, int slot)
{
    return slot < n->n_in && n->in[slot] >= 0 ? c->src[n->in[slot]] : -1;
}

/* A Conv whose weight and bias are both anonymous and whose output no
 * BatchNormalization reads: the exporter's eval-mode Conv+BN fusion, the
 * only step of a torch export that makes a new Conv weight and bias (a
 * weight computed in forward, e.g. by weight_norm, leaves the bias its
 * name, or the Conv with no bias). The BN's own name is gone from the file. */
static int is_folded_conv(const names_ctx *c, const bf__node *n)
{
    int w = param_of(c, n, 1), b = param_of(c, n, 2);
    return w >= 0 && b >= 0 && !is_param_named(c, w) && !is_param_named(c, b) && n->n_out > 0 &&
           !read_by(c->m, n->out[0], "BatchNormalization");
}

/* MatMul input B: nn.Linear on a 3-d input exports MatMul with the weight
 * transposed, then Add with the bias as is. The bias's name says which
 * weight this is ("bias" -> "weight", "in_proj_bias" -> "in_proj_weight");
 * without one, the module might not be a Linear: no leaf. */
static char *matmul_weight_leaf(names_ctx *c, const bf__node *mm, const char *mod)
{
    const bf_model *m = c->m;
    size_t ml = strlen(mod);
    for (size_t o = 0; mm->n_out > 0 && o < m->n_nodes; o++) {
        const bf__node *n = &m->nodes[m->order[o]];
        if (strcmp(n->op_type, "Add") != 0 || n->n_in != 2) continue;
        int j = n->in[0] == mm->out[0] ? 1 : n->in[1] == mm->out[0] ? 0 : -1;
        if (j < 0 || n->in[j] < 0) continue;
        /* the value's own name: a merged bias reaches the Add through an
         * Identity named after it */
        const char *bn = m->values[n->in[j]].name;
        if (c->src[n->in[j]] < 0 || !is_torch_key(bn)) continue;
        size_t bl = strlen(bn);
        if (bl <= ml + 1 || strncmp(bn, mod, ml) != 0 || bn[ml] != '.' || strchr(bn + ml + 1, '.')) continue;
        if (bl < 4 || strcmp(bn + bl - 4, "bias") != 0) continue;
        char *leaf = bf__malloc(bl - ml + 3);
        if (!leaf) { c->oom = 1; return NULL; }
        size_t stem = bl - 4 - (ml + 1);
        memcpy(leaf, bn + ml + 1, stem);
        strcpy(leaf + stem, "weight");
        return leaf;
    }
    return NULL;
}

/* LSTM, GRU, RNN: one node per layer, in order, within the module (a
 * second call of the module is another path, "lstm_1"). */
static void recurrent_name(names_ctx *c, const bf__node *n, int slot, const char *mod, bf_param_info *pi)
{
    const bf_model *m = c->m;
    int layer = 0;
    for (size_t idx = 0; idx < m->n_nodes && &m->nodes[idx] != n; idx++)   /* in file (call) order */
        layer += !strcmp(m->nodes[idx].op_type, n->op_type) && c->mod[idx] && !strcmp(c->mod[idx], mod);
    static const char *const leaf[] = {NULL, "weight_ih_l%d", "weight_hh_l%d", "bias_ih_l%d"};
    if (slot < 1 || slot > 3) return;
    char name[64], note[256];
    snprintf(name, sizeof name, leaf[slot], layer);
    const char *gates = strcmp(n->op_type, "LSTM") == 0 ? "gates reordered from PyTorch's i,f,g,o to ONNX's i,o,f,c"
                        : strcmp(n->op_type, "GRU") == 0 ? "gates reordered from PyTorch's r,z,n to ONNX's z,r,h"
                                                         : NULL;
    size_t off = 0;
    note[0] = '\0';
    if (slot == 3) off += (size_t)snprintf(note, sizeof note, "followed by bias_hh_l%d", layer);
    if (gates) off += (size_t)snprintf(note + off, sizeof note - off, "%s%s", off ? "; " : "", gates);
    if (pi->tensor->ndim > 0 && pi->tensor->dims[0] == 2 && off < sizeof note)
        off += (size_t)snprintf(note + off, sizeof note - off, "%sthe _reverse direction stacked after it", off ? "; " : "");
    pi->torch_name = join(mod, name, &c->oom);
    if (note[0]) pi->torch_note = dup(note, &c->oom);
}

/* The name of anonymous parameter `p` from its first reader `n` (input `slot`). */
static void name_from_reader(names_ctx *c, int p, const bf__node *n, int slot, const char *mod)
{
    bf_param_info *pi = &c->m->params[p];
    const char *op = n->op_type;
    c->derived[p] = 1;
    c->modp[p] = mod;
    if (!strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN")) {
        recurrent_name(c, n, slot, mod, pi);
        if (pi->torch_name || c->oom) return;
    }
    if (!strcmp(op, "MatMul") && slot == 1) {
        char *leaf = matmul_weight_leaf(c, n, mod);
        if (c->oom) return;
        pi->torch_name = join(mod, leaf, &c->oom);
        char note[512];
        snprintf(note, sizeof note, "read as MatMul input B: the weight transposed, if %s is an nn.Linear", mod);
        pi->torch_note = dup(leaf ? "transposed" : note, &c->oom);
        bf__free(leaf);
        return;
    }
    const char *leaf = slot_leaf(op, slot);
    pi->torch_name = join(mod, leaf, &c->oom);
    if (!strcmp(op, "Conv") && (slot == 1 || slot == 2) && is_folded_conv(c, n))
        pi->torch_note = dup("a BatchNorm folded in", &c->oom);
    else if (!strcmp(op, "Gemm") && slot == 1) {
        const bf__attr *t = bf__node_attr(n, "transB");
        if (!t || t->i == 0) pi->torch_note = dup("transposed", &c->oom);
    }
}

/* "the exporter merged N equal tensors into this one: also a, b": the
 * Identity outputs that stand for other parameters. */
static void merged_note(names_ctx *c, int p)
{
    const bf_model *m = c->m;
    char list[256];
    size_t off = 0, count = 0, shown = 0;
    list[0] = '\0';
    for (size_t v = 0; v < m->n_values; v++) {
        if (c->src[v] != p || m->values[v].kind != BF__VAL_NODE || !is_torch_key(m->values[v].name)) continue;
        count++;
        if (shown < 3 && off < sizeof list) {
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", shown ? ", " : "", m->values[v].name);
            shown++;
        }
    }
    if (!count) return;
    char more[32] = "";
    if (count > shown) snprintf(more, sizeof more, " and %zu more", count - shown);
    char note[420];
    snprintf(note, sizeof note, "the exporter merged %zu equal tensor%s into this one: %s%s", count, count == 1 ? "" : "s",
             list, more);
    c->m->params[p].torch_note = dup(note, &c->oom);
}

static void name_param(names_ctx *c, int p)
{
    bf_model *m = c->m;
    bf_param_info *pi = &m->params[p];
    if (is_param_named(c, p)) {   /* the state_dict key itself */
        pi->torch_name = dup(pi->tensor->name, &c->oom);
        if (pi->torch_name && c->aliased[p]) merged_note(c, p);
        return;
    }
    int idx = c->first[p];
    /* no reader in a module, or only the root's, or readers in several */
    if (idx < 0 || c->shared[p] || !c->mod[idx][0]) return;
    name_from_reader(c, p, &m->nodes[idx], c->first_slot[p], c->mod[idx]);
}

/* Each parameter's first reader in a module (an Identity only forwards
 * it), and whether a reader in another module makes it nobody's in
 * particular. First in the file's order: ONNX files list nodes in a
 * topological order, and a torch export in call order, so a module's first
 * call comes before its second ("fc" before "fc_1"). */
static void find_readers(names_ctx *c)
{
    const bf_model *m = c->m;
    for (size_t i = 0; i < m->n_nodes; i++) {
        int idx = (int)i;
        const bf__node *n = &m->nodes[idx];
        if (!c->mod[idx] || !strcmp(n->op_type, "Identity")) continue;
        for (int j = 0; j < n->n_in; j++) {
            int p = n->in[j] < 0 ? -1 : c->src[n->in[j]];
            if (p < 0) continue;
            if (c->first[p] < 0) c->first[p] = idx, c->first_slot[p] = j;
            else if (strcmp(c->module[c->first[p]], c->module[idx]) != 0) c->shared[p] = 1;
        }
    }
}

/* Two derived names alike (an MultiheadAttention's MatMuls, a name equal
 * to a kept state_dict key): the leaf was a guess, keep the module path. */
static void settle_collisions(names_ctx *c)
{
    bf_model *m = c->m;
    for (size_t p = 0; p < m->n_params; p++) {
        if (!c->derived[p] || !m->params[p].torch_name) continue;
        int clash = 0;
        for (size_t q = 0; q < m->n_params && !clash; q++)
            clash = q != p && m->params[q].torch_name && strcmp(m->params[q].torch_name, m->params[p].torch_name) == 0;
        if (!clash) continue;
        for (size_t q = 0; q < m->n_params; q++) {
            if (q == p || !c->derived[q] || !m->params[q].torch_name) continue;
            if (strcmp(m->params[q].torch_name, m->params[p].torch_name) != 0) continue;
            char *mod = bf__strdup(c->modp[q]);
            if (!mod) { c->oom = 1; return; }
            bf__free((char *)m->params[q].torch_name);
            m->params[q].torch_name = mod;
        }
        char *mod = bf__strdup(c->modp[p]);
        if (!mod) { c->oom = 1; return; }
        bf__free((char *)m->params[p].torch_name);
        m->params[p].torch_name = mod;
    }
}

static int from_pytorch(const bf_model *m)
{
    return m->producer && strncmp(m->producer, "pytorch", 7) == 0 && (m->producer[7] == '\0' || m->producer[7] == ' ');
}

bf_status bf__torch_names(bf_model *m, bf_error *err)
{
    if (!from_pytorch(m) || m->n_params == 0) return BF_OK;
    names_ctx c = {.m = m};
    c.mod = bf__calloc(m->n_nodes + 1, sizeof *c.mod);
    c.module = bf__calloc(m->n_nodes + 1, sizeof *c.module);
    c.src = bf__malloc((m->n_values + 1) * sizeof *c.src);
    c.first = bf__malloc((m->n_params + 1) * sizeof *c.first);
    c.first_slot = bf__calloc(m->n_params + 1, sizeof *c.first_slot);
    c.shared = bf__calloc(m->n_params + 1, 1);
    c.aliased = bf__calloc(m->n_params + 1, 1);
    c.derived = bf__calloc(m->n_params + 1, sizeof *c.derived);
    c.modp = bf__calloc(m->n_params + 1, sizeof *c.modp);
    if (!c.mod || !c.module || !c.src || !c.first || !c.first_slot || !c.shared || !c.aliased || !c.derived || !c.modp) c.oom = 1;
    for (size_t p = 0; !c.oom && p < m->n_params; p++) c.first[p] = -1;
    for (size_t i = 0; !c.oom && i < m->n_nodes; i++) {
        c.mod[i] = module_path(m->nodes[i].name, 1, &c.oom);
        if (c.mod[i]) c.module[i] = module_path(m->nodes[i].name, 0, &c.oom);
        if (c.mod[i] && !c.module[i] && !c.oom) c.module[i] = dup(c.mod[i], &c.oom);   /* "a._1": keep it whole */
    }
    for (size_t v = 0; !c.oom && v < m->n_values; v++)
        c.src[v] = m->values[v].kind == BF__VAL_PARAM ? (int)m->values[v].index : -1;
    for (size_t o = 0; !c.oom && o < m->n_nodes; o++) {
        const bf__node *n = &m->nodes[m->order[o]];
        if (strcmp(n->op_type, "Identity") != 0 || n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0) continue;
        c.src[n->out[0]] = c.src[n->in[0]];
        if (c.src[n->in[0]] >= 0) c.aliased[c.src[n->in[0]]] = 1;
    }
    if (!c.oom) find_readers(&c);
    for (size_t p = 0; !c.oom && p < m->n_params; p++) name_param(&c, (int)p);
    if (!c.oom) settle_collisions(&c);
    for (size_t i = 0; c.mod && i < m->n_nodes; i++) bf__free(c.mod[i]);
    for (size_t i = 0; c.module && i < m->n_nodes; i++) bf__free(c.module[i]);
    bf__free(c.mod);
    bf__free(c.module);
    bf__free(c.src);
    bf__free(c.first);
    bf__free(c.first_slot);
    bf__free(c.shared);
    bf__free(c.aliased);
    bf__free(c.derived);
    bf__free(c.modp);
    if (c.oom) return bf_error_set(err, BF_ENOMEM, "%s: out of memory while naming the parameters", m->label);
    return BF_OK;
}
