/* The main graph's initializers: the weights arena sized for their data,
 * each converted from its cut range (onnx_strip.c), from the unpacked
 * proto, or from its external data file (onnx_external.c), and a mapped
 * file's pages given back once read. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/warena.h"
#include "model/graph.h"
#include "model/onnx_convert.h"
#include "model/onnx_load.h"

/* Once an initializer is converted, the file's pages up to its end are not
 * read again (protobuf-c unpacked the rest before): given back, so that
 * loading holds the model once, not the file beside it. */
static void release_file(bf__raw_src *src, size_t upto)
{
#if defined(__unix__)
    size_t pg = bf__warena_page(), end = upto / pg * pg;
    if (!src->map || end <= src->released) return;
    bf__pages_drop(src->map + src->released, end - src->released);
    src->released = end;
#else
    (void)src; (void)upto;
#endif
}

/* Initializers: float ones are parameters, the rest constants. */
bf_status bf__convert_initializers(const Onnx__GraphProto *g, bf_model *m, bf__name_map *map, bf__raw_src *src,
                                   bf_error *err)
{
    bf_status st;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        const char *name = tp->name ? tp->name : "";
        char what[300];
        int idx = -1;   /* set by bf__add_value; GCC cannot see that an error return is never BF_OK */
        if (!name[0]) return bf_error_set(err, BF_EFORMAT, "%s: initializer #%zu has no name", m->label, i);
        snprintf(what, sizeof what, "initializer '%.250s'", name);
        if ((st = bf__add_value(m, map, name, BF__VAL_CONST, -1, &idx, err)) != BF_OK) return st;
        const bf__raw_range *cut = src->ranges ? &src->ranges[i] : NULL;
        /* external data (onnx_external.c): read from beside the model file
         * and converted as raw_data is; heap, not the arena, which was sized
         * from the data inside the model */
        bf__raw_range ext = {.cut = 1};
        uint8_t *ext_buf = NULL;
        if (src->dir && bf__tensor_is_external(tp)) {
            if ((st = bf__external_read(tp, src->dir, what, &ext_buf, &ext.len, err)) != BF_OK) {
                bf_error_prefix(err, "%s", m->label);
                return st;
            }
            ext.data = ext_buf;
            cut = &ext;
        }
        st = bf__tensor_from_proto_at(tp, what, cut, ext_buf ? NULL : m->warena, &m->values[idx].init, err);
        bf__free(ext_buf);
        if (st != BF_OK) {
            bf_error_prefix(err, "%s", m->label);
            return st;
        }
        if (cut == &ext) cut = NULL;
        if (cut && cut->cut) release_file(src, cut->off + cut->len);
        m->values[idx].init->name = m->values[idx].name;
        m->values[idx].stored = tp->data_type == 10 ? "float16" : tp->data_type == 16 ? "bfloat16"
                                : tp->data_type == 11 ? "float64" : NULL;   /* ONNX TensorProto types */
        if (m->values[idx].init->dtype == BF_F32) {
            m->values[idx].kind = BF__VAL_PARAM;
            m->n_params++;
        }
    }
    return BF_OK;
}

/* The weights arena for mp's large initializers (their sizes known from
 * the unpacked headers and the cut ranges, and only for data that is there:
 * dims alone could ask for gigabytes). NULL when there are none or no arena
 * can be made: the heap then. */
bf__warena *bf__onnx_arena(const Onnx__ModelProto *mp, const bf__raw_range *ranges, int huge)
{
    const Onnx__GraphProto *g = mp->graph;
    size_t pg = bf__warena_page(), total = 0;
    for (size_t i = 0; g && i < g->n_initializer; i++) {
        size_t nb = bf__tensor_proto_nbytes(g->initializer[i], ranges ? &ranges[i] : NULL);
        if (nb < BF__WARENA_MIN_BYTES) continue;
        nb = (nb + pg - 1) / pg * pg;
        if (nb > SIZE_MAX - total) return NULL;
        total += nb;
    }
    return total ? bf__warena_create_opts(total, huge) : NULL;
}
