/* Shared by the sliding-window ops' files: the window geometry that Conv
 * and the pools read (linalg_window.c parses it), Conv's parameters and the
 * summation order all its paths keep (linalg_conv.c chooses a path,
 * linalg_conv_gemm.c and linalg_conv_direct.c run them). Spatial ranks 1 to
 * 3 all run as 3-D, with the missing leading dims of size 1, so each kernel
 * is written once. The small helpers are static inline: the kernels call
 * them in their inner loops, as they did when all of this was one file. */
#ifndef BF_LINALG_WINDOW_H
#define BF_LINALG_WINDOW_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/op.h"

/* ---- window geometry ---- */

typedef struct bf__window {
    int rank;                               /* spatial rank of the model's tensors */
    /* Always 3-D here: dims of a lower rank are padded in front with 1s. */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
} bf__window;

enum { BF__WIN_CONV, BF__WIN_MAXPOOL, BF__WIN_AVGPOOL };

static inline int64_t bf__ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* Reads kernel_shape, strides, dilations, pads, auto_pad (and ceil_mode for
 * the pools) against input X of shape [N, C, spatial...]; `wkernel` is the
 * kernel from W's shape for Conv, NULL for the pools. Output sizes follow the
 * ONNX formulas; with ceil_mode a last window that would start in the right
 * padding is dropped, as PyTorch does. kind: BF__WIN_*. */
bf_status bf__window_parse(const bf__prep *p, int kind, const int64_t *wkernel, bf__window *w, bf_error *err);

static inline int64_t bf__win_in(const bf__window *w) { return w->in[0] * w->in[1] * w->in[2]; }
static inline int64_t bf__win_out(const bf__window *w) { return w->out[0] * w->out[1] * w->out[2]; }
static inline int64_t bf__win_k(const bf__window *w) { return w->k[0] * w->k[1] * w->k[2]; }

/* Output positions o in [*lo, *hi) whose input o*s - pb + kk*d lies in [0, in). */
static inline void bf__valid_range(int64_t in, int64_t out, int64_t s, int64_t pb, int64_t kk, int64_t d,
                                   int64_t *lo, int64_t *hi)
{
    int64_t off = kk * d - pb;                  /* input index = o*s + off */
    int64_t l = off >= 0 ? 0 : bf__ceil_div(-off, s);
    int64_t h = in - off <= 0 ? 0 : bf__ceil_div(in - off, s);
    if (h > out) h = out;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* ---- Conv ---- */

enum { BF__CONV_IM2COL, BF__CONV_POINTWISE, BF__CONV_DEPTHWISE };
#define BF__DW_MAXKW 16             /* widest kernel the direct path takes */
#define BF__DW_MAXKH 16             /* tallest kernel its row-at-a-time form takes (dw2d) */

typedef struct bf__conv_params {
    bf__window w;
    int64_t n, c, m, group, cg, mg;
    int64_t isp, osp, ksp, kc;          /* input, output, kernel positions; kc = cg * ksp */
    int64_t nb;                         /* im2col: images per sgemm */
    size_t off_cols, off_tmp;           /* im2col: scratch offsets (floats) past the weights */
    size_t scratch_floats;              /* im2col: the scratch prepare asked for, in floats */
    int has_bias, path;
    int simd;                           /* bf__sgemm path (BF_SGEMM_*), fixed when the plan is built */
    int bcast;                          /* bf__conv_packed runs bf__conv_bcast (prepare: bf__conv_bcast_want) */
    int stem;                           /* bf__conv_packed runs bf__conv_stem (prepare: bf__conv_stem_want) */
} bf__conv_params;
static_assert(sizeof(bf__conv_params) <= BF__OP_SUBPARAMS_MAX, "conv params too large (ABFT keeps them inside its own)");

/* A stride-1, undilated 2-D Conv whose outputs span its zero-padded
 * planes: bf__conv_packed multiplies panels gathered from those planes. */
static inline int bf__conv_padded_ok(const bf__window *w)
{
    int64_t hp = w->in[1] + w->pb[1] + w->pe[1], wp = w->in[2] + w->pb[2] + w->pe[2];
    return w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->s[1] == 1 && w->s[2] == 1 && w->d[1] == 1 &&
           w->d[2] == 1 && w->out[1] == hp - w->k[1] + 1 && w->out[2] == wp - w->k[2] + 1;
}

/* A 2-D Conv of horizontal stride 2 (any vertical stride and dilation)
 * whose windows lie inside its zero-padded planes: bf__conv_packed
 * gathers its panels from those planes too, each run of outputs as two
 * loads and a permute of their even lanes (AVX-512), or four loads, two
 * shuffles and two permutes (AVX2). */
static inline int bf__conv_strided_ok(const bf__window *w)
{
    int64_t hp = w->in[1] + w->pb[1] + w->pe[1], wp = w->in[2] + w->pb[2] + w->pe[2];
    return w->in[0] == 1 && w->k[0] == 1 && w->out[0] == 1 && w->s[2] == 2 && w->out[1] > 0 && w->out[2] > 0 &&
           (w->out[1] - 1) * w->s[1] + (w->k[1] - 1) * w->d[1] < hp && (w->out[2] - 1) * 2 + (w->k[2] - 1) * w->d[2] < wp;
}

static inline int64_t bf__conv_padded_plane(const bf__window *w)
{
    return (w->in[1] + w->pb[1] + w->pe[1]) * (w->in[2] + w->pb[2] + w->pe[2]);
}

/* Images per product of bf__conv_packed: one, unless an image's map is
 * small (resnet18's layer4: 7x7 = 49 columns, four 16-lane panels of which
 * the last holds one column: 23% of its lanes padding), then enough images
 * side by side for about BF__CONV_COLS columns (4 x 49 = 196 in 13 panels),
 * up to the batch. Which images share a product changes no element's
 * chain: each column is one output position of one image. */
#define BF__CONV_COLS 192
static inline int64_t bf__conv_packed_images(const bf__conv_params *cp)
{
    if (cp->osp <= 0 || cp->osp >= BF__CONV_COLS / 2) return 1;
    int64_t k = (BF__CONV_COLS + cp->osp - 1) / cp->osp;
    return k < cp->n ? k : cp->n > 0 ? cp->n : 1;
}

/* The scratch bf__conv_packed takes past the weights for `imgs` images'
 * padded planes: the planes, the product of several images (imgs > 1),
 * and a bias of zeros. */
static inline size_t bf__conv_packed_floats(const bf__conv_params *cp, int64_t imgs)
{
    size_t planes = ((size_t)(imgs * cp->cg * bf__conv_padded_plane(&cp->w)) + 15) & ~(size_t)15;
    size_t prod = imgs > 1 ? ((size_t)(cp->mg * imgs * cp->osp) + 15) & ~(size_t)15 : 0;
    return planes + prod + (size_t)cp->mg + 16;
}

/* Summation order. Rows of the column matrix, and columns of the reordered
 * weights, run tap-major within blocks of 16 channels: (channel block, kd,
 * kh, kw, channel in block). sgemm accumulates along K in that order, which is
 * the order of PyTorch's oneDNN direct convolution on this class of CPU, so
 * results (and the rounding that huge faulty values amplify) agree with
 * PyTorch's bit for bit where it matters most. Any order is a valid sum. */
#define BF__CONV_CBLOCK 16

static inline int64_t bf__conv_krow(const bf__conv_params *cp, int64_t c, int64_t tap)
{
    int64_t cb = c / BF__CONV_CBLOCK, base = cb * BF__CONV_CBLOCK;
    int64_t width = cp->cg - base < BF__CONV_CBLOCK ? cp->cg - base : BF__CONV_CBLOCK;
    return base * cp->ksp + tap * width + (c - base);
}

/* A fused activation (op.h) over n outputs just written, while they are in
 * cache: for the paths whose last pass is not the product's epilogue. */
static inline void bf__act_pass(const bf__act *act, float *y, int64_t n)
{
    if (!act) return;
    for (int64_t i = 0; i < n; i++) y[i] = bf__act_apply(act, y[i]);
}

/* The paths. Each computes output channel ch of every image (ch < 0: every
 * channel, with act, a fused activation, applied); linalg_conv.c's
 * dispatcher says which path runs. */

/* linalg_conv_gemm.c: im2col for nb images at a time, one sgemm per group. */
void bf__conv_im2col(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                     const bf__act *act, float *y, void *scratch, int64_t ch);
/* linalg_conv_gemm.c: one image per product, panels packed from padded
 * planes where it can; 0 when bf__sgemm has no kernel for it (then
 * bf__conv_im2col gives the same bits). act->res may be set (a residual
 * Add in the product's epilogue, op.h); the other paths take none. ps:
 * partial sums to save or load (op.h), taken by bf__conv_bcast alone
 * (ps->used then set), NULL: none. */
int bf__conv_packed(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                    const bf__act *act, float *y, void *scratch, int64_t ch, bf__psum *ps);
/* the same, wpk: W packed once by bf__conv_bcast_pack (NULL: none), taken
 * where the step runs linalg_conv_bcast.c's kernel; cpos: the output
 * positions to compute alone (op.h), taken by that kernel alone (cpos->used
 * then set; NULL: all) */
int bf__conv_packed_wpk(const bf__conv_params *cp, const float *x, const float *wt, const float *wpk,
                        const float *bias, const bf__act *act, float *y, void *scratch, int64_t ch, bf__psum *ps,
                        bf__cpos *cpos);
/* linalg_conv_planes.c: a stride-1 2-D Conv of one image per product
 * straight off its padded planes on AVX-512, no panel packed, the bits
 * bf__conv_packed's product gives (bf__conv_planes_ok: the shapes and
 * level it takes). The scratch past the weights, buf: the image's padded
 * planes as bf__conv_packed lays them, then bf__conv_planes_floats in all;
 * bf__conv_planes_zeros zeroes what is read past the planes and returns
 * room for a bias of zeros (mg floats). a: the reordered weights of rows
 * 0 .. m (row stride kc); bias: m floats; act->res laid out as y; buf
 * also holds the sums between chunks of K and the k terms' offsets. */
int bf__conv_planes_ok(const bf__conv_params *cp);
size_t bf__conv_planes_floats(const bf__conv_params *cp);
float *bf__conv_planes_zeros(const bf__conv_params *cp, float *buf);
void bf__conv_planes(const bf__conv_params *cp, const float *a, int64_t m, float *buf, const float *bias,
                     const bf__act *act, float *y);
/* linalg_conv_bcast.c: a Conv of bf__conv_packed's padded planes with
 * 16 output channels to a vector and the input broadcast (AVX-512; on
 * AVX2 linalg_conv_bcast8.c's blocks, two vectors of 8), the
 * bits bf__conv_packed's product gives. bf__conv_bcast_ok: the shapes and
 * level it can take (mg a multiple of 16); bf__conv_bcast_want: those
 * prepare gives it (measured per shape). bf__conv_bcast: every channel of
 * the group of ni images whose planes are xp (bf__conv_packed's layout);
 * wt: the group's weights as stored, packed a chunk at a time into buf,
 * bf__conv_bcast_floats of scratch, unless wpk (the group's part of
 * bf__conv_bcast_pack's copy: NULL, none) holds them packed already;
 * bias: mg floats; act->res laid out as y. bf__conv_bcast_pack: all of W
 * (m x kc floats, bf__conv_bcast_pack_floats; 0 where the step does not
 * take this kernel) in that layout, 0 if not taken: no AVX-512, or a W
 * holding an Inf or NaN, which its calls pack a chunk at a time, every
 * padding tap computed (0 * Inf is NaN: bc_sched leaves none out). */
int bf__conv_bcast_ok(const bf__conv_params *cp);
int bf__conv_bcast_want(const bf__conv_params *cp);
int64_t bf__conv_bcast_images(const bf__conv_params *cp);   /* images a call (planes of that many) */
size_t bf__conv_bcast_floats(const bf__conv_params *cp);
void bf__conv_bcast(const bf__conv_params *cp, const float *wt, const float *wpk, int64_t ni, const float *xp,
                    float *buf, const float *bias, const bf__act *act, float *y, bf__psum *ps, int64_t img0,
                    const int32_t *sel, int64_t nsel);
/* The partial sums (op.h, bf__psum) of bf__conv_bcast: its chunks of K
 * (*channels: the input channels of each but the last), and the floats of
 * one checkpoint of a whole step (0: one chunk, none).
 * ps: NULL, or the step's checkpoints, img0 the call's first image. */
int64_t bf__conv_bcast_chunks(const bf__conv_params *cp, int64_t *channels);
size_t bf__conv_psum_floats(const bf__conv_params *cp);
size_t bf__conv_bcast_pack_floats(const bf__conv_params *cp);
int bf__conv_bcast_pack(const bf__conv_params *cp, const float *wt, float *out);
/* linalg_conv_gemm.c: W with each row's K in the column matrix's row
 * order (bf__conv_krow), as bf__conv_packed_wpk reorders it per call, kept
 * once a model (base/wpack.h) for AVX2's panels: m x kc floats where the
 * step takes them (an im2col Conv of more than one tap that neither the
 * lanes nor the stem kernel takes, at AVX2), else 0. bf__conv_reorder
 * writes it (1; 0 where the floats are 0). */
size_t bf__conv_reorder_floats(const bf__conv_params *cp);
int bf__conv_reorder(const bf__conv_params *cp, const float *wt, float *out);
/* linalg_conv_flat5.c: one channel's plane of a stride-1 5x5 depthwise
 * Conv through linalg_conv_direct.c's dw_flat table (tab: its 16-lane masks,
 * 25 a chunk; off: each tap's input offset), four chunks interleaved, on
 * AVX-512: the bits dw_flat's any-size body gives. */
void bf__dw_flat_5x5(const uint16_t *tab, const int64_t *off, int64_t osp, const float *x, const float *wk,
                     float bv, const bf__act *act, float *y);
/* bf__dw_row16_5x5: the same for planes whose rows are 16 wide (in and
 * out), one vector a row, the weights and column masks in registers;
 * bf__dw_row16_ok: the shapes it takes. */
int bf__dw_row16_ok(const bf__window *w);
void bf__dw_row16_5x5(const bf__window *w, const float *x, const float *wk, float bv, const bf__act *act,
                      float *y);
/* linalg_conv_stem.c: a first Conv (under 16 input channels, K up to
 * 160, horizontal stride 2, mg a multiple of 16 on AVX-512, of 8 on AVX2)
 * of bf__conv_packed's padded planes, the output channels in the lanes,
 * the whole K in registers, the outputs stored through 16 x 16 (8 x 8)
 * transposes: the bits bf__conv_packed's product gives. bf__conv_stem_want: the shapes and level prepare gives it;
 * bf__conv_stem: every channel of the group of one image whose planes are
 * xp; wt: the group's weights as stored; buf: bf__conv_stem_floats of
 * scratch; bias: mg floats; act without a residual. */
int bf__conv_stem_want(const bf__conv_params *cp);
size_t bf__conv_stem_floats(const bf__conv_params *cp);
void bf__conv_stem(const bf__conv_params *cp, const float *wt, const float *xp, float *buf, const float *bias,
                   const bf__act *act, float *y);
/* The same over bands of output rows (linalg_conv_stpool.c): buf of
 * bf__conv_stem_band_floats, set up by bf__conv_stem_band_prep once a
 * step (every row block's weights packed, the k terms' offsets); then
 * bf__conv_stem_band writes output rows h0 .. h1 of one image (planes xp)
 * to y channels-last, position q = h ow + w (from h0 ow) at y + (q - h0 ow)
 * ps, channel c at + c (ps >= mg), the same bits as bf__conv_stem. */
size_t bf__conv_stem_band_floats(const bf__conv_params *cp);
void bf__conv_stem_band_prep(const bf__conv_params *cp, const float *wt, float *buf);
void bf__conv_stem_band(const bf__conv_params *cp, const float *xp, float *buf, const float *bias, const bf__act *act,
                        int64_t h0, int64_t h1, float *y, int64_t ps);
/* linalg_conv_gemm.c: 1 where bf__conv_fill_planes writes a call's padded
 * planes whole (AVX-512, padded rows up to 512 floats); then it writes ni
 * images' planes from xg (the group's first channel) into buf, plane
 * floats apart, borders +0. */
int bf__conv_fill_planes_ok(const bf__conv_params *cp);
void bf__conv_fill_planes(const bf__conv_params *cp, const float *xg, int64_t ni, float *buf, int64_t plane);
/* Elsewhere the planes' insides only (their borders zeroed once by the
 * caller): ni images' rows from xg into buf, plane floats apart. */
void bf__conv_copy_planes(const bf__conv_params *cp, const float *xg, int64_t ni, float *buf, int64_t plane);
/* linalg_conv_gemm.c: one channel (ch >= 0) of a stride-1, undilated 2-D
 * Conv summed over windows of padded planes; 0 when the shape does not
 * qualify or the scratch is too small. */
int bf__conv_channel_windows(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                             float *y, void *scratch, int64_t ch);
/* linalg_conv_direct.c: the depthwise and 1x1 paths. act->res may be set
 * only where bf__conv_res_direct says. scratch: the step's (a 1x1 Conv's
 * bf__conv_pw_floats; NULL: none asked). */
void bf__conv_direct(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                     const bf__act *act, float *y, int64_t ch, void *scratch);
/* The stride-1 depthwise path's table of lane masks and tap offsets
 * (linalg_conv_direct.c, dw_flat_masks): it depends on the window alone,
 * so a caller running one depthwise step a block of channels and an image
 * at a time (linalg_conv_pwdw.c) builds it once a step with
 * bf__dw_flat_table (1: the step takes that path, *t filled; 0: it does
 * not, t untouched) and passes it to bf__conv_direct_dw, which runs what
 * bf__conv_direct would (whole images, every channel) with that table in
 * place of its own: the same kernel on the same masks, the same bits. */
#define BF__DW_FLAT_MASKS 8192 /* entries: a 3x3 kernel over up to 910 chunks of 16 outputs (a 120x120 plane) */
typedef struct bf__dw_flat {
    uint16_t tab[BF__DW_FLAT_MASKS];   /* __mmask16s */
    int64_t off[BF__DW_MAXKH * BF__DW_MAXKW];
} bf__dw_flat;
int bf__dw_flat_table(const bf__conv_params *cp, bf__dw_flat *t);
void bf__conv_direct_dw(const bf__conv_params *cp, const bf__dw_flat *t, const float *x, const float *wt,
                        const float *bias, const bf__act *act, float *y);
/* linalg_conv_dw8.c: the depthwise plane as one run of outputs on AVX2,
 * stride 1 or 2 (cp->simd BF_SGEMM_AVX2, bf__dw8_ok's shapes): images n, groups
 * [g0, g1) (depthwise: one channel each), the activation before the store
 * (act->lo, act->hi; act->res not read), the bits of dw2d_impl. 1 when it
 * ran, 0 when it did not (y untouched: not its shape, or its table of
 * masks past BF__DW8_TABLE_MAX bytes or out of memory). */
#define BF__DW8_TABLE_MAX ((size_t)4 << 20) /* bytes: a 3x3 kernel's partial chunks of a plane near 3500x3500 */
int bf__dw8_ok(const bf__window *w);
/* linalg_conv_dwc8.c: the depthwise Conv on AVX2 with 8 channels in the
 * lanes, for input maps of at most BF__DWC8_MAXPOS1 positions at stride 1
 * and BF__DWC8_MAXPOS at larger strides (outputs of at most
 * BF__DWC8_MAXPOS: its buffer 8 planes of each; where it measured faster than
 * linalg_conv_dw8.c's planes: docs/perf/mobilenet/h44.md, h44-dwc8, and
 * h46.md, h46-dwc56; any
 * dilation and padding; kernels up to BF__DW_MAXKH x BF__DW_MAXKW): channels
 * [g0, g0 + 8 b) of every image, b the most whole blocks of 8 in [g0, g1),
 * the activation before the store, the bits of dw2d_impl. Returns where the
 * channels it left start (g0 when it ran none: not its shape, fewer than 8
 * channels, or out of memory; y untouched there). */
/* 64x64: 28x28 measured level at first (h44-dwc8); with the inside columns
 * eight at a time, 56x56 6-9% faster than the planes and 112x112 13%
 * slower in the pass (docs/perf/mobilenet/h46.md, h46-dwc56) */
#define BF__DWC8_MAXPOS1 4096
#define BF__DWC8_MAXPOS 16384  /* 128x128: 112x112 -> 56x56 measured faster */
int bf__dwc8_want(const bf__conv_params *cp);
int64_t bf__dwc8_run(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                     const bf__act *act, float *y, int64_t g0, int64_t g1);
int bf__dw8_run(const bf__conv_params *cp, const float *x, const float *wt, const float *bias, const bf__act *act,
                float *y, int64_t g0, int64_t g1);
/* 1 when bf__conv_direct adds act->res in the product's epilogue: the 1x1
 * path with a bias on a CPU with the product's kernel. */
int bf__conv_res_direct(const bf__conv_params *cp);
/* linalg_conv_pointwise.c: two shapes of the 1x1 path on AVX-512 (the
 * second on AVX2 too; whole steps; each element the chain and epilogue of
 * bf__sgemm_bias, so the same bits). bf__conv_pw_inplace: few output channels over a large map,
 * B (the input) read in place and prefetched, no panel packed; it takes nj
 * rows of a group where bf__conv_pw_inplace_ok says (BF__PW_MMIN ..
 * BF__PW_MMAX rows, at least BF__PW_NMIN positions: the shapes where it
 * measured faster, docs/BENCHMARKS.md, h14-mbv2). bf__conv_pw_batched:
 * bf__conv_pw_images images side by side in one product where a map is
 * small (bf__conv_packed_images' rule), K past BF__PW_KMIN (any K on a
 * map of one position; on AVX2 any K) and the product no larger than
 * BF__PW_TMPMAX floats (AVX2: BF__PW_TMPMAX_AVX2), the product in the scratch
 * (bf__conv_pw_floats, 0 when it takes none) then copied to each image,
 * act->res added plane by plane; 0 when it does not take the step (y
 * untouched). */
#define BF__PW_MMIN 8
#define BF__PW_MMAX 32
#define BF__PW_NMIN 784
#define BF__PW_KMIN 256 /* bf__conv_pw_batched: K past this only (maps of one position: any) */
#define BF__PW_TMPMAX (1 << 17) /* ... and a product of at most this many floats (512 KiB) */
#define BF__PW_TMPMAX_AVX2 (1 << 19) /* ... on AVX2 (where any K is taken) this many (2 MiB) */
#define BF__PW_SIDE_AVX2 256 /* ... and on AVX2 maps of 96 to 255 positions not a multiple of 16 side by side too */
int bf__conv_pw_inplace_ok(const bf__conv_params *cp, int64_t nj);
/* linalg_conv_pwdw.c (exec/step_access.h, bf__conv_pwdw): the 1x1 ->
 * depthwise pairs over maps of at least BF__PWDW_NMIN positions (7x7), a
 * block of at most BF__PWDW_BLK channels (a multiple of 8; maps under
 * BF__PWDW_SMALL positions, the 14x14 and 7x7 ones, BF__PWDW_BLK_SMALL)
 * whose planes fit BF__PWDW_FLOATS floats (784 KiB: 16 planes of 112x112,
 * 32 of 56x56): the block sizes that measured best (docs/perf/
 * mobilenet.md, h16-mb; the small maps and their blocks of 64, h18-mbv2) */
#define BF__PWDW_NMIN 49
#define BF__PWDW_SMALL 784
#define BF__PWDW_BLK 32
#define BF__PWDW_BLK_SMALL 64
#define BF__PWDW_FLOATS 200704
void bf__conv_pw_inplace(int m, int n, int k, const float *a, int lda, const float *b, int ldb, const float *bias,
                         const bf__act *act, float *y, int ldy);
int64_t bf__conv_pw_images(const bf__conv_params *cp);
size_t bf__conv_pw_floats(const bf__conv_params *cp);
int bf__conv_pw_batched(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                        const bf__act *act, float *y, void *scratch);
/* linalg_conv_pwlanes.c: the 1x1 path with 16 output channels to a
 * vector, the input broadcast from its NCHW planes in place (AVX-512; whole
 * steps; each element the chain and epilogue of bf__sgemm_bias, so the same
 * bits). bf__conv_pwl_ok: the shapes and level it can take (mg a multiple
 * of 16, a bias); bf__conv_pwl_want: those the step gives it (measured per
 * shape); bf__conv_pwl_images images a call; bf__conv_pwl_floats of
 * scratch (0: none); bf__conv_pwl: every channel of every image (wpk: W
 * packed once, or NULL), act->res laid out as y; 0 when it does not take
 * the step (y untouched). cpos: the output positions to compute alone
 * (op.h; cpos->used then set), NULL: all. */
int bf__conv_pwl_ok(const bf__conv_params *cp);
int bf__conv_pwl_want(const bf__conv_params *cp);
/* ... and those it takes with a list of positions (the wanted ones and
 * the small maps' unit 1x1s) */
int bf__conv_pwl_list_ok(const bf__conv_params *cp);
int64_t bf__conv_pwl_images(const bf__conv_params *cp);
size_t bf__conv_pwl_floats(const bf__conv_params *cp);
int bf__conv_pwl(const bf__conv_params *cp, const float *x, const float *wt, const float *wpk, const float *bias,
                 const bf__act *act, float *y, void *scratch, bf__cpos *cpos);
/* linalg_conv_pwlist.c: a unit 1x1 Conv (one group, a bias, cp->simd of
 * AVX2 or more, maps of at most BF__PW_LIST_MAXPOS positions, none pws
 * takes) on a list of output positions, each listed output the whole
 * step's bits, the others untouched; the gather room cpos->work of at
 * least bf__conv_pw_list_floats(c, m, osp) floats (an image's X,
 * residual and output). 0 when it does not take the step (y untouched).
 * The bound keeps a worker's room for it near 1 MiB on mobilenet_v2's
 * 28x28 layers (784 positions). */
#define BF__PW_LIST_MAXPOS 1024
int bf__conv_pw_list_ok(const bf__conv_params *cp);
int64_t bf__conv_pw_list_floats(int64_t c, int64_t m, int64_t osp);
int bf__conv_pw_list(const bf__conv_params *cp, const float *x, const float *wt, const float *bias,
                     const bf__act *act, float *y, bf__cpos *cpos);
/* W packed once for bf__conv_pwl (wpk above; NULL: it packs per call):
 * m x kc floats where the step would take the lanes at cp->simd, whatever
 * this CPU has (the plan's estimate), else 0; bf__conv_pwl_pack writes
 * them (0: not this step, or not on this CPU). */
size_t bf__conv_pwl_pack_floats(const bf__conv_params *cp);
int bf__conv_pwl_pack(const bf__conv_params *cp, const float *wt, float *out);
/* linalg_conv_dwpair.c: a depthwise 3-wide, stride-2 Conv with output
 * rows of at most 7 (mobilenet_v2's 14x14 -> 7x7), two output rows to a
 * vector (AVX-512; bf__dw_pair_ok: the shapes and level), groups [g0, g1)
 * of every image; the bits of the other depthwise paths. */
int bf__dw_pair_ok(const bf__conv_params *cp);
void bf__dw_pair(const bf__conv_params *cp, const float *x, const float *wt, const float *bias, const bf__act *act,
                 float *y, int64_t g0, int64_t g1);
/* linalg_conv.c: n outputs y of one plane become the residual Add's
 * expression with r (act->res_a says which is A), then the activation
 * (act->lo, act->hi), as the pass after a bare Conv computes them. */
void bf__conv_res_plane(int simd, const bf__act *act, const float *r, float *y, int64_t n);

#endif
