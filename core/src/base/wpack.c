/* Packed copies of a model's weights (wpack.h). */
#include <pthread.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/wpack.h"

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
};

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
    for (size_t i = 0; i < w->n; i++) bf__free(w->e[i].data);
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
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        wp_entry *e = bf__realloc(w->e, cap * sizeof *e);
        if (!e) goto out;
        w->e = e, w->cap = cap;
    }
    /* 64-byte aligned, as a panel in the step's scratch is */
    float *d = floats <= SIZE_MAX / sizeof(float) ? bf__aligned_alloc(floats * sizeof(float)) : NULL;
    if (d && !fill(ctx, d)) {
        bf__free(d);
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
