/* Loading an ONNX model: the door check (onnx_limits.c), the large
 * initializers' data cut out (onnx_strip.c), protobuf-c's unpack of the rest,
 * the conversion into our graph (onnx_convert.c, onnx_init.c,
 * onnx_subgraph.c), the nodes sorted and the parameters indexed
 * (graph_index.c); from a caller's buffer or a file mapped read-only.
 * Nothing in the file is trusted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if defined(__unix__)
#include <sys/mman.h>
#endif

#include "base/alloc.h"
#include "base/warena.h"
#include "base/wpack.h"
#include "model/graph.h"
#include "model/onnx_convert.h"
#include "model/onnx_load.h"

/* protobuf-c keeps the whole message in memory; 2 GiB is protobuf's own limit. */
#define MAX_MODEL_BYTES ((size_t)2 << 30)

static bf_status parse(const uint8_t *buf, size_t len, uint8_t *map, int fd, const char *dir, const char *label,
                       const bf_load_limits *lim, bf_model **out, bf_error *err)
{
    bf_status st = BF_OK;
    Onnx__ModelProto *mp = NULL;
    bf_model *m = NULL;
    bf__stripped sp = {0};
    bf__raw_src src = {.map = map, .dir = dir};

    *out = NULL;
    m = bf__calloc(1, sizeof *m);
    if (!m) return bf_error_set(err, BF_ENOMEM, "out of memory");
    m->label = bf__strdup(label ? label : "model");
    if (!m->label) { st = bf_error_set(err, BF_ENOMEM, "out of memory"); goto out; }

    if ((st = bf__onnx_check_limits(buf, len, lim, m->label, err)) != BF_OK) goto out;
    /* the model without its large raw_data, which is then read from buf
     * tensor by tensor; anything unexpected: the whole buffer, as protobuf-c
     * reads it, so that errors read as they always have */
    if ((st = bf__onnx_strip(buf, len, &sp, err)) != BF_OK) goto out;
    if (sp.buf) {
        mp = onnx__model_proto__unpack(NULL, sp.len, sp.buf);
        if (mp && (mp->graph ? mp->graph->n_initializer : 0) == sp.n_ranges) {
            src.ranges = sp.ranges;
            for (size_t i = 0; i < sp.n_ranges; i++) {
                sp.ranges[i].data = buf + sp.ranges[i].off;
                sp.ranges[i].droppable = map != NULL;
                sp.ranges[i].fd = fd;
            }
        } else if (mp) {
            onnx__model_proto__free_unpacked(mp, NULL);
            mp = NULL;
        }
        bf__free(sp.buf);   /* protobuf-c copied what it kept */
        sp.buf = NULL;
    }
    if (!mp) mp = onnx__model_proto__unpack(NULL, len, buf);
    if (!mp) {
        char why[300];
        bf__onnx_diagnose(buf, len, why, sizeof why);
        st = bf_error_set(err, BF_EFORMAT, "%s: not a valid ONNX model (%zu bytes): %s", m->label, len, why);
        goto out;
    }
    m->warena = bf__onnx_arena(mp, src.ranges, lim && lim->huge_pages);
    m->tie_order = lim ? lim->tie_order : BF_TIE_ORDER_ONNX;
    if (m->tie_order != BF_TIE_ORDER_ONNX && m->tie_order != BF_TIE_ORDER_PYTORCH) {
        st = bf_error_set(err, BF_EINVAL, "%s: tie_order %d is neither ONNX (0) nor PYTORCH (1)", m->label, m->tie_order);
        goto out;
    }
    if ((st = bf__onnx_convert(mp, m, &src, err)) != BF_OK) goto out;
    bf__warena_seal(m->warena);
    m->wpack = bf__wpack_create();   /* NULL (no memory): products pack per call */
    if ((st = bf__graph_sort(m, err)) != BF_OK) goto out;
    if ((st = bf__graph_index_params(m, err)) != BF_OK) goto out;
    if ((st = bf__torch_names(m, err)) != BF_OK) goto out;
    *out = m;
    m = NULL;
out:
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    bf__onnx_stripped_free(&sp);
    bf_model_free(m);
    return st;
}

bf_status bf__model_parse(const void *buf, size_t len, const char *label, const bf_load_limits *lim,
                          bf_model **out, bf_error *err)
{
    return parse(buf, len, NULL, -1, NULL, label, lim, out, err);
}

/* The file is mapped read-only, not read into memory: protobuf-c reads the
 * model's structure from it, the initializers are converted from it one by
 * one, and each one's pages are given back once converted (release_file).
 * Peak memory: the model's tensors plus one tensor's pages of file. */
bf_status bf__model_parse_file(const char *path, const bf_load_limits *lim, bf_model **out,
                               bf_error *err)
{
    bf_status st;
    uint8_t *buf = NULL, *map = NULL;
    FILE *f = fopen(path, "rb");
    *out = NULL;
    if (!f) return bf_error_set(err, errno == ENOENT ? BF_ENOTFOUND : BF_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = bf_error_set(err, BF_EIO, "%s: not a regular file (a directory?); give the path of an .onnx file", path);
        goto out;
    }
    if (sb.st_size < 0) { st = bf_error_set(err, BF_EIO, "%s: cannot tell its size", path); goto out; }
    size_t size = (size_t)sb.st_size;
    if (size > MAX_MODEL_BYTES) {
        st = bf_error_set(err, BF_EUNSUPPORTED, "%s: %zu bytes; ONNX protobuf files are limited to 2 GiB", path, size);
        goto out;
    }
#if defined(__unix__)
    if (size > 0) {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
        if (p != MAP_FAILED) map = p;
    }
#endif
    if (!map) {   /* an empty file, or no mmap: read it */
        buf = bf__malloc(size + 1);
        if (!buf) { st = bf_error_set(err, BF_ENOMEM, "%s: out of memory for %zu bytes", path, size); goto out; }
        if (fread(buf, 1, size, f) != size) {
            st = bf_error_set(err, BF_EIO, "%s: read failed: %s", path, ferror(f) ? strerror(errno) : "short read");
            goto out;
        }
    }
    const char *base = strrchr(path, '/');
    /* the directory external data is read from: the path up to its last '/' */
    char *dir = bf__strdup(base ? path : ".");
    if (!dir) { st = bf_error_set(err, BF_ENOMEM, "%s: out of memory", path); goto out; }
    if (base) dir[(base - path) ? (base - path) : 1] = 0;   /* "/m.onnx": the root */
    st = parse(map ? map : buf, size, map, fileno(f), dir, base ? base + 1 : path, lim, out, err);
    bf__free(dir);
out:
#if defined(__unix__)
    if (map) munmap(map, size);
#endif
    fclose(f);
    bf__free(buf);
    return st;
}
