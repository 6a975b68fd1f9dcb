/* Tests only: planted errors in the differential engine's saved state, so
 * that a test shows its comparison against the exact engine would catch
 * one (tests/unit/test_diff_psum.c). Nothing in the product calls these:
 * they live behind this internal header, out of the public API and out of
 * the kernels' loops, and act on what a prepared golden pass left before
 * the trials read it. */
#ifndef BF_DIFF_PLANT_H
#define BF_DIFF_PLANT_H

#include <stddef.h>
#include <stdint.h>

struct bf__dx_shared;
struct bf__psum_store;

/* The partial-sum resume's checkpoints (diffpsum.c; docs/ENGINE.md, "The
 * partial-sum resume"), corrupted once the golden pass saved them:
 *   WRONG_CHUNK  each checkpoint replaced by its chunk's neighbour's (the
 *                one before it, the first by the second): a resume loads the
 *                sums of another chunk than the one before c's;
 *   LATE         each checkpoint but the last replaced by the next one: a
 *                resume starts from sums that already hold c's chunk, which
 *                it then adds again;
 *   EARLY        at one position in BF__PSUM_PLANT_EVERY of each checkpoint,
 *                the sums before its chunk's adds (the checkpoint before it,
 *                the first's +0): a save made before the chunk finished.
 * Returns the (step, batch) checkpoint sets it changed (0: none saved, or
 * one chunk boundary too few for WRONG_CHUNK and LATE). */
enum { BF__PSUM_PLANT_WRONG_CHUNK = 1, BF__PSUM_PLANT_LATE, BF__PSUM_PLANT_EARLY };
#define BF__PSUM_PLANT_EVERY 6
int64_t bf__dx_shared_psum_plant(struct bf__dx_shared *sh, int kind);

/* diffpsum.c: step i's checkpoints of batch b as the golden pass saved
 * them, *n of *slab floats one after another (checkpoint k: the sums after
 * chunk k, laid out as op.h's bf__psum says); NULL when it saved none. */
float *bf__psum_saved(const struct bf__psum_store *ps, size_t i, int64_t b, int64_t *n, size_t *slab);

#endif
