/* NonMaxSuppression: the box selection of every torchvision detector
 * (torchvision.ops.nms and batched_nms export as it, one class, batch 1). Its
 * output's shape is the number of boxes kept, so it is data: prepare
 * computes the selection when every input's data is there (at plan time for
 * constants, or prepared again at run time: op.h, at_run) and says so
 * otherwise (data_dependent). Prepared at run time, it selects into the
 * run-time arena (op.h, run_alloc) and run copies that selection; prepared
 * at plan build (constants), run selects again into the output.
 *
 * The rules (docs/OPS.md, "Detectors"): per batch and class, candidates are
 * the boxes whose score is > score_threshold (every box when that input is
 * absent; a NaN score is never > it), sorted by score descending with NaN
 * as the largest score (torch.sort's order, which torchvision.ops.nms
 * uses) and ties by lower box index (torch's CPU sort is stable; ONNX
 * Runtime's heap leaves ties unordered); then greedily, as torchvision's
 * CPU kernel: a box is kept unless its IoU with a box kept before it is
 * > iou_threshold, computed with that kernel's expressions (std::max and
 * std::min, so NaN coordinates never suppress), on corners put in order
 * first as the spec says (torchvision does not; its detectors drop boxes with
 * x1 > x2 before NMS). At most max_output_boxes_per_class per batch and class
 * (absent, 0 or negative: none, as the spec and ONNX Runtime); rows (batch,
 * class, box) in batch, class, then selection order.
 *
 * --tie-order pytorch (p->tie_order): a batch and class of more than 1000
 * boxes is returned in the order torchvision 0.14's batched_nms returns in
 * eager mode, which is what an exported detector's NonMaxSuppression stands
 * for. Past 4000 coordinates on the CPU it runs the boxes class by class
 * (`_batched_nms_vanilla`) and returns the kept indices, ascending, sorted
 * by torch.sort(descending=True): unstable, so equal scores come in
 * std::sort's order (torch_order.c), not the selection's. The boxes kept are
 * the same (each class's own NMS sorts stably, as the export's one NMS
 * does); only their order differs, and with it which tied boxes survive a
 * cut after it (detections_per_img, post_nms_top_n). At 1000 boxes or
 * fewer batched_nms runs the one NMS the export holds: the selection order.
 *
 * When the caller asks (bf_eval_opts.nms_ties: the conformance runner;
 * p->nms set at run time), the selection also records the decisions it took
 * within rounding (op.h, bf__nms_sample), the same selection either way;
 * otherwise the one added test is nt == NULL per pair compared. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/limits.h"
#include "detect_impl.h"
#include "shape_impl.h"
#include "torch_order.h"

/* torchvision's batched_nms runs class by class past 4000 coordinates */
#define TORCH_VANILLA_BOXES 1000

typedef struct nms_params {
    int center;             /* center_point_box: 0 corners, 1 centre and size */
    int torch;              /* --tie-order pytorch: batched_nms's eager order past 1000 boxes */
    int known;              /* prepare computed `count` from the data */
    int64_t count;          /* rows of selected_indices */
    const int64_t *sel;     /* prepared at run time: the count rows, in the run-time arena */
} nms_params;
static_assert(sizeof(nms_params) <= BF__OP_PARAMS_MAX, "nms_params must fit in params");

/* std::max and std::min as the C++ library defines them (the kernel's NaN
 * behaviour follows from these: the first argument wins unless the
 * comparison is true). */
static inline float std_max(float a, float b) { return a < b ? b : a; }
static inline float std_min(float a, float b) { return b < a ? b : a; }

/* a comes strictly before b: NaN first, then by descending score. */
static inline int score_before(float a, float b)
{
    if (isnan(a)) return !isnan(b);
    return a > b;
}

/* Stable bottom-up merge sort of idx[0..n) with tmp of n: b goes before a
 * when before(key, b, a) (the score order; the x index's x1 order). */
static void merge_sort(int64_t *idx, int64_t *tmp, int64_t n, int (*before)(const float *, int64_t, int64_t),
                       const float *key)
{
    int64_t *a = idx, *b = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) b[k++] = before(key, a[j], a[i]) ? a[j++] : a[i++];
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        int64_t *t = a; a = b; b = t;
    }
    if (a != idx) memcpy(idx, a, (size_t)n * sizeof *idx);
}

static int by_score(const float *s, int64_t i, int64_t j) { return score_before(s[i], s[j]); }
static int by_x1(const float *c, int64_t i, int64_t j) { return c[4 * i] < c[4 * j]; }

/* ONNX Runtime's MaxMin: NaN leaves the pair as it is. */
static inline void min_max(float p, float q, float *lo, float *hi)
{
    if (p >= q) { *lo = q; *hi = p; }
    else { *lo = p; *hi = q; }
}

/* Batch b's boxes as corners in order (c[4i..4i+3] = lo0, lo1, hi0, hi1)
 * and their areas. */
static void corners(const float *bx, int64_t n, int center, float *c, float *area)
{
    for (int64_t i = 0; i < n; i++) {
        const float *v = bx + 4 * i;
        float *o = c + 4 * i;
        if (center) {
            /* [x_centre, y_centre, width, height], as ONNX Runtime reads it */
            float hw = v[2] / 2, hh = v[3] / 2;
            o[0] = v[0] - hw; o[2] = v[0] + hw;
            o[1] = v[1] - hh; o[3] = v[1] + hh;
        } else {
            /* [y1, x1, y2, x2] in the spec, [x1, y1, x2, y2] from torchvision:
             * the IoU is the same either way */
            min_max(v[0], v[2], &o[0], &o[2]);
            min_max(v[1], v[3], &o[1], &o[3]);
        }
        area[i] = (o[2] - o[0]) * (o[3] - o[1]);
    }
}

/* Scratch bytes for n boxes: order and merge buffer, corners, areas, flags;
 * then the x index (x_index): ranks, boxes by x and their x, the others. */
static size_t nms_scratch(int64_t n, int torch)
{
    return (size_t)n * (2 * sizeof(int64_t) + 5 * sizeof(float) + 1) + 64 +
           (size_t)n * (3 * sizeof(int64_t) + sizeof(double)) + 64 + (torch ? (size_t)n * sizeof(bf__kv) + 64 : 0);
}

static int by_index(const void *a, const void *b)
{
    int64_t x = ((const bf__kv *)a)->i, y = ((const bf__kv *)b)->i;
    return (x > y) - (x < y);
}

/* rows[0, m) of one batch and class (selection order) put in the order
 * batched_nms returns them in eager mode (above): ascending box index, then
 * torch.sort's descending order of their scores */
static void torch_vanilla_order(int64_t *rows, int64_t m, const float *s, bf__kv *kv)
{
    for (int64_t r = 0; r < m; r++) kv[r] = (bf__kv){.i = rows[3 * r + 2]};
    qsort(kv, (size_t)m, sizeof *kv, by_index);
    for (int64_t r = 0; r < m; r++) kv[r].v = s[kv[r].i];
    bf__torch_sort(kv, m, 1);
    for (int64_t r = 0; r < m; r++) rows[3 * r + 2] = kv[r].i;
}

/* The boxes a kept box may suppress, found without looking at every later
 * candidate. A box suppresses another only when their IoU is > the
 * threshold, which is >= 0 (read_limits), so only when their intersection
 * is > 0: each box's x extent must overlap the other's. The exported
 * detectors put every class's boxes in one NMS, offset apart by class
 * (torchvision's batched_nms when tracing), so a box overlaps few of the
 * 10^4-10^5 candidates an untrained head gives. Boxes with all four corners
 * finite are indexed by their x1, ascending; a kept box scans those with x1
 * from its own x1 less the widest box's width (in double, and a little
 * wider: the window may only be too wide) up to its x2. Each pair looked at
 * is computed with the kernel's expressions, and a finite pair not looked at
 * has no positive intersection, so the selection is the kernel's. A box
 * with a NaN or infinite corner (as faults make) is never suppressed by a
 * finite one: the intersection is finite, and its area infinite or NaN
 * makes the IoU 0 or NaN, never > the threshold. So it is not indexed; a
 * kept box with such a corner compares with every later one, as the kernel. */
typedef struct x_index {
    int64_t *rank;            /* per box: its place in the score order (or -1) */
    int64_t *by_x, *tmp;      /* finite candidates, by x1 */
    double *x;                /* ... their x1 */
    int64_t n_x;
    double width;             /* the widest finite candidate's x2 - x1 */
} x_index;

static void x_build(x_index *xi, const int64_t *order, int64_t m, const float *c)
{
    xi->n_x = 0;
    xi->width = 0;
    for (int64_t r = 0; r < m; r++) {
        int64_t i = order[r];
        const float *ci = c + 4 * i;
        xi->rank[i] = r;
        if (isfinite(ci[0]) && isfinite(ci[1]) && isfinite(ci[2]) && isfinite(ci[3])) {
            xi->by_x[xi->n_x++] = i;
            double w = (double)ci[2] - (double)ci[0];
            if (w > xi->width) xi->width = w;
        }
    }
    merge_sort(xi->by_x, xi->tmp, xi->n_x, by_x1, c);
    for (int64_t t = 0; t < xi->n_x; t++) xi->x[t] = c[4 * xi->by_x[t]];
}

/* The IoU of boxes i and j in torchvision's expressions (the same float
 * operations in the same order, so the same bits). */
static inline float iou_of(const float *c, const float *area, int64_t i, int64_t j)
{
    const float *ci = c + 4 * i, *cj = c + 4 * j;
    float w = std_max(0.0f, std_min(ci[2], cj[2]) - std_max(ci[0], cj[0]));
    float h = std_max(0.0f, std_min(ci[3], cj[3]) - std_max(ci[1], cj[1]));
    float inter = w * h;
    return inter / (area[i] + area[j] - inter);
}

/* Box i (at rank ii, kept) suppresses a later, unsuppressed box j when
 * their IoU is > iou. */
static inline void suppress(const float *c, const float *area, int64_t i, int64_t j, float iou, unsigned char *supp)
{
    if (iou_of(c, area, i, j) > iou) supp[j] = 1;
}

/* A near-tie record's state in one NonMaxSuppression run (op.h,
 * bf__nms_sample): the margins, and the highest score a decision within
 * them involved so far. */
typedef struct nms_note {
    const struct bf_nms_ties *m;
    const float *s;    /* the class's scores */
    int tie;
    float score;
    int class_tie;            /* the class in hand had one */
    unsigned char *seed;      /* per box: in a near decision of the class in hand */
    unsigned char *hit;       /* per box: a root of a component holding a seed (note_region) */
    int64_t *parent;          /* per box: its overlap component (union-find), -1 not a candidate */
} nms_note;

static int within(const struct bf_nms_ties *m, float a, float b)
{
    double mag = fabs(a) > fabs(b) ? fabs(a) : fabs(b), tol = m->rtol * mag > m->atol ? m->rtol * mag : m->atol;
    return isfinite(a) && isfinite(b) && fabs((double)a - (double)b) <= tol;
}

/* A decision within rounding at box i's score, between boxes i and j (-1:
 * box i alone, at the score threshold). */
static void note(nms_note *nt, int64_t i, int64_t j)
{
    float score = nt->s[i];
    if (!nt->tie || score > nt->score) nt->score = score;
    nt->tie = nt->class_tie = 1;
    nt->seed[i] = 1;
    if (j >= 0) nt->seed[j] = 1;
}

/* suppress, and whether the decision was within rounding: box j suppressed
 * by i at a score within rounding of i's (either could have been kept: from
 * i's score on), or an IoU within the margin of the threshold (j's fate:
 * from j's score on). Only when recording. */
static void suppress_noted(const float *c, const float *area, int64_t i, int64_t j, float iou, unsigned char *supp,
                           nms_note *nt)
{
    float ovr = iou_of(c, area, i, j);
    if (ovr > iou) supp[j] = 1;
    if (supp[j] && within(nt->m, nt->s[i], nt->s[j])) note(nt, i, j);
    if (fabs((double)ovr - (double)iou) <= nt->m->iou && isfinite(nt->s[j])) note(nt, j, i);
}

static inline void suppress_one(const float *c, const float *area, int64_t i, int64_t j, float iou, unsigned char *supp,
                                nms_note *nt)
{
    if (nt) suppress_noted(c, area, i, j, iou, supp, nt);
    else suppress(c, area, i, j, iou, supp);
}

static void suppress_after(const x_index *xi, const int64_t *order, int64_t m, int64_t ii, const float *c,
                           const float *area, float iou, unsigned char *supp, nms_note *nt)
{
    int64_t i = order[ii];
    const float *ci = c + 4 * i;
    if (!(isfinite(ci[0]) && isfinite(ci[1]) && isfinite(ci[2]) && isfinite(ci[3]))) {
        for (int64_t jj = ii + 1; jj < m; jj++)   /* as the kernel: every later box */
            if (!supp[order[jj]]) suppress_one(c, area, i, order[jj], iou, supp, nt);
        return;
    }
    double from = (double)ci[0] - xi->width, to = (double)ci[2];
    from -= 1e-6 * (fabs(from) + xi->width) + 1e-30;
    int64_t lo = 0, hi = xi->n_x;
    while (lo < hi) {   /* the first indexed box with x1 >= from */
        int64_t mid = lo + (hi - lo) / 2;
        if (xi->x[mid] < from) lo = mid + 1;
        else hi = mid;
    }
    for (int64_t t = lo; t < xi->n_x && xi->x[t] <= to; t++) {
        int64_t j = xi->by_x[t];
        if (xi->rank[j] > ii && !supp[j]) suppress_one(c, area, i, j, iou, supp, nt);
    }
}

static int64_t find_root(int64_t *parent, int64_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

static void unite(int64_t *parent, int64_t i, int64_t j)
{
    i = find_root(parent, i);
    j = find_root(parent, j);
    if (i != j) parent[i < j ? j : i] = i < j ? i : j;
}

static int corners_finite(const float *c, int64_t i)
{
    return isfinite(c[4 * i]) && isfinite(c[4 * i + 1]) && isfinite(c[4 * i + 2]) && isfinite(c[4 * i + 3]);
}

/* How far a near tie of the class in hand reaches (op.h, bf__nms_sample.
 * region; tests/fixtures/README.md, "NMS near-ties", has the argument).
 * Greedy NMS keeps a box iff no kept box of higher score overlaps it past
 * the threshold, so a box's fate depends on the boxes linked to it by such
 * overlaps alone. Another engine's IoUs are within the margin of ours, so
 * its links are among ours at IoU >= threshold - margin (edge): the
 * components of those links decide apart, and one with no near decision
 * (no seed) decides as here. Appends to rec the scores of every candidate
 * (above the score threshold, or a seed at it) in a component with a seed;
 * every candidate when all (the class's max_output_boxes_per_class was
 * reached: a component's count moves the cap) or when edge <= 0 (every
 * pair linked) or when a candidate has a non-finite corner (its IoUs are
 * NaN or 0 here, and may not be elsewhere). The pairs are found by the x
 * index as suppress_after finds them (boxes sorted by x1: a later box
 * overlaps in x only with x1 <= this x2). */
static bf_status note_region(nms_note *nt, const float *c, const float *area, const int64_t *order, int64_t m,
                             const x_index *xi, int64_t nbox, double edge, int all, bf__nms_sample *rec)
{
    int64_t *parent = nt->parent, first = -1;
    unsigned char *listed = nt->hit;   /* first: in the order */
    memset(listed, 0, (size_t)nbox);
    for (int64_t i = 0; i < nbox; i++) parent[i] = -1;
    for (int64_t ii = 0; ii < m; ii++) parent[order[ii]] = order[ii], listed[order[ii]] = 1;
    for (int64_t i = 0; i < nbox; i++) {
        if (nt->seed[i]) parent[i] = i;
        if (parent[i] >= 0 && !corners_finite(c, i)) all = 1;
    }
    for (int64_t i = 0; i < nbox; i++) {
        if (parent[i] < 0) continue;
        if (first < 0) first = i;
        if (all || !(edge > 0)) unite(parent, first, i);
    }
    for (int64_t t = 0; t < xi->n_x; t++) {
        int64_t i = xi->by_x[t];
        double x2 = c[4 * i + 2];
        for (int64_t u = t + 1; u < xi->n_x && xi->x[u] <= x2; u++)
            if ((double)iou_of(c, area, i, xi->by_x[u]) >= edge) unite(parent, i, xi->by_x[u]);
    }
    for (int64_t i = 0; i < nbox; i++) {   /* seeds under the score threshold: not in the x index */
        if (parent[i] < 0 || listed[i]) continue;
        for (int64_t j = 0; j < nbox; j++)
            if (parent[j] >= 0 && j != i && (double)iou_of(c, area, i, j) >= edge) unite(parent, i, j);
    }
    memset(nt->hit, 0, (size_t)nbox);
    for (int64_t i = 0; i < nbox; i++)
        if (nt->seed[i]) nt->hit[find_root(parent, i)] = 1;
    for (int64_t i = 0; i < nbox; i++) {
        if (parent[i] < 0 || !nt->hit[find_root(parent, i)]) continue;
        if (rec->n_region == rec->cap_region) {
            int64_t cap = rec->cap_region ? 2 * rec->cap_region : 64;
            float *g = (size_t)cap <= SIZE_MAX / sizeof *g ? bf__realloc(rec->region, (size_t)cap * sizeof *g) : NULL;
            if (!g) return BF_ENOMEM;
            rec->region = g;
            rec->cap_region = cap;
        }
        rec->region[rec->n_region++] = nt->s[i];
    }
    return BF_OK;
}

typedef struct nms_limits {
    int64_t max_out;
    float iou, score;
    int have_score;
} nms_limits;

static bf_status read_limits(const bf__node *n, const bf_tensor *const *in, int n_in, nms_limits *l,
                             bf_error *err)
{
    memset(l, 0, sizeof *l);
    if (n_in > 2 && in[2] && bf_tensor_numel(in[2]) == 1)
        l->max_out = in[2]->dtype == BF_I32 ? ((const int32_t *)in[2]->data)[0] : ((const int64_t *)in[2]->data)[0];
    if (n_in > 3 && in[3] && bf_tensor_numel(in[3]) == 1) {
        l->iou = ((const float *)in[3]->data)[0];
        if (!(l->iou >= 0.0f && l->iou <= 1.0f))
            return bf__node_error(err, n, BF_EINVAL, "iou_threshold is %g; it must be in [0, 1]", (double)l->iou);
    }
    if (n_in > 4 && in[4] && bf_tensor_numel(in[4]) == 1) {
        l->score = ((const float *)in[4]->data)[0];
        l->have_score = 1;
    }
    return BF_OK;
}

/* The selection. out NULL: count only; else up to cap rows into out.
 * rec (NULL but when the caller records them): this run's near ties. */
static bf_status nms_select(const bf__node *n, const bf_tensor *const *in, int n_in, int center, int torch,
                            void *scratch, int64_t *out, int64_t cap, int64_t *count, const struct bf_nms_ties *ties,
                            bf__nms_sample *rec, bf_error *err)
{
    nms_limits l;
    bf_status st = read_limits(n, in, n_in, &l, err);
    if (st) return st;
    int64_t nb = in[0]->dims[0], nbox = in[0]->dims[1], ncls = in[1]->dims[1], rows = 0;
    *count = 0;
    if (l.max_out <= 0 || nbox <= 0) return BF_OK;
    int64_t *order = scratch, *tmp = order + nbox;
    float *c = (float *)(tmp + nbox), *area = c + 4 * nbox;
    unsigned char *supp = (unsigned char *)(area + nbox);
    x_index xi;
    xi.rank = (int64_t *)(((uintptr_t)(supp + nbox) + 63) & ~(uintptr_t)63);
    xi.by_x = xi.rank + nbox;
    xi.tmp = xi.by_x + nbox;
    xi.x = (double *)(xi.tmp + nbox);
    bf__kv *kv = (bf__kv *)(((uintptr_t)(xi.x + nbox) + 63) & ~(uintptr_t)63);
    torch = torch && nbox > TORCH_VANILLA_BOXES && out;
    const float *boxes = in[0]->data, *scores = in[1]->data;
    nms_note note_at = {.m = ties}, *nt = rec && ties ? &note_at : NULL;
    if (nt) {   /* recording: the per-box flags and components (note_region) */
        rec->n_region = 0;
        nt->parent = bf__malloc((size_t)nbox * (2 + sizeof(int64_t)));
        if (!nt->parent) return bf__node_error(err, n, BF_ENOMEM, "out of memory for the NMS near-ties of %lld boxes",
                                               (long long)nbox);
        nt->seed = (unsigned char *)(nt->parent + nbox);
        nt->hit = nt->seed + nbox;
    }
    for (int64_t b = 0; b < nb && !st; b++) {
        corners(boxes + b * nbox * 4, nbox, center, c, area);
        for (int64_t k = 0; k < ncls && !st; k++) {
            const float *s = scores + (b * ncls + k) * nbox;
            int64_t m = 0, kept = 0, row0 = rows;
            for (int64_t i = 0; i < nbox; i++)
                if (!l.have_score || s[i] > l.score) order[m++] = i;
            if (nt) {
                nt->s = s;
                nt->class_tie = 0;
                memset(nt->seed, 0, (size_t)nbox);
            }
            if (nt && l.have_score)   /* a box in or out by rounding at the score threshold */
                for (int64_t i = 0; i < nbox; i++)
                    if (within(ties, s[i], l.score)) note(nt, i, -1);
            merge_sort(order, tmp, m, by_score, s);
            x_build(&xi, order, m, c);
            memset(supp, 0, (size_t)nbox);
            for (int64_t ii = 0; ii < m && kept < l.max_out; ii++) {
                int64_t i = order[ii];
                if (supp[i]) continue;
                if (out) {
                    if (rows == cap) {
                        if (nt) bf__free(nt->parent);
                        return bf__node_error(err, n, BF_EINVAL, "its inputs changed since it was prepared "
                                              "(more than %lld boxes selected)", (long long)cap);
                    }
                    out[3 * rows] = b; out[3 * rows + 1] = k; out[3 * rows + 2] = i;
                }
                rows++;
                if (++kept == l.max_out) break;
                suppress_after(&xi, order, m, ii, c, area, l.iou, supp, nt);
            }
            if (torch) torch_vanilla_order(out + 3 * row0, rows - row0, s, kv);
            if (nt && nt->class_tie &&
                (st = note_region(nt, c, area, order, m, &xi, nbox, (double)l.iou - ties->iou, kept == l.max_out, rec)))
                break;   /* out of memory: reported below, after the record is closed */
        }
    }
    *count = rows;
    if (nt) {   /* the sample's record: an earlier run's tie stays (op.h) */
        rec->earlier |= rec->runs && rec->last;
        rec->runs++;
        rec->last = nt->tie;
        rec->score = nt->score;
        bf__free(nt->parent);
    }
    if (st) return bf__node_error(err, n, BF_ENOMEM, "out of memory for the NMS near-ties' region");
    return BF_OK;
}

/* Optional input i, if present and not empty: one value of an allowed dtype. */
static bf_status want_scalar(const bf__prep *p, int i, const char *what, int ints, bf_error *err)
{
    const bf_tensor *t = p->n_in > i ? p->in[i] : NULL;
    if (!t || bf_tensor_numel(t) == 0) return BF_OK;
    int ok = ints ? (t->dtype == BF_I64 || t->dtype == BF_I32) : t->dtype == BF_F32;
    if (!ok)
        return bf__node_error(err, p->node, BF_EFORMAT, "%s is %s; it must be %s", what, bf_dtype_name(t->dtype),
                              ints ? "int64" : "float32");
    if (bf_tensor_numel(t) != 1)
        return bf__node_error(err, p->node, BF_ESHAPE, "%s holds %lld values; it must hold one", what,
                              (long long)bf_tensor_numel(t));
    return BF_OK;
}

static bf_status nms_prepare(bf__prep *p, bf_error *err)
{
    const bf__node *n = p->node;
    nms_params *np = (nms_params *)p->params;
    char a[64], b[64];
    bf_status st;
    if ((st = bf__need_inputs(p, 2, err)) || (st = bf__want_f32(p, 0, "boxes", err)) ||
        (st = bf__want_f32(p, 1, "scores", err)))
        return st;
    const bf_tensor *bx = p->in[0], *sc = p->in[1];
    if (bx->ndim != 3 || bx->dims[2] != 4)
        return bf__node_error(err, n, BF_ESHAPE, "boxes are %s; they must be [batches, boxes, 4]",
                              bf_shape_str(bx->dims, bx->ndim, a, sizeof a));
    if (sc->ndim != 3 || sc->dims[0] != bx->dims[0] || sc->dims[2] != bx->dims[1])
        return bf__node_error(err, n, BF_ESHAPE, "scores are %s with boxes %s; they must be [batches, classes, "
                              "boxes] with the boxes' batches and boxes",
                              bf_shape_str(sc->dims, sc->ndim, a, sizeof a), bf_shape_str(bx->dims, bx->ndim, b, sizeof b));
    if ((st = bf__check_dims(n, "scores", sc->ndim, sc->dims, err)) ||
        (st = want_scalar(p, 2, "max_output_boxes_per_class", 1, err)) ||
        (st = want_scalar(p, 3, "iou_threshold", 0, err)) || (st = want_scalar(p, 4, "score_threshold", 0, err)))
        return st;
    int64_t center;
    if ((st = bf__attr_int(n, "center_point_box", 0, &center, err))) return st;
    if (center != 0 && center != 1)
        return bf__node_error(err, n, BF_EINVAL, "center_point_box is %lld; it must be 0 or 1", (long long)center);
    if (bx->dims[1] > (int64_t)(SIZE_MAX / 64))
        return bf__node_error(err, n, BF_ESHAPE, "%lld boxes is too many", (long long)bx->dims[1]);
    memset(np, 0, sizeof *np);
    np->center = (int)center;
    np->torch = p->tie_order == BF_TIE_ORDER_PYTORCH;
    p->scratch = nms_scratch(bx->dims[1], np->torch);
    for (int i = 0; i < p->n_in && i < 5; i++) {
        if (!p->in[i] || p->in[i]->data || bf_tensor_numel(p->in[i]) == 0) continue;
        if (p->at_run)
            return bf__node_error(err, n, BF_EINVAL, "input %d has no data when prepared at run time", i);
        p->data_dependent = 1;   /* the output's shape is the data: prepared again at run time */
        return BF_OK;
    }
    if (p->at_run && p->run_alloc) {
        /* once: the selection into the arena, its rows after the work area
         * (at most one per box, class and batch), for run to copy */
        nms_limits l;
        if ((st = read_limits(n, p->in, p->n_in, &l, err))) return st;
        int64_t per = l.max_out <= 0 ? 0 : l.max_out < bx->dims[1] ? l.max_out : bx->dims[1];
        int64_t cap = bx->dims[0] * sc->dims[1] * per;   /* scores' elements bound it (check_dims) */
        size_t work = (nms_scratch(bx->dims[1], np->torch) + 63) & ~(size_t)63;
        if (cap > (int64_t)((SIZE_MAX - work) / (3 * sizeof(int64_t))))
            return bf__node_error(err, n, BF_ESHAPE, "%lld candidate rows is too many", (long long)cap);
        void *buf;
        if ((st = p->run_alloc(p->run_ctx, work + (size_t)cap * 3 * sizeof(int64_t), "NonMaxSuppression's selection",
                               &buf, err)))
            return st;
        int64_t *rows = (int64_t *)((unsigned char *)buf + work);
        if ((st = nms_select(n, p->in, p->n_in, np->center, np->torch, buf, rows, cap, &np->count, p->nms, p->nms_at,
                             err)))
            return st;
        np->sel = rows;
        p->scratch = 0;
    } else {
        void *scratch = bf__aligned_alloc(p->scratch);
        if (!scratch) return bf__node_error(err, n, BF_ENOMEM, "out of memory for %lld boxes", (long long)bx->dims[1]);
        st = nms_select(n, p->in, p->n_in, np->center, np->torch, scratch, NULL, 0, &np->count, p->nms, p->nms_at, err);
        bf__free(scratch);
        if (st) return st;
    }
    np->known = 1;
    int64_t dims[2] = {np->count, 3};
    bf__set_shape(p->out[0], BF_I64, 2, dims);
    return BF_OK;
}

static bf_status nms_run(const bf__ctx *c, bf_error *err)
{
    const nms_params *np = c->params;
    const bf_tensor *o = c->out[0];
    if (!np->known)
        return bf__node_error(err, c->node, BF_EUNSUPPORTED, "its output's shape is the number of boxes it keeps, "
                              "which depends on the data, and this plan did not prepare it again when the data "
                              "was there");
    if (o->ndim != 2 || o->dims[0] != np->count || o->dims[1] != 3)
        return bf__node_error(err, c->node, BF_EINVAL, "its output is not the [%lld, 3] it was prepared for",
                              (long long)np->count);
    if (np->sel) {   /* selected when prepared, this run */
        if (np->count) memcpy(o->data, np->sel, (size_t)np->count * 3 * sizeof(int64_t));
        return BF_OK;
    }
    int64_t got;
    bf_status st = nms_select(c->node, c->in, c->n_in, np->center, np->torch, c->scratch, o->data, np->count, &got, NULL,
                              NULL, err);
    if (st) return st;
    if (got != np->count)
        return bf__node_error(err, c->node, BF_EINVAL, "its inputs changed since it was prepared (%lld boxes "
                              "selected, %lld then)", (long long)got, (long long)np->count);
    return BF_OK;
}

const bf__op bf__ops_detect[] = {
    {"NonMaxSuppression", 2, 5, 1, 1, 0, nms_prepare, nms_run},
    {"RoiAlign", 3, 3, 1, 1, 0, bf__roialign_prepare, bf__roialign_run},
    {0},
};
