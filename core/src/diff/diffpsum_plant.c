/* Planted errors in the partial-sum resume's checkpoints (diff_plant.h),
 * for tests only: test_diff_psum.c corrupts what a prepared golden pass
 * saved and asserts that some trial's record then differs from the exact
 * engine's. Kept out of diffpsum.c and of linalg_conv_bcast.c's loop, so
 * the product's code carries no branch for them. */
#include "diff/diff_impl.h"
#include "diff/diff_plant.h"

/* checkpoint set c (n of slab floats each) corrupted as `kind` says */
static int plant_one(float *c, int64_t n, size_t slab, int kind)
{
    if (kind == BF__PSUM_PLANT_WRONG_CHUNK && n >= 2) {
        /* new[0] = old[1], new[k] = old[k - 1]: float by float, no buffer */
        for (size_t j = 0; j < slab; j++) {
            float second = c[slab + j];
            for (int64_t k = n - 1; k >= 1; k--) c[(size_t)k * slab + j] = c[(size_t)(k - 1) * slab + j];
            c[j] = second;
        }
        return 1;
    }
    if (kind == BF__PSUM_PLANT_LATE && n >= 2) {
        memmove(c, c + slab, sizeof(float) * slab * (size_t)(n - 1));
        return 1;
    }
    if (kind == BF__PSUM_PLANT_EARLY) {
        /* a position's 64 sums (one row block's channels) are one record;
         * the last of every BF__PSUM_PLANT_EVERY records, each checkpoint
         * from the last down so the one before it is still the golden one */
        for (int64_t k = n - 1; k >= 0; k--)
            for (size_t q = BF__PSUM_PLANT_EVERY - 1; (q + 1) * 64 <= slab; q += BF__PSUM_PLANT_EVERY) {
                float *at = c + (size_t)k * slab + q * 64;
                if (k > 0) memcpy(at, at - slab, sizeof(float) * 64);
                else memset(at, 0, sizeof(float) * 64);
            }
        return 1;
    }
    return 0;
}

int64_t bf__dx_shared_psum_plant(bf__dx_shared *sh, int kind)
{
    int64_t sets = 0;
    for (size_t i = 0; sh && sh->ps && i < sh->n_steps; i++)
        for (int64_t b = 0; b < sh->n_batches; b++) {
            int64_t n;
            size_t slab;
            float *c = bf__psum_saved(sh->ps, i, b, &n, &slab);
            if (c) sets += plant_one(c, n, slab, kind);
        }
    return sets;
}
