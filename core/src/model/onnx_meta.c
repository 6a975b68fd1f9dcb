/* The ONNX file's metadata_props that change how bitflip runs the model.
 *
 * "bitflip.kernels" is written by bitflip.export (clients/python): which
 * PyTorch kernels (layer_norm, group_norm, gelu, hardswish) ran in which
 * module scope when the model was traced. Loading keeps its text; the
 * fusion step (exec/fuse_record.c) parses it and fuses exactly the patterns
 * it names, since an exported LayerNorm and one written out by hand are the
 * same nodes and only the exporter saw which one PyTorch ran as one kernel
 * (docs/NUMERICS.md). Other keys are the user's and are ignored. */
#include <string.h>

#include "base/alloc.h"
#include "model/graph.h"
#include "model/onnx_load.h"

bf_status bf__onnx_metadata(const Onnx__ModelProto *mp, bf_model *m, bf_error *err)
{
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = mp->metadata_props[i];
        if (!e || !e->key || strcmp(e->key, BF__KERNELS_KEY) != 0) continue;
        if (m->kernels)
            return bf_error_set(err, BF_EFORMAT, "%s: metadata_props holds '%s' twice; the exporter writes it once",
                                m->label, BF__KERNELS_KEY);
        const char *v = e->value ? e->value : "";
        size_t len = strlen(v);
        if (len > BF__KERNELS_MAX)
            return bf_error_set(err, BF_ELIMIT,
                                "%s: metadata_props '%s' is %zu bytes; at most %d (one line per kernel call: "
                                "re-export with bitflip.export, or drop the key to fuse by pattern)",
                                m->label, BF__KERNELS_KEY, len, BF__KERNELS_MAX);
        m->kernels = bf__strdup(v);
        if (!m->kernels) return bf_error_set(err, BF_ENOMEM, "%s: out of memory while loading the model", m->label);
    }
    return BF_OK;
}
