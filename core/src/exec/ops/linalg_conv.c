/* Conv: its prepare (which path, how much scratch), the run that hands a
 * step or one output channel to the path chosen (linalg_conv_gemm.c: im2col
 * and packed products; linalg_conv_direct.c: depthwise and 1x1), and the
 * accessors through which the differential engine reads a Conv step and
 * recomputes or updates one of its channels (exec/step_access.h): they sit
 * beside the parameters they read. */
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/simd.h"
#include "base/wpack.h"
#include "exec/op.h"
#include "exec/step_access.h"
#include "fastmath_impl.h"
#include "linalg_impl.h"
#include "linalg_pwseg.h"
#include "linalg_window.h"
#include "sgemm.h"

/* The im2col path's scratch: how many images one product takes (cp->nb),
 * where the columns and products sit, and room for whichever kernel
 * bf__conv_packed, linalg_conv_bcast.c, linalg_conv_planes.c or (a strided
 * 1x1) linalg_conv_pwlanes.c will take
 * for this shape. Apart from bf__conv_prepare, which checks the
 * attributes, to keep both short. */
static bf_status im2col_scratch(bf__prep *p, bf__conv_params *cp, bf_error *err)
{
    const bf__node *nd = p->node;
    const bf__window *w = &cp->w;
    /* Several images per sgemm: small feature maps give tiny GEMMs
     * otherwise, dominated by call overhead. About 256 KiB of columns and
     * products, so both stay in L2 (measured: 4 MiB was 20% slower). */
    double per_image = (double)(cp->kc + cp->mg) * (double)cp->osp;
    int64_t nb = (int64_t)((double)(1 << 16) / (per_image > 1 ? per_image : 1));
    cp->nb = nb < 1 ? 1 : nb > cp->n ? (cp->n > 0 ? cp->n : 1) : nb;
    if ((double)cp->kc * (double)cp->osp * (double)cp->nb > (double)INT_MAX)
        cp->nb = 1;
    double floats = (double)cp->m * (double)cp->kc + per_image * (double)cp->nb + 64;
    if (floats * sizeof(float) > (double)((size_t)1 << 36) || (double)cp->nb * (double)cp->osp > (double)INT_MAX)
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "im2col scratch of %.0f bytes is too large",
                              floats * sizeof(float));
    cp->off_cols = ((size_t)(cp->m * cp->kc) + 15) & ~(size_t)15;
    cp->off_tmp = cp->off_cols + (((size_t)(cp->kc * cp->osp * cp->nb) + 15) & ~(size_t)15);
    cp->scratch_floats = cp->off_tmp + (size_t)(cp->mg * cp->osp * cp->nb);
    /* One image per product on the AVX2 kernel (conv_packed): no
     * product buffer, and for a stride-1 2-D Conv no column matrix
     * either, only the padded planes (a 3x3 layer of resnet18's layer1:
     * 1.0 MB with the weights instead of 8.2 MB, each page of which a
     * plan's first run touches).
     * A panel deeper than the kernel's stack one may find no memory,
     * and then the column matrix is needed after all: kept there. */
    if (cp->nb == 1 && cp->simd >= BF_SGEMM_AVX2 && cp->kc <= BF_SGEMM_KSTACK) {
        size_t need;
        if (!bf__conv_padded_ok(w) && bf__conv_strided_ok(w)) {
            /* horizontal stride 2: the padded planes (a 1x1 stride-2
             * Conv's are larger than its columns), and room for one image's
             * columns still, should bf__conv_packed ever leave it to im2col */
            size_t planes = (size_t)(cp->cg * bf__conv_padded_plane(w));
            size_t packed = cp->off_cols + ((planes + 15) & ~(size_t)15) + (size_t)cp->mg + 16;
            need = cp->off_tmp + (size_t)cp->mg;
            if (packed > need) need = packed;
            cp->scratch_floats = need;
        } else if (bf__conv_padded_ok(w)) {
            size_t planes = (size_t)(cp->cg * bf__conv_padded_plane(w));
            size_t packed = ((planes + 15) & ~(size_t)15) + (size_t)cp->mg + 16;
            /* and one channel alone (conv_channel_windows, the differential engine's) */
            size_t windows = planes + 2 * (size_t)cp->kc + (size_t)cp->osp + 16;
            need = cp->off_cols + (packed > windows ? packed : windows);
        } else {
            need = cp->off_tmp + (size_t)cp->mg;   /* one image's columns, then the bias of zeros */
        }
        if (need < cp->scratch_floats) cp->scratch_floats = need;
    }
    /* several images per product where the map is small (bf__conv_packed_images) */
    int planes_ok = bf__conv_padded_ok(w) || bf__conv_strided_ok(w);
    if (cp->nb == 1 && cp->simd >= BF_SGEMM_AVX2 && planes_ok) {
        size_t want = cp->off_cols + bf__conv_packed_floats(cp, bf__conv_packed_images(cp));
        if (want > cp->scratch_floats) cp->scratch_floats = want;
    }
    /* the output channels in the lanes (linalg_conv_bcast.c): the planes, its sums and tables */
    cp->bcast = cp->nb == 1 && bf__conv_bcast_want(cp);
    if (cp->bcast) {
        size_t planes = (size_t)(bf__conv_bcast_images(cp) * cp->cg * bf__conv_padded_plane(w));
        size_t want = cp->off_cols + ((planes + 15) & ~(size_t)15) + ((bf__conv_bcast_floats(cp) + 15) & ~(size_t)15) +
                      (size_t)cp->mg + 16;
        if (want > cp->scratch_floats) cp->scratch_floats = want;
    }
    /* a first Conv, the output channels in the lanes (AVX-512, linalg_conv_stem.c): the planes, its weights and tile */
    cp->stem = cp->nb == 1 && !cp->bcast && bf__conv_stem_want(cp);
    if (cp->stem) {
        size_t planes = (size_t)(cp->cg * bf__conv_padded_plane(w));
        size_t want = cp->off_cols + ((planes + 15) & ~(size_t)15) + ((bf__conv_stem_floats(cp) + 15) & ~(size_t)15) +
                      (size_t)cp->mg + 16;
        if (want > cp->scratch_floats) cp->scratch_floats = want;
    }
    /* a strided 1x1, the output channels in the lanes (AVX-512, linalg_conv_pwlanes.c): its sums, weights, table */
    if (bf__conv_pwl_want(cp)) {
        size_t want = bf__conv_pwl_floats(cp);
        if (want > cp->scratch_floats) cp->scratch_floats = want;
    }
    /* the product straight off the planes (AVX-512, stride 1): its sums between blocks of K */
    if (bf__conv_planes_ok(cp)) {
        size_t want = cp->off_cols + bf__conv_planes_floats(cp);
        if (want > cp->scratch_floats) cp->scratch_floats = want;
    }
    p->scratch = cp->scratch_floats * sizeof(float);
    return BF_OK;
}

bf_status bf__conv_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *nd = p->node;
    bf__conv_params *cp = (bf__conv_params *)p->params;
    const bf_tensor *x = p->in[0], *wt = p->in[1];
    const bf_tensor *b = p->n_in > 2 ? p->in[2] : NULL;
    bf_status st;
    if ((st = bf__want_f32(p, 0, "X", err)) || (st = bf__want_f32(p, 1, "W", err))) return st;
    if (b && (st = bf__want_f32(p, 2, "B", err))) return st;
    char sx[96], sw[96];
    if (wt->ndim != x->ndim || x->ndim < 3)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "input W has shape %s; expected [M, C/group, k1, ...] of the same rank as X %s",
                              bf_shape_str(wt->dims, wt->ndim, sw, sizeof sw),
                              bf_shape_str(x->dims, x->ndim, sx, sizeof sx));
    if ((st = bf__window_parse(p, BF__WIN_CONV, wt->dims + 2, &cp->w, err))) return st;
    int64_t group;
    if ((st = bf__attr_int(nd, "group", 1, &group, err))) return st;
    int64_t c = x->dims[1], m = wt->dims[0];
    if (group < 1 || c % group != 0 || m % group != 0)
        return bf__node_error(err, nd, BF_EFORMAT,
                              "attribute 'group' is %lld; it must be >= 1 and divide both C = %lld and M = %lld",
                              (long long)group, (long long)c, (long long)m);
    if (wt->dims[1] != c / group)
        return bf__node_error(err, nd, BF_ESHAPE,
                              "input W has shape %s; expected dim 1 = C/group = %lld (C = %lld from X %s, group %lld)",
                              bf_shape_str(wt->dims, wt->ndim, sw, sizeof sw), (long long)(c / group),
                              (long long)c, bf_shape_str(x->dims, x->ndim, sx, sizeof sx), (long long)group);
    if (b && (b->ndim != 1 || b->dims[0] != m))
        return bf__node_error(err, nd, BF_ESHAPE, "input B has shape %s; expected [M] = [%lld]",
                              bf_shape_str(b->dims, b->ndim, sw, sizeof sw), (long long)m);
    const bf__window *w = &cp->w;
    cp->n = x->dims[0], cp->c = c, cp->m = m, cp->group = group;
    cp->cg = c / group, cp->mg = m / group;
    cp->isp = bf__win_in(w), cp->osp = bf__win_out(w), cp->ksp = bf__win_k(w), cp->kc = cp->cg * cp->ksp;
    cp->has_bias = b != NULL, cp->bcast = 0, cp->stem = 0;
    cp->simd = bf__sgemm_best();   /* once, when the plan is built */
    if (cp->mg > INT_MAX || cp->osp > INT_MAX || cp->kc > INT_MAX)
        return bf__node_error(err, nd, BF_EUNSUPPORTED, "conv too large (M/group %lld, "
                              "output positions %lld, C/group * kernel %lld)", (long long)cp->mg,
                              (long long)cp->osp, (long long)cp->kc);
    int unit = 1;
    for (int i = 0; i < 3; i++)
        unit &= w->k[i] == 1 && w->s[i] == 1 && w->pb[i] == 0 && w->pe[i] == 0;
    /* Depthwise (one input and one output channel per group): sgemm would
     * have one row and K = kernel size; a direct loop is faster and needs no
     * scratch. With more output channels per input channel (a first layer on
     * one channel), im2col + sgemm wins again. */
    int depthwise = cp->cg == 1 && cp->mg == 1 && w->k[2] <= BF__DW_MAXKW;
    cp->path = unit ? BF__CONV_POINTWISE : depthwise ? BF__CONV_DEPTHWISE : BF__CONV_IM2COL;
    if (cp->path == BF__CONV_IM2COL && (st = im2col_scratch(p, cp, err)) != BF_OK) return st;
    if (cp->path == BF__CONV_POINTWISE) {
        /* several small images per product (linalg_conv_pointwise.c), or
         * the output channels in the lanes (linalg_conv_pwlanes.c) */
        cp->scratch_floats = bf__conv_pwl_want(cp) ? bf__conv_pwl_floats(cp) : bf__conv_pw_floats(cp);
        /* room for the lanes' run on a list of positions (op.h, bf__cpos) */
        if (bf__conv_pwl_list_ok(cp) && bf__conv_pwl_floats(cp) > cp->scratch_floats)
            cp->scratch_floats = bf__conv_pwl_floats(cp);
        p->scratch = cp->scratch_floats * sizeof(float);
    }
    int64_t dims[5] = {cp->n, m};
    for (int i = 0; i < w->rank; i++) dims[2 + i] = w->out[3 - w->rank + i];
    bf__set_shape(p->out[0], BF_F32, 2 + w->rank, dims);
    return BF_OK;
}

/* act: a fused activation (whole steps only, ch < 0). With act->res (a
 * residual Add, op.h) the paths whose product adds it in its epilogue
 * (bf__conv_packed, bf__conv_res_direct) get it, and 1 says it is done; 0:
 * y is the bare Conv's, the Add and the activation still to do. */
static int conv_channels(const bf__conv_params *cp, const float *x, const float *wt, const float *wpk,
                         const float *bias, const bf__act *act, float *y, void *scratch, int64_t ch, bf__psum *ps,
                         bf__cpos *cpos)
{
    int res = act && act->res;
    if (cp->osp == 0 || cp->mg == 0) return 0;
    /* the 1x1 lanes (linalg_conv_pwlanes.c), unit or strided, whole steps:
     * on W packed once where the plan passed the copy; the residual Add and
     * the activation in their epilogue */
    int lanes = cpos ? bf__conv_pwl_list_ok(cp) : bf__conv_pwl_want(cp);
    if (ch < 0 && lanes && bf__conv_pwl(cp, x, wt, wpk, bias, act, y, scratch, cpos)) return act != NULL;
    /* a list elsewhere: the 1x1 product on its gathered columns */
    if (ch < 0 && cpos && bf__conv_pw_list(cp, x, wt, bias, act, y, cpos)) return act != NULL;
    if (cp->path != BF__CONV_IM2COL) {
        if (res && !bf__conv_res_direct(cp)) act = NULL;
        bf__conv_direct(cp, x, wt, bias, act, y, ch, scratch);
        return act != NULL;
    }
    if (cp->kc == 0) {
        if (res) act = NULL;
        for (int64_t i = 0; i < cp->n * cp->m; i++)
            if (ch < 0 || i % cp->m == ch) {
                for (int64_t o = 0; o < cp->osp; o++) y[i * cp->osp + o] = bias ? bias[i % cp->m] : 0.0f;
                bf__act_pass(act, y + i * cp->osp, cp->osp);
            }
        return 0;
    }
    if (ch >= 0 && bf__conv_channel_windows(cp, x, wt, bias, y, scratch, ch)) return 0;
    if (bf__conv_packed_wpk(cp, x, wt, wpk, bias, act, y, scratch, ch, ps, cpos)) return 1;
    bf__conv_im2col(cp, x, wt, bias, res ? NULL : act, y, scratch, ch);
    return !res;
}

int bf__conv_step(const bf__step *st) { return st->node->op->run == bf__conv_run; }

size_t bf__conv_psum_of(const bf__step *st, int64_t *block, int64_t *chunk)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    if (cp->path != BF__CONV_IM2COL || !cp->bcast || cp->group != 1 || cp->osp <= 0 || cp->kc <= 0) return 0;
    (void)bf__conv_bcast_chunks(cp, chunk);
    *block = BF__CONV_CBLOCK;
    return bf__conv_psum_floats(cp);
}

/* W packed once for linalg_conv_bcast.c's kernel and linalg_conv_pwlanes.c's
 * (base/wpack.h), for bf__linalg_packed: the steps whose prepare chose
 * one. The estimate's bytes are those of every step that would take one
 * on AVX-512, whatever this CPU has, as the products' are (an upper
 * bound). */
/* whose copy: linalg_conv_bcast.c's (AVX-512's row blocks of 64, AVX2's of
 * 16: two layouts, two kinds, so that plans of either level on one model
 * never read the other's), pwlanes.c's, the AVX2 panels' */
enum { PACK_BCAST, PACK_LANES1X1, PACK_REORDER, PACK_BCAST8 };
typedef struct conv_pack_job {
    const bf__conv_params *cp;
    const float *wt;
    int kind;
} conv_pack_job;

static int conv_pack_fill(const void *ctx, float *out)
{
    const conv_pack_job *j = ctx;
    return j->kind == PACK_LANES1X1 ? bf__conv_pwl_pack(j->cp, j->wt, out)
           : j->kind == PACK_REORDER ? bf__conv_reorder(j->cp, j->wt, out)
                                     : bf__conv_bcast_pack(j->cp, j->wt, out);
}

/* the kind of a step's copy: the 1x1 lanes' (unit or strided), the larger
 * kernels' lanes' (bcast; never both: a strided 1x1 goes to the 1x1 lanes
 * only where bcast did not take it), or W reordered for AVX2's panels
 * (bf__conv_reorder_floats: none of the others') */
static int conv_pack_kind(const bf__conv_params *cp)
{
    return bf__conv_pwl_pack_floats(cp)     ? PACK_LANES1X1
           : bf__conv_reorder_floats(cp)    ? PACK_REORDER
           : cp->simd < BF_SGEMM_AVX512     ? PACK_BCAST8
                                            : PACK_BCAST;
}

static size_t conv_pack_floats(const bf__conv_params *cp)
{
    size_t pw = bf__conv_pwl_pack_floats(cp), ro = bf__conv_reorder_floats(cp);
    return pw ? pw : ro ? ro : cp->path == BF__CONV_IM2COL ? bf__conv_bcast_pack_floats(cp) : 0;
}

size_t bf__conv_pack_bytes(const bf__step *s)
{
    if (s->node->op->run != bf__conv_run || s->n_in < 2 || !s->in[1] || s->in[1]->dtype != BF_F32) return 0;
    bf__conv_params cp = *(const bf__conv_params *)s->params;
    size_t most = 0;
    /* prepare's choices at AVX-512 (the 1x1 lanes defer to them) and at
     * AVX2 (the reordered copy): the larger */
    for (int level = BF_SGEMM_AVX2; level <= BF_SGEMM_AVX512; level++) {
        cp.simd = level;
        if (cp.path == BF__CONV_IM2COL) {
            cp.bcast = cp.nb == 1 && bf__conv_bcast_want(&cp);
            cp.stem = cp.nb == 1 && !cp.bcast && bf__conv_stem_want(&cp);
        }
        size_t f = conv_pack_floats(&cp);
        if (f > most) most = f;
    }
    return most * sizeof(float);
}

const float *bf__conv_wpacked(const bf__step *s, struct bf__wpack *w)
{
    if (s->node->op->run != bf__conv_run || s->n_in < 2 || !s->in[1] || !s->in[1]->data) return NULL;
    const bf__conv_params *cp = s->params;
    size_t floats = conv_pack_floats(cp);
    if (!floats) return NULL;
    conv_pack_job j = {cp, s->in[1]->data, conv_pack_kind(cp)};
    /* the layout: the kernel (bits 61-62: the kind), rows of mg a group
     * (W's tensor fixes the rest); bit 63 keeps it apart from a product's
     * tag (linalg.c: under 2^55) */
    return bf__wpack_get(w, j.wt, (uint64_t)1 << 63 | (uint64_t)j.kind << 61 | (uint64_t)cp->mg, floats,
                         conv_pack_fill, &j);
}

/* What a Conv computes after its own output in one pass over it (op.h,
 * bf__ctx: bn, res, act), instead of the steps' two or three: each element
 * the BatchNormalization's fmaf(v, a, b) (a and b from bf__bnorm_coef, as the
 * BN kernel takes them, one rounding as in PyTorch's kernel), then the residual Add's expression (ops/
 * elementwise_broadcast.c, x + y with x the Add's A), then the activation
 * (clamp_f32: Relu's and Clip's two comparisons, bf__act_apply's bits; or
 * hard_swish_f32, the HardSwish kernel's own function), each rounded to
 * float as the step rounds it, so the bits (NaN, infinities, -0 included)
 * are the steps'. Per channel plane, in chunks that stay in L1, each
 * operation a loop of its own over the chunk (the AVX2 copy runs them 8
 * wide, the AVX-512 one 16: the BN's fused multiply-add, add and
 * compare-selects; nothing else to contract). */
#define EPI_CHUNK 512
#define EPILOGUE_BODY                                                                    \
    if (bn)                                                                              \
        for (int64_t i = 0; i < n; i++) y[i] = fmaf(y[i], a, b);                         \
    /* the Add's A's NaN when both are NaN, as x86's first source gives it \
     * (sgemm.c's add_first): spelled out, since the compiler may swap a + b */ \
    if (r && res_a)                                                                      \
        for (int64_t i = 0; i < n; i++) y[i] = r[i] != r[i] ? r[i] + r[i] : r[i] + y[i]; \
    else if (r)                                                                          \
        for (int64_t i = 0; i < n; i++) y[i] = y[i] != y[i] ? y[i] + y[i] : y[i] + r[i]; \
    if (act && act->hswish)                                                              \
        for (int64_t i = 0; i < n; i++) y[i] = hard_swish_f32(y[i]);                     \
    else if (act && (act->lo != -INFINITY || act->hi != INFINITY))                       \
        for (int64_t i = 0; i < n; i++) y[i] = clamp_f32(y[i], act->lo, act->hi);

static void epilogue_plain(int bn, float a, float b, const float *restrict r, int res_a, const bf__act *act,
                           float *restrict y, int64_t n)
{
    EPILOGUE_BODY
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void epilogue_avx2(int bn, float a, float b, const float *restrict r, int res_a,
                                                          const bf__act *act, float *restrict y, int64_t n)
{
    EPILOGUE_BODY
}
/* the same loops 16 wide where the product ran on AVX-512: each element's
 * operations are the plain copy's (the BN's one fmaf, the Add's, the
 * activation's compare-selects and HardSwish's multiply and divide), so its
 * bits. SSDlite's 20x20 and 10x10 1x1 Convs (672 planes of 400 floats,
 * a BN and HardSwish after each) spent 5% of a campaign's trials in the
 * 8-wide copy, a quarter less in this one (docs/perf/detectors.md,
 * h22-ssd). */
#if defined(__clang__)
#define EPI_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"), min_vector_width(512)))
#else
#define EPI_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma,prefer-vector-width=512")))
#endif
EPI_AVX512 static void epilogue_avx512(int bn, float a, float b, const float *restrict r, int res_a, const bf__act *act,
                                       float *restrict y, int64_t n)
{
    EPILOGUE_BODY
}
#endif

static void epilogue_run(int simd, int bn, float a, float b, const float *r, int res_a, const bf__act *act, float *y,
                         int64_t n);

void bf__conv_res_plane(int simd, const bf__act *act, const float *r, float *y, int64_t n)
{
    epilogue_run(simd, 0, 1.0f, 0.0f, r, act->res_a, act, y, n);
}

/* simd: the level the product ran at (BF_SGEMM_*): the epilogue's copy of
 * the same width, chosen here once for every caller */
static void epilogue_run(int simd, int bn, float a, float b, const float *r, int res_a, const bf__act *act, float *y,
                         int64_t n)
{
    for (int64_t o = 0; o < n; o += EPI_CHUNK) {
        int64_t len = n - o < EPI_CHUNK ? n - o : EPI_CHUNK;
        const float *ro = r ? r + o : NULL;
#if defined(__x86_64__) && defined(__GNUC__)
        if (simd >= BF_SGEMM_AVX512) {
            epilogue_avx512(bn, a, b, ro, res_a, act, y + o, len);
            continue;
        }
        if (simd >= BF_SGEMM_AVX2) {
            epilogue_avx2(bn, a, b, ro, res_a, act, y + o, len);
            continue;
        }
#endif
        (void)simd;
        epilogue_plain(bn, a, b, ro, res_a, act, y + o, len);
    }
}

/* in memory order: without a BN the whole output as one run (a residual
 * block's planes can be 49 floats), with one a plane at a time, a and b
 * computed per plane as the BN kernel computes them */
static void conv_epilogue(const bf__conv_params *cp, const bf__ctx *c, float *y)
{
    if (!c->bn) {
        epilogue_run(cp->simd, 0, 1.0f, 0.0f, c->res, c->res_a, c->act, y, cp->n * cp->m * cp->osp);
        return;
    }
    for (int64_t n = 0; n < cp->n; n++)
        for (int64_t ch = 0; ch < cp->m; ch++) {
            float a, b;
            bf__bnorm_coef(c->bn, ch, &a, &b);
            int64_t at = (n * cp->m + ch) * cp->osp;
            epilogue_run(cp->simd, 1, a, b, c->res ? c->res + at : NULL, c->res_a, c->act, y + at, cp->osp);
        }
}

bf_status bf__conv_run(const bf__ctx *c, bf_error *err)
{
    (void)err;
    const bf__conv_params *cp = c->params;
    /* 16x16 and 32x32 maps: the product and what follows it at once
     * (linalg_conv_pwseg.c) */
    if (bf__conv_pws_step(cp, c)) return BF_OK;
    /* a BatchNormalization or a residual Add comes before the activation,
     * and HardSwish has no copy in the paths' epilogues: the paths then run
     * bare, and one pass computes the rest */
    int bare = c->act && (c->res || c->bn || c->act->hswish);
    /* a residual Add then Relu or Clip (or nothing): into the product's
     * epilogue where the path has one (op.h, bf__act's res), the block
     * still in registers, instead of a pass over the whole batch's output
     * after it */
    bf__act ra;
    const bf__act *act = bare ? NULL : c->act;
    if (bare && c->res && !c->bn && !c->act->hswish) ra = *c->act, ra.res = c->res, ra.res_a = c->res_a, act = &ra;
    /* c->packed: W as the model holds it, packed once (plan.c, packed_of) */
    /* some positions alone (op.h, bf__cpos) only where the kernel's epilogue
     * finishes the fused chain: a bare run's epilogue pass below would run
     * again on the positions the caller filled with its golden output */
    bf__cpos *cpos = bare && !act ? NULL : c->cpos;
    int done = conv_channels(cp, c->in[0]->data, c->in[1]->data, c->packed, cp->has_bias ? c->in[2]->data : NULL,
                             act, c->out[0]->data, c->scratch, -1, c->psum, cpos);
    if (bare && !(act && done)) conv_epilogue(cp, c, c->out[0]->data);
    return BF_OK;
}

int bf__conv_channel(const bf__step *st, int slot, int64_t index, const float *x, const float *wt, const float *bias,
                     float *y, void *scratch)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    int64_t ch = slot == 2 ? index : cp->kc ? index / cp->kc : -1;
    if (ch < 0 || ch >= cp->m) return 0;
    conv_channels(cp, x, wt, NULL, cp->has_bias ? bias : NULL, NULL, y, scratch, ch, NULL, NULL);
    return 1;
}

int bf__conv_channel_epi(const bf__step *st, const bf__ctx *c, int64_t ch, void *scratch)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    if (ch < 0 || ch >= cp->m || cp->osp == 0) return 0;
    float *y = c->out[0]->data;
    conv_channels(cp, c->in[0]->data, c->in[1]->data, NULL, cp->has_bias ? c->in[2]->data : NULL, NULL, y, scratch, ch,
                  NULL, NULL);
    /* conv_epilogue's operations on this channel's planes: elementwise, so
     * the chunks it cut the whole output into give the same bits; a clamp
     * a path's epilogue applies (not bare) is bf__act_apply's, as here */
    float a = 1.0f, b = 0.0f;
    if (c->bn) bf__bnorm_coef(c->bn, ch, &a, &b);
    for (int64_t n = 0; n < cp->n; n++) {
        int64_t at = (n * cp->m + ch) * cp->osp;
        epilogue_run(cp->simd, c->bn != NULL, a, b, c->res ? c->res + at : NULL, c->res_a, c->act, y + at, cp->osp);
    }
    return 1;
}

int bf__conv_depthwise(const bf__step *st)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    return cp->cg == 1 && cp->mg == 1;
}

int64_t bf__conv_group_in(const bf__step *st)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    return cp->mg == 1 && cp->cg > 0 ? cp->cg : 0;
}

int bf__conv_shape(const bf__step *st, int64_t *c, int64_t *m, int64_t *isp, int64_t *osp)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    *c = cp->c, *m = cp->m, *isp = cp->isp, *osp = cp->osp;
    return 1;
}

int bf__conv_pos_ok(const bf__step *st, bf__conv_geom *g, int64_t *work)
{
    *work = 0;
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    const bf__window *w = &cp->w;
    /* the kernels that take a list: the bcast kernel's, the 1x1 lanes',
     * the 1x1 product on gathered columns */
    int lanes = bf__conv_pwl_list_ok(cp) && !bf__conv_pws_ok(cp), gather = !lanes && bf__conv_pw_list_ok(cp);
    if (!(cp->path == BF__CONV_IM2COL && cp->bcast) && !lanes && !gather) return 0;
    if (w->rank != 2 || cp->osp <= 0 || cp->kc <= 0) return 0;
    if (gather) *work = bf__conv_pw_list_floats(cp->c, cp->m, cp->osp);
    *g = (bf__conv_geom){cp->n, cp->c, w->in[1], w->in[2], cp->m, w->out[1], w->out[2], w->k[1], w->k[2],
                         w->s[1], w->s[2], w->pb[1], w->pb[2], w->d[1], w->d[2]};
    return 1;
}

int bf__conv_taps(const bf__step *st, int slot, int64_t index, int64_t *oc, int64_t *ic, int32_t *tap)
{
    if (st->node->op->run != bf__conv_run) return 0;
    const bf__conv_params *cp = st->params;
    const bf__window *w = &cp->w;
    int64_t kk[3] = {0, 0, 0};
    *ic = -1;
    if (slot == 2) {
        *oc = index;
    } else {
        *oc = index / cp->kc;
        int64_t rem = index % cp->kc, kpos = rem % cp->ksp;
        *ic = *oc / cp->mg * cp->cg + rem / cp->ksp;
        kk[2] = kpos % w->k[2], kk[1] = kpos / w->k[2] % w->k[1], kk[0] = kpos / (w->k[2] * w->k[1]);
    }
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < w->out[0]; o0++)
        for (int64_t o1 = 0; o1 < w->out[1]; o1++)
            for (int64_t o2 = 0; o2 < w->out[2]; o2++, o++) {
                int64_t i0 = o0 * w->s[0] - w->pb[0] + kk[0] * w->d[0];
                int64_t i1 = o1 * w->s[1] - w->pb[1] + kk[1] * w->d[1];
                int64_t i2 = o2 * w->s[2] - w->pb[2] + kk[2] * w->d[2];
                int in = i0 >= 0 && i0 < w->in[0] && i1 >= 0 && i1 < w->in[1] && i2 >= 0 && i2 < w->in[2];
                tap[o] = slot == 2 ? 0 : in ? (int32_t)((i0 * w->in[1] + i1) * w->in[2] + i2) : -1;
            }
    return 1;
}

int bf__conv_channel_n(const bf__step *st, int64_t oc, int64_t n, const float *x, const float *wt, const float *bias,
                       float *y, void *scratch)
{
    if (st->node->op->run != bf__conv_run) return 0;
    bf__conv_params cp = *(const bf__conv_params *)st->params;
    if (n > cp.n) return 0;   /* the scratch is the step's */
    cp.n = n;
    conv_channels(&cp, x, wt, NULL, cp.has_bias ? bias : NULL, NULL, y, scratch, oc, NULL, NULL);
    return 1;
}

/* For the differential executor (diff.h): one corrupted element of W (slot
 * 1) or B (slot 2) moves one output channel by X * dW (or dB), applied to
 * the golden output y where every change is clear. */
int bf__conv_delta(const bf__step *st, int slot, const float *x, int64_t index, float old, float now, float *y)
{
    if (st->node->op->run != bf__conv_run) return -1;
    const bf__conv_params *cp = st->params;
    const bf__window *w = &cp->w;
    if (!isfinite(old) || !isfinite(now)) return 0;
    double dw = (double)now - (double)old;
    int64_t oc, ic = 0, kk[3] = {0, 0, 0};
    if (slot == 2) {
        oc = index;
    } else {
        oc = index / cp->kc;
        int64_t rem = index % cp->kc, kpos = rem % cp->ksp;
        ic = oc / cp->mg * cp->cg + rem / cp->ksp;
        kk[2] = kpos % w->k[2], kk[1] = kpos / w->k[2] % w->k[1], kk[0] = kpos / (w->k[2] * w->k[1]);
    }
    int64_t lo[3], hi[3];
    for (int d = 0; d < 3; d++) {
        if (slot == 2) lo[d] = 0, hi[d] = w->out[d];
        else bf__valid_range(w->in[d], w->out[d], w->s[d], w->pb[d], kk[d], w->d[d], &lo[d], &hi[d]);
    }
    for (int64_t n = 0; n < cp->n; n++) {
        const float *xc = x + (n * cp->c + ic) * cp->isp;
        float *yc = y + (n * cp->m + oc) * cp->osp;
        for (int64_t o0 = lo[0]; o0 < hi[0]; o0++)
            for (int64_t o1 = lo[1]; o1 < hi[1]; o1++)
                for (int64_t o2 = lo[2]; o2 < hi[2]; o2++) {
                    double d = dw;
                    if (slot != 2) {
                        int64_t i0 = o0 * w->s[0] - w->pb[0] + kk[0] * w->d[0];
                        int64_t i1 = o1 * w->s[1] - w->pb[1] + kk[1] * w->d[1];
                        int64_t i2 = o2 * w->s[2] - w->pb[2] + kk[2] * w->d[2];
                        d *= xc[(i0 * w->in[1] + i1) * w->in[2] + i2];
                    }
                    if (d == 0) continue;
                    float *e = &yc[(o0 * w->out[1] + o1) * w->out[2] + o2];
                    if (!isfinite(*e) || !(*e == 0 || fabs(d) >= CLEAR_CHANGE * fabs(*e))) return 0;
                    if (fabs(d) > HUGE_CHANGE * fmax(1.0, fabs(*e))) return 0;
                    if (fabs((double)*e + d) < CLEAR_CHANGE * fabs(*e)) return 0;   /* cancels (diffgemm.c) */
                    float v = (float)((double)*e + d);
                    if (!isfinite(v)) return 0;
                    *e = v;
                }
    }
    return 1;
}

/* bf__conv_update (step_access.h), written once for both copies: the hot
 * loop of diffchain.c's Conv faults, beside the Conv whose channel it moves. */
static inline __attribute__((always_inline)) int conv_update_body(const float *x, const int32_t *tap,
                                                                  const float *tapm, const float *yg, float dw,
                                                                  int64_t n, float *e, int *moved)
{
    int mv = 0, huge = 0;
    for (int64_t p = 0; p < n; p++) {
        float d = dw * (x[tap[p]] * tapm[p]), mag = fabsf(yg[p]), lim = (float)HUGE_CHANGE * (mag > 1.0f ? mag : 1.0f);
        huge |= (fabsf(d) > lim) | (d != d);
        mv |= d != 0.0f;
        e[p] = d != 0.0f ? yg[p] + d : yg[p];
    }
    *moved = mv;
    return huge;
}

static int conv_update_ref(const float *x, const int32_t *tap, const float *tapm, const float *yg, float dw, int64_t n,
                           float *e, int *moved)
{
    return conv_update_body(x, tap, tapm, yg, dw, n, e, moved);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int conv_update_avx2(const float *x, const int32_t *tap, const float *tapm,
                                                            const float *yg, float dw, int64_t n, float *e, int *moved)
{
    const __m256 vdw = _mm256_set1_ps(dw), one = _mm256_set1_ps(1.0f), hc = _mm256_set1_ps((float)HUGE_CHANGE);
    const __m256 zero = _mm256_setzero_ps(), abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 huge = zero, mv = zero;
    int64_t p = 0;
    for (; p + 8 <= n; p += 8) {   /* conv_update_body, eight lanes at a time */
        __m256i idx = _mm256_loadu_si256((const __m256i *)(tap + p));
        __m256 d = _mm256_mul_ps(vdw, _mm256_mul_ps(_mm256_i32gather_ps(x, idx, 4), _mm256_loadu_ps(tapm + p)));
        __m256 y = _mm256_loadu_ps(yg + p);
        __m256 lim = _mm256_mul_ps(hc, _mm256_max_ps(_mm256_and_ps(y, abs), one));   /* NaN |yg|: 1, as mag > 1 ? mag : 1 */
        huge = _mm256_or_ps(huge, _mm256_cmp_ps(_mm256_and_ps(d, abs), lim, _CMP_GT_OQ));
        huge = _mm256_or_ps(huge, _mm256_cmp_ps(d, d, _CMP_UNORD_Q));
        __m256 nz = _mm256_cmp_ps(d, zero, _CMP_NEQ_UQ);
        mv = _mm256_or_ps(mv, nz);
        _mm256_storeu_ps(e + p, _mm256_blendv_ps(y, _mm256_add_ps(y, d), nz));
    }
    int tail_moved, h = conv_update_body(x, tap + p, tapm + p, yg + p, dw, n - p, e + p, &tail_moved);
    *moved = tail_moved | (_mm256_movemask_ps(mv) != 0);
    return h | (_mm256_movemask_ps(huge) != 0);
}
#endif

int bf__conv_update(int simd, const float *x, const int32_t *tap, const float *tapm, const float *yg, float dw,
                    int64_t n, float *e, int *moved)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (simd && bf__simd_cpu()) return conv_update_avx2(x, tap, tapm, yg, dw, n, e, moved);
#else
    (void)simd;
#endif
    return conv_update_ref(x, tap, tapm, yg, dw, n, e, moved);
}
