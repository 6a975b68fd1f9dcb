/* Fusing exported patterns back into the one op PyTorch ran.
 *
 * torch.onnx.export spells some single kernels out in several nodes: LayerNorm
 * below opset 17 (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, then
 * Mul scale, Add bias), GELU (Div sqrt 2, Erf, Add 1, Mul x, Mul 0.5, or the
 * tanh form), Hardswish at opset 13 (HardSigmoid 1/6, Mul x), GroupNorm
 * below opset 18 (Reshape, InstanceNormalization, Reshape, Mul, Add). On ordinary
 * values the nodes agree with the kernel, but under a fault that makes a value
 * huge they overflow elsewhere: PyTorch's LayerNorm turns a row past ~1.8e19
 * into NaN where the nodes give a finite row, its GELU returns x up to FLT_MAX
 * where x * 2 overflows, its Hardswish overflows above ~5.7e37 where x *
 * HardSigmoid does not (docs/NUMERICS.md). A fault campaign has to see what
 * the user's PyTorch model does, so each pattern, recognised exactly, becomes
 * one node of the op whose kernel follows PyTorch's.
 *
 * A pattern is taken only if every node has the op, attributes and constant
 * operands of the export, each intermediate value is read only by the next
 * node of the pattern and is no graph output, and its constants are Constant
 * nodes (a float initializer is a parameter: a fault in it must keep landing
 * somewhere). Anything else is left as it is. The pattern's last node becomes
 * the fused node: it keeps its name and its output, so what reads the output
 * and the activation fault site on it are unchanged; its scale and bias are
 * the same initializers, so weight faults land in the same parameters. The
 * other nodes, and Constant nodes read only by them, are removed; their
 * outputs stay in the value table, marked fused_into, so that a fault spec
 * naming one is told where it went (bf__fused_note).
 *
 * When the file carries bitflip.export's record of the kernels PyTorch ran
 * (fuse_record.c), a pattern is fused only where the record says PyTorch
 * ran its kernel: the same nodes written out by hand ran op by op. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/model.h"
#include "exec/fuse.h"

enum { K_LAYERNORM, K_GELU, K_GELU_TANH, K_HARDSWISH, K_GROUPNORM };
static const char *const kind_name[BF__FUSE_KINDS] = {"LayerNorm", "GELU", "GELU (tanh)", "HardSwish", "GroupNorm"};

#define MAX_PAT 16

typedef struct ctx {
    bf_model *m;
    int *n_read;            /* per value: input slots reading it */
    int *reader;            /* per value: a node reading it (the one, when n_read is 1) */
    unsigned char *is_out;  /* per value: a graph output */
    unsigned char *dead;    /* per node: removed */
    int one;                /* the shared scale 1 of LayerNorms without one, -1 until made */
} ctx;

typedef struct pattern {
    int kind;
    int rm[MAX_PAT], n_rm;  /* nodes to remove (the last one aside) */
    int n_ops;              /* nodes of the pattern, Constant feeders aside */
    int last;
    int x, scale, bias;     /* scale -1: a LayerNorm without affine parameters */
    int axis;
    int64_t groups;         /* GroupNorm */
    int affine;             /* GroupNorm: 0, Mul 1 and Add 0 (Constant nodes, kept as the op's inputs) */
    float eps;
} pattern;

static bf__node *node_of(const ctx *c, int v, const char *op)
{
    const bf_model *m = c->m;
    if (v < 0 || (size_t)v >= m->n_values || m->values[v].kind != BF__VAL_NODE) return NULL;
    int p = m->values[v].producer;
    if (p < 0 || c->dead[p] || strcmp(m->nodes[p].op_type, op) != 0) return NULL;
    return &m->nodes[p];
}

static int idx(const ctx *c, const bf__node *n) { return (int)(n - c->m->nodes); }

/* v is read by exactly `slots` inputs, and is not a graph output. */
static int private_value(const ctx *c, int v, int slots) { return v >= 0 && c->n_read[v] == slots && !c->is_out[v]; }

/* The node reading v if v is private to it, with op `op` and two inputs. */
static bf__node *sole_reader(const ctx *c, int v, const char *op)
{
    if (!private_value(c, v, 1)) return NULL;
    bf__node *n = &c->m->nodes[c->reader[v]];
    if (c->dead[c->reader[v]] || strcmp(n->op_type, op) != 0 || n->n_in != 2 || n->n_out != 1 || n->n_attrs) return NULL;
    return n;
}

static int tensor_scalar(const bf_tensor *t, double *out)
{
    if (!t || !t->data || bf_tensor_numel(t) != 1) return 0;
    switch (t->dtype) {
    case BF_F32: *out = *(const float *)t->data; return 1;
    case BF_I64: *out = (double)*(const int64_t *)t->data; return 1;
    case BF_I32: *out = *(const int32_t *)t->data; return 1;
    default: return 0;
    }
}

/* A one-element constant: a Constant node's output (its node into *feeder)
 * or an integer initializer. A float initializer is a parameter, a fault
 * site, and is never folded into an attribute. */
static int const_scalar(const ctx *c, int v, double *out, int *feeder)
{
    const bf_model *m = c->m;
    *feeder = -1;
    if (v < 0) return 0;
    if (m->values[v].kind == BF__VAL_CONST) return tensor_scalar(m->values[v].init, out);
    const bf__node *k = node_of(c, v, "Constant");
    if (!k || k->n_in != 0 || k->n_attrs != 1) return 0;
    const bf__attr *a = &k->attrs[0];
    int ok = 0;
    if (strcmp(a->name, "value") == 0 && a->type == BF__ATTR_TENSOR) ok = tensor_scalar(a->t, out);
    else if (strcmp(a->name, "value_float") == 0 && a->type == BF__ATTR_FLOAT) *out = a->f, ok = 1;
    else if (strcmp(a->name, "value_int") == 0 && a->type == BF__ATTR_INT) *out = (double)a->i, ok = 1;
    if (ok) *feeder = idx(c, k);
    return ok;
}

/* Equal to `want` up to float32 rounding of the exporter's constant. */
static int near(double v, double want) { return fabs(v - want) <= 4e-7 * fabs(want); }

static int add_rm(pattern *p, int node)
{
    if (node < 0) return 1;
    if (p->n_rm == MAX_PAT) return 0;
    p->rm[p->n_rm++] = node;
    return 1;
}

/* Of a two-input node, the operand that is the constant `want` (its
 * Constant feeder kept for removal); the other operand into *other. */
static int const_operand(const ctx *c, const bf__node *n, double want, int *other, pattern *p)
{
    for (int i = 0; i < 2; i++) {
        double v;
        int feeder;
        if (const_scalar(c, n->in[i], &v, &feeder) && near(v, want)) {
            *other = n->in[1 - i];
            if (feeder >= 0 && private_value(c, n->in[i], 1) && !add_rm(p, feeder)) return 0;
            return 1;
        }
    }
    return 0;
}

static int add_op(pattern *p, const bf__node *n, const ctx *c)
{
    p->n_ops++;
    return add_rm(p, idx(c, n));
}

/* ---- LayerNorm: anchored at the Div of (x - mean) by sqrt(var + eps) ---- */

/* The axes of a ReduceMean that keeps its dims: attribute (opset < 18) or
 * constant input (18). */
static int reduce_axes(const ctx *c, const bf__node *r, int64_t *axes, int *n, pattern *p)
{
    const bf__attr *kd = bf__node_attr(r, "keepdims");
    if (kd && (kd->type != BF__ATTR_INT || kd->i != 1)) return 0;
    const bf__attr *ne = bf__node_attr(r, "noop_with_empty_axes");
    if (ne && (ne->type != BF__ATTR_INT || ne->i != 0)) return 0;
    const bf__attr *a = bf__node_attr(r, "axes");
    if (a) {
        if (a->type != BF__ATTR_INTS || a->n < 1 || a->n > BF_MAX_DIMS || r->n_in != 1) return 0;
        for (size_t i = 0; i < a->n; i++) axes[i] = a->ints[i];
        *n = (int)a->n;
        return 1;
    }
    if (r->n_in != 2 || r->in[1] < 0) return 0;
    int v = r->in[1];
    const bf_tensor *t = NULL;
    int feeder = -1;
    if (c->m->values[v].kind == BF__VAL_CONST) {
        t = c->m->values[v].init;
    } else {
        const bf__node *k = node_of(c, v, "Constant");
        if (!k || k->n_attrs != 1 || strcmp(k->attrs[0].name, "value") || k->attrs[0].type != BF__ATTR_TENSOR) return 0;
        t = k->attrs[0].t;
        feeder = idx(c, k);
    }
    int64_t cnt = t ? bf_tensor_numel(t) : 0;
    if (!t || !t->data || t->dtype != BF_I64 || cnt < 1 || cnt > BF_MAX_DIMS) return 0;
    for (int64_t i = 0; i < cnt; i++) axes[i] = ((const int64_t *)t->data)[i];
    *n = (int)cnt;
    if (feeder >= 0 && private_value(c, v, 1) && !add_rm(p, feeder)) return 0;
    return 1;
}

/* The trailing axes -k .. -1 (in any order, each once): PyTorch exports
 * normalized_shape as negative axes. Positive axes would need the rank,
 * which a parsed graph does not know: left unfused. */
static int trailing(const int64_t *axes, int n)
{
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        if (axes[i] < -n || axes[i] > -1) return 0;
        unsigned bit = 1u << (unsigned)(-axes[i] - 1);
        if (seen & bit) return 0;
        seen |= bit;
    }
    return 1;
}

/* A scale or bias the LayerNormalization op takes for k normalised dims in
 * place of the Mul's or Add's broadcast: one value, or exactly k dims none
 * of which is 1 (a 1 would broadcast in the Mul where the op wants X's dim).
 * The value may also be an Identity of such a parameter: torch.onnx.export
 * writes one where modules share equal initial weights (a LayerNorm's ones
 * and zeros before training), the parameter stored once and each module's
 * name an Identity of it. The Identity is kept (its output is the module's
 * parameter name, computed once a plan as a parameter-only value, and a
 * weight fault reaches the op through it as it reached the Mul). */
static int ln_param(const ctx *c, int v, int k)
{
    const bf__node *id = node_of(c, v, "Identity");
    if (id && id->n_in == 1 && id->n_out == 1 && !id->n_attrs) v = id->in[0];
    if (v < 0 || c->m->values[v].kind != BF__VAL_PARAM) return 0;
    const bf_tensor *t = c->m->values[v].init;
    if (t->dtype != BF_F32) return 0;
    if (bf_tensor_numel(t) == 1) return t->ndim <= k;
    if (t->ndim != k) return 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->dims[d] <= 1) return 0;
    return 1;
}

static int match_layernorm(const ctx *c, const bf__node *div, pattern *p)
{
    if (div->n_in != 2 || div->n_out != 1 || div->n_attrs) return 0;
    int s = div->in[0], q = div->in[1];
    const bf__node *sq = node_of(c, q, "Sqrt");
    if (!sq || !private_value(c, q, 1) || sq->n_in != 1) return 0;
    int a = sq->in[0], var = -1;
    const bf__node *add = node_of(c, a, "Add");
    if (!add || !private_value(c, a, 1) || add->n_in != 2 || add->n_attrs) return 0;
    double eps = 0;
    for (int i = 0; i < 2 && var < 0; i++) {
        int feeder;
        if (!const_scalar(c, add->in[i], &eps, &feeder)) continue;
        var = add->in[1 - i];
        if (feeder >= 0 && private_value(c, add->in[i], 1) && !add_rm(p, feeder)) return 0;
    }
    if (var < 0 || !(eps >= 0) || eps > 1) return 0;
    const bf__node *rm2 = node_of(c, var, "ReduceMean");
    if (!rm2 || !private_value(c, var, 1)) return 0;
    int pw_out = rm2->in[0];
    const bf__node *pw = node_of(c, pw_out, "Pow");
    if (!pw || !private_value(c, pw_out, 1) || pw->n_in != 2 || pw->in[0] != s) return 0;
    double two;
    int feeder;
    if (!const_scalar(c, pw->in[1], &two, &feeder) || two != 2.0) return 0;
    if (feeder >= 0 && private_value(c, pw->in[1], 1) && !add_rm(p, feeder)) return 0;
    /* x - mean: read by the Pow and the Div only */
    const bf__node *sub = node_of(c, s, "Sub");
    if (!sub || !private_value(c, s, 2) || sub->n_in != 2 || sub->n_attrs) return 0;
    int x = sub->in[0], mean = sub->in[1];
    const bf__node *rm1 = node_of(c, mean, "ReduceMean");
    if (!rm1 || !private_value(c, mean, 1) || rm1->in[0] != x) return 0;
    int64_t ax1[BF_MAX_DIMS], ax2[BF_MAX_DIMS];
    int n1, n2;
    if (!reduce_axes(c, rm1, ax1, &n1, p) || !reduce_axes(c, rm2, ax2, &n2, p) || n1 != n2 || !trailing(ax1, n1) ||
        !trailing(ax2, n2))
        return 0;
    const bf__node *nodes[] = {rm1, sub, pw, rm2, add, sq};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        if (!add_op(p, nodes[i], c)) return 0;
    p->n_ops++;   /* the Div */
    p->kind = K_LAYERNORM;
    p->x = x;
    p->axis = -n1;
    p->eps = (float)eps;
    p->scale = p->bias = -1;
    p->last = idx(c, div);
    /* then, optionally, * scale + bias (elementwise_affine) */
    int other;
    const bf__node *mul = sole_reader(c, div->out[0], "Mul");
    if (!mul) return 1;
    other = mul->in[0] == div->out[0] ? mul->in[1] : mul->in[0];
    if (!ln_param(c, other, n1) || !add_rm(p, p->last)) return 1;
    p->scale = other;
    p->last = idx(c, mul);
    p->n_ops++;
    const bf__node *badd = sole_reader(c, mul->out[0], "Add");
    if (!badd) return 1;
    other = badd->in[0] == mul->out[0] ? badd->in[1] : badd->in[0];
    if (!ln_param(c, other, n1) || !add_rm(p, p->last)) return 1;
    p->bias = other;
    p->n_ops++;
    p->last = idx(c, badd);
    return 1;
}

/* ---- GELU: anchored at the Erf (or Tanh) ---- */

/* a -> Add 1 -> Mul x -> Mul 0.5: the common tail; the last node into p. */
static int match_gelu_tail(const ctx *c, int a, int x, pattern *p)
{
    int other;
    const bf__node *add = sole_reader(c, a, "Add");
    if (!add || !const_operand(c, add, 1.0, &other, p) || other != a) return 0;
    const bf__node *mx = sole_reader(c, add->out[0], "Mul");
    if (!mx) return 0;
    other = mx->in[0] == add->out[0] ? mx->in[1] : mx->in[0];
    if (other != x) return 0;
    const bf__node *half = sole_reader(c, mx->out[0], "Mul");
    if (!half || !const_operand(c, half, 0.5, &other, p) || other != mx->out[0]) return 0;
    if (!add_op(p, add, c) || !add_op(p, mx, c)) return 0;
    p->n_ops++;
    p->last = idx(c, half);
    p->x = x;
    return 1;
}

static int match_gelu(const ctx *c, const bf__node *erf, pattern *p)
{
    if (erf->n_in != 1 || erf->n_out != 1) return 0;
    int t = erf->in[0], x = -1;
    if (!private_value(c, t, 1)) return 0;
    const bf__node *dv = node_of(c, t, "Div"), *ml = node_of(c, t, "Mul");
    if (dv && dv->n_in == 2 && !dv->n_attrs) {
        double v;
        int feeder;
        if (!const_scalar(c, dv->in[1], &v, &feeder) || !near(v, sqrt(2.0))) return 0;
        if (feeder >= 0 && private_value(c, dv->in[1], 1) && !add_rm(p, feeder)) return 0;
        x = dv->in[0];
    } else if (ml && ml->n_in == 2 && !ml->n_attrs) {
        if (!const_operand(c, ml, sqrt(0.5), &x, p)) return 0;
    } else {
        return 0;
    }
    if (!add_op(p, dv ? dv : ml, c) || !add_op(p, erf, c)) return 0;
    p->kind = K_GELU;
    return match_gelu_tail(c, erf->out[0], x, p);
}

/* x^3 as the export writes it: Mul(x, Mul(x, x)) (either order) or Pow(x, 3). */
static int match_cube(const ctx *c, int c3, int x, pattern *p)
{
    if (!private_value(c, c3, 1)) return 0;
    const bf__node *pw = node_of(c, c3, "Pow");
    if (pw) {
        double e;
        int feeder;
        if (pw->n_in != 2 || pw->in[0] != x || !const_scalar(c, pw->in[1], &e, &feeder) || e != 3.0) return 0;
        if (feeder >= 0 && private_value(c, pw->in[1], 1) && !add_rm(p, feeder)) return 0;
        return add_op(p, pw, c);
    }
    const bf__node *m3 = node_of(c, c3, "Mul");
    if (!m3 || m3->n_in != 2 || m3->n_attrs) return 0;
    int sq = m3->in[0] == x ? m3->in[1] : m3->in[1] == x ? m3->in[0] : -1;
    const bf__node *m2 = node_of(c, sq, "Mul");
    if (!m2 || !private_value(c, sq, 1) || m2->n_in != 2 || m2->n_attrs || m2->in[0] != x || m2->in[1] != x) return 0;
    return add_op(p, m2, c) && add_op(p, m3, c);
}

static int match_gelu_tanh(const ctx *c, const bf__node *th, pattern *p)
{
    if (th->n_in != 1 || th->n_out != 1) return 0;
    int u = th->in[0], s = -1;
    const bf__node *mu = node_of(c, u, "Mul");
    if (!mu || !private_value(c, u, 1) || mu->n_in != 2 || mu->n_attrs ||
        !const_operand(c, mu, sqrt(2.0 / 3.14159265358979323846), &s, p))
        return 0;
    const bf__node *sa = node_of(c, s, "Add");
    if (!sa || !private_value(c, s, 1) || sa->n_in != 2 || sa->n_attrs) return 0;
    int saved = p->n_rm, saved_ops = p->n_ops;
    for (int i = 0; i < 2; i++) {
        int x = sa->in[1 - i], kk = sa->in[i], c3;
        const bf__node *mk = node_of(c, kk, "Mul");
        p->n_rm = saved, p->n_ops = saved_ops;
        if (!mk || !private_value(c, kk, 1) || mk->n_in != 2 || mk->n_attrs || !const_operand(c, mk, 0.044715, &c3, p) ||
            !match_cube(c, c3, x, p))
            continue;
        if (!add_op(p, mk, c) || !add_op(p, sa, c) || !add_op(p, mu, c) || !add_op(p, th, c)) return 0;
        p->kind = K_GELU_TANH;
        return match_gelu_tail(c, th->out[0], x, p);
    }
    return 0;
}

/* ---- Hardswish: HardSigmoid(alpha 1/6, beta 0.5) then Mul by x ---- */

static int match_hardswish(const ctx *c, const bf__node *hs, pattern *p)
{
    if (hs->n_in != 1 || hs->n_out != 1) return 0;
    const bf__attr *al = bf__node_attr(hs, "alpha"), *be = bf__node_attr(hs, "beta");
    if (!al || al->type != BF__ATTR_FLOAT || !near(al->f, 1.0 / 6.0)) return 0;
    if (be && (be->type != BF__ATTR_FLOAT || be->f != 0.5f)) return 0;
    if ((size_t)(!!al + !!be) != hs->n_attrs) return 0;
    int x = hs->in[0];
    const bf__node *mul = sole_reader(c, hs->out[0], "Mul");
    if (!mul) return 0;
    int other = mul->in[0] == hs->out[0] ? mul->in[1] : mul->in[0];
    if (other != x || !add_op(p, hs, c)) return 0;
    p->kind = K_HARDSWISH;
    p->x = x;
    p->n_ops++;
    p->last = idx(c, mul);
    return 1;
}

/* ---- GroupNorm: Reshape [0, G, -1], InstanceNormalization (scale 1, bias
 * 0), Reshape to Shape(x), Mul scale [C, 1, ...], Add bias: anchored at the
 * InstanceNormalization. PyTorch's group_norm takes the group's moments as
 * LayerNorm's Welford does, where InstanceNormalization follows
 * instance_norm's double sums: a group past ~1.8e19 is NaN in one and the
 * bias in the other (docs/NUMERICS.md). ---- */

/* A Constant node's 1-D tensor (float or int64; NULL otherwise), its node
 * into *feeder. Initializers are not taken: a float one is a parameter. */
static const bf_tensor *const_vector(const ctx *c, int v, int *feeder)
{
    const bf__node *k = node_of(c, v, "Constant");
    *feeder = -1;
    if (!k || k->n_in != 0 || k->n_attrs != 1 || strcmp(k->attrs[0].name, "value") != 0 ||
        k->attrs[0].type != BF__ATTR_TENSOR)
        return NULL;
    const bf_tensor *t = k->attrs[0].t;
    if (!t || !t->data || t->ndim != 1 || (t->dtype != BF_F32 && t->dtype != BF_I64)) return NULL;
    *feeder = idx(c, k);
    return t;
}

/* The InstanceNormalization's scale or bias: G float values all equal to want. */
static int const_fill(const ctx *c, int v, double want, int64_t groups, pattern *p)
{
    int feeder;
    const bf_tensor *t = const_vector(c, v, &feeder);
    if (!t || t->dtype != BF_F32 || t->dims[0] != groups || !private_value(c, v, 1)) return 0;
    for (int64_t i = 0; i < groups; i++)
        if (((const float *)t->data)[i] != (float)want) return 0;
    return add_rm(p, feeder);
}

/* The parameter GroupNorm's Mul or Add reads: the initializer itself or
 * an Identity of it (a chain of them). The exporter reads a module's folded
 * parameters through Identity nodes each time the module runs again (FCOS's
 * and RetinaNet v2's heads, one GroupNorm per FPN level) and where it merged
 * initializers of equal values (an untrained model's norm weights, all
 * ones). Left unfused, those patterns ran instance_norm's statistics where
 * PyTorch runs group_norm's and gave finite values where it gives NaN (a
 * held-out FCOS under one flipped head weight: docs/NUMERICS.md). The op
 * reads the Identity's output, which is the parameter, so a fault in it
 * reaches every reader as in PyTorch. */
static const bf_tensor *param_of(const ctx *c, int v)
{
    for (size_t hops = 0; v >= 0 && hops <= c->m->n_nodes; hops++) {
        if (c->m->values[v].kind == BF__VAL_PARAM) return c->m->values[v].init;
        const bf__node *id = node_of(c, v, "Identity");
        if (!id || id->n_in != 1 || id->n_out != 1) return NULL;
        v = id->in[0];
    }
    return NULL;
}

/* The Mul's scale or the Add's bias: a float parameter (or an Identity of
 * one: param_of) of one value, or of
 * shape [C, 1, ...] (the exporter unsqueezes weight and bias to the input's
 * rank - 1; the op checks that rank once shapes are known). */
static int gn_param(const ctx *c, int v)
{
    const bf_tensor *t = param_of(c, v);
    if (!t || t->dtype != BF_F32 || t->ndim < 1) return 0;
    for (int d = 1; d < t->ndim; d++)
        if (t->dims[d] != 1) return 0;
    return 1;
}

/* A Reshape of two inputs as the exporter writes it: no attribute, or
 * allowzero 0 (opset 14 on). */
static int plain_reshape(const bf__node *r)
{
    if (!r || r->n_in != 2 || r->n_out != 1 || r->n_attrs > 1) return 0;
    return !r->n_attrs ||
           (strcmp(r->attrs[0].name, "allowzero") == 0 && r->attrs[0].type == BF__ATTR_INT && r->attrs[0].i == 0);
}

/* Without affine parameters the exporter multiplies by a Constant 1 and adds
 * a Constant 0: PyTorch then computes (x - mean) * rstd. */
static int gn_unit(const ctx *c, int v, double want)
{
    double got;
    int feeder;
    return const_scalar(c, v, &got, &feeder) && feeder >= 0 && got == want;
}

static int match_groupnorm(const ctx *c, const bf__node *in, pattern *p)
{
    if (in->n_in != 3 || in->n_out != 1 || in->n_attrs > 1) return 0;
    float eps = 1e-5f;
    if (in->n_attrs) {
        if (strcmp(in->attrs[0].name, "epsilon") != 0 || in->attrs[0].type != BF__ATTR_FLOAT) return 0;
        eps = in->attrs[0].f;
    }
    if (!(eps >= 0.0f) || eps > 1.0f) return 0;
    int r1v = in->in[0], feeder;
    const bf__node *r1 = node_of(c, r1v, "Reshape");
    if (!plain_reshape(r1) || !private_value(c, r1v, 1)) return 0;
    const bf_tensor *shape = const_vector(c, r1->in[1], &feeder);
    if (!shape || shape->dtype != BF_I64 || shape->dims[0] != 3) return 0;
    const int64_t *sh = shape->data;
    if (sh[0] != 0 || sh[1] < 1 || sh[2] != -1) return 0;
    int64_t groups = sh[1];
    if (private_value(c, r1->in[1], 1) && !add_rm(p, feeder)) return 0;
    if (!const_fill(c, in->in[1], 1.0, groups, p) || !const_fill(c, in->in[2], 0.0, groups, p)) return 0;
    int x = r1->in[0];
    if (!private_value(c, in->out[0], 1)) return 0;
    const bf__node *r2 = &c->m->nodes[c->reader[in->out[0]]];
    if (c->dead[c->reader[in->out[0]]] || strcmp(r2->op_type, "Reshape") != 0 || !plain_reshape(r2) ||
        r2->in[0] != in->out[0])
        return 0;
    const bf__node *sh2 = node_of(c, r2->in[1], "Shape");
    if (!sh2 || !private_value(c, r2->in[1], 1) || sh2->n_in != 1 || sh2->n_attrs || sh2->in[0] != x) return 0;
    const bf__node *mul = sole_reader(c, r2->out[0], "Mul");
    if (!mul) return 0;
    int scale = mul->in[0] == r2->out[0] ? mul->in[1] : mul->in[0];
    const bf__node *add = sole_reader(c, mul->out[0], "Add");
    if (!add) return 0;
    int bias = add->in[0] == mul->out[0] ? add->in[1] : add->in[0];
    if (gn_unit(c, scale, 1.0) && gn_unit(c, bias, 0.0)) p->affine = 0;
    else if (gn_param(c, scale) && gn_param(c, bias)) p->affine = 1;
    else return 0;
    const bf__node *nodes[] = {r1, in, sh2, r2, mul};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        if (!add_op(p, nodes[i], c)) return 0;
    p->n_ops++;
    p->kind = K_GROUPNORM;
    p->x = x;
    p->scale = scale;
    p->bias = bias;
    p->groups = groups;
    p->eps = eps;
    p->last = idx(c, add);
    return 1;
}

/* ---- the rewrite ---- */

static bf_status oom(const bf_model *m, bf_error *err)
{
    return bf_error_set(err, BF_ENOMEM, "%s: out of memory fusing exported patterns", m->label);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = bf__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* One float constant 1 of shape [1], the scale of every LayerNorm the export
 * wrote without elementwise_affine (the op takes a scale). */
static bf_status make_one(ctx *c, bf_error *err)
{
    bf_model *m = c->m;
    if (c->one >= 0) return BF_OK;
    const char *base = "bitflip::fuse/one";
    char *name = dup_str(base);
    bf_tensor *t = bf__calloc(1, sizeof *t);
    float *data = bf__aligned_alloc(sizeof(float) + 1);
    bf__value *vals = bf__realloc(m->values, (m->n_values + 1) * sizeof *vals);
    if (vals) m->values = vals;
    if (!name || !t || !data || !vals || bf_model_find_value(m, base) >= 0) {
        int taken = name && t && data && vals;
        bf__free(name);
        bf__free(t);
        bf__free(data);
        if (taken) return bf_error_set(err, BF_EFORMAT, "%s: a value is named '%s', a name bitflip keeps for itself", m->label, base);
        return oom(m, err);
    }
    *data = 1.0f;
    t->name = name;
    t->dtype = BF_F32;
    t->ndim = 1;
    t->dims[0] = 1;
    t->data = data;
    m->values[m->n_values] = (bf__value){.name = name, .kind = BF__VAL_CONST, .producer = -1, .index = -1, .init = t};
    c->one = (int)m->n_values++;
    return BF_OK;
}

static bf_status rewrite(ctx *c, const pattern *p, bf_error *err)
{
    bf_model *m = c->m;
    bf__node *last = &m->nodes[p->last];
    static const char *const op[BF__FUSE_KINDS] = {"LayerNormalization", "Gelu", "Gelu", "HardSwish",
                                                   "GroupNormalization"};
    int in[3] = {p->x, -1, -1}, n_in = 1;
    if (p->kind == K_LAYERNORM) {
        bf_status st = p->scale < 0 ? make_one(c, err) : BF_OK;
        if (st != BF_OK) return st;
        in[1] = p->scale >= 0 ? p->scale : c->one;
        in[2] = p->bias;
        n_in = p->bias >= 0 ? 3 : 2;
    } else if (p->kind == K_GROUPNORM) {
        in[1] = p->scale, in[2] = p->bias, n_in = 3;
    }
    size_t n_attrs = p->kind == K_LAYERNORM ? 2 : p->kind == K_GROUPNORM ? 3 : p->kind == K_GELU_TANH ? 1 : 0;
    char *op_type = dup_str(op[p->kind]);
    int *ins = bf__malloc(4 * sizeof *ins);
    bf__attr *attrs = bf__calloc(n_attrs + 1, sizeof *attrs);
    int ok = op_type && ins && attrs;
    if (ok && p->kind == K_LAYERNORM) {
        attrs[0] = (bf__attr){.name = dup_str("axis"), .type = BF__ATTR_INT, .i = p->axis};
        attrs[1] = (bf__attr){.name = dup_str("epsilon"), .type = BF__ATTR_FLOAT, .f = p->eps};
        ok = attrs[0].name && attrs[1].name;
    } else if (ok && p->kind == K_GROUPNORM) {
        /* bitflip_per_channel 1: scale and bias [C, 1, ...] (or one value),
         * indexed by channel whatever C and num_groups are; 2: no affine
         * parameters, (x - mean) * rstd as PyTorch computes it then */
        attrs[0] = (bf__attr){.name = dup_str("num_groups"), .type = BF__ATTR_INT, .i = p->groups};
        attrs[1] = (bf__attr){.name = dup_str("epsilon"), .type = BF__ATTR_FLOAT, .f = p->eps};
        attrs[2] = (bf__attr){.name = dup_str("bitflip_per_channel"), .type = BF__ATTR_INT, .i = p->affine ? 1 : 2};
        ok = attrs[0].name && attrs[1].name && attrs[2].name;
    } else if (ok && p->kind == K_GELU_TANH) {
        attrs[0] = (bf__attr){.name = dup_str("approximate"), .type = BF__ATTR_STRING, .s = dup_str("tanh")};
        ok = attrs[0].name && attrs[0].s;
    }
    if (!ok) {
        for (size_t i = 0; attrs && i < n_attrs; i++) bf__free(attrs[i].name), bf__free(attrs[i].s);
        bf__free(attrs);
        bf__free(ins);
        bf__free(op_type);
        return oom(m, err);
    }
    /* reader counts follow the edit: later patterns check them */
    for (int j = 0; j < last->n_in; j++)
        if (last->in[j] >= 0) c->n_read[last->in[j]]--;
    for (int r = 0; r < p->n_rm; r++) {
        const bf__node *n = &m->nodes[p->rm[r]];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) c->n_read[n->in[j]]--;
    }
    for (int j = 0; j < n_in; j++) {
        ins[j] = in[j];
        c->n_read[in[j]]++;
        c->reader[in[j]] = p->last;
    }
    bf__free(last->op_type);
    bf__free(last->in);
    bf__free(last->attrs);   /* none: every last node is matched without attributes */
    last->op_type = op_type;
    last->in = ins;
    last->n_in = n_in;
    last->attrs = attrs;
    last->n_attrs = n_attrs;
    for (int r = 0; r < p->n_rm; r++) {
        const bf__node *n = &m->nodes[p->rm[r]];
        c->dead[p->rm[r]] = 1;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0) m->values[n->out[j]].fused_into = last->out[0] + 1;
    }
    size_t k = (size_t)p->kind;
    size_t nodes = (size_t)p->n_ops;
    if (m->fused[k] == 0 || nodes < m->fused_min[k]) m->fused_min[k] = nodes;
    if (nodes > m->fused_max[k]) m->fused_max[k] = nodes;
    m->fused[k]++;
    return BF_OK;
}

/* Removes the dead nodes, keeping the order topological (the fused node
 * stands where its pattern's last node stood, after all it reads). */
bf_status bf__remove_nodes(bf_model *m, const unsigned char *dead, bf_error *err)
{
    int *map = bf__malloc((m->n_nodes + 1) * sizeof *map);
    if (!map) return oom(m, err);
    size_t j = 0;
    for (size_t i = 0; i < m->n_nodes; i++) {
        if (dead[i]) {
            for (int o = 0; o < m->nodes[i].n_out; o++)
                if (m->nodes[i].out[o] >= 0) m->values[m->nodes[i].out[o]].producer = -1;
            bf__node_clear(&m->nodes[i]);
            map[i] = -1;
            continue;
        }
        if (j != i) m->nodes[j] = m->nodes[i];
        map[i] = (int)j++;
    }
    size_t o2 = 0;
    for (size_t o = 0; o < m->n_nodes; o++)
        if (map[m->order[o]] >= 0) m->order[o2++] = map[m->order[o]];
    for (size_t v = 0; v < m->n_values; v++)
        if (m->values[v].kind == BF__VAL_NODE && m->values[v].producer >= 0)
            m->values[v].producer = map[m->values[v].producer];
    memset(m->nodes + j, 0, (m->n_nodes - j) * sizeof *m->nodes);
    m->n_nodes = j;
    bf__free(map);
    bf__index_param_readers(m);
    return BF_OK;
}

/* With the exporter's record: whether PyTorch ran this pattern's kernel in
 * the module its nodes (Constant feeders aside) belong to. */
static int recorded(const ctx *c, const pattern *p, bf__kernels *rec)
{
    const char *names[MAX_PAT + 1];
    int n = 0;
    for (int r = 0; r < p->n_rm; r++) {
        const bf__node *nd = &c->m->nodes[p->rm[r]];
        if (strcmp(nd->op_type, "Constant") != 0) names[n++] = nd->name;
    }
    names[n++] = c->m->nodes[p->last].name;
    return bf__kernels_take(rec, p->kind, names, n);
}

bf_status bf__fuse(bf_model *m, bf_error *err)
{
    ctx c = {.m = m, .one = -1};
    bf__kernels rec;
    bf_status st = bf__kernels_parse(m, &rec, err);
    if (st != BF_OK) return st;
    m->fuse_rule = m->kernels ? BF__FUSE_RULE_RECORD : BF__FUSE_RULE_PATTERN;
    m->n_kernel_calls = rec.n;
    /* +1: room for the constant 1 make_one may add */
    c.n_read = bf__calloc(m->n_values + 2, sizeof *c.n_read);
    c.reader = bf__calloc(m->n_values + 2, sizeof *c.reader);
    c.is_out = bf__calloc(m->n_values + 2, 1);
    c.dead = bf__calloc(m->n_nodes + 1, 1);
    if (!c.n_read || !c.reader || !c.is_out || !c.dead) { st = oom(m, err); goto out; }
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int j = 0; j < m->nodes[i].n_in; j++)
            if (m->nodes[i].in[j] >= 0) c.n_read[m->nodes[i].in[j]]++, c.reader[m->nodes[i].in[j]] = (int)i;
    for (size_t i = 0; i < m->n_outputs; i++) c.is_out[m->output_vals[i]] = 1;

    size_t fused = 0;
    for (size_t o = 0; st == BF_OK && o < m->n_nodes; o++) {
        int i = m->order[o];
        if (c.dead[i]) continue;
        const bf__node *n = &m->nodes[i];
        pattern p = {.last = -1, .x = -1};
        int hit = 0;
        if (strcmp(n->op_type, "Div") == 0) hit = match_layernorm(&c, n, &p);
        else if (strcmp(n->op_type, "Erf") == 0) hit = match_gelu(&c, n, &p);
        else if (strcmp(n->op_type, "Tanh") == 0) hit = match_gelu_tanh(&c, n, &p);
        else if (strcmp(n->op_type, "HardSigmoid") == 0) hit = match_hardswish(&c, n, &p);
        else if (strcmp(n->op_type, "InstanceNormalization") == 0) hit = match_groupnorm(&c, n, &p);
        if (!hit) continue;
        /* the last node may not be among those removed (a Constant feeder
         * listed twice is harmless: clearing is once per node) */
        int bad = p.last < 0 || p.x < 0 || m->nodes[p.last].n_attrs != 0 || m->nodes[p.last].n_out != 1 ||
                  m->nodes[p.last].out[0] < 0;
        for (int r = 0; r < p.n_rm && !bad; r++) bad = p.rm[r] == p.last || c.dead[p.rm[r]];
        if (bad) continue;
        if (m->kernels && !recorded(&c, &p, &rec)) {
            m->fuse_unrecorded++;
            continue;
        }
        st = rewrite(&c, &p, err);
        fused++;
    }
    if (st == BF_OK && fused) st = bf__remove_nodes(m, c.dead, err);
out:
    bf__free(c.n_read);
    bf__free(c.reader);
    bf__free(c.is_out);
    bf__free(c.dead);
    bf__kernels_free(&rec);
    return st;
}

const char *bf_model_fusion_rule(const bf_model *m, size_t *calls, size_t *unrecorded)
{
    static const char *const rule[] = {"off", "pattern", "record"};
    if (calls) *calls = m->n_kernel_calls;
    if (unrecorded) *unrecorded = m->fuse_unrecorded;
    return rule[m->fuse_rule >= 0 && m->fuse_rule <= 2 ? m->fuse_rule : 0];
}

const char *bf_model_fusion(const bf_model *m, size_t i, size_t *count, size_t *min_nodes, size_t *max_nodes)
{
    if (i >= BF__FUSE_KINDS) return NULL;
    if (count) *count = m->fused[i];
    if (min_nodes) *min_nodes = m->fused_min[i];
    if (max_nodes) *max_nodes = m->fused_max[i];
    return kind_name[i];
}

int bf__fused_note(const bf_model *m, int64_t v, char *buf, size_t len)
{
    if (len) buf[0] = '\0';
    if (v < 0 || (size_t)v >= m->n_values || !m->values[v].fused_into) return 0;
    int y = m->values[v].fused_into - 1, p = m->values[y].producer;
    const bf__node *n = p >= 0 ? &m->nodes[p] : NULL;
    snprintf(buf, len,
             "'%s' is an intermediate of an exported pattern that bitflip runs as one op, as PyTorch does: "
             "node '%s' (%s) computes it internally (docs/OPS.md, fused patterns); fault that node's output "
             "'%s', or load the model with --no-fuse",
             m->values[v].name, n ? n->name : "?", n ? n->op_type : "?", m->values[y].name);
    return 1;
}
