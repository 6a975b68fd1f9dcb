/* Model and dataset summaries as JSON. */
#include "bitflip/api/summary.h"

#include <string.h>

static json_t *dims_json(const bf_value_info *vi)
{
    json_t *a = json_array();
    for (int d = 0; d < vi->ndim; d++)
        json_array_append_new(a, vi->dims[d] >= 0 ? json_integer(vi->dims[d])
                                                  : json_string(vi->dim_names[d] ? vi->dim_names[d] : "?"));
    return a;
}

static json_t *shape_json(const bf_tensor *t)
{
    json_t *a = json_array();
    for (int d = 0; d < t->ndim; d++) json_array_append_new(a, json_integer(t->dims[d]));
    return a;
}

static json_t *values_json(const bf_value_info *(*get)(const bf_model *, size_t), size_t n, const bf_model *m)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        const bf_value_info *vi = get(m, i);
        json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "name", vi->name, "dtype", bf_dtype_name(vi->dtype),
                                           "shape", dims_json(vi)));
    }
    return a;
}

json_t *bf_model_summary(const bf_model *m)
{
    json_t *root = json_object(), *ops = json_object(), *layers = json_array(), *params = json_array();
    int64_t bits = 0;
    if (!root || !ops || !layers || !params) goto fail;
    json_object_set_new(root, "opset", json_integer(bf_model_opset(m)));
    json_object_set_new(root, "producer", json_string(bf_model_producer(m)));
    json_object_set_new(root, "inputs", values_json(bf_model_input, bf_model_num_inputs(m), m));
    json_object_set_new(root, "outputs", values_json(bf_model_output, bf_model_num_outputs(m), m));
    json_object_set_new(root, "nodes", json_integer((json_int_t)bf_model_num_nodes(m)));
    for (size_t i = 0; i < bf_model_num_nodes(m); i++) {
        const char *op = bf_model_node_op(m, i);
        json_t *c = json_object_get(ops, op);
        json_object_set_new(ops, op, json_integer(c ? json_integer_value(c) + 1 : 1));
        json_array_append_new(layers, json_pack("{s:s, s:s}", "name", bf_model_node_name(m, i), "op", op));
    }
    for (size_t i = 0; i < bf_model_num_params(m); i++) {
        const bf_param_info *p = bf_model_param(m, i);
        json_t *pj = json_pack("{s:s, s:o, s:I, s:s?, s:s?, s:b, s:s}", "name", p->tensor->name, "shape",
                               shape_json(p->tensor), "elements", (json_int_t)bf_tensor_numel(p->tensor),
                               "read_by_op", p->reader_op, "read_by_node", p->reader_node, "embedding", p->is_embedding,
                               "dtype", bf_dtype_name(p->dtype));
        /* absent, not null, when nothing was recovered: older readers see the same object */
        if (pj && p->torch_name) json_object_set_new(pj, "torch_name", json_string(p->torch_name));
        if (pj && p->torch_note) json_object_set_new(pj, "torch_note", json_string(p->torch_note));
        /* a half-precision export's weights: the type the file holds them in */
        if (pj && p->stored) json_object_set_new(pj, "stored", json_string(p->stored));
        json_array_append_new(params, pj);
        bits += bf_tensor_numel(p->tensor) * (p->dtype == BF_F32 ? 32 : 8);
    }
    json_object_set_new(root, "ops", ops);
    json_object_set_new(root, "layers", layers);
    json_object_set_new(root, "params", params);
    json_object_set_new(root, "param_elements", json_integer(bf_model_param_elements(m)));
    json_object_set_new(root, "param_bits", json_integer(bits));
    return root;
fail:
    json_decref(root);
    json_decref(ops);
    json_decref(layers);
    json_decref(params);
    return NULL;
}

json_t *bf_dataset_summary(const bf_dataset *ds)
{
    json_t *root = json_object(), *tensors = json_array();
    if (!root || !tensors) { json_decref(root); json_decref(tensors); return NULL; }
    for (size_t i = 0; i < bf_dataset_num_tensors(ds); i++) {
        const bf_tensor *t = bf_dataset_tensor(ds, i);
        json_array_append_new(tensors, json_pack("{s:s, s:s, s:o}", "name", t->name, "dtype", bf_dtype_name(t->dtype),
                                                 "shape", shape_json(t)));
    }
    json_object_set_new(root, "samples", json_integer(bf_dataset_num_samples(ds)));
    json_object_set_new(root, "labels", json_boolean(bf_dataset_find(ds, "labels") != NULL));
    json_object_set_new(root, "tensors", tensors);
    return root;
}

json_t *bf_errmap_summary(const bf_errmap *m)
{
    json_t *root = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "rows", (json_int_t)m->rows, "cols",
                             (json_int_t)m->cols, "bits", (json_int_t)(m->rows * m->cols), "flip",
                             (json_int_t)m->n[BF_CELL_FLIP], "stuck_at_0", (json_int_t)m->n[BF_CELL_STUCK_AT_0],
                             "stuck_at_1", (json_int_t)m->n[BF_CELL_STUCK_AT_1], "cells",
                             (json_int_t)bf_errmap_cells(m));
    if (!root) return NULL;
    /* NaN is "no voltage in the header" */
    if (m->voltage == m->voltage && json_object_set_new(root, "voltage", json_real(m->voltage)) != 0) goto oom;
    if (m->chip && json_object_set_new(root, "chip", json_string(m->chip)) != 0) goto oom;
    return root;
oom:
    json_decref(root);
    return NULL;
}
