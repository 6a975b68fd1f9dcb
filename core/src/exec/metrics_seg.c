/* The segmentation task's layout and metrics (metrics_seg.h).
 *
 * mIoU follows the VOC devkit and torchvision's references/segmentation
 * ConfusionMatrix: one confusion matrix over every labelled pixel of the
 * eval set (ignored pixels left out), IoU per class diag / (row + column -
 * diag), averaged over the classes whose union is not empty (torchvision's
 * iu.mean() would be NaN for such a class; the VOC devkit and mmseg's
 * nanmean leave it out, as we do). Pixel accuracy is torchvision's
 * acc_global: the diagonal over the total. Labels outside [0, C) other than
 * 255 are an error here, where torchvision would drop them silently. */
#include "exec/metrics_seg.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/alloc.h"
#include "base/simd.h"

int bf__seg_layout(const bf_tensor *labels, const bf_tensor *out) { return labels->ndim == 3 && out->ndim == 4; }

void bf__seg_free(bf__seg *seg)
{
    if (!seg) return;
    bf__free(seg->own);
    bf__free(seg->cm);
    bf__free(seg->pred);
    bf__free(seg);
}

bf_status bf__seg_create(const bf_tensor *l, const bf_tensor *o, const char *out_name, int64_t n, bf__seg **out,
                         bf_error *err)
{
    char a[96], b[96];
    *out = NULL;
    if (l->dtype != BF_I64 && l->dtype != BF_I32 && l->dtype != BF_U8)
        return bf_error_set(err, BF_EFORMAT, "eval tensor 'labels' is %s; a segmentation eval set's labels are class ids, "
                                             "int64 (or int32, uint8) [N, H, W]", bf_dtype_name(l->dtype));
    if (o->dims[2] != l->dims[1] || o->dims[3] != l->dims[2] || o->dims[1] < 1)
        return bf_error_set(err, BF_ESHAPE, "eval tensor 'labels' has shape %s (segmentation: [N, H, W]) but output '%s' has "
                                            "shape %s; it must be [N, C, H, W] with the labels' H and W",
                            bf_shape_str(l->dims, l->ndim, a, sizeof a), out_name, bf_shape_str(o->dims, o->ndim, b, sizeof b));
    bf__seg *s = bf__calloc(1, sizeof *s);
    if (!s) return bf_error_set(err, BF_ENOMEM, "out of memory for labels");
    s->n = n;
    s->C = o->dims[1];
    s->HW = l->dims[1] * l->dims[2];
    size_t cells = (size_t)(n * s->HW);
    /* int64 labels are read where the eval set holds them: a copy was 8 MB
     * of fresh pages for LRASPP's 16 images at 256x256, written once and
     * only read after (docs/perf/detectors.md, h19-det) */
    int in_place = l->dtype == BF_I64 && (uintptr_t)l->data % _Alignof(int64_t) == 0;
    if (!in_place) s->own = bf__malloc(cells * sizeof(int64_t) + 1);
    s->labels = in_place ? (const int64_t *)l->data : s->own;
    s->cm = bf__malloc((size_t)(s->C * s->C) * sizeof(int64_t));
    s->pred = bf__malloc((size_t)s->HW * sizeof(int32_t) + 1);
    bf_status st = BF_OK;
    if (!s->labels || !s->cm || !s->pred) st = bf_error_set(err, BF_ENOMEM, "out of memory for labels");
    if (st == BF_OK && !in_place) st = bf_convert(s->own, BF_I64, l->data, l->dtype, cells, err);
    for (size_t i = 0; st == BF_OK && i < cells; i++) {
        int64_t y = s->labels[i];
        if (y == BF_SEG_IGNORE) continue;
        if (y < 0 || y >= s->C)
            st = bf_error_set(err, BF_ERANGE, "labels[%lld, %lld, %lld] is class %lld but output '%s' scores %lld classes "
                                              "(255 marks an ignored pixel)",
                              (long long)(i / (size_t)s->HW), (long long)(i % (size_t)s->HW / (size_t)l->dims[2]),
                              (long long)(i % (size_t)l->dims[2]), (long long)y, out_name, (long long)s->C);
        s->labelled++;
    }
    if (st == BF_OK && s->labelled == 0)
        st = bf_error_set(err, BF_EINVAL, "eval tensor 'labels' labels no pixel: every entry is 255 (ignored), so there is "
                                          "nothing to measure");
    if (st != BF_OK) {
        bf__seg_free(s);
        return st;
    }
    *out = s;
    return BF_OK;
}

/* Plane by plane, so the loads run along memory, a chunk of pixels at a
 * time: per pixel the best value so far (where the old loop read it back
 * from the plane of the best class, a load from another plane per element
 * that kept it scalar: 5% of a segmenter campaign's CPU), and its class. A
 * NaN best stays (nothing compares greater than it); a NaN value replaces
 * a number; else strictly greater: torch.argmax's rule (test_seg_task).
 * Eight pixels at a time on AVX2, the same comparisons as masks. */
#define SEG_CHUNK 512
static void chunk_ref(const float *x, int64_t C, int64_t HW, int64_t k0, int64_t n, float *best, int32_t *pr)
{
    for (int64_t c = 1; c < C; c++)
        for (int64_t k = k0; k < n; k++) {
            float b = best[k], v = x[c * HW + k];
            if (!isnan(b) && (isnan(v) || v > b)) best[k] = v, pr[k] = (int32_t)c;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int64_t chunk_avx2(const float *x, int64_t C, int64_t HW, int64_t n,
                                                          float *best, int32_t *pr)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 b = _mm256_loadu_ps(best + k);
        __m256i p = _mm256_loadu_si256((const __m256i *)(const void *)(pr + k));
        for (int64_t c = 1; c < C; c++) {
            __m256 v = _mm256_loadu_ps(x + c * HW + k);
            __m256 up = _mm256_and_ps(_mm256_cmp_ps(b, b, _CMP_ORD_Q),
                                      _mm256_or_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(v, b, _CMP_GT_OQ)));
            b = _mm256_blendv_ps(b, v, up);
            p = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(p),
                                                     _mm256_castsi256_ps(_mm256_set1_epi32((int32_t)c)), up));
        }
        _mm256_storeu_ps(best + k, b);
        _mm256_storeu_si256((__m256i *)(void *)(pr + k), p);
    }
    return k;
}
#endif

void bf__seg_argmax(const float *x, int64_t C, int64_t HW, int32_t *pred)
{
    float best[SEG_CHUNK];
#if defined(__x86_64__) && defined(__GNUC__)
    int avx2 = bf__simd_avx2();
#endif
    for (int64_t p0 = 0; p0 < HW; p0 += SEG_CHUNK) {
        int64_t n = HW - p0 < SEG_CHUNK ? HW - p0 : SEG_CHUNK, k = 0;
        int32_t *pr = pred + p0;
        memcpy(best, x + p0, (size_t)n * sizeof *best);
        for (int64_t i = 0; i < n; i++) pr[i] = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        if (avx2) k = chunk_avx2(x + p0, C, HW, n, best, pr);
#endif
        chunk_ref(x + p0, C, HW, k, n, best, pr);
    }
}

int64_t bf__seg_changed(const float *x, const int32_t *pred, int64_t C, int64_t HW)
{
    int64_t moved = 0;
    for (int64_t p = 0; p < HW; p++) {
        /* the arg-max of column p, as bf__seg_argmax finds it */
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++) {
            float b = x[best * HW + p], v = x[c * HW + p];
            if (!isnan(b) && (isnan(v) || v > b)) best = c;
        }
        moved += best != pred[p];
    }
    return moved;
}

void bf__seg_confusion(int64_t *cm, int64_t C, const int64_t *labels, const int32_t *pred, int64_t HW, int sign)
{
    for (int64_t p = 0; p < HW; p++)
        if (labels[p] != BF_SEG_IGNORE) cm[labels[p] * C + pred[p]] += sign;
}

void bf__seg_metrics(const int64_t *cm, int64_t C, double *miou, double *pixel_accuracy)
{
    int64_t diag = 0, total = 0, classes = 0;
    double sum = 0;
    for (int64_t k = 0; k < C; k++) {
        int64_t tp = cm[k * C + k], row = 0, col = 0;
        for (int64_t j = 0; j < C; j++) row += cm[k * C + j], col += cm[j * C + k];
        diag += tp;
        total += row;
        int64_t uni = row + col - tp;
        if (uni == 0) continue;   /* neither labelled nor predicted: left out */
        sum += (double)tp / (double)uni;
        classes++;
    }
    *miou = classes ? sum / (double)classes : NAN;
    *pixel_accuracy = total ? (double)diag / (double)total : NAN;
}

void bf__seg_score_keep(bf__seg *s, const float *outputs, int32_t *keep, double *miou, double *pixel_accuracy)
{
    memset(s->cm, 0, (size_t)(s->C * s->C) * sizeof *s->cm);
    for (int64_t i = 0; i < s->n; i++) {
        int32_t *pred = keep ? keep + i * s->HW : s->pred;
        bf__seg_argmax(outputs + i * s->C * s->HW, s->C, s->HW, pred);
        bf__seg_confusion(s->cm, s->C, s->labels + i * s->HW, pred, s->HW, 1);
    }
    bf__seg_metrics(s->cm, s->C, miou, pixel_accuracy);
}

void bf__seg_score(bf__seg *s, const float *outputs, double *miou, double *pixel_accuracy)
{
    bf__seg_score_keep(s, outputs, NULL, miou, pixel_accuracy);
}

void bf_metric_segmentation(const float *logits, const int64_t *labels, int64_t n, int64_t C, int64_t HW, int64_t *cm,
                            int32_t *pred, double *miou, double *pixel_accuracy)
{
    bf__seg s = {.n = n, .C = C, .HW = HW, .labels = labels, .cm = cm, .pred = pred};
    bf__seg_score(&s, logits, miou, pixel_accuracy);
}

int64_t bf_metric_seg_changed(const float *a, const float *b, int64_t n, int64_t C, int64_t HW)
{
    /* b's arg-max column by column against a's, without scratch */
    int64_t moved = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *x = a + i * C * HW, *y = b + i * C * HW;
        for (int64_t p = 0; p < HW; p++) {
            int64_t ba = 0, bb = 0;
            for (int64_t c = 1; c < C; c++) {
                float u = x[ba * HW + p], v = x[c * HW + p];
                if (!isnan(u) && (isnan(v) || v > u)) ba = c;
                u = y[bb * HW + p], v = y[c * HW + p];
                if (!isnan(u) && (isnan(v) || v > u)) bb = c;
            }
            moved += ba != bb;
        }
    }
    return moved;
}
