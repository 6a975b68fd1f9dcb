/* bitflip — profiled bit-error maps: which cells of a chip's memory fail,
 * and how, at one supply voltage, so a campaign replays the measured pattern
 * (fault model "profiled"; docs/CAMPAIGNS.md, "Profiled error maps").
 *
 * The memory is `rows` x `cols` bits; cell (r, c) is number r * cols + c.
 * A map lists the failing cells by kind: a `flip` cell reads back the
 * opposite of what was written, a stuck-at-0 / stuck-at-1 cell always reads
 * 0 / 1 (so it corrupts only the weights' bits that differ from it).
 *
 * File format (".bfmap"; little-endian):
 *
 *   bytes 0..7    the magic "BFERRMAP"
 *   bytes 8..15   H, an unsigned 64-bit length
 *   next H bytes  a JSON object (UTF-8), flat: "format": 1, "rows", "cols",
 *                 "flip", "stuck_at_0", "stuck_at_1" (the number of cells of
 *                 each kind), and optionally "voltage" (a number), "chip"
 *                 and "note" (strings); nothing else
 *   then          the flip cells, then the stuck-at-0 cells, then the
 *                 stuck-at-1 cells: one unsigned 64-bit cell number each,
 *                 strictly ascending within a kind, every one < rows * cols,
 *                 no cell in two kinds; the file ends there
 *
 * A list, not a bitmap: at the paper's rates (at most a few percent of the
 * cells fail) it is the smaller of the two, and its size is what loading
 * allocates, checked against the file's size before any allocation.
 *
 * How a map is laid over a campaign's weights: the weights' stored bits are
 * concatenated in memory order — sites in campaign order (the model's
 * initializers in file order, as bf_campaign_sites lists them), elements
 * row-major within a tensor, each element's m bits from bit 0 (least
 * significant) to bit m-1 — and weight bit j sits in cell (j + offset) mod
 * (rows * cols). A model larger than the memory wraps around it (the map
 * repeats), as Stutz et al. lay a model over a profiled array; the offset is
 * drawn per trial (per repeat) from the campaign's seed. */
#ifndef BITFLIP_ERRMAP_H
#define BITFLIP_ERRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bf_cell_kind {
    BF_CELL_FLIP = 0,
    BF_CELL_STUCK_AT_0,
    BF_CELL_STUCK_AT_1,
    BF_CELL_KINDS
} bf_cell_kind;

typedef struct bf_errmap {
    int64_t rows, cols;
    uint64_t *cells[BF_CELL_KINDS];   /* ascending cell numbers */
    int64_t n[BF_CELL_KINDS];
    double voltage;                   /* NaN when the header has none */
    char *chip;                       /* NULL when the header has none */
} bf_errmap;

/* What a loader accepts (0 fields: the defaults below). Every one is a
 * `--limit errmap.KEY=VALUE` of the CLI and bitflipd (docs/LIMITS.md). */
typedef struct bf_errmap_limits {
    int64_t max_header_bytes;   /* errmap.header-bytes */
    int64_t max_cells;          /* errmap.cells: failing cells of all kinds */
    int64_t max_bits;           /* errmap.bits: rows * cols */
} bf_errmap_limits;

#define BF_LIMIT_EM_HEADER_BYTES_DEFAULT ((int64_t)64 << 10)   /* 64 KiB */
#define BF_LIMIT_EM_CELLS_DEFAULT ((int64_t)1 << 24)           /* 128 MiB of cell numbers */
#define BF_LIMIT_EM_BITS_DEFAULT ((int64_t)1 << 40)            /* a 128 GiB memory */

bf_errmap_limits bf_errmap_limits_resolve(const bf_errmap_limits *lim);

/* Loads a map from a file or from memory; on failure *out is NULL and err
 * names the file, the byte offset or header field, and what is wrong
 * (BF_EFORMAT), or the limit (BF_ELIMIT). */
bf_status bf_errmap_load_file(const char *path, const bf_errmap_limits *lim, bf_errmap **out, bf_error *err);
bf_status bf_errmap_load_memory(const void *buf, size_t len, const bf_errmap_limits *lim, bf_errmap **out,
                                bf_error *err);
void bf_errmap_free(bf_errmap *m);

/* Failing cells of every kind. */
int64_t bf_errmap_cells(const bf_errmap *m);

#ifdef __cplusplus
}
#endif
#endif
