/* The ModelProto's fields beside its graph: the metadata_props that change
 * how bitflip runs the model, and its local functions, which it refuses.
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

/* A node that calls one of the model's local functions (FunctionProto:
 * torch.onnx.export(export_modules_as_functions=True) writes one per module
 * class, the graph then a node per module): refused with what to do, where
 * the generic error would only name an unknown domain. */
bf_status bf__onnx_check_functions(const Onnx__ModelProto *mp, const bf_model *m, bf_error *err)
{
    const Onnx__GraphProto *g = mp->graph;
    for (size_t i = 0; i < g->n_node && mp->n_functions; i++) {
        const Onnx__NodeProto *np = g->node[i];
        const char *dom = np->domain ? np->domain : "";
        for (size_t k = 0; k < mp->n_functions; k++) {
            const Onnx__FunctionProto *f = mp->functions[k];
            if (!f->name || !np->op_type || strcmp(f->name, np->op_type) != 0 || strcmp(f->domain ? f->domain : "", dom) != 0)
                continue;
            return bf_error_set(err, BF_EUNSUPPORTED,
                                "%s: node '%s' calls %s (domain '%s'), one of the %zu functions local to the model, as "
                                "torch.onnx.export(..., export_modules_as_functions=True) writes them; bitflip runs graphs "
                                "of standard ONNX ops: export without export_modules_as_functions, or inline the functions "
                                "first (onnx.inliner.inline_local_functions, onnx 1.15 and later)",
                                m->label, np->name ? np->name : "", np->op_type, dom, mp->n_functions);
        }
    }
    return BF_OK;
}
