/* Limits at the door: ONNX files are built here byte by byte in protobuf wire
 * format (field numbers from onnx.proto), so a test can make what no
 * exporter would: graphs nested 10,000 deep, tensors whose dims ask for
 * terabytes, more nodes than a limit allows. Each must be refused with an
 * error that names the limit and where it was hit, before protobuf-c or the
 * converter allocates or recurses. Plans: their memory estimate against sums
 * done by hand, and a memory bomb refused before any big allocation. */
#include "test_limits/test_limits.h"

/* --- a forward wire writer: messages are byte strings, nested by value */

void wb_put(wb *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

/* A protobuf varint into tmp; returns its length. */
size_t varint(uint8_t tmp[10], uint64_t v)
{
    size_t k = 0;
    do {
        tmp[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) tmp[k] |= 0x80;
        k++;
    } while (v);
    return k;
}

void wb_varint(wb *b, uint64_t v)
{
    uint8_t tmp[10];
    wb_put(b, tmp, varint(tmp, v));
}

void wb_int(wb *b, unsigned field, uint64_t v) { wb_varint(b, (uint64_t)field << 3); wb_varint(b, v); }

void wb_bytes(wb *b, unsigned field, const void *data, size_t n)
{
    wb_varint(b, (uint64_t)field << 3 | 2);
    wb_varint(b, n);
    wb_put(b, data, n);
}

void wb_str(wb *b, unsigned field, const char *s) { wb_bytes(b, field, s, strlen(s)); }

/* Appends `sub` as a message field and frees it. */
void wb_msg(wb *b, unsigned field, wb *sub)
{
    wb_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    *sub = (wb){0};
}

/* ValueInfoProto: a float tensor named `name` of the given dims (-1: "batch"). */
void value_info(wb *g, unsigned field, const char *name, int ndim, const int64_t *dims)
{
    wb shape = {0}, tt = {0}, tp = {0}, vi = {0};
    for (int d = 0; d < ndim; d++) {
        wb dim = {0};
        if (dims[d] < 0) wb_str(&dim, 2, "batch");
        else wb_int(&dim, 1, (uint64_t)dims[d]);
        wb_msg(&shape, 1, &dim);
    }
    wb_int(&tt, 1, 1);              /* elem_type FLOAT */
    wb_msg(&tt, 2, &shape);
    wb_msg(&tp, 1, &tt);            /* TypeProto.tensor_type */
    wb_str(&vi, 1, name);
    wb_msg(&vi, 2, &tp);
    wb_msg(g, field, &vi);
}

/* TensorProto with raw data (or none: data NULL). */
void tensor(wb *out, unsigned field, const char *name, int dtype, int ndim, const int64_t *dims,
                   const void *data, size_t bytes)
{
    wb t = {0};
    for (int d = 0; d < ndim; d++) wb_int(&t, 1, (uint64_t)dims[d]);
    wb_int(&t, 2, (uint64_t)dtype);
    wb_str(&t, 8, name);
    if (data) wb_bytes(&t, 9, data, bytes);
    wb_msg(out, field, &t);
}

void node(wb *g, nodespec s, wb *attrs)
{
    wb n = {0};
    for (int i = 0; i < 3 && s.in[i]; i++) wb_str(&n, 1, s.in[i]);
    wb_str(&n, 2, s.out);
    wb_str(&n, 3, s.name);
    wb_str(&n, 4, s.op);
    if (attrs) { wb_put(&n, attrs->p, attrs->n); free(attrs->p); *attrs = (wb){0}; }
    wb_msg(g, 1, &n);
}

/* ModelProto around a graph body: ir_version 7, opset 13. */
wb model(wb *graph)
{
    wb m = {0}, ops = {0};
    wb_int(&m, 1, 7);
    wb_int(&ops, 2, 13);
    wb_msg(&m, 8, &ops);
    wb_msg(&m, 7, graph);
    return m;
}

bf_status load(const wb *m, const bf_load_limits *lim, bf_model **out, bf_error *err)
{
    /* an exact-size copy, so ASan sees any read past the end */
    uint8_t *copy = malloc(m->n ? m->n : 1);
    assert_non_null(copy);
    memcpy(copy, m->p, m->n);
    bf_status st = bf_model_load_buffer_opts(copy, m->n, "t.onnx", lim, out, err);
    free(copy);
    return st;
}

/* x[batch,3] + c[3] -> s; s + k -> t; Relu(t) -> y, where k =
 * ConstantOfShape(shape [3]) is folded when the plan is built. */
wb small_plan_model(void)
{
    wb g = {0};
    int64_t d[2] = {-1, 3}, three = 3;
    float c[3] = {1, 2, 3};
    tensor(&g, 5, "c", 1, 1, &three, c, sizeof c);
    int64_t one = 1;
    tensor(&g, 5, "shp", 7, 1, &one, &three, 8);
    node(&g, (nodespec){"ConstantOfShape", "cos", {"shp"}, "k"}, NULL);
    node(&g, (nodespec){"Add", "add1", {"x", "c"}, "s"}, NULL);
    node(&g, (nodespec){"Add", "add2", {"s", "k"}, "t"}, NULL);
    node(&g, (nodespec){"Relu", "act", {"t"}, "y"}, NULL);
    value_info(&g, 11, "x", 2, d);
    value_info(&g, 12, "y", 2, d);
    return model(&g);
}

/* A file of header `hdr` and `data_len` zero bytes of data. */
unsigned char *st_file(const char *hdr, size_t data_len, size_t *len)
{
    size_t h = strlen(hdr);
    *len = 8 + h + data_len;
    unsigned char *b = calloc(1, *len);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    return b;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(if_nested_10000_deep_is_refused),
        cmocka_unit_test(if_nested_1000_deep_is_refused),
        cmocka_unit_test(if_within_depth_reaches_op_check),
        cmocka_unit_test(tiny_model_loads),
        cmocka_unit_test(too_many_nodes),
        cmocka_unit_test(too_many_attributes),
        cmocka_unit_test(message_count_limit),
        cmocka_unit_test(field_size_limit),
        cmocka_unit_test(huge_dims_refused_before_allocating),
        cmocka_unit_test(rank_limit),
        cmocka_unit_test(type_depth_limit),
        cmocka_unit_test(walk_survives_truncation_and_flips),
        cmocka_unit_test(allocation_failure_in_the_walk),
        cmocka_unit_test(estimate_matches_hand_arithmetic),
        cmocka_unit_test(bytes_are_printed_in_binary_units),
        cmocka_unit_test(memory_bomb_is_refused_before_allocating),
        cmocka_unit_test(safetensors_json_depth),
        cmocka_unit_test(safetensors_counts_and_bytes),
        cmocka_unit_test(job_estimates_add_up),
        cmocka_unit_test(packed_weights_counted_once),
        cmocka_unit_test(param_only_values_counted),
        cmocka_unit_test(campaign_estimate_is_the_peak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
