/* bitflip — mitigations: what a protection recovers of the damage a fault
 * does, measured on the same faults as the unprotected model.
 *
 * A mitigation configuration is a named set of protections, any of:
 *
 * - clip: activation clipping (Ranger, FT-ClipAct). After chosen node
 *   outputs (default: every Gemm, MatMul and Conv output except the ones
 *   that are graph outputs) values outside [lo, hi] are clamped to the bound
 *   (clamp) or set to 0 (zero); NaN optionally to 0. Bounds are fixed, or
 *   profiled per node on the golden pass over the eval set: min/max, or a
 *   percentile p (hi = the p-th, lo = the (100 - p)-th).
 *
 * - abft: Huang-Abraham checksums on every Gemm, MatMul with a stored
 *   second operand, and Conv (as a GEMM). Each output row's sum (per group
 *   for a grouped Conv) is checked against the input times the column sums
 *   of the golden weights, computed when the model is prepared, so a
 *   corrupted stored weight is caught and not only a compute error; a second,
 *   weighted checksum (channel c counted c + 1 times) locates the channel. The
 *   tolerance is k * (2K + C) * u * sum|a||b| per check (u = 2^-24, K the
 *   inner dimension, C the channels checked). detect: any mismatch makes the
 *   trial DUE (a real system would re-execute). correct: mismatches confined
 *   to one channel per row are fixed from the checksum; anything else is
 *   recomputed from the op's inputs, and what still fails is DUE.
 *
 * - sbp: selective bit protection, as ECC on chosen bits: faults on the
 *   protected bit positions of the chosen tensors are corrected (default:
 *   sign and exponent of every weight: fp32 bits 31-23, fp16 15-10, bf16
 *   15-7, int8 7). Storage cost: protected bits over all bits.
 *
 * - ecc: SECDED over 64-bit words of the stored weights, a (72,64) Hsiao
 *   code: two fp32, four fp16/bf16 or eight int8 values per word in the
 *   tensor's memory order (int<m>/uint<m>: floor(64 / m), packed from bit 0;
 *   a tensor's last word zero-padded), 8 check bits each. After the faults
 *   each word is decoded: one wrong bit (data or check) is corrected, what
 *   the code calls uncorrectable (every double error) makes the trial DUE,
 *   and three or more can be miscorrected or pass unseen. Check bits take
 *   faults too with BER (check_bits_faulty). Storage cost: 8 bits per 64.
 *
 * - range: a weight range check at load: a stored value outside its tensor's
 *   range (profiled: the golden tensor's min/max; or declared) is set to 0
 *   (zero) or makes the trial DUE (flag).
 *
 * Clipping and ABFT change the graph (bf__mitigate_model inserts internal
 * nodes after the ones they protect); sbp, ecc and range act on the faults
 * before they reach the model. A configuration with none of them is the
 * unprotected model. */
#ifndef BITFLIP_MITIGATE_H
#define BITFLIP_MITIGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_clip_bounds {
    BF_CLIP_PROFILE = 0,      /* min/max (percentile 100) or a percentile of the golden pass */
    BF_CLIP_FIXED             /* lo, hi as given */
} bf_clip_bounds;

typedef struct bf_clip_opts {
    int enabled;
    bf_clip_bounds bounds;
    double percentile;        /* PROFILE: 100 = min/max */
    float lo, hi;             /* FIXED */
    int zero;                 /* out-of-range values to 0 instead of to the bound */
    int nan_to_zero;
    char **at;                /* node output names, globs or "op:Type"; NULL: the default placement */
    size_t n_at;
} bf_clip_opts;

typedef struct bf_abft_opts {
    int enabled;
    int correct;              /* else detect */
    double k;                 /* tolerance factor; 0: BF_ABFT_K_DEFAULT */
} bf_abft_opts;

#define BF_ABFT_K_DEFAULT 2.0

typedef struct bf_sbp_opts {
    int enabled;
    char **tensors;           /* patterns as in the fault spec; NULL: every tensor */
    size_t n_tensors;
    int positions[64];        /* n_positions 0: sign and exponent of the representation */
    int n_positions;
} bf_sbp_opts;

/* bf_ecc_opts.check_bits_faulty */
enum {
    BF_ECC_CHECK_DEFAULT = 0,  /* faulty with model "ber" (they flip at the rate), clean otherwise */
    BF_ECC_CHECK_FAULTY,       /* "ber" only: a single-element fault is drawn in a weight */
    BF_ECC_CHECK_CLEAN
};

typedef struct bf_ecc_opts {
    int enabled;
    int check_bits_faulty;    /* BF_ECC_CHECK_* */
    char **tensors;           /* patterns as in the fault spec; NULL: every tensor */
    size_t n_tensors;
} bf_ecc_opts;

typedef struct bf_range_opts {
    int enabled;
    int declared;             /* lo, hi given; else each tensor's golden min/max */
    float lo, hi;
    int flag;                 /* out of range: the trial is DUE; else the value is set to 0 */
} bf_range_opts;

typedef struct bf_mitigation {
    char *name;               /* "none", "clip", ... as the spec names it */
    bf_clip_opts clip;
    bf_abft_opts abft;
    bf_sbp_opts sbp;
    bf_range_opts range;
    bf_ecc_opts ecc;
} bf_mitigation;

/* Frees the members, not the struct. */
void bf_mitigation_free(bf_mitigation *m);

#ifdef __cplusplus
}
#endif
#endif
