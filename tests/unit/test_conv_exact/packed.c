/* test_conv_exact: W packed once, the padding taps left out where that is exact. */
#include "exec/ops/sgemm.h"
#include "test_conv_exact.h"

/* W packed once, as a plan passes the model's copy of a weight to the
 * step (bf__ctx.packed; base/wpack.h): the output-channel lanes kernels
 * (linalg_conv_bcast.c; linalg_conv_pwlanes.c for 1x1) then read that
 * copy instead of packing W a chunk at a time, and on AVX2 the panels'
 * product reads W reordered once (bf__conv_reorder: the "3x3 stride 1"
 * cases must take it there) instead of reordering it per call; every
 * other path ignores it. Every case on every CPU path, bare, with an activation, and with a
 * residual as the Add's A (Relu) and as its B (alone): the reference's
 * bits, as without the copy. Where the CPU has AVX-512, the "bcast:" and
 * "1x1 lanes:" cases (row blocks of 4, 3, 2 vectors, K in chunks, groups)
 * must have taken the copy, but for a "bcast:" case with an Inf weight,
 * whose copy is refused; at AVX2 the "bcast:" cases too (linalg_conv_bcast8.c's
 * copy, rows in blocks of 16). With the copy the bcast kernel leaves the padding
 * taps out (bc_sched), so the reference's chain, which computes them, is
 * what shows that this is exact, the -0 cases above where it would not be. */
void conv_packed_weights_match_reference(void **state)
{
    (void)state;
    const char *levels[] = {"ref", "avx2", "avx512"};   /* not unset too: the head comment */
    static const bf__act relu = {.lo = 0.0f, .hi = INFINITY}, none = {.lo = -INFINITY, .hi = INFINITY};
    for (size_t i = 0; i < n_cases; i++) {
        prepared p = case_get(i);
        const conv_case *k = p.k;
        case_run cr;
        case_run_of(&p, &cr);
        bf_tensor r = th_tensor_rand(15, 4, cr.od);
        float *want = malloc(sizeof(float) * (size_t)p.numel + 1);
        assert_non_null(want);
        for (int l = 0; l < 3; l++)
            for (int form = 0; form < 4; form++) {
                if (l < 2 && !half_here(i, l, form)) continue;   /* every form at AVX-512, where the copy is read */
                /* 0 bare, 1 an activation, 2 the residual as A then Relu, 3 as B alone */
                const bf__act *act = form == 1 ? &acts[i % n_acts] : form == 2 ? &relu : form == 3 ? &none : NULL;
                const float *rv = form >= 2 ? r.data : NULL;
                for (int64_t e = 0; e < p.numel; e++) {
                    float v = p.ref[e], a = rv ? rv[e] : 0.0f;
                    /* the Add's own expression; no NaN here in the residual, so the order shows only in -0 */
                    if (rv) v = form == 2 ? a + v : v + a;
                    want[e] = act ? ref_act(act, v) : v;
                }
                bf_tensor out;
                bf_error err = {0};
                int took = 0;
                if (levels[l]) setenv("BITFLIP_SIMD", levels[l], 1);
                else unsetenv("BITFLIP_SIMD");
                bf_status stt = th_run_conv_wpk(cr.ca.a, 5, cr.in, cr.nin, &out, act, rv, form == 2, &took, &err);
                unsetenv("BITFLIP_SIMD");
                if (stt != BF_OK) fail_msg("%s, W packed once: %s", k->what, err.msg);
                /* the bcast kernel's copy refuses a W with an Inf (linalg_conv_bcast.c,
                 * bc_sched: its calls then compute every padding tap) */
                int bc = !strncmp(k->what, "bcast:", 6);
                if ((bc || !strncmp(k->what, "1x1 lanes:", 10)) && (!levels[l] || !strcmp(levels[l], "avx512")) &&
                    bf__sgemm_best() >= BF_SGEMM_AVX512 && took != !(bc && k->special == 1))
                    fail_msg("%s: %s of W packed once at AVX-512", k->what, took ? "a copy" : "no copy");
                if (levels[l] && !strcmp(levels[l], "avx2") && bf__sgemm_best() >= BF_SGEMM_AVX2 &&
                    !strncmp(k->what, "3x3 stride 1", 12) && !took)
                    fail_msg("%s: no copy of W reordered at AVX2", k->what);
                /* linalg_conv_bcast8.c reads its own copy (row blocks of 16) at AVX2 */
                if (bc && levels[l] && !strcmp(levels[l], "avx2") && bf__sgemm_best() >= BF_SGEMM_AVX2 &&
                    took != (k->special != 1))
                    fail_msg("%s: %s of W packed once at AVX2", k->what, took ? "a copy" : "no copy");
                const float *got = out.data;
                for (int64_t e = 0; e < p.numel; e++)
                    if (memcmp(&got[e], &want[e], sizeof(float)) != 0)
                        fail_msg("%s, W packed once (BITFLIP_SIMD=%s, form %d, copy %s): element %lld is %.9g, the "
                                 "reference %.9g", k->what, levels[l] ? levels[l] : "unset", form, took ? "taken" : "none",
                                 (long long)e, got[e], want[e]);
                th_free(&out, 1);
            }
        free(want);
        th_tensor_free(&r);
    }
}
