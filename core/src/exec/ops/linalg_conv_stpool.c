/* A network's first Conv (linalg_conv_stem.c's kernel, its Relu or Clip
 * fused) and the MaxPool that is the one reader of its activation's
 * output, run together over bands of output rows of one image at a time
 * (plan_fuse.c, bf__plan_find_pwdw; plan.c runs the pair in bitflip
 * eval's passes). resnet18's conv1 7x7/2 -> Relu -> MaxPool 3x3/2.
 *
 * Why: apart, the stem writes its whole output (64 x 112x112 floats an
 * image, 3.2 MB, 103 MB for a batch of 32) and the pool reads it back from
 * memory: `perf` put the pool's samples on its first row loads, and the
 * pool ran at the memory's rate (docs/perf/conv.md, h16-r18f, h17-r18p).
 * Together, a band of the stem's output rows (at most BF__STPOOL_FLOATS
 * floats, in L2) is written and pooled while it is in cache, and the
 * stem's output is never written to the arena at all. The band is
 * channels-last (a position's channels together, as the stem kernel's
 * tile holds them): the stem stores its tile with plain vector stores and
 * the pool takes 16 channels a vector with plain loads, where NCHW planes
 * cost the stem a 16 x 16 transpose per 16 positions and the pool two
 * masked loads and a permute per tap (docs/perf/conv/h31.md, h31-conv:
 * the pool and the transposes were 16% of the pair, and the pair 2-4%
 * faster this way); only the pool's output, a quarter of the stem's, is
 * transposed, into y's planes.
 *
 * The bits: each stem output is bf__conv_stem's own block chain and
 * epilogue (bf__conv_stem_band: the same blocks over any rows, stored
 * elsewhere), and each pool output maxpool_s2_plane's separable order
 * over the same floats, lane for lane (bf__maxpool_band: the window's rows
 * in order, then its columns in order, 16 channels a vector, or 8 on AVX2). A pool row whose window spans two bands
 * finds the rows of the earlier band moved to the top of the buffer, the
 * same floats. test_conv_stpool checks the pair's outputs against the
 * steps run apart. */
#include <stdint.h>
#include <string.h>

#include "exec/op.h"
#include "exec/step_access.h"
#include "linalg_window.h"
#include "sgemm.h"

/* The band buffer's floats: pool output rows a band are as many as keep
 * the stem rows they read, all channels, under this (resnet18: 16 pool
 * rows, 33 stem rows of 64 x 112 floats, 924 KiB; with the image's padded
 * planes, 1.5 MiB, in L2). Measured on resnet18's first three nodes
 * (docs/perf/conv.md, h17-r18p), paired against apart at batch 32: 2 pool
 * rows a band 0.99x, 4 0.95x, 8 0.93-0.96x, 16 0.92-0.94x, 32 or the whole
 * image 0.92-0.93x */
#define BF__STPOOL_FLOATS 262144

typedef struct stpool_shape {
    int64_t pb;       /* pool output rows a band */
    int64_t br;       /* stem rows the band buffer holds a channel */
    int64_t planes;   /* floats of the image's padded planes (a multiple of 16) */
    int64_t stem;     /* floats of the stem kernel's buffer (a multiple of 16) */
} stpool_shape;

/* 0 when the pair is not this one's: the stem kernel on one group (AVX2
 * or AVX-512: cp->stem), a MaxPool of the stem's output whose band loop
 * runs at this level (bf__maxpool_band_ok) */
static int shape_of(const bf__conv_params *cp, const bf__step *pl, stpool_shape *sh)
{
    if (!cp->stem || cp->group != 1 || cp->n < 1) return 0;
    if (!bf__maxpool_band_ok(pl)) return 0;
    const bf_tensor *x = pl->in[0];
    int64_t isp, osp, oh = cp->w.out[1], ow = cp->w.out[2];
    if (!bf__pool_shape(pl, &isp, &osp) || x->ndim != 4 || x->dims[0] != cp->n || x->dims[1] != cp->m ||
        x->dims[2] != oh || x->dims[3] != ow || isp != cp->osp || osp < 1)
        return 0;
    int64_t poh = pl->out[0]->dims[2], pb = 0, br = 0;
    for (int64_t o = 0; o < poh; o++) {   /* every pool row reads some stem row */
        int64_t h0, h1;
        bf__maxpool_band_rows(pl, o, o + 1, &h0, &h1);
        if (h1 <= h0) return 0;
    }
    /* the most pool rows a band such that every band's stem rows fit
     * (more pool rows a band never read fewer stem rows) */
    for (int64_t k = 1; k <= poh; k++) {
        int64_t most = 0;
        for (int64_t o = 0; o < poh; o += k) {
            int64_t h0, h1;
            bf__maxpool_band_rows(pl, o, o + k < poh ? o + k : poh, &h0, &h1);
            if (h0 < 0 || h1 > oh) return 0;
            if (h1 - h0 > most) most = h1 - h0;
        }
        if (k > 1 && most * cp->m * ow > BF__STPOOL_FLOATS) break;
        pb = k, br = most;
    }
    sh->pb = pb, sh->br = br;
    sh->planes = (cp->cg * bf__conv_padded_plane(&cp->w) + 15) & ~(int64_t)15;
    sh->stem = ((int64_t)bf__conv_stem_band_floats(cp) + 15) & ~(int64_t)15;
    return 1;
}

/* planes, the stem kernel's buffer, zeros for a missing bias, the band, the pool's row (a band row's floats) */
static int64_t floats_of(const bf__conv_params *cp, const stpool_shape *sh)
{
    return sh->planes + sh->stem + ((cp->m + 15) & ~(int64_t)15) + (sh->br + 1) * cp->m * cp->w.out[2];
}

int64_t bf__conv_stpool_pair(const bf__step *cv, const bf__step *pl)
{
    stpool_shape sh;
    if (!bf__conv_step(cv) || !shape_of(cv->params, pl, &sh)) return 0;
    return floats_of(cv->params, &sh);
}

int bf__conv_stpool(const bf__ctx *cv, const bf__step *pl, float *buf, size_t buf_floats)
{
    const bf__conv_params *cp = cv->params;
    stpool_shape sh;
    if (!shape_of(cp, pl, &sh) || (size_t)floats_of(cp, &sh) > buf_floats) return 0;
    /* an activation the stem kernel applies (Relu, Clip) or none */
    if (cv->res || cv->bn || (cv->act && (cv->act->hswish || cv->act->res))) return 0;
    const float *x = cv->in[0]->data, *wt = cv->in[1]->data;
    const float *bias = cp->has_bias ? cv->in[2]->data : NULL;
    float *y = pl->out[0]->data;
    float *planes = buf, *sb = planes + sh.planes, *zeros = sb + sh.stem;
    float *band = zeros + ((cp->m + 15) & ~(int64_t)15), *row = band + sh.br * cp->m * cp->w.out[2];
    int64_t ow = cp->w.out[2], rs = ow * cp->m, plane = bf__conv_padded_plane(&cp->w);   /* rs: a band row's floats */
    int64_t poh = pl->out[0]->dims[2], posp = poh * pl->out[0]->dims[3];
    if (!bias) memset(zeros, 0, sizeof(float) * (size_t)cp->m);
    bf__conv_stem_band_prep(cp, wt, sb);
    /* the planes written whole (AVX-512), else their borders zeroed once and their insides copied per image */
    int filled = bf__conv_fill_planes_ok(cp);
    if (!filled) memset(planes, 0, sizeof(float) * (size_t)(cp->cg * plane));
    for (int64_t n = 0; n < cp->n; n++) {
        if (filled) bf__conv_fill_planes(cp, x + n * cp->c * cp->isp, 1, planes, plane);
        else bf__conv_copy_planes(cp, x + n * cp->c * cp->isp, 1, planes, plane);
        int64_t b0 = 0, b1 = 0;   /* the stem rows the band holds */
        for (int64_t o = 0; o < poh; o += sh.pb) {
            int64_t o1 = o + sh.pb < poh ? o + sh.pb : poh, h0, h1;
            bf__maxpool_band_rows(pl, o, o1, &h0, &h1);
            /* rows the last band computed and this one reads: to the top */
            int64_t keep = b1 > h0 && h0 >= b0 ? b1 - h0 : 0;
            if (keep && h0 > b0) memmove(band, band + (h0 - b0) * rs, sizeof(float) * (size_t)(keep * rs));
            if (h0 + keep < h1)
                bf__conv_stem_band(cp, planes, sb, bias ? bias : zeros, cv->act, h0 + keep, h1, band + keep * rs, cp->m);
            b0 = h0, b1 = h1;
            bf__maxpool_band(pl, band, h0, o, o1, cp->m, y + n * cp->m * posp, row);
        }
    }
    return 1;
}
