/* Profiled bit-error maps (bitflip/errmap.h): a magic, a flat JSON header
 * read with jansson, then three ascending lists of 64-bit cell numbers.
 * Hand-written framing, as for safetensors (dataset.c): no library reads
 * this layout, and it is a few checks. Maps come from chips and uploads, so
 * the header is bounded before it is read, the declared counts are checked
 * against the file's size before anything is allocated for them, and every
 * cell is checked (ascending, inside the memory, in one kind only). */
#include "bitflip/errmap.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"

#define MAGIC "BFERRMAP"
#define PREFIX 16   /* magic and header length */
#define STR_FMT "%.64s"

static const char *const KIND_KEYS[BF_CELL_KINDS] = {"flip", "stuck_at_0", "stuck_at_1"};

bf_errmap_limits bf_errmap_limits_resolve(const bf_errmap_limits *lim)
{
    bf_errmap_limits r = lim ? *lim : (bf_errmap_limits){0};
    if (r.max_header_bytes <= 0) r.max_header_bytes = BF_LIMIT_EM_HEADER_BYTES_DEFAULT;
    if (r.max_cells <= 0) r.max_cells = BF_LIMIT_EM_CELLS_DEFAULT;
    if (r.max_bits <= 0) r.max_bits = BF_LIMIT_EM_BITS_DEFAULT;
    return r;
}

void bf_errmap_free(bf_errmap *m)
{
    if (!m) return;
    for (int k = 0; k < BF_CELL_KINDS; k++) bf__free(m->cells[k]);
    bf__free(m->chip);
    bf__free(m);
}

int64_t bf_errmap_cells(const bf_errmap *m)
{
    return m ? m->n[0] + m->n[1] + m->n[2] : 0;
}

/* Where the bytes come from: a buffer or an open file, read front to back. */
typedef struct src {
    const unsigned char *buf;
    FILE *f;
    uint64_t size, pos;
} src;

static int src_read(src *s, void *dst, size_t n)
{
    if (n > s->size - s->pos) return -1;
    if (s->buf) memcpy(dst, s->buf + s->pos, n);
    else if (n && fread(dst, 1, n, s->f) != n) return -1;
    s->pos += n;
    return 0;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A header count: a JSON integer in [0, max]. */
static bf_status get_count(json_t *h, const char *key, int required, int64_t max, int64_t *out, bf_error *err)
{
    json_t *v = json_object_get(h, key);
    *out = 0;
    if (!v) return required ? bf_error_set(err, BF_EFORMAT, "header: \"%s\" is required", key) : BF_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return bf_error_set(err, BF_EFORMAT, "header: \"%s\" must be an integer from 0 to %" PRId64, key, max);
    *out = (int64_t)json_integer_value(v);
    return BF_OK;
}

static bf_status read_header(src *s, const bf_errmap_limits *lim, bf_errmap *m, bf_error *err)
{
    unsigned char pre[PREFIX];
    if (src_read(s, pre, PREFIX) != 0 || memcmp(pre, MAGIC, 8) != 0)
        return bf_error_set(err, BF_EFORMAT, "not a bitflip error map: it does not start with \"" MAGIC "\" and a "
                                             "header length (docs/CAMPAIGNS.md, Profiled error maps)");
    uint64_t hl = le64(pre + 8);
    if (hl > (uint64_t)lim->max_header_bytes)
        return bf_error_set(err, BF_ELIMIT, "header declares %" PRIu64 " bytes; at most %" PRId64 " are accepted "
                                            "(errmap.header-bytes)", hl, lim->max_header_bytes);
    if (hl > s->size - s->pos)
        return bf_error_set(err, BF_EFORMAT, "header declares %" PRIu64 " bytes but the file has %" PRIu64
                                             " after byte 16: truncated", hl, s->size - s->pos);
    char *text = bf__malloc((size_t)hl + 1);
    if (!text) return bf_error_set(err, BF_ENOMEM, "out of memory for a %" PRIu64 "-byte header", hl);
    if (src_read(s, text, (size_t)hl) != 0) {
        bf__free(text);
        return bf_error_set(err, BF_EIO, "cannot read the %" PRIu64 "-byte header", hl);
    }
    /* flat: one object of scalars, so no nesting for jansson to recurse on */
    int in_str = 0, depth = 0;
    for (uint64_t i = 0; i < hl; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if ((c == '{' || c == '[') && ++depth > 1) {
            bf__free(text);
            return bf_error_set(err, BF_EFORMAT, "header byte %" PRIu64 ": the header is one flat JSON object "
                                                 "(numbers and strings only)", i);
        }
    }
    json_error_t je;
    json_t *h = json_loadb(text, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    bf__free(text);
    if (!h) return bf_error_set(err, BF_EFORMAT, "header is not JSON: %s at header byte %d", je.text, je.position);
    bf_status st = BF_OK;
    const char *key;
    json_t *v;
    if (!json_is_object(h)) {
        st = bf_error_set(err, BF_EFORMAT, "header must be a JSON object");
        goto out;
    }
    json_object_foreach(h, key, v) {
        int known = !strcmp(key, "format") || !strcmp(key, "rows") || !strcmp(key, "cols") || !strcmp(key, "voltage") ||
                    !strcmp(key, "chip") || !strcmp(key, "note");
        for (int k = 0; k < BF_CELL_KINDS; k++) known |= !strcmp(key, KIND_KEYS[k]);
        if (!known) {
            st = bf_error_set(err, BF_EFORMAT, "header: unknown field \"" STR_FMT "\" (the fields are format, rows, "
                                               "cols, flip, stuck_at_0, stuck_at_1, voltage, chip, note)", key);
            goto out;
        }
    }
    int64_t fmt;
    if ((st = get_count(h, "format", 1, INT64_MAX, &fmt, err)) != BF_OK) goto out;
    if (fmt != 1) {
        st = bf_error_set(err, BF_EUNSUPPORTED, "header: format %" PRId64 "; this bitflip reads format 1", fmt);
        goto out;
    }
    if ((st = get_count(h, "rows", 1, INT64_MAX, &m->rows, err)) != BF_OK ||
        (st = get_count(h, "cols", 1, INT64_MAX, &m->cols, err)) != BF_OK)
        goto out;
    if (m->rows < 1 || m->cols < 1) {
        st = bf_error_set(err, BF_EFORMAT, "header: rows and cols must be at least 1, got %" PRId64 " x %" PRId64,
                          m->rows, m->cols);
        goto out;
    }
    if (m->rows > lim->max_bits / m->cols) {
        st = bf_error_set(err, BF_ELIMIT, "header: a memory of %" PRId64 " x %" PRId64 " bits; at most %" PRId64
                                          " bits are accepted (errmap.bits)", m->rows, m->cols, lim->max_bits);
        goto out;
    }
    int64_t total = 0;
    for (int k = 0; k < BF_CELL_KINDS; k++) {
        if ((st = get_count(h, KIND_KEYS[k], 1, INT64_MAX, &m->n[k], err)) != BF_OK) goto out;
        if (m->n[k] > lim->max_cells - total) {
            st = bf_error_set(err, BF_ELIMIT, "header: more than %" PRId64 " failing cells; the limit is %" PRId64
                                              " (errmap.cells)", lim->max_cells, lim->max_cells);
            goto out;
        }
        total += m->n[k];
    }
    if (total > m->rows * m->cols) {
        st = bf_error_set(err, BF_EFORMAT, "header: %" PRId64 " failing cells in a memory of %" PRId64 " cells", total,
                          m->rows * m->cols);
        goto out;
    }
    v = json_object_get(h, "voltage");
    if (v && !json_is_number(v)) {
        st = bf_error_set(err, BF_EFORMAT, "header: \"voltage\" must be a number (volts)");
        goto out;
    }
    m->voltage = v ? json_number_value(v) : NAN;
    v = json_object_get(h, "chip");
    if (v && !json_is_string(v)) {
        st = bf_error_set(err, BF_EFORMAT, "header: \"chip\" must be a string");
        goto out;
    }
    if (v && !(m->chip = bf__strdup(json_string_value(v)))) st = bf_error_set(err, BF_ENOMEM, "out of memory");
    v = json_object_get(h, "note");
    if (v && !json_is_string(v)) st = bf_error_set(err, BF_EFORMAT, "header: \"note\" must be a string");
out:
    json_decref(h);
    return st;
}

static bf_status read_cells(src *s, bf_errmap *m, bf_error *err)
{
    uint64_t total = (uint64_t)bf_errmap_cells(m), left = s->size - s->pos;
    /* total <= max_cells < 2^62: no overflow */
    if (left != total * 8)
        return bf_error_set(err, BF_EFORMAT, "the header lists %" PRIu64 " cells (%" PRIu64 " bytes) but %" PRIu64
                                             " bytes follow it at byte %" PRIu64 ": %s", total, total * 8, left, s->pos,
                            left < total * 8 ? "truncated" : "trailing bytes");
    uint64_t limit = (uint64_t)m->rows * (uint64_t)m->cols;
    for (int k = 0; k < BF_CELL_KINDS; k++) {
        if (!m->n[k]) continue;
        m->cells[k] = bf__malloc((size_t)m->n[k] * sizeof **m->cells);
        if (!m->cells[k]) return bf_error_set(err, BF_ENOMEM, "out of memory for %" PRId64 " cells", m->n[k]);
        uint64_t at = s->pos;
        if (src_read(s, m->cells[k], (size_t)m->n[k] * 8) != 0)
            return bf_error_set(err, BF_EIO, "cannot read the %s cells at byte %" PRIu64, KIND_KEYS[k], at);
        for (int64_t i = 0; i < m->n[k]; i++) {
            uint64_t x = le64((const unsigned char *)&m->cells[k][i]);
            m->cells[k][i] = x;
            if (x >= limit)
                return bf_error_set(err, BF_EFORMAT, "%s cell %" PRId64 " (byte %" PRIu64 ") is %" PRIu64
                                                     ", past the memory's %" PRIu64 " cells", KIND_KEYS[k], i,
                                    at + (uint64_t)i * 8, x, limit);
            if (i > 0 && x <= m->cells[k][i - 1])
                return bf_error_set(err, BF_EFORMAT, "%s cell %" PRId64 " (byte %" PRIu64 ") is %" PRIu64
                                                     ", not above the one before it (%" PRIu64 "): cells ascend",
                                    KIND_KEYS[k], i, at + (uint64_t)i * 8, x, m->cells[k][i - 1]);
        }
    }
    /* one kind per cell: a three-way merge of the ascending lists */
    int64_t i[BF_CELL_KINDS] = {0};
    uint64_t last = 0;
    int have = 0, last_k = 0;
    for (;;) {
        int best = -1;
        for (int k = 0; k < BF_CELL_KINDS; k++)
            if (i[k] < m->n[k] && (best < 0 || m->cells[k][i[k]] < m->cells[best][i[best]])) best = k;
        if (best < 0) break;
        uint64_t x = m->cells[best][i[best]++];
        if (have && x == last)
            return bf_error_set(err, BF_EFORMAT, "cell %" PRIu64 " is both %s and %s: a cell fails one way", x,
                                KIND_KEYS[last_k], KIND_KEYS[best]);
        last = x;
        last_k = best;
        have = 1;
    }
    return BF_OK;
}

static bf_status load(src *s, const bf_errmap_limits *lim_in, bf_errmap **out, bf_error *err)
{
    bf_errmap_limits lim = bf_errmap_limits_resolve(lim_in);
    *out = NULL;
    bf_errmap *m = bf__calloc(1, sizeof *m);
    if (!m) return bf_error_set(err, BF_ENOMEM, "out of memory");
    bf_status st = read_header(s, &lim, m, err);
    if (st == BF_OK) st = read_cells(s, m, err);
    if (st != BF_OK) {
        bf_errmap_free(m);
        return st;
    }
    *out = m;
    return BF_OK;
}

bf_status bf_errmap_load_memory(const void *buf, size_t len, const bf_errmap_limits *lim, bf_errmap **out,
                                bf_error *err)
{
    if (out) *out = NULL;
    if (!out || (!buf && len)) return bf_error_set(err, BF_EINVAL, "bf_errmap_load_memory: no buffer or no result");
    src s = {.buf = buf, .size = len};
    return load(&s, lim, out, err);
}

bf_status bf_errmap_load_file(const char *path, const bf_errmap_limits *lim, bf_errmap **out, bf_error *err)
{
    if (out) *out = NULL;
    if (!path || !out) return bf_error_set(err, BF_EINVAL, "bf_errmap_load_file: no path or no result");
    FILE *f = fopen(path, "rb");
    if (!f) return bf_error_set(err, BF_EIO, "%s: cannot open the error map: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return bf_error_set(err, BF_EIO, "%s: not a regular file", path);
    }
    src s = {.f = f, .size = (uint64_t)sb.st_size};
    bf_status st = load(&s, lim, out, err);
    fclose(f);
    if (st != BF_OK) return bf_error_prefix(err, "%s", path);
    return BF_OK;
}
