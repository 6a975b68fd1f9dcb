/* The weights arena: one anonymous shared-memory file (memfd) holding a
 * model's large initializers, each at a page-aligned offset. The model reads
 * it through a read-only shared mapping; a plan that must change a parameter
 * (a fault, a stored representation) maps that tensor's pages privately
 * (MAP_PRIVATE): the kernel copies only the pages written, so a fault costs a
 * page, not a copy of the table it lands in, and N plans do not hold N copies
 * of the model. Where memfd is missing (not Linux) the arena is never made and
 * tensors live on the heap, copied whole as before. */
#ifndef BF_WARENA_H
#define BF_WARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct bf__warena bf__warena;

/* Tensors smaller than this stay on the heap: a private copy of them is
 * cheaper than a mapping, and a page each would waste memory on models
 * with thousands of small initializers. */
#define BF__WARENA_MIN_BYTES ((size_t)64 << 10)

/* An arena of `bytes` (rounded up to pages); NULL when none can be made
 * (no memfd, out of memory): the caller then uses the heap. */
bf__warena *bf__warena_create(size_t bytes);
/* Room for `nbytes` at the next page boundary; NULL when it is full. */
void *bf__warena_take(bf__warena *a, size_t nbytes);
/* Makes the whole arena read-only: after loading, a model's tensors never
 * change (a write would also change what private mappings read). */
void bf__warena_seal(bf__warena *a);
void bf__warena_free(bf__warena *a);
int bf__warena_owns(const bf__warena *a, const void *p);
size_t bf__warena_page(void);

/* A private, writable view of the `nbytes` at `data` (inside the arena);
 * NULL on failure. Free with bf__wview_free(view, nbytes). */
void *bf__wview_create(const bf__warena *a, const void *data, size_t nbytes);
void bf__wview_free(void *view, size_t nbytes);
/* Gives back every page of a view: written (private) and read (the arena's,
 * mapped here too). It reads the arena's contents again: only when it holds
 * exactly those (every fault restored). */
void bf__wview_drop(void *view, size_t nbytes);

/* Gives back a page-aligned range of a read-only file mapping (its pages are
 * read from the file again if touched): how the loader drops what it has
 * converted. */
void bf__pages_drop(void *addr, size_t len);

/* Faults in the whole pages of [addr, addr + len) for writing, in one call
 * (MADV_POPULATE_WRITE, Linux 5.14 and later; elsewhere nothing): memory
 * about to be written whole. A fault a page costs on some VMs as much as
 * a few KiB of arithmetic (16 us a page on the benchmark host, where one
 * call took half the time for 512 MiB); best effort, no error. */
void bf__pages_populate(void *addr, size_t len);

/* Asks for transparent huge pages over the whole 2 MiB pages inside
 * [addr, addr + len) (MADV_HUGEPAGE; elsewhere nothing): memory that every
 * pass touches again, a plan's shared arena and scratch (`bitflip eval`).
 * mobilenet_v2's depthwise and panel-packing loads stride a plane per row
 * (12.5 KiB at 56x56), a 4 KiB page each: with 2 MiB pages its batch-4 pass
 * took 15% less CPU (docs/BENCHMARKS.md, h13-mbv2). Not for the golden
 * cache, written once (gcache.c: compaction on each fault cost more). Best
 * effort, no error. */
void bf__pages_huge(void *addr, size_t len);

#endif
