/* Einsum: any equation of up to EIN_OPS operands, with repeated subscripts
 * in an operand (its diagonal), ellipses (broadcast batch dims) and the
 * implicit output (the subscripts seen once, in alphabetical order, A..Z
 * before a..z, after
 * the ellipsis dims). One plain loop: for each output element, the products
 * of the operands summed over the contracted subscripts, in row-major order
 * of those subscripts (the last one innermost).
 *
 * Two operands are summed as PyTorch 1.13 sums them: its einsum lowers a
 * pair to one bmm (sumproduct_pair: batch = the output subscripts both
 * operands have, rows = the first's alone, columns = the second's alone,
 * contraction = the contracted subscripts flattened in its label order:
 * ellipsis dims, then A..Z, then a..z), or to a plain product when nothing
 * is contracted. A bmm under 400 multiply-adds per matrix is ATen's loop of
 * rounded products (matmul_plain.c), a larger one BLAS, bf__sgemm's chain of
 * fused multiply-adds (docs/NUMERICS.md, "Softmax and attention"). Three
 * or more operands it contracts pair by pair from the left, each pair so
 * (torch_pairwise). A subscript summed in one operand alone PyTorch sums
 * first, in an order of its own: those equations keep the single loop (the
 * chain for two operands). */
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec/op.h"
#include "linalg_impl.h"
#include "sgemm.h"

enum { EIN_OPS = 4, EIN_LABELS = 24, EIN_TERM_MAX = 64 };
enum { EIN_MUL, EIN_PLAIN, EIN_CHAIN };   /* how a pair is summed: a product, ATen's small bmm loop, BLAS's chain */

typedef struct ein_params {
    int n_ops, n_labels, n_out;         /* labels: the output's first, then the contracted */
    int64_t size[EIN_LABELS];
    int64_t stride[EIN_OPS][EIN_LABELS]; /* elements to step operand i when label l moves; 0: absent or broadcast */
    /* Two operands, no diagonal, nothing summed out of one operand alone:
     * a batched matrix product. Labels by role (indices into the above):
     * batch (both operands and the output), m (first and output), n (second
     * and output), k (both, contracted), each group in label order. */
    int gemm, nb, nm, nn, nk;
    /* two operands as PyTorch runs them: plain, its small bmm loop (each
     * product rounded, then added); mul, nothing contracted (one product,
     * a -0 kept); neither, the fma chain */
    int plain, mul;
    /* three or more operands as PyTorch contracts them (pairwise): steps
     * 1 .. n_ops - 1 take the result so far and operand j */
    int pairwise;
    struct ein_step {
        uint32_t keep, sum;             /* labels of the step's result; labels it sums */
        int mode;                       /* EIN_MUL, EIN_PLAIN, EIN_CHAIN */
    } step[EIN_OPS - 1];
    int64_t inter;                      /* elements of the largest result so far */
    int8_t lb[EIN_LABELS], lm[EIN_LABELS], ln[EIN_LABELS], lk[EIN_LABELS];
    int64_t batch, m, n, k;
    int64_t out_stride[EIN_LABELS];     /* output labels: elements to step the output */
} ein_params;
static_assert(sizeof(ein_params) <= BF__OP_PARAMS_MAX, "einsum params too large");

/* One operand's subscripts: label codes per dim, the ellipsis kept as one entry. Codes:
 * 0..51 letters, 52 + k the k-th ellipsis dim counted from the right. */
typedef struct term {
    int n;               /* letters and the ellipsis position */
    int code[EIN_TERM_MAX];
    int ell;             /* index in code[] of the ellipsis, -1 if none */
} term;

static int letter(char ch)
{
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
    return -1;
}

/* Parses [s, e) into t; 0 on a malformed term. */
static int parse_term(const char *s, const char *e, term *t)
{
    t->n = 0, t->ell = -1;
    while (s < e) {
        if (*s == ' ') { s++; continue; }
        if (*s == '.') {
            if (e - s < 3 || s[1] != '.' || s[2] != '.' || t->ell >= 0 || t->n >= EIN_TERM_MAX) return 0;
            t->ell = t->n++;
            s += 3;
            continue;
        }
        int l = letter(*s++);
        if (l < 0 || t->n >= EIN_TERM_MAX) return 0;
        t->code[t->n++] = l;
    }
    return 1;
}

/* Sorts the labels of a two-operand equation into the roles of a batched
 * matrix product and sizes its scratch; 0 when the equation is not one
 * (a diagonal, a subscript summed in one operand only) or is too large. */
static int gemm_roles(ein_params *ep, int occ[EIN_OPS][EIN_LABELS], bf__prep *p)
{
    ep->nb = ep->nm = ep->nn = ep->nk = 0;
    ep->batch = ep->m = ep->n = ep->k = 1;
    for (int l = 0; l < ep->n_labels; l++) {
        if (occ[0][l] > 1 || occ[1][l] > 1) return 0;   /* a diagonal */
        /* an operand without the subscript (or with a broadcast size-1
         * '...' dim) does not move along it: a subscript in one operand and
         * the output is that operand's rows or columns */
        int a = occ[0][l] == 1, b = occ[1][l] == 1, out = l < ep->n_out;
        if (out && (a == b)) ep->lb[ep->nb++] = (int8_t)l, ep->batch *= ep->size[l];
        else if (out && a) ep->lm[ep->nm++] = (int8_t)l, ep->m *= ep->size[l];
        else if (out) ep->ln[ep->nn++] = (int8_t)l, ep->n *= ep->size[l];
        else if (a == b) ep->lk[ep->nk++] = (int8_t)l, ep->k *= ep->size[l];
        else return 0;                                   /* summed in one operand only */
    }
    double floats = (double)ep->batch * ((double)ep->m * (double)ep->k + (double)ep->k * (double)ep->n +
                                         (double)ep->m * (double)ep->n);
    if (ep->m > INT_MAX || ep->n > INT_MAX || ep->k > INT_MAX || floats * sizeof(float) > (double)((size_t)1 << 32))
        return 0;
    p->scratch = (size_t)floats * sizeof(float);
    return 1;
}

/* How PyTorch runs a two-operand equation (the header comment): its bmm's
 * sizes from the subscripts' roles, a diagonal subscript counting once. A
 * size-1 subscript changes no product, so the sizes' products decide. */
static void torch_pair(ein_params *ep, int occ[EIN_OPS][EIN_LABELS])
{
    double m = 1, n = 1, k = 1;
    ep->plain = ep->mul = 0;
    for (int l = 0; l < ep->n_labels; l++) {
        int a = occ[0][l] > 0, b = occ[1][l] > 0, out = l < ep->n_out;
        double v = (double)ep->size[l];
        if (!out && a != b) return;   /* summed in one operand first */
        if (out && a && !b) m *= v;
        else if (out && b && !a) n *= v;
        else if (!out) k *= v;
    }
    ep->mul = k == 1;
    ep->plain = !ep->mul && k * m * n < BF_BMM_PLAIN_MAX;
}

/* Three or more operands as PyTorch 1.13 (without opt_einsum) contracts
 * them: the result so far with the next operand, left to right, each pair
 * one sumproduct_pair (a bmm or a product, torch_pair's rule), its result
 * rounded to float. A contracted subscript is summed in the pair after
 * which no later operand has it; PyTorch sums one that only one side of a
 * pair has (and no later operand) first, with its own reduction: such an
 * equation keeps the single loop. 0 then, or when the results would not
 * fit the scratch bound. A subscript of size 1 is in no operand. */
static int torch_pairwise(ein_params *ep, int occ[EIN_OPS][EIN_LABELS], bf__prep *p)
{
    int cnt[EIN_LABELS] = {0};
    uint32_t in[EIN_OPS] = {0};
    for (int i = 0; i < ep->n_ops; i++)
        for (int l = 0; l < ep->n_labels; l++)
            if (occ[i][l] > 0 && ep->size[l] != 1) in[i] |= 1u << l, cnt[l]++;
    uint32_t cur = in[0];
    double most = 0;
    for (int j = 1; j < ep->n_ops; j++) {
        uint32_t b = in[j], sum = 0;
        for (int l = ep->n_out; l < ep->n_labels; l++) {
            int a_has = cur >> l & 1, b_has = b >> l & 1;
            if (a_has && b_has && --cnt[l] == 1) sum |= 1u << l, cnt[l] = 0;
            else if (!(a_has && b_has) && (a_has || b_has) && cnt[l] == 1) return 0;   /* summed on one side first */
        }
        uint32_t keep = (cur | b) & ~sum;
        double m = 1, n = 1, k = 1, size = 1;
        for (int l = 0; l < ep->n_labels; l++) {
            double v = (double)ep->size[l];
            if (sum >> l & 1) k *= v;
            else if ((cur & ~b) >> l & 1) m *= v;
            else if ((b & ~cur) >> l & 1) n *= v;
            if (keep >> l & 1) size *= v;
        }
        ep->step[j - 1] = (struct ein_step){.keep = keep, .sum = sum,
                                            .mode = !sum ? EIN_MUL : k * m * n < BF_BMM_PLAIN_MAX ? EIN_PLAIN : EIN_CHAIN};
        if (size > most) most = size;
        cur = keep;
    }
    if (2 * most * sizeof(float) > (double)((size_t)1 << 32)) return 0;
    ep->inter = (int64_t)most;
    p->scratch = 2 * (size_t)most * sizeof(float);
    return 1;
}

/* An equation as einsum_prepare reads it, step by step: the operands'
 * terms, each subscript's size (letters 0..51, then the ellipsis dims
 * from 52, the last ellipsis dim at 52), the output's term. */
typedef struct ein_eq {
    const char *eq;
    term t[EIN_OPS], out;
    int n;                                /* operands */
    int64_t size[52 + BF_MAX_DIMS];
    int seen[52 + BF_MAX_DIMS], count[52], n_ell;
} ein_eq;

/* The operands' terms, left of "->": as many as the node has inputs. */
static bf_status ein_operands(const bf__prep *p, const char *lhs_end, ein_eq *q, bf_error *err)
{
    const bf__node *nd = p->node;
    const char *eq = q->eq;
    int n = 0;
    for (const char *s = eq; n <= EIN_OPS; n++) {
        const char *comma = memchr(s, ',', (size_t)(lhs_end - s));
        const char *e = comma ? comma : lhs_end;
        if (n == EIN_OPS || !parse_term(s, e, &q->t[n]))
            return bf__node_error(err, nd, BF_EFORMAT, "equation '%.80s': operand %d is not letters with at most one "
                                  "'...'", eq, n);
        if (!comma) { n++; break; }
        s = comma + 1;
    }
    if (n != p->n_in)
        return bf__node_error(err, nd, BF_EFORMAT, "equation '%.80s' names %d operands; the node has %d inputs", eq, n,
                              p->n_in);
    q->n = n;
    return BF_OK;
}

/* Each subscript's size from the operands' shapes: ellipsis dims as many
 * as the widest operand's, their sizes broadcast; a letter the same size
 * everywhere. */
static bf_status ein_sizes(const bf__prep *p, ein_eq *q, bf_error *err)
{
    const bf__node *nd = p->node;
    const char *eq = q->eq;
    const term *t = q->t;
    for (int i = 0; i < q->n; i++) {
        const bf_tensor *x = p->in[i];
        int letters = t[i].n - (t[i].ell >= 0), e = x->ndim - letters;
        char sx[96];
        if (e < 0 || (e > 0 && t[i].ell < 0))
            return bf__node_error(err, nd, BF_ESHAPE, "equation '%.80s': operand %d has %d subscripts but shape %s", eq,
                                  i, letters, bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
        if (e > q->n_ell) q->n_ell = e;
    }
    for (int i = 0; i < q->n; i++) {
        const bf_tensor *x = p->in[i];
        int dim = 0;
        for (int j = 0; j < t[i].n; j++) {
            if (j == t[i].ell) {
                int e = x->ndim - (t[i].n - 1);
                for (int k = 0; k < e; k++, dim++) {
                    int code = 52 + (e - 1 - k);
                    int64_t v = x->dims[dim];
                    if (q->seen[code] && q->size[code] != v && q->size[code] != 1 && v != 1)
                        return bf__node_error(err, nd, BF_ESHAPE, "equation '%.80s': the '...' dims of the operands "
                                              "do not broadcast (%lld vs %lld)", eq, (long long)q->size[code], (long long)v);
                    if (!q->seen[code] || q->size[code] == 1) q->size[code] = v;
                    q->seen[code] = 1;
                }
                continue;
            }
            int code = t[i].code[j];
            int64_t v = x->dims[dim++];
            if (q->seen[code] && q->size[code] != v)
                return bf__node_error(err, nd, BF_ESHAPE, "equation '%.80s': subscript '%c' is %lld in one place and "
                                      "%lld in another", eq, code < 26 ? 'a' + code : 'A' + code - 26,
                                      (long long)q->size[code], (long long)v);
            q->size[code] = v, q->seen[code] = 1, q->count[code]++;
        }
    }
    return BF_OK;
}

/* The output's subscripts: after "->", or implicit (the ellipsis, then
 * the letters used once, in alphabetical order, capitals first). */
static bf_status ein_output(const bf__prep *p, const char *arrow, ein_eq *q, bf_error *err)
{
    const bf__node *nd = p->node;
    const char *eq = q->eq;
    term *out = &q->out;
    if (arrow) {
        if (!parse_term(arrow + 2, arrow + 2 + strlen(arrow + 2), out))
            return bf__node_error(err, nd, BF_EFORMAT, "equation '%.80s': the output is not letters with at most one "
                                  "'...'", eq);
        for (int j = 0; j < out->n; j++) {
            if (j == out->ell) continue;
            if (!q->seen[out->code[j]])
                return bf__node_error(err, nd, BF_EFORMAT, "equation '%.80s': output subscript '%c' is in no operand", eq,
                                      out->code[j] < 26 ? 'a' + out->code[j] : 'A' + out->code[j] - 26);
            for (int k = 0; k < j; k++)
                if (k != out->ell && out->code[k] == out->code[j])
                    return bf__node_error(err, nd, BF_EFORMAT, "equation '%.80s': output subscript repeated", eq);
        }
        return BF_OK;
    }
    out->n = 0, out->ell = -1;
    if (q->n_ell > 0) out->ell = out->n++;
    /* alphabetical as ASCII has it, A..Z before a..z: PyTorch's order (and
     * numpy's), so "Ab,bc" is [A, c] */
    for (int k = 0; k < 52; k++) {
        int l = k < 26 ? 26 + k : k - 26;
        if (q->count[l] == 1) {
            if (out->n >= BF_MAX_DIMS + 1)
                return bf__node_error(err, nd, BF_EUNSUPPORTED, "equation '%.80s': the implicit output has more "
                                      "than %d dims", eq, BF_MAX_DIMS);
            out->code[out->n++] = l;
        }
    }
    return BF_OK;
}

bf_status bf__einsum_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    ein_params *ep = (ein_params *)p->params;
    const char *eq;
    bf_status st;
    if ((st = bf__attr_string(nd, "equation", "", &eq, err))) return st;
    if (p->n_in > EIN_OPS)
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "%d operands; at most %d are supported", p->n_in, EIN_OPS);
    for (int i = 0; i < p->n_in; i++) {
        char what[24];
        snprintf(what, sizeof what, "Inputs[%d]", i);
        if ((st = bf__want_f32(p, i, what, err))) return st;
    }
    const char *arrow = strstr(eq, "->"), *lhs_end = arrow ? arrow : eq + strlen(eq);
    ein_eq q = {.eq = eq};
    if ((st = ein_operands(p, lhs_end, &q, err)) || (st = ein_sizes(p, &q, err)) || (st = ein_output(p, arrow, &q, err)))
        return st;
    const term *t = q.t, out = q.out;
    const int64_t *size = q.size;
    int n = q.n, n_ell = q.n_ell;
    /* label order: output dims first, then contracted letters, then contracted ellipsis dims */
    int order[52 + BF_MAX_DIMS], nl = 0, in_out[52 + BF_MAX_DIMS] = {0};
    int64_t odims[BF_MAX_DIMS];
    int ond = 0;
    for (int j = 0; j < out.n; j++) {
        if (j == out.ell) {
            for (int k = n_ell - 1; k >= 0; k--) order[nl++] = 52 + k, in_out[52 + k] = 1;
            continue;
        }
        order[nl++] = out.code[j], in_out[out.code[j]] = 1;
    }
    int n_out = nl;
    /* the contracted labels in PyTorch's order (it flattens them so into the
     * bmm's contraction, which sets the order of each sum): the ellipsis
     * dims left to right, then A..Z, then a..z */
    for (int k = n_ell - 1; k >= 0; k--)
        if (q.seen[52 + k] && !in_out[52 + k]) order[nl++] = 52 + k;
    for (int l = 26; l < 52; l++)
        if (q.seen[l] && !in_out[l]) order[nl++] = l;
    for (int l = 0; l < 26; l++)
        if (q.seen[l] && !in_out[l]) order[nl++] = l;
    if (n_out > BF_MAX_DIMS || nl > EIN_LABELS)
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "equation '%.80s': %d output dims and %d subscripts in all; at "
                              "most %d and %d are supported", eq, n_out, nl, BF_MAX_DIMS, EIN_LABELS);
    ep->n_ops = n, ep->n_labels = nl, ep->n_out = n_out;
    for (int l = 0; l < nl; l++) ep->size[l] = size[order[l]];
    for (int l = 0; l < n_out; l++) odims[ond++] = size[order[l]];
    /* strides: repeated subscripts add up (the diagonal); size-1 ellipsis dims broadcast */
    memset(ep->stride, 0, sizeof ep->stride);
    int occ[EIN_OPS][EIN_LABELS] = {{0}};
    for (int i = 0; i < n; i++) {
        const bf_tensor *x = p->in[i];
        int64_t st_[BF_MAX_DIMS], acc = 1;
        for (int dd = x->ndim - 1; dd >= 0; dd--) st_[dd] = acc, acc *= x->dims[dd];
        int dim = 0;
        for (int j = 0; j < t[i].n; j++) {
            int codes[BF_MAX_DIMS], nc = 0;
            if (j == t[i].ell) {
                int e = x->ndim - (t[i].n - 1);
                for (int k = 0; k < e; k++) codes[nc++] = 52 + (e - 1 - k);
            } else {
                codes[nc++] = t[i].code[j];
            }
            for (int k = 0; k < nc; k++, dim++) {
                if (x->dims[dim] == 1 && codes[k] >= 52) continue;   /* broadcast */
                for (int l = 0; l < nl; l++)
                    if (order[l] == codes[k]) ep->stride[i][l] += st_[dim], occ[i][l]++;
            }
        }
    }
    int64_t acc = 1;
    for (int l = n_out - 1; l >= 0; l--) ep->out_stride[l] = acc, acc *= ep->size[l];
    ep->gemm = n == 2 && gemm_roles(ep, occ, p);
    if (n == 2) torch_pair(ep, occ);
    ep->pairwise = n > 2 && torch_pairwise(ep, occ, p);
    bf__set_shape(p->out[0], BF_F32, ond, odims);
    return BF_OK;
}

/* Copies the elements of src at the labels `ls` (row-major: the last label
 * fastest) to dst, contiguous; `scatter` copies the other way. */
static void pack(const ein_params *ep, const int8_t *const *groups, const int *counts, int n_groups,
                 const int64_t *stride, float *src_or_dst, const float *src, float *dst)
{
    int8_t ls[EIN_LABELS];
    int nl = 0;
    for (int g = 0; g < n_groups; g++)
        for (int j = 0; j < counts[g]; j++) ls[nl++] = groups[g][j];
    int64_t idx[EIN_LABELS] = {0}, off = 0, total = 1;
    for (int j = 0; j < nl; j++) total *= ep->size[ls[j]];
    for (int64_t e = 0; e < total; e++) {
        if (src) dst[e] = src[off];
        else src_or_dst[off] = dst[e];
        for (int j = nl - 1; j >= 0; j--) {
            off += stride[ls[j]];
            if (++idx[j] < ep->size[ls[j]]) break;
            off -= stride[ls[j]] * ep->size[ls[j]];
            idx[j] = 0;
        }
    }
}

/* The batched product: A packed as [batch, m, k], B as [batch, k, n],
 * bf__sgemm per batch (each element the in-order chain over k, as the
 * loop below computes it), the product scattered into the output. */
static void einsum_gemm(const ein_params *ep, const float *a, const float *b, float *y, float *scratch)
{
    float *pa = scratch, *pb = pa + ep->batch * ep->m * ep->k, *pc = pb + ep->batch * ep->k * ep->n;
    const int8_t *ga[3] = {ep->lb, ep->lm, ep->lk}, *gb[3] = {ep->lb, ep->lk, ep->ln}, *gc[3] = {ep->lb, ep->lm, ep->ln};
    int ca[3] = {ep->nb, ep->nm, ep->nk}, cb[3] = {ep->nb, ep->nk, ep->nn}, cc[3] = {ep->nb, ep->nm, ep->nn};
    pack(ep, ga, ca, 3, ep->stride[0], NULL, a, pa);
    pack(ep, gb, cb, 3, ep->stride[1], NULL, b, pb);
    int m = (int)ep->m, n = (int)ep->n, k = (int)ep->k, level = bf__sgemm_best();
    for (int64_t t = 0; t < ep->batch; t++) {
        float *ct = pc + t * ep->m * ep->n;
        const float *at = pa + t * ep->m * ep->k, *bt = pb + t * ep->k * ep->n;
        if (k == 0) memset(ct, 0, sizeof(float) * (size_t)(ep->m * ep->n));
        else if (m == 0 || n == 0) continue;
        else if (ep->mul)   /* k == 1: an outer product */
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) ct[(int64_t)i * n + j] = at[i] * bt[j];
        else if (ep->plain) bf__smatmul_plain(level, m, n, k, at, k, bt, n, ct, n);
        else bf__sgemm_level(level, 0, 0, m, n, k, 1.0f, at, k, bt, n, 0, ct, n);
    }
    pack(ep, gc, cc, 3, ep->out_stride, y, NULL, pc);
}

/* Strides of a dense tensor over the labels in mask, in label order (the
 * last fastest), 0 for the others; its elements. */
static int64_t dense_strides(const ein_params *ep, uint32_t mask, int64_t *st)
{
    int64_t acc = 1;
    for (int l = ep->n_labels - 1; l >= 0; l--) {
        st[l] = mask >> l & 1 ? acc : 0;
        if (mask >> l & 1) acc *= ep->size[l];
    }
    return acc;
}

/* One pairwise step: t (strides st) = a (sa) times b (sb), summed over the
 * step's labels in label order, the last one innermost. */
static void pair_step(const ein_params *ep, const struct ein_step *s, const float *a, const int64_t *sa, const float *b,
                      const int64_t *sb, float *t, const int64_t *st)
{
    int ol[EIN_LABELS], kl[EIN_LABELS], no = 0, nk = 0;
    int64_t total = 1, outer = 1;
    for (int l = 0; l < ep->n_labels; l++) {
        if (s->keep >> l & 1) ol[no++] = l, total *= ep->size[l];
        if (s->sum >> l & 1) kl[nk++] = l;
    }
    int inner = nk ? kl[nk - 1] : -1;
    int64_t ilen = inner >= 0 ? ep->size[inner] : 1;
    for (int i = 0; i + 1 < nk; i++) outer *= ep->size[kl[i]];
    if (ilen == 0) outer = 0;
    int64_t idx[EIN_LABELS] = {0}, oa = 0, ob = 0, ot = 0;
    for (int64_t e = 0; e < total; e++) {
        float acc = 0.0f;
        if (s->mode == EIN_MUL) {
            acc = a[oa] * b[ob];
        } else {
            int64_t kidx[EIN_LABELS] = {0}, ka = oa, kb = ob, ia = inner >= 0 ? sa[inner] : 0, ib = inner >= 0 ? sb[inner] : 0;
            for (int64_t r = 0; r < outer; r++) {
                if (s->mode == EIN_PLAIN) acc = bf__sdot_plain(ilen, a + ka, ia, b + kb, ib, acc);
                else
                    for (int64_t k = 0; k < ilen; k++) acc = fmaf(a[ka + k * ia], b[kb + k * ib], acc);
                for (int i = nk - 2; i >= 0; i--) {
                    int l = kl[i];
                    ka += sa[l], kb += sb[l];
                    if (++kidx[i] < ep->size[l]) break;
                    ka -= sa[l] * ep->size[l], kb -= sb[l] * ep->size[l];
                    kidx[i] = 0;
                }
            }
        }
        t[ot] = acc;
        for (int i = no - 1; i >= 0; i--) {
            int l = ol[i];
            oa += sa[l], ob += sb[l], ot += st[l];
            if (++idx[i] < ep->size[l]) break;
            oa -= sa[l] * ep->size[l], ob -= sb[l] * ep->size[l], ot -= st[l] * ep->size[l];
            idx[i] = 0;
        }
    }
}

/* Three or more operands, pair by pair (torch_pairwise), through two
 * scratch buffers; the last result copied to y in output order. */
static void einsum_pairwise(const ein_params *ep, const float *const *x, float *y, float *scratch)
{
    const float *cur = x[0];
    int64_t scur[EIN_LABELS], st[EIN_LABELS];
    memcpy(scur, ep->stride[0], sizeof scur);
    for (int j = 1; j < ep->n_ops; j++) {
        float *t = scratch + (j & 1) * ep->inter;
        dense_strides(ep, ep->step[j - 1].keep, st);
        pair_step(ep, &ep->step[j - 1], cur, scur, x[j], ep->stride[j], t, st);
        cur = t;
        memcpy(scur, st, sizeof scur);
    }
    int64_t total = 1, idx[EIN_LABELS] = {0}, off = 0;
    for (int l = 0; l < ep->n_out; l++) total *= ep->size[l];
    for (int64_t o = 0; o < total; o++) {
        y[o] = cur[off];
        for (int l = ep->n_out - 1; l >= 0; l--) {
            off += scur[l];
            if (++idx[l] < ep->size[l]) break;
            off -= scur[l] * ep->size[l];
            idx[l] = 0;
        }
    }
}

bf_status bf__einsum_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const ein_params *ep = c->params;
    if (ep->gemm) {
        einsum_gemm(ep, c->in[0]->data, c->in[1]->data, c->out[0]->data, c->scratch);
        return BF_OK;
    }
    float *y = c->out[0]->data;
    const float *x[EIN_OPS] = {NULL};
    for (int i = 0; i < ep->n_ops; i++) x[i] = c->in[i]->data;
    if (ep->pairwise) {
        einsum_pairwise(ep, x, y, c->scratch);
        return BF_OK;
    }
    int nl = ep->n_labels, no = ep->n_out, n = ep->n_ops;
    int64_t total_out = 1, total_red = 1;
    for (int l = 0; l < no; l++) total_out *= ep->size[l];
    for (int l = no; l < nl; l++) total_red *= ep->size[l];
    /* the innermost contracted label runs as a strided loop */
    int inner = nl > no ? nl - 1 : -1;
    int64_t ilen = inner >= 0 ? ep->size[inner] : 1, outer_red = inner >= 0 && ilen ? total_red / ilen : 1;
    if (inner >= 0 && ilen == 0) outer_red = 0;
    int64_t idx[EIN_LABELS] = {0}, base[EIN_OPS] = {0};
    for (int64_t o = 0; o < total_out; o++) {
        float s = 0.0f;
        int64_t off[EIN_OPS];
        int64_t ridx[EIN_LABELS] = {0};
        for (int i = 0; i < n; i++) off[i] = base[i];
        for (int64_t r = 0; r < outer_red; r++) {
            if (n == 2) {
                const float *a = x[0] + off[0], *b = x[1] + off[1];
                int64_t sa = inner >= 0 ? ep->stride[0][inner] : 0, sb = inner >= 0 ? ep->stride[1][inner] : 0;
                if (ep->mul) s = a[0] * b[0];   /* one product: no sum to start from 0 (a -0 stays) */
                else if (ep->plain) s = bf__sdot_plain(ilen, a, sa, b, sb, s);
                else
                    for (int64_t k = 0; k < ilen; k++) s = fmaf(a[k * sa], b[k * sb], s);
            } else {
                for (int64_t k = 0; k < ilen; k++) {
                    float v = 1.0f;
                    for (int i = 0; i < n; i++) v *= x[i][off[i] + (inner >= 0 ? k * ep->stride[i][inner] : 0)];
                    s += v;
                }
            }
            /* odometer over the other contracted labels */
            for (int l = inner - 1; l >= no; l--) {
                for (int i = 0; i < n; i++) off[i] += ep->stride[i][l];
                if (++ridx[l] < ep->size[l]) break;
                for (int i = 0; i < n; i++) off[i] -= ep->stride[i][l] * ep->size[l];
                ridx[l] = 0;
            }
        }
        y[o] = s;
        for (int l = no - 1; l >= 0; l--) {
            for (int i = 0; i < n; i++) base[i] += ep->stride[i][l];
            if (++idx[l] < ep->size[l]) break;
            for (int i = 0; i < n; i++) base[i] -= ep->stride[i][l] * ep->size[l];
            idx[l] = 0;
        }
    }
    return BF_OK;
}
