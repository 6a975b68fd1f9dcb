/* Packed copies of a model's weights (wpack.h). */
#include <pthread.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/grow.h"
#include "base/warena.h"
#include "base/wpack.h"

/* The copies are carved, 64-byte aligned, one after the other, from slabs
 * of at least WP_SLAB bytes on 2 MiB boundaries whose pages are asked to be
 * 2 MiB ones (bf__pages_written, BF__WRITE_AGAIN: unless
 * BITFLIP_HUGE_PAGES=0), as the shared arena's are: a pass reads every copy
 * once, front to back, and in 4 KiB pages (one bf__aligned_alloc a copy)
 * ViT-S/16's 85 MB of copies are 21,000 pages, a page walk every 4 KiB of
 * a weight's stream. On the AMD host of issue 33 that made ViT-S/16's
 * weight products 1.25-1.6x slower in the pass than the same step run
 * again in place, and 1.00-1.08x in 2 MiB pages (docs/perf/vit.md, h26-gemm).
 * A slab's pages are touched only as copies fill them, so a model with
 * small weights holds little more than it did. */
#define WP_HUGE ((size_t)2 << 20)
#define WP_SLAB ((size_t)32 << 20)

typedef struct wp_slab {
    void *raw;    /* as allocated (bf__free) */
    char *base;   /* raw rounded up to 2 MiB */
    size_t len, used;
} wp_slab;

typedef struct wp_entry {
    const void *src;
    uint64_t tag;
    float *data;      /* NULL: fill refused it; asked again, refused again */
    size_t floats;
} wp_entry;

struct bf__wpack {
    pthread_mutex_t mu;
    wp_entry *e;
    size_t n, cap, bytes;
    wp_slab *slab;
    size_t ns, scap;
};

/* `bytes` (rounded up to 64) from the last slab, or a new one; NULL: no memory */
static float *slab_take(bf__wpack *w, size_t bytes)
{
    size_t need = (bytes + 63) & ~(size_t)63;
    if (need < bytes) return NULL;
    wp_slab *l = w->ns ? &w->slab[w->ns - 1] : NULL;
    if (l && l->len - l->used >= need) {
        float *d = (float *)(void *)(l->base + l->used);
        l->used += need;
        return d;
    }
    if (!bf__grow(&w->slab, &w->scap, w->ns + 1, sizeof *w->slab, 4)) return NULL;
    size_t len = need > WP_SLAB ? (need + WP_HUGE - 1) & ~(WP_HUGE - 1) : WP_SLAB;
    if (len < need || len > SIZE_MAX - WP_HUGE) return NULL;
    void *raw = bf__malloc(len + WP_HUGE);
    if (!raw) return NULL;
    char *base = (char *)(((uintptr_t)raw + WP_HUGE - 1) & ~(uintptr_t)(WP_HUGE - 1));
    bf__pages_written(base, len, BF__WRITE_AGAIN);
    w->slab[w->ns++] = (wp_slab){.raw = raw, .base = base, .len = len, .used = need};
    return (float *)(void *)base;
}

/* the last copy taken, given back (its fill refused it) */
static void slab_untake(bf__wpack *w, size_t bytes)
{
    w->slab[w->ns - 1].used -= (bytes + 63) & ~(size_t)63;
}

bf__wpack *bf__wpack_create(void)
{
    bf__wpack *w = bf__calloc(1, sizeof *w);
    if (!w) return NULL;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        bf__free(w);
        return NULL;
    }
    return w;
}

void bf__wpack_free(bf__wpack *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->ns; i++) bf__free(w->slab[i].raw);
    bf__free(w->slab);
    bf__free(w->e);
    pthread_mutex_destroy(&w->mu);
    bf__free(w);
}

const float *bf__wpack_get(bf__wpack *w, const void *src, uint64_t tag, size_t floats,
                           int (*fill)(const void *ctx, float *out), const void *ctx)
{
    if (!w || !src || !floats) return NULL;
    const float *r = NULL;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->n; i++)
        if (w->e[i].src == src && w->e[i].tag == tag && w->e[i].floats == floats) {
            r = w->e[i].data;
            goto out;
        }
    if (!bf__grow(&w->e, &w->cap, w->n + 1, sizeof *w->e, 16)) goto out;
    /* 64-byte aligned, as a panel in the step's scratch is */
    float *d = floats <= SIZE_MAX / sizeof(float) ? slab_take(w, floats * sizeof(float)) : NULL;
    if (d && !fill(ctx, d)) {
        slab_untake(w, floats * sizeof(float));
        d = NULL;
    }
    if (!d) goto out;   /* not remembered: a later plan may find memory */
    w->e[w->n++] = (wp_entry){.src = src, .tag = tag, .data = d, .floats = floats};
    w->bytes += floats * sizeof(float);
    r = d;
out:
    pthread_mutex_unlock(&w->mu);
    return r;
}

size_t bf__wpack_bytes(bf__wpack *w)
{
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    size_t b = w->bytes;
    pthread_mutex_unlock(&w->mu);
    return b;
}
