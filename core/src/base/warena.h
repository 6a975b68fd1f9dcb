/* The weights arena: one block of memory holding a model's large
 * initializers, each at a page-aligned offset, read-only once loaded.
 *
 * Two needs pull apart. Golden eval reads rows at random from tables of
 * hundreds of MiB (a DLRM's embeddings): with 4 KiB pages it is TLB-bound,
 * and only anonymous private memory gets transparent huge pages where
 * shared memory gets none (`shmem_enabled` is often `never`; anonymous THP
 * `madvise` is the common default). A plan that writes faults wants the
 * opposite: a private view of a tensor's pages (MAP_PRIVATE of a file), so
 * that the kernel copies only the pages written (a fault costs a page, not
 * a copy of the table it lands in) and N plans do not hold N copies; only a
 * file (a memfd) can be mapped privately more than once.
 *
 * So the arena starts anonymous (MAP_PRIVATE | MAP_ANONYMOUS, aligned to
 * 2 MiB, MADV_HUGEPAGE where asked for), and the first view asked of a range moves that
 * range, and only it, into a memfd: its pages are written once to the file
 * at the same offsets, then the file is mapped shared at a fresh address
 * and that mapping moved over the range's addresses in one call (mremap,
 * MREMAP_FIXED; read-only again once sealed). Every pointer into the arena
 * stays valid and reads the same bytes throughout (the kernel swaps the
 * mapping under its mmap lock: a reader in another thread faults in the
 * file's page, which holds the same bytes); views map
 * the file privately as before. What was moved is remembered a page at a
 * time, under a mutex (workers ask for views concurrently). Where the
 * arena was made with huge pages, eval, which asks for no view, keeps them
 * everywhere, and a campaign on every tensor its faults never land in; the
 * loader asks for them only for work that pays their first touch
 * (bf_load_limits.huge_pages). Memory stays one copy: the move
 * frees each anonymous range as the file's replaces it (the file is
 * sparse where nothing moved).
 *
 * Fallbacks: MADV_HUGEPAGE refused (no THP, THP disabled): 4 KiB pages,
 * nothing else changes. No memfd (not Linux, out of descriptors) or the move
 * failing: the view is NULL and the caller copies on the heap as it does
 * without an arena (plan.c) or runs the step (dxparam.c); the arena's bytes
 * and addresses are unchanged (what can fail, the file's mapping, is made
 * away from the range; warena.c, move_run, says what the kernel holds for
 * the swap itself). A range moves 16 MiB at a time, so
 * its bytes are held twice for at most that long. Not on Linux (no memfd)
 * the arena is never made and tensors live on the heap. */
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
 * (no mmap, out of memory): the caller then uses the heap. huge: ask for
 * transparent huge pages (MADV_HUGEPAGE) unless the environment says
 * otherwise (BITFLIP_HUGE_PAGES=0: never, any other value: always); a
 * model's arena takes them only for work that pays their first touch
 * (bf_load_limits.huge_pages). bf__warena_create: huge 1. */
bf__warena *bf__warena_create_opts(size_t bytes, int huge);
bf__warena *bf__warena_create(size_t bytes);
/* Room for `nbytes` at the next page boundary; NULL when it is full. */
void *bf__warena_take(bf__warena *a, size_t nbytes);
/* Makes the whole arena read-only: after loading, a model's tensors never
 * change (a write would also change what private mappings read). */
void bf__warena_seal(bf__warena *a);
void bf__warena_free(bf__warena *a);
int bf__warena_owns(const bf__warena *a, const void *p);
size_t bf__warena_page(void);

/* A private, writable view of the `nbytes` at `data` (inside the arena, at
 * a page boundary); NULL on failure. The first view of a range moves it
 * into the arena's memfd (above); safe while other threads read the arena
 * or ask for views. Free with bf__wview_free(view, nbytes). */
void *bf__wview_create(bf__warena *a, const void *data, size_t nbytes);
/* Bytes of the arena moved into its memfd so far (a page at a time). */
size_t bf__warena_moved(bf__warena *a);
void bf__wview_free(void *view, size_t nbytes);
/* Gives back every page of a view: written (private) and read (the arena's,
 * mapped here too). It reads the arena's contents again: only when it holds
 * exactly those (every fault restored). */
void bf__wview_drop(void *view, size_t nbytes);

/* Gives back a page-aligned range of a read-only file mapping (its pages are
 * read from the file again if touched): how the loader drops what it has
 * converted. */
void bf__pages_drop(void *addr, size_t len);

/* Memory a caller will write whole, and how: the page policy lives here
 * (warena.c) and nowhere else; callers say what they will do with the
 * memory, not which madvise it gets. Flags, or-ed:
 *
 *   BF__WRITE_NOW    every byte written right away (a copy, a read() into
 *                    it, a step's output): its pages faulted in by one
 *                    call (MADV_POPULATE_WRITE, Linux 5.14 and later;
 *                    elsewhere nothing) instead of a fault a page inside
 *                    the copy. On a VM each fresh page traps to the host:
 *                    16 us a page on the Intel benchmark host, where one
 *                    call took half the time for 512 MiB; on the AMD host
 *                    of the eighteenth session first touch runs at 0.05-
 *                    0.27 GB/s, and one call took LRASPP's 88 MB of a
 *                    worker's golden outputs from 1.3-1.5 s to 0.16-0.19 s
 *                    of a loaded setup (docs/perf/detectors.md, h18-seg).
 *                    Only for memory written whole: a slot written by
 *                    rows keeps its untouched pages unmapped.
 *   BF__WRITE_AGAIN  written again and again (each pass, batch or trial):
 *                    a shared eval arena and its scratch, the golden
 *                    pass's pool, a worker's copy of the golden outputs.
 *                    Transparent huge pages (MADV_HUGEPAGE over the whole
 *                    2 MiB pages inside) unless BITFLIP_HUGE_PAGES=0:
 *                    mobilenet_v2's depthwise and panel-packing loads
 *                    stride a plane per row (12.5 KiB at 56x56), a 4 KiB
 *                    page each, and with 2 MiB pages its batch-4 pass took
 *                    15% less CPU (docs/BENCHMARKS.md, h13-mbv2).
 *   BF__WRITE_ONCE   written once, later, by whoever fills it (the golden
 *                    cache's blocks, the partial-sum checkpoints, the
 *                    eval set's tensors as read from its file): huge
 *                    pages only when BITFLIP_HUGE_PAGES is set to other
 *                    than 0. Off by default: an Intel host's compaction on
 *                    each fault tripled the pass's system time, and the
 *                    AMD host measured the campaign within its load's
 *                    noise (docs/perf/trials.md, "Huge pages for the
 *                    golden cache").
 *   BF__WRITE_HUGE   transparent huge pages unless BITFLIP_HUGE_PAGES=0,
 *                    for memory whose first touch is its main cost
 *                    (written once, or first touched by work that then
 *                    reuses it) whose caller found this
 *                    host's 2 MiB pages cheap and its 4 KiB ones dear
 *                    (bf__pages_huge_cheaper, or the caller's bf_host_pages
 *                    measured once a process): the golden checkpoints, the
 *                    golden cache's blocks and partial sums (h22-camp), a
 *                    differential worker's places (diffarena.c, h35-arena)
 *                    and a large eval set on the AMD host, whose 4 KiB first
 *                    touch costs 2.2-3.1 ns a byte and 2 MiB pages' 0.1
 *                    (docs/perf/detectors.md, h21-ssd). Never a default:
 *                    a host that measures otherwise keeps 4 KiB pages.
 *
 * Best effort throughout: a refused madvise leaves ordinary pages and the
 * same bytes. */
enum { BF__WRITE_NOW = 1, BF__WRITE_AGAIN = 2, BF__WRITE_ONCE = 4, BF__WRITE_HUGE = 8 };

/* bf__malloc(len + 1) (+ 1: a 0-byte block is still a block), its pages
 * as `how` says; NULL when the allocation is refused (the countdown
 * allocator's failures included: nothing else is tried). Free with
 * bf__free. */
void *bf__alloc_written(size_t len, unsigned how);

/* The same policy for memory the caller holds already (a slot of an
 * arena, a block from bf__aligned_alloc or bf__calloc, a caller's
 * buffer): [addr, addr + len), its whole pages. */
void bf__pages_written(void *addr, size_t len, unsigned how);

/* What a byte of fresh memory costs this process, in seconds: the thread
 * CPU time of mapping `len` bytes, populating them (BF__WRITE_NOW) and
 * writing each once, over len (about 0.3-0.4 ns a byte on the Intel KVM
 * hosts, 2.3-2.5 on the AMD host whose guest's first write to a page
 * faults to the hypervisor even after the populate: docs/perf/
 * detectors.md, h18-ssd). A measurement, not a constant: callers use it
 * to choose between fixed prices, far from either. 0 where it cannot be
 * measured (no memory, no mmap). */
double bf__pages_fresh_cost(size_t len);
/* The same in transparent huge pages: `len` bytes (rounded up to 2 MiB)
 * on 2 MiB boundaries, MADV_HUGEPAGE before the populate (BF__WRITE_HUGE's
 * pages). 0 where it cannot be measured, or BITFLIP_HUGE_PAGES=0 says no
 * huge pages. */
double bf__pages_fresh_cost_huge(size_t len);
/* Whether memory written once should go in 2 MiB pages on this host
 * (BF__WRITE_HUGE): 1 where 4 KiB fresh pages cost over BF__PAGES_DEAR a
 * byte (bf__pages_fresh_cost over 1 MiB) and 2 MiB ones under
 * BF__PAGES_HUGE_CHEAP (bf__pages_fresh_cost_huge over 2 MiB, the least
 * of three, measured only then); *small, if not NULL, gets the 4 KiB measurement. About 3 ms
 * of CPU where the small pages are dear, 0.4 where not: for callers about
 * to write many MiB. bf__pages_huge_rule: the choice from the two
 * measurements (0: not measured). On the AMD host of h21-ssd 4 KiB pages
 * cost 2.2-3.1 ns a byte, 2 MiB ones 0.08-0.15 (its guest traps to the
 * hypervisor once a page); the Intel KVM hosts' 4 KiB pages 0.3-0.4, not
 * dear, so they never ask for huge ones (docs/perf/trials.md measured
 * compaction there). */
#define BF__PAGES_DEAR 1.2e-9
#define BF__PAGES_HUGE_CHEAP 0.6e-9
int bf__pages_huge_cheaper(double *small);
int bf__pages_huge_rule(double small_cost, double huge_cost);
/* Whether memory written once goes in 2 MiB pages by the caller's
 * measurement (bitflip/limits.h, bf_host_pages: .huge), or where hp is
 * NULL or not measured by bf__pages_huge_cheaper now (BF__WRITE_HUGE
 * still minds BITFLIP_HUGE_PAGES=0). */
struct bf_host_pages;
int bf__host_pages_huge(const struct bf_host_pages *hp);

#endif
