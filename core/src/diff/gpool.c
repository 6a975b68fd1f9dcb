/* The golden pass's pools, kept past the pass for the differential
 * workers' places (diff.h; docs/engine/exactness.md).
 *
 * The pass writes the values the cache does not keep into one pool a plan,
 * shared by lifetime (gcache.c, pool_values), and used to free it just
 * before the workers were made; each worker then mapped fresh memory for
 * its own places (diffarena.c), and on this AMD guest a fresh page costs
 * the guest's zeroing and the host's first touch: resnet18's one layer1
 * trial, the first to write ~150 MB of places, took 1.04-1.20 s for ~0.84 s
 * of compute (docs/perf/trials/resnet18.md, h38-pool). So the pool is
 * reserved with room for its plan's whole arena (the places are laid out
 * inside those bytes, so they fit; address space only, a page mapped when
 * written), kept, and taken by the worker of the same plan, which gives
 * back the room past its places. Growing the pool to the places' size
 * afterwards instead (realloc, mremap) moved its page tables: 0.47 s.
 *
 * A handful of entries (two plans a golden thread), found by plan. */
#include "base/alloc.h"
#include "diff/diff_impl.h"

struct bf__gpools {
    int n, cap;
    struct gpool {
        const bf_plan *plan;
        void *mem;
        size_t bytes;
    } *e;
};

void *bf__gpool_reserve(const bf_plan *p, size_t bytes, size_t *room)
{
    size_t arena = bf_plan_arena_bytes(p) + 64;
    void *mem = arena > bytes ? bf__aligned_alloc(arena) : NULL;
    *room = mem ? arena : bytes;
    /* the room refused (RLIMIT_AS, a job's --job-memory): the pool alone */
    return mem ? mem : bf__aligned_alloc(bytes);
}

bf__gpools *bf__gpools_new(int n)
{
    bf__gpools *g = bf__calloc(1, sizeof *g);
    if (g && !(g->e = bf__calloc((size_t)n + 1, sizeof *g->e))) bf__free(g), g = NULL;
    if (g) g->cap = n;
    return g;
}

int bf__gpools_put(bf__gpools *g, const bf_plan *p, void *mem, size_t bytes)
{
    if (!g || !p || !mem || g->n >= g->cap) return 0;
    g->e[g->n++] = (struct gpool){p, mem, bytes};
    return 1;
}

static struct gpool *find(const bf__gpools *g, const bf_plan *p)
{
    for (int i = 0; g && p && i < g->n; i++)
        if (g->e[i].plan == p && g->e[i].mem) return &g->e[i];
    return NULL;
}

void *bf__gpools_take(bf__gpools *g, const bf_plan *p, size_t *bytes)
{
    struct gpool *e = find(g, p);
    if (!e) return NULL;
    void *mem = e->mem;
    *bytes = e->bytes;
    e->mem = NULL;
    return mem;
}

const void *bf__gpools_peek(const bf__gpools *g, const bf_plan *p, size_t *bytes)
{
    const struct gpool *e = find(g, p);
    if (!e) return NULL;
    *bytes = e->bytes;
    return e->mem;
}

void bf__gpools_drop(bf__gpools *g)
{
    for (int i = 0; g && i < g->n; i++) {
        bf__free(g->e[i].mem);
        g->e[i].mem = NULL;
    }
}

void bf__gpools_free(bf__gpools *g)
{
    if (!g) return;
    bf__gpools_drop(g);
    bf__free(g->e);
    bf__free(g);
}
