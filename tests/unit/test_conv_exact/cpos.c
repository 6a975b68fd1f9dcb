/* test_conv_exact: a list of output positions computed alone (op.h,
 * bf__cpos; the differential engine's diffpos.c). */
#include "base/simd.h"
#include "exec/ops/sgemm.h"
#include "test_conv_exact.h"

/* position q of the case's n x oh x ow is listed (sel 0: about a third,
 * the map's corners and edges among them, where the padding taps a
 * position leaves out differ; 1: every position; 2: none; 3: the first
 * image's first position and the last image's last) */
static int listed(const prepared *p, int sel, int64_t q)
{
    int64_t all = p->k->n * p->oh * p->ow;
    if (sel == 1) return 1;
    if (sel == 2) return 0;
    if (sel == 3) return q == 0 || q == all - 1;
    return (q * 2654435761u >> 7) % 3 == 0 || q % p->ow == 0 || q % (p->oh * p->ow) < p->ow;
}

/* a unit 1x1 of one group with a bias on maps of at most 1024 positions:
 * the 1x1 product on gathered columns takes its lists (linalg_conv_pwlist.c),
 * but for the maps of 256-1024 positions in 32s that pws takes first on
 * AVX-512 (left out here: no case of those maps is unit and of a list) */
static int gathered(const conv_case *k)
{
    int64_t osp = k->h * k->w;
    return k->kh == 1 && k->kw == 1 && k->s == 1 && !k->pads[0] && !k->pads[1] && !k->pads[2] && !k->pads[3] &&
           k->group == 1 && k->bias && osp <= 1024 && !(osp >= 256 && osp % 32 == 0);
}

/* Does case k's kernel take a list at level l (0: AVX2, 1: AVX-512) on
 * this CPU: the "bcast:" cases' (linalg_conv_bcast.c and its AVX2 half)
 * wherever the CPU has AVX2; the 1x1 lanes' (linalg_conv_pwlanes.c: its
 * own cases, and the product's 7x7 shape it takes with a list alone) at
 * AVX-512 on a CPU that has it; the other unit 1x1s (gathered) at either
 * level on a CPU with AVX2. *kind: 1, 2, 3 for the three, 0 for none. */
static int takes_list(const conv_case *k, int l, int *kind)
{
    int lanes = strncmp(k->what, "1x1 lanes:", 10) == 0 || strncmp(k->what, "1x1 lanes' list:", 16) == 0;
    int avx2 = bf__sgemm_best() >= BF_SGEMM_AVX2, avx512 = l == 1 && bf__simd_cpu() >= BF_SGEMM_AVX512;
    *kind = strncmp(k->what, "bcast:", 6) == 0 ? 1 : lanes && avx512 ? 2 : gathered(k) ? 3 : lanes ? 2 : 0;
    return *kind == 1 || *kind == 3 ? avx2 : *kind == 2 && avx512;
}

/* Every case of the three kernels that take a list (takes_list), at AVX2
 * and AVX-512, with W packed once (the padding taps left out, where the
 * case allows) and without, bare and with a residual (the Add's A) and a
 * Relu: each listed position's every channel has the reference's bits,
 * as the whole step gives them, and every other float keeps the bytes
 * the output held (the golden output the engine put there). A list that
 * is every position, none, or two lone ones, too. Where the CPU has the
 * kernel's level the step must have taken the list (cpos.used); elsewhere
 * the Conv takes another path, which computes every position, so only the
 * listed ones are checked. */
void conv_positions_match_reference(void **state)
{
    (void)state;
    const char *levels[] = {"avx2", "avx512"};
    static const bf__act relu = {.lo = 0.0f, .hi = INFINITY};
    int ran = 0, lanes = 0, gather = 0, kind;
    for (size_t i = 0; i < n_cases; i++) {
        (void)takes_list(&cases[i], 1, &kind);
        if (!kind) continue;
        prepared p = case_get(i);
        const conv_case *k = p.k;
        case_run cr;
        case_run_of(&p, &cr);
        bf_tensor r = th_tensor_rand(17, 4, cr.od);
        int64_t osp = p.oh * p.ow, all = k->n * osp;
        int32_t *q = malloc(sizeof(int32_t) * (size_t)all + 1);
        float *want = malloc(sizeof(float) * (size_t)p.numel + 1);
        /* the 1x1 product's gather room, as the engine sizes it */
        int64_t nwork = (k->c + 2 * k->m) * osp;
        float *work = malloc(sizeof(float) * (size_t)nwork);
        assert_non_null(q);
        assert_non_null(want);
        assert_non_null(work);
        for (int l = 0; l < 2; l++)
            for (int form = 0; form < 2; form++)
                for (int wpk = 0; wpk < 2; wpk++)
                    for (int sel = 0; sel < 4; sel++) {
                        if (!half_here(i, l, form * 8 + wpk * 4 + sel)) continue;
                        int64_t nq = 0;
                        for (int64_t e = 0; e < all; e++)
                            if (listed(&p, sel, e)) q[nq++] = (int32_t)e;
                        const bf__act *act = form ? &relu : NULL;
                        const float *rv = form ? r.data : NULL;
                        for (int64_t e = 0; e < p.numel; e++)
                            want[e] = rv ? ref_act(act, rv[e] + p.ref[e]) : p.ref[e];
                        bf__cpos cpos = {q, nq, 0, work, nwork};
                        bf_tensor out;
                        bf_error err = {0};
                        int took = 0;
                        setenv("BITFLIP_SIMD", levels[l], 1);
                        bf_status st = th_run_conv_pos(cr.ca.a, 5, cr.in, cr.nin, &out, act, rv, 1, wpk ? &took : NULL,
                                                       &cpos, &err);
                        unsetenv("BITFLIP_SIMD");
                        if (st != BF_OK) fail_msg("%s, positions: %s", k->what, err.msg);
                        if (takes_list(k, l, &kind) && !cpos.used)
                            fail_msg("%s (BITFLIP_SIMD=%s, list %d): the step left the list", k->what, levels[l], sel);
                        ran += cpos.used;
                        lanes += cpos.used && kind == 2;
                        gather += cpos.used && kind == 3;
                        const uint32_t *got = out.data;
                        for (int64_t e = 0; e < p.numel; e++) {
                            int64_t img = e / (k->m * osp), at = img * osp + e % osp;
                            uint32_t fill, wb;
                            memset(&fill, POS_FILL, sizeof fill);
                            memcpy(&wb, &want[e], sizeof wb);
                            int in = listed(&p, sel, at);
                            if (in ? memcmp(&got[e], &want[e], sizeof(float)) != 0 : cpos.used && got[e] != fill)
                                fail_msg("%s (BITFLIP_SIMD=%s, form %d, copy %s, list %d): element %lld (position "
                                         "%lld, %s) is %08x, %s %08x",
                                         k->what, levels[l], form, took ? "taken" : "none", sel, (long long)e,
                                         (long long)at, in ? "listed" : "not listed", (unsigned)got[e],
                                         in ? "the reference" : "left as", in ? wb : fill);
                        }
                        th_free(&out, 1);
                    }
        free(q), free(want), free(work);
        th_tensor_free(&r);
    }
    if (bf__sgemm_best() >= BF_SGEMM_AVX2) assert_true(ran > 0);
    if (bf__simd_cpu() >= BF_SGEMM_AVX512) assert_true(lanes > 0);
    if (bf__sgemm_best() >= BF_SGEMM_AVX2) assert_true(gather > 0);
}
