/* Detection metrics (COCO mAP, AP50, AR) and the per-image outcome rule
 * against golden detections: see metrics_det.h for the definitions. */
#include "exec/metrics_det.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define N_IOU 10
#define N_REC 101

double bf__det_iou(const float *a, const float *b)
{
    for (int j = 0; j < 4; j++)
        if (isnan(a[j]) || isnan(b[j])) return NAN;
    double ax1 = a[0], ay1 = a[1], ax2 = a[2], ay2 = a[3], bx1 = b[0], by1 = b[1], bx2 = b[2], by2 = b[3];
    double w = (ax2 < bx2 ? ax2 : bx2) - (ax1 > bx1 ? ax1 : bx1);
    if (!(w > 0)) return 0;
    double h = (ay2 < by2 ? ay2 : by2) - (ay1 > by1 ? ay1 : by1);
    if (!(h > 0)) return 0;
    double inter = w * h, u = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter;
    return inter / u;
}

/* numpy's linspace(0.5, 0.95, 10) and linspace(0, 1, 101): i * step + start, the last one the stop */
static double iou_threshold(int t) { return t == N_IOU - 1 ? 0.95 : (double)t * ((0.95 - 0.5) / (N_IOU - 1)) + 0.5; }
static double recall_point(int r) { return r == N_REC - 1 ? 1.0 : (double)r * (1.0 / (N_REC - 1)); }

typedef struct ranked {
    float score;
    int64_t row;
} ranked;

/* numpy's argsort(-score, kind='mergesort'): higher first, NaN last, ties by row */
static int ranked_cmp(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    int na = isnan(a->score), nb = isnan(b->score);
    if (na != nb) return na - nb;
    if (!na && a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->row > b->row) - (a->row < b->row);
}

static int i64_cmp(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* One class's AP (summed over recall points, per threshold) and final recall. */
typedef struct det_scratch {
    int64_t *img_of;          /* prediction row -> image */
    ranked *items;            /* the class's detections, ranked */
    unsigned char *tp;        /* N_IOU x detections */
    unsigned char *gtm;       /* ground-truth row matched (per threshold) */
    double *pr, *rc;
} det_scratch;

static void class_ap(const bf__dets *p, const bf__dets *g, int64_t k, int64_t npig, det_scratch *s, double qsum[N_IOU],
                     double rec[N_IOU])
{
    int64_t nd = 0, rows_p = p->offsets[p->n], rows_g = g->offsets[g->n];
    for (int64_t r = 0; r < rows_p; r++)
        if (p->labels[r] == k) s->items[nd++] = (ranked){p->scores[r], r};
    qsort(s->items, (size_t)nd, sizeof *s->items, ranked_cmp);
    for (int t = 0; t < N_IOU; t++) {
        double thr = iou_threshold(t);
        if (thr > 1 - 1e-10) thr = 1 - 1e-10;
        memset(s->gtm, 0, (size_t)rows_g);
        unsigned char *tp = s->tp + (size_t)t * (size_t)nd;
        for (int64_t d = 0; d < nd; d++) {
            int64_t row = s->items[d].row, i = s->img_of[row], m = -1;
            double best = thr;
            for (int64_t gr = g->offsets[i]; gr < g->offsets[i + 1]; gr++) {
                if (g->labels[gr] != k || s->gtm[gr]) continue;
                double iou = bf__det_iou(p->boxes + 4 * row, g->boxes + 4 * gr);
                if (!(iou >= best)) continue;   /* NaN matches nothing */
                best = iou;
                m = gr;
            }
            tp[d] = m >= 0;
            if (m >= 0) s->gtm[m] = 1;
        }
        int64_t ctp = 0, cfp = 0;
        for (int64_t d = 0; d < nd; d++) {
            ctp += tp[d];
            cfp += !tp[d];
            s->rc[d] = (double)ctp / (double)npig;
            s->pr[d] = (double)ctp / ((double)cfp + (double)ctp + 2.220446049250313e-16);   /* np.spacing(1) */
        }
        rec[t] = nd ? s->rc[nd - 1] : 0;
        for (int64_t d = nd - 1; d > 0; d--)
            if (s->pr[d] > s->pr[d - 1]) s->pr[d - 1] = s->pr[d];
        double q = 0;
        int64_t at = 0;
        for (int r = 0; r < N_REC; r++) {
            double want = recall_point(r);
            while (at < nd && s->rc[at] < want) at++;   /* searchsorted(rc, want, 'left') */
            q += at < nd ? s->pr[at] : 0;
        }
        qsum[t] = q;
    }
}

bf_status bf__det_evaluate(const bf__dets *p, const bf__dets *g, bf__det_metrics *out, bf_error *err)
{
    out->map = out->map50 = out->recall = NAN;
    if (p->n != g->n)
        return bf_error_set(err, BF_EINVAL, "detections for %lld images against ground truth for %lld", (long long)p->n,
                            (long long)g->n);
    int64_t n = p->n, rows_p = p->offsets[n], rows_g = g->offsets[n];
    bf_status st = BF_OK;
    det_scratch s = {0};
    int64_t *cls = bf__malloc((size_t)rows_g * sizeof *cls + 1);
    s.img_of = bf__malloc((size_t)rows_p * sizeof *s.img_of + 1);
    s.items = bf__malloc((size_t)rows_p * sizeof *s.items + 1);
    s.tp = bf__malloc((size_t)rows_p * N_IOU + 1);
    s.gtm = bf__malloc((size_t)rows_g + 1);
    s.pr = bf__malloc((size_t)rows_p * sizeof *s.pr + 1);
    s.rc = bf__malloc((size_t)rows_p * sizeof *s.rc + 1);
    if (!cls || !s.img_of || !s.items || !s.tp || !s.gtm || !s.pr || !s.rc) {
        st = bf_error_set(err, BF_ENOMEM, "out of memory for detection metrics");
        goto out;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t r = p->offsets[i]; r < p->offsets[i + 1]; r++) s.img_of[r] = i;
    memcpy(cls, g->labels, (size_t)rows_g * sizeof *cls);
    qsort(cls, (size_t)rows_g, sizeof *cls, i64_cmp);
    double q_all = 0, q50 = 0, r_all = 0;
    int64_t classes = 0;
    for (int64_t a = 0; a < rows_g;) {
        int64_t b = a;
        while (b < rows_g && cls[b] == cls[a]) b++;
        double qsum[N_IOU], rec[N_IOU];
        class_ap(p, g, cls[a], b - a, &s, qsum, rec);
        for (int t = 0; t < N_IOU; t++) q_all += qsum[t], r_all += rec[t];
        q50 += qsum[0];
        classes++;
        a = b;
    }
    if (classes) {
        out->map = q_all / ((double)classes * N_IOU * N_REC);
        out->map50 = q50 / ((double)classes * N_REC);
        out->recall = r_all / ((double)classes * N_IOU);
    }
out:
    bf__free(cls);
    bf__free(s.img_of);
    bf__free(s.items);
    bf__free(s.tp);
    bf__free(s.gtm);
    bf__free(s.pr);
    bf__free(s.rc);
    return st;
}

/* --- outcomes */

static int counts(float score, double threshold) { return isnan(score) || (double)score > threshold; }

static int edge(const bf__dets *a, int64_t ra, const bf__dets *b, int64_t rb)
{
    return a->labels[ra] == b->labels[rb] && bf__det_iou(a->boxes + 4 * ra, b->boxes + 4 * rb) >= BF_DET_MATCH_IOU;
}

/* Whether golden rows gr[0..m) and faulty rows fr[0..m) have a perfect
 * matching (Kuhn's augmenting paths, the depth-first search kept on an
 * explicit stack: a path is as long as the golden detections). */
static int perfect(const bf__dets *g, const int64_t *gr, const bf__dets *f, const int64_t *fr, int64_t m, int64_t *w)
{
    int64_t *match = w, *stack = w + m, *next = w + 2 * m, *via = w + 3 * m;
    unsigned char *seen = (unsigned char *)(w + 4 * m);
    for (int64_t j = 0; j < m; j++) match[j] = -1;
    for (int64_t g0 = 0; g0 < m; g0++) {
        memset(seen, 0, (size_t)m);
        int64_t depth = 1;
        stack[0] = g0, next[0] = 0;
        int found = 0;
        while (depth > 0 && !found) {
            int64_t gi = stack[depth - 1], j = next[depth - 1];
            while (j < m && (seen[j] || !edge(g, gr[gi], f, fr[j]))) j++;
            next[depth - 1] = j + 1;
            if (j == m) {
                depth--;
                continue;
            }
            seen[j] = 1;
            via[depth - 1] = j;
            if (match[j] < 0) {
                for (int64_t d = 0; d < depth; d++) match[via[d]] = stack[d];
                found = 1;
            } else {
                stack[depth] = match[j], next[depth] = 0;
                depth++;
            }
        }
        if (!found) return 0;
    }
    return 1;
}

bf_status bf__det_image_critical(const bf__dets *g, const bf__dets *f, int64_t i, double threshold, int *critical, bf_error *err)
{
    int64_t mg = 0, mf = 0;
    for (int64_t r = g->offsets[i]; r < g->offsets[i + 1]; r++) mg += counts(g->scores[r], threshold);
    for (int64_t r = f->offsets[i]; r < f->offsets[i + 1]; r++) mf += counts(f->scores[r], threshold);
    *critical = mg != mf;
    if (*critical || mg == 0) return BF_OK;
    /* rows of both sides, then the matching's five arrays of mg */
    int64_t *w = bf__malloc((size_t)mg * 7 * sizeof(int64_t));
    if (!w) return bf_error_set(err, BF_ENOMEM, "out of memory matching %lld detections", (long long)mg);
    int64_t *gr = w, *fr = w + mg, k = 0;
    for (int64_t r = g->offsets[i]; r < g->offsets[i + 1]; r++)
        if (counts(g->scores[r], threshold)) gr[k++] = r;
    k = 0;
    for (int64_t r = f->offsets[i]; r < f->offsets[i + 1]; r++)
        if (counts(f->scores[r], threshold)) fr[k++] = r;
    *critical = !perfect(g, gr, f, fr, mg, w + 2 * mg);
    bf__free(w);
    return BF_OK;
}

bf_status bf__det_critical_images(const bf__dets *g, const bf__dets *f, double threshold, int64_t *critical_images, bf_error *err)
{
    *critical_images = 0;
    if (g->n != f->n)
        return bf_error_set(err, BF_EINVAL, "faulty detections for %lld images against golden ones for %lld", (long long)f->n,
                            (long long)g->n);
    for (int64_t i = 0; i < g->n; i++) {
        int c;
        bf_status st = bf__det_image_critical(g, f, i, threshold, &c, err);
        if (st != BF_OK) return st;
        *critical_images += c;
    }
    return BF_OK;
}
