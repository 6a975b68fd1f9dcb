/* The per-timestep work of the recurrent ops (recurrent.c), made fast
 * without changing a bit of what it computes.
 *
 * The recurrent product H R^T: bf__sgemm given R with trans_b transposes
 * R into 16-column panels on every call, and a step's product is only
 * batch rows deep: all of R (1 MiB at hidden 256) was transposed on every
 * step for a few rows' product. R^T is packed into those panels once per direction per run (faults
 * rewrite R in place, so never once per plan) and each panel goes to
 * bf__sgemm as a plain 16-column B, which it reads in place. Every element
 * is still bf__sgemm's in-order chain over its row and column (sgemm.h),
 * so the bits are the unpacked product's, whatever the batch.
 *
 * The LSTM cell: each row's bias adds, gates and cell update in one call
 * instead of six passes and a copy, with the same operations in the same
 * order as recurrent.c's general path, no contraction (-std=c11), so the
 * same bits; compiled twice, plain and for AVX2 (fastmath_impl.h). */
#include "recurrent_impl.h"

#include <string.h>

#include "fastmath_impl.h"
#include "sgemm.h"
#include "transpose8.h"

#define PANEL 16 /* bf__sgemm's panel width: a 16-column B is read in place */

int64_t bf__rnn_panels_size(int64_t n, int64_t k) { return (n + PANEL - 1) / PANEL * PANEL * k; }

/* What the AVX2 copy's 8 x 8 tiles leave of the panel of columns
 * j0 .. j0 + nr: columns from j8 on whole, the others from p = k8 on, and
 * the zeros past nr (all of it for the plain copy: j8 = k8 = 0). */
static void pack_edges(const float *r, int64_t k, int64_t j0, int64_t nr, int64_t j8, int64_t k8, float *pan)
{
    for (int64_t j = 0; j < nr; j++) {
        const float *row = r + (j0 + j) * k;
        for (int64_t p = j < j8 ? k8 : 0; p < k; p++) pan[p * PANEL + j] = row[p];
    }
    for (int64_t p = 0; nr < PANEL && p < k; p++) memset(pan + p * PANEL + nr, 0, sizeof(float) * (size_t)(PANEL - nr));
}

#ifdef BF__HAVE_AVX2_COPY
BF__AVX2 static void pack_avx2(const float *r, int64_t n, int64_t k, float *dst)
{
    for (int64_t j0 = 0; j0 < n; j0 += PANEL) {
        float *pan = dst + j0 * k;
        int64_t nr = n - j0 < PANEL ? n - j0 : PANEL, j8 = nr & ~(int64_t)7, k8 = k & ~(int64_t)7;
        for (int64_t j = 0; j < j8; j += 8)
            for (int64_t p = 0; p < k8; p += 8) bf__transpose8(r + (j0 + j) * k + p, k, pan + p * PANEL + j, PANEL);
        pack_edges(r, k, j0, nr, j8, k8, pan);
    }
}
#endif

void bf__rnn_pack(const float *r, int64_t n, int64_t k, float *dst)
{
#ifdef BF__HAVE_AVX2_COPY
    if (bf__cpu_avx2()) {
        pack_avx2(r, n, k, dst);
        return;
    }
#endif
    for (int64_t j0 = 0; j0 < n; j0 += PANEL) {
        int64_t nr = n - j0 < PANEL ? n - j0 : PANEL;
        pack_edges(r, k, j0, nr, 0, 0, dst + j0 * k);
    }
}

/* At AVX-512, one bf__sgemm_prepacked call over all the panels (they are
 * bf__sgemm_pack's layout, read where they lie; r itself the B a path
 * without the kernel reads): its block takes 12 rows by two panels at
 * once. An LSTM of hidden 256 at batch 32: 1.35-1.45x the eval's samples/s
 * on a Zen 5 core, against the per-panel calls below (docs/perf/lstm.md,
 * h49-lstm). Below AVX-512, a panel at a time: the AVX2 block computes 6
 * rows at a time; a last block of 1 to 3 rows has too few independent sums
 * to keep both FMA pipes busy and costs nearly a full block. So the rows
 * past the last whole 6 but one (a batch of 32: 24, then 8) go as two
 * calls of about half each (4 and 4). Either way each element is the
 * in-order chain over its row and column: the same bits. */
void bf__rnn_product(int level, const float *h, int m, int k, const float *r, const float *panels, int n,
                     int accumulate, float *y, int ldy)
{
    if (level >= BF_SGEMM_AVX512) {
        bf__sgemm_prepacked(level, 1, m, n, k, 1.0f, h, k, r, k, accumulate, y, ldy, NULL, panels, NULL, NULL);
        return;
    }
    int rem = m % 6, head = m, tail1 = 0;
    if (m > 6 && rem >= 1 && rem <= 3) {
        head = m - 6 - rem;
        tail1 = (6 + rem + 1) / 2;
    }
    int cut[4] = {0, head, head + tail1, m}, calls = tail1 ? 3 : 1;
    for (int j0 = 0; j0 < n; j0 += PANEL) {
        int nr = n - j0 < PANEL ? n - j0 : PANEL;
        const float *pan = panels + (int64_t)j0 * k;
        for (int c = 0; c < calls; c++) {
            int i0 = cut[c], rows = cut[c + 1] - cut[c];
            if (rows > 0)
                bf__sgemm_level(level, 0, 0, rows, nr, k, 1.0f, h + (int64_t)i0 * k, k, pan, PANEL, accumulate,
                                y + (int64_t)i0 * ldy + j0, ldy);
        }
    }
}

/* ONNX gate order i, o, f, c; s the recurrent product (no bias), sx the
 * input projection (no bias). recurrent.c's general path computes
 * (s + Rb) + (sx + Wb) for each gate (the products accumulate onto the
 * biases, then add), sigmoid / tanh, c = f c + i g, h = o tanh(c). */
BF__ALWAYS_INLINE void lstm_cell_body(int64_t H, float *restrict s,
                                                                 const float *restrict rb,
                                                                 const float *restrict sx,
                                                                 const float *restrict wb, float *restrict h,
                                                                 float *restrict c)
{
    /* Three short loops rather than one: a loop over all five
     * transcendentals is one long dependency chain per element, longer than
     * the CPU's reorder window, and ran at half the speed. */
    for (int64_t j = 0; j < 3 * H; j++) s[j] = sigmoid_f32((s[j] + rb[j]) + (sx[j] + wb[j]));
    for (int64_t j = 3 * H; j < 4 * H; j++) s[j] = tanh_f32((s[j] + rb[j]) + (sx[j] + wb[j]));
    const float *gi = s, *go = s + H, *gf = s + 2 * H, *gc = s + 3 * H;
    for (int64_t j = 0; j < H; j++) {
        float cn = gf[j] * c[j] + gi[j] * gc[j];
        c[j] = cn;
        h[j] = go[j] * tanh_f32(cn);
    }
}

static void lstm_cell_plain(int64_t H, float *s, const float *rb, const float *sx, const float *wb, float *h,
                            float *c)
{
    lstm_cell_body(H, s, rb, sx, wb, h, c);
}

#ifdef BF__HAVE_AVX2_COPY
BF__AVX2 static void lstm_cell_avx2(int64_t H, float *s, const float *rb, const float *sx, const float *wb, float *h,
                                    float *c)
{
    lstm_cell_body(H, s, rb, sx, wb, h, c);
}
/* 16 lanes: the same loops again (fastmath_impl.h's BF__AVX512, no FMA) */
BF__AVX512 static void lstm_cell_avx512(int64_t H, float *s, const float *rb, const float *sx, const float *wb,
                                        float *h, float *c)
{
    lstm_cell_body(H, s, rb, sx, wb, h, c);
}
#endif

void bf__lstm_cell(int level, int64_t H, float *s, const float *rb, const float *sx, const float *wb, float *h,
                   float *c)
{
#ifdef BF__HAVE_AVX2_COPY
    if (level >= BF_SGEMM_AVX512) {
        lstm_cell_avx512(H, s, rb, sx, wb, h, c);
        return;
    }
    if (level >= BF_SGEMM_AVX2) {
        lstm_cell_avx2(H, s, rb, sx, wb, h, c);
        return;
    }
#endif
    (void)level;
    lstm_cell_plain(H, s, rb, sx, wb, h, c);
}

int bf__rnn_avx2(void) { return bf__cpu_avx2(); }
