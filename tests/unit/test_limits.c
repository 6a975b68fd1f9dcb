/* Limits at the door: ONNX files are built here byte by byte in protobuf wire
 * format (field numbers from onnx.proto), so a test can make what no
 * exporter would: graphs nested 10,000 deep, tensors whose dims ask for
 * terabytes, more nodes than a limit allows. Each must be refused with an
 * error that names the limit and where it was hit, before protobuf-c or the
 * converter allocates or recurses. Plans: their memory estimate against sums
 * done by hand, and a memory bomb refused before any big allocation. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"

/* --- a forward wire writer: messages are byte strings, nested by value */

typedef struct wb {
    uint8_t *p;
    size_t n, cap;
} wb;

static void wb_put(wb *b, const void *src, size_t n)
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
static size_t varint(uint8_t tmp[10], uint64_t v)
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

static void wb_varint(wb *b, uint64_t v)
{
    uint8_t tmp[10];
    wb_put(b, tmp, varint(tmp, v));
}

static void wb_int(wb *b, unsigned field, uint64_t v) { wb_varint(b, (uint64_t)field << 3); wb_varint(b, v); }

static void wb_bytes(wb *b, unsigned field, const void *data, size_t n)
{
    wb_varint(b, (uint64_t)field << 3 | 2);
    wb_varint(b, n);
    wb_put(b, data, n);
}

static void wb_str(wb *b, unsigned field, const char *s) { wb_bytes(b, field, s, strlen(s)); }

/* Appends `sub` as a message field and frees it. */
static void wb_msg(wb *b, unsigned field, wb *sub)
{
    wb_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    *sub = (wb){0};
}

/* ValueInfoProto: a float tensor named `name` of the given dims (-1: "batch"). */
static void value_info(wb *g, unsigned field, const char *name, int ndim, const int64_t *dims)
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
static void tensor(wb *out, unsigned field, const char *name, int dtype, int ndim, const int64_t *dims,
                   const void *data, size_t bytes)
{
    wb t = {0};
    for (int d = 0; d < ndim; d++) wb_int(&t, 1, (uint64_t)dims[d]);
    wb_int(&t, 2, (uint64_t)dtype);
    wb_str(&t, 8, name);
    if (data) wb_bytes(&t, 9, data, bytes);
    wb_msg(out, field, &t);
}

typedef struct nodespec {
    const char *op, *name, *in[3], *out;
} nodespec;

static void node(wb *g, nodespec s, wb *attrs)
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
static wb model(wb *graph)
{
    wb m = {0}, ops = {0};
    wb_int(&m, 1, 7);
    wb_int(&ops, 2, 13);
    wb_msg(&m, 8, &ops);
    wb_msg(&m, 7, graph);
    return m;
}

static bf_status load(const wb *m, const bf_load_limits *lim, bf_model **out, bf_error *err)
{
    /* an exact-size copy, so ASan sees any read past the end */
    uint8_t *copy = malloc(m->n ? m->n : 1);
    assert_non_null(copy);
    memcpy(copy, m->p, m->n);
    bf_status st = bf_model_load_buffer_opts(copy, m->n, "t.onnx", lim, out, err);
    free(copy);
    return st;
}

/* --- nested If: built back to front, so each level costs its own bytes only */

typedef struct rb {
    uint8_t *p;
    size_t cap, start;   /* content is p[start, cap) */
} rb;

static void rb_put(rb *b, const void *src, size_t n)
{
    assert_true(n <= b->start);
    b->start -= n;
    memcpy(b->p + b->start, src, n);
}

static void rb_varint(rb *b, uint64_t v)
{
    uint8_t tmp[10];
    rb_put(b, tmp, varint(tmp, v));
}

/* Prepends the key and length of a length-delimited field whose body is the
 * last `len` bytes written (the current front). */
static void rb_wrap(rb *b, unsigned field, size_t len)
{
    rb_varint(b, len);
    rb_varint(b, (uint64_t)field << 3 | 2);
}

static void rb_str(rb *b, unsigned field, const char *s)
{
    rb_put(b, s, strlen(s));
    rb_wrap(b, field, strlen(s));
}

/* A model whose graph holds node if_0 (If), whose then_branch holds if_1,
 * ... down to if_{depth-1}, whose then_branch is an empty graph. */
static uint8_t *nested_if(int depth, size_t *len)
{
    rb b = {.cap = (size_t)depth * 64 + 256};
    b.p = malloc(b.cap);
    assert_non_null(b.p);
    b.start = b.cap;
    size_t graph_len = 0;                       /* the innermost graph is empty */
    for (int k = depth - 1; k >= 0; k--) {
        char name[32];
        /* AttributeProto { name, type = GRAPH, g = <graph below> } */
        size_t mark = b.start + graph_len;      /* end of the graph body */
        rb_wrap(&b, 6, graph_len);
        uint8_t type[] = {0xa0, 0x01, 0x05};    /* field 20 varint: GRAPH (5) */
        rb_put(&b, type, sizeof type);
        rb_str(&b, 1, "then_branch");
        size_t attr_len = mark - b.start;
        /* NodeProto { input "c", output, name, op_type, attribute } */
        rb_wrap(&b, 5, attr_len);
        rb_str(&b, 4, "If");
        snprintf(name, sizeof name, "if_%d", k);
        rb_str(&b, 3, name);
        rb_str(&b, 2, k ? "inner" : "y");
        rb_str(&b, 1, "c");
        size_t node_len = mark - b.start;
        /* GraphProto { node } */
        rb_wrap(&b, 1, node_len);
        graph_len = mark - b.start;
    }
    rb_wrap(&b, 7, graph_len);                  /* ModelProto.graph */
    uint8_t head[] = {0x08, 0x07, 0x42, 0x02, 0x10, 0x0d};   /* ir_version 7; opset_import {version 13} */
    rb_put(&b, head, sizeof head);
    *len = b.cap - b.start;
    uint8_t *out = malloc(*len);
    memcpy(out, b.p + b.start, *len);
    free(b.p);
    return out;
}

static size_t offset_named(const char *msg)
{
    const char *s = strstr(msg, "byte offset ");
    assert_non_null(s);
    return (size_t)strtoull(s + 12, NULL, 10);
}

static void check_deep_if(int depth)
{
    size_t len;
    uint8_t *buf = nested_if(depth, &len);
    bf_model *m = NULL;
    bf_error err = {0};
    bf_status st = bf_model_load_buffer(buf, len, "deep.onnx", &m, &err);
    assert_int_equal(st, BF_ELIMIT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "deep.onnx: ONNX subgraphs nested more than 64 deep"));
    assert_non_null(strstr(err.msg, "the limit is 64 (max_graph_depth)"));
    /* the 65th graph is if_63's then_branch: if_0 sits in graph 1 */
    assert_non_null(strstr(err.msg, "(node 'if_63' op If attribute 'then_branch')"));
    /* the offset named is that of the field opening the graph: AttributeProto.g */
    size_t off = offset_named(err.msg);
    assert_true(off < len);
    assert_int_equal(buf[off], 6 << 3 | 2);
    free(buf);
}

static void if_nested_10000_deep_is_refused(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = nested_if(10000, &len);
    /* about what the file weighs (318 KB) */
    assert_true(len > 200000 && len < 800000);
    free(buf);
    check_deep_if(10000);
}

static void if_nested_1000_deep_is_refused(void **state)
{
    (void)state;
    check_deep_if(1000);
}

/* Within the limit, the file goes on to the graph checks, which refuse If
 * (bitflip runs no control flow) by name. */
static void if_within_depth_reaches_op_check(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = nested_if(3, &len);
    bf_model *m = NULL;
    bf_error err = {0};
    bf_status st = bf_model_load_buffer(buf, len, "if.onnx", &m, &err);
    assert_int_not_equal(st, BF_OK);
    assert_int_not_equal(st, BF_ELIMIT);
    assert_null(m);
    /* and a limit of 2 catches the third graph: if_1's then_branch */
    bf_load_limits lim = {.max_graph_depth = 2};
    st = bf_model_load_buffer_opts(buf, len, "if.onnx", &lim, &m, &err);
    assert_int_equal(st, BF_ELIMIT);
    assert_non_null(strstr(err.msg, "nested more than 2 deep"));
    assert_non_null(strstr(err.msg, "node 'if_1' op If attribute 'then_branch'"));
    free(buf);
}

/* x[batch,3] -> Relu -> y: the smallest model that loads. */
static wb tiny_graph(void)
{
    wb g = {0};
    int64_t d[2] = {-1, 3};
    node(&g, (nodespec){"Relu", "act", {"x"}, "y"}, NULL);
    value_info(&g, 11, "x", 2, d);
    value_info(&g, 12, "y", 2, d);
    return g;
}

static void tiny_model_loads(void **state)
{
    (void)state;
    wb g = tiny_graph(), m = model(&g);
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_OK);
    assert_int_equal(bf_model_num_nodes(mod), 1);
    bf_model_free(mod);
    free(m.p);
}

static void too_many_nodes(void **state)
{
    (void)state;
    wb g = {0};
    int64_t d[2] = {-1, 3};
    node(&g, (nodespec){"Relu", "a", {"x"}, "h1"}, NULL);
    node(&g, (nodespec){"Relu", "b", {"h1"}, "h2"}, NULL);
    node(&g, (nodespec){"Relu", "c", {"h2"}, "y"}, NULL);
    value_info(&g, 11, "x", 2, d);
    value_info(&g, 12, "y", 2, d);
    wb m = model(&g);
    bf_model *mod = NULL;
    bf_error err = {0};
    bf_load_limits lim = {.max_nodes = 3};
    assert_int_equal(load(&m, &lim, &mod, &err), BF_OK);
    bf_model_free(mod);
    lim.max_nodes = 2;
    assert_int_equal(load(&m, &lim, &mod, &err), BF_ELIMIT);
    assert_null(mod);
    assert_non_null(strstr(err.msg, "GraphProto has more than 2 nodes"));
    assert_non_null(strstr(err.msg, "(max_nodes)"));
    free(m.p);
}

/* tiny_graph: the graph, its node, two value infos each with a type, a
 * tensor type, a shape and two dims: 1 + 1 + 2 * (1 + 1 + 1 + 1 + 2) = 14 */
static void message_count_limit(void **state)
{
    (void)state;
    wb g = tiny_graph(), m = model(&g);
    bf_model *mod = NULL;
    bf_error err = {0};
    bf_load_limits lim = {.max_messages = 14};
    assert_int_equal(load(&m, &lim, &mod, &err), BF_OK);
    bf_model_free(mod);
    lim.max_messages = 13;
    assert_int_equal(load(&m, &lim, &mod, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "more than 13 messages"));
    assert_non_null(strstr(err.msg, "(max_messages)"));
    free(m.p);
}

static void too_many_attributes(void **state)
{
    (void)state;
    wb g = {0}, attrs = {0};
    int64_t d[2] = {-1, 3};
    for (int i = 0; i < 5; i++) {
        wb a = {0};
        char name[16];
        snprintf(name, sizeof name, "a%d", i);
        wb_str(&a, 1, name);
        wb_int(&a, 20, 2);    /* INT */
        wb_int(&a, 3, 1);
        wb_msg(&attrs, 5, &a);
    }
    node(&g, (nodespec){"Relu", "act", {"x"}, "y"}, &attrs);
    value_info(&g, 11, "x", 2, d);
    value_info(&g, 12, "y", 2, d);
    wb m = model(&g);
    bf_model *mod = NULL;
    bf_error err = {0};
    bf_load_limits lim = {.max_attributes = 4};
    assert_int_equal(load(&m, &lim, &mod, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "NodeProto has more than 4 attributes"));
    assert_non_null(strstr(err.msg, "node 'act' op Relu"));
    free(m.p);
}

static void field_size_limit(void **state)
{
    (void)state;
    wb g = tiny_graph();
    char doc[200];
    memset(doc, 'd', sizeof doc - 1);
    doc[sizeof doc - 1] = '\0';
    wb_str(&g, 10, doc);     /* GraphProto.doc_string: 199 bytes */
    wb m = model(&g);
    bf_model *mod = NULL;
    bf_error err = {0};
    /* the limit is on fields taken whole (here the string), not on the
     * graph that holds it: messages are bounded by what they hold */
    bf_load_limits lim = {.max_field_bytes = 198};
    assert_int_equal(load(&m, &lim, &mod, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "field 10 of GraphProto"));
    assert_non_null(strstr(err.msg, "is 199 bytes; the limit is 198 (max_field_bytes)"));
    lim.max_field_bytes = 199;
    assert_int_equal(load(&m, &lim, &mod, &err), BF_OK);
    bf_model_free(mod);
    free(m.p);
}

/* An initializer whose dims multiply to 2^40 elements and which carries no
 * data: a few bytes of file that used to be a 4 TiB allocation request. */
static void huge_dims_refused_before_allocating(void **state)
{
    (void)state;
    wb g = tiny_graph();
    int64_t dims[2] = {INT64_C(1) << 20, INT64_C(1) << 20};
    tensor(&g, 5, "big", 1, 2, dims, NULL, 0);
    wb m = model(&g);
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "tensor 'big'"));
    assert_non_null(strstr(err.msg, "(max_tensor_elements)"));
    /* dims that overflow int64 when multiplied are caught the same way */
    wb g2 = tiny_graph();
    int64_t dims2[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 0x7fffffff};
    tensor(&g2, 5, "overflow", 1, 3, dims2, NULL, 0);
    wb m2 = model(&g2);
    assert_int_equal(load(&m2, NULL, &mod, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "tensor 'overflow'"));
    /* within the element limit but with no data: refused by the data check,
     * and only allocations the size of the file are made (the countdown
     * allocator lets a small number through) */
    wb g3 = tiny_graph();
    int64_t dims3[2] = {65536, 16384};    /* 2^30 floats: 4 GiB */
    tensor(&g3, 5, "nodata", 1, 2, dims3, NULL, 0);
    wb m3 = model(&g3);
    assert_int_equal(load(&m3, NULL, &mod, &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "nodata"));
    assert_non_null(strstr(err.msg, "holds 0 values but its dims need 1073741824"));
    free(m.p);
    free(m2.p);
    free(m3.p);
}

static void rank_limit(void **state)
{
    (void)state;
    wb g = tiny_graph();
    int64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float one = 1;
    tensor(&g, 5, "r9", 1, 9, dims, &one, 4);
    wb m = model(&g);
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "more than 8 dims"));
    free(m.p);
}

/* tiny_graph with a value_info 'deep' of type sequence(sequence(...(tensor)))
 * nested `depth` deep: two frames of the walk's stack per level. */
static wb deep_typed_model(int depth)
{
    wb tp = {0}, tt = {0};
    wb_int(&tt, 1, 1);
    wb_msg(&tp, 1, &tt);
    for (int i = 0; i < depth; i++) {
        wb seq = {0}, outer = {0};
        wb_msg(&seq, 1, &tp);
        wb_msg(&outer, 4, &seq);
        tp = outer;
    }
    wb g = tiny_graph(), vi = {0};
    wb_str(&vi, 1, "deep");
    wb_msg(&vi, 2, &tp);
    wb_msg(&g, 13, &vi);     /* value_info */
    return model(&g);
}

/* sequence(sequence(...(tensor))) 40 deep in a graph input's type */
static void type_depth_limit(void **state)
{
    (void)state;
    wb m = deep_typed_model(40);
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "nested more than 32 deep"));
    assert_non_null(strstr(err.msg, "(max_type_depth)"));
    free(m.p);
}

/* Every prefix of a valid file and every single-byte change: refused or
 * loaded, never a crash (the walk reads only inside the buffer). */
static void walk_survives_truncation_and_flips(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = nested_if(80, &len);
    for (size_t cut = 0; cut < len; cut += 7) {
        bf_model *m = NULL;
        bf_error err = {0};
        uint8_t *copy = malloc(cut + 1);
        memcpy(copy, buf, cut);
        assert_int_not_equal(bf_model_load_buffer(copy, cut, "cut.onnx", &m, &err), BF_OK);
        assert_true(err.msg[0] != '\0');
        free(copy);
    }
    for (size_t i = 0; i < len; i += 5) {
        bf_model *m = NULL;
        bf_error err = {0};
        uint8_t saved = buf[i];
        buf[i] ^= 0xff;
        if (bf_model_load_buffer(buf, len, "flip.onnx", &m, &err) == BF_OK) bf_model_free(m);
        buf[i] = saved;
    }
    free(buf);
}

/* The walk's own allocations failing: its stack starts at 64 frames, and a
 * type nested 40 deep (80 frames; max_type_depth raised to let it through)
 * makes it grow. The same bytes load when nothing fails, so every refusal
 * below is the allocation's doing, and each must say so with BF_ENOMEM: a
 * failed allocation reported as a malformed or over-limit model would send
 * the user to fix a file that is fine. */
static void allocation_failure_in_the_walk(void **state)
{
    (void)state;
    wb m = deep_typed_model(40);
    bf_load_limits lim = {.max_type_depth = 100};
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, &lim, &mod, &err), BF_OK);
    bf_model_free(mod);

    int walk_refusals = 0;
    long n = 0;
    for (;; n++) {
        assert_true(n < 10000);
        mod = NULL;
        err = (bf_error){0};
        bf_test_alloc_fail_after(n);
        bf_status st = load(&m, &lim, &mod, &err);
        long refused = bf_test_alloc_failures();
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) {
            assert_int_equal(refused, 0);
            bf_model_free(mod);
            break;
        }
        assert_null(mod);
        assert_true(refused > 0);
        if (st != BF_ENOMEM) fail_msg("allocation %ld failing gave status %d: %s", n, st, err.msg);
        if (strstr(err.msg, "out of memory checking the model")) walk_refusals++;
    }
    /* both the walk's first stack and its growth were made to fail */
    assert_int_equal(walk_refusals, 2);
    free(m.p);
}

/* --- plans: memory known before allocating */

/* x[batch,3] + c[3] -> s; s + k -> t; Relu(t) -> y, where k =
 * ConstantOfShape(shape [3]) is folded when the plan is built. */
static wb small_plan_model(void)
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

static void estimate_matches_hand_arithmetic(void **state)
{
    (void)state;
    wb m = small_plan_model();
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_OK);
    bf_plan_budget b;
    assert_int_equal(bf_plan_estimate(mod, 4, &b, &err), BF_OK);
    /* arena: x, s, t, y are 4 x 3 floats = 48 bytes, each in a 64-byte slot,
     * and the arena is allocated 64 bytes longer: 4 * 64 + 64 */
    assert_int_equal(b.arena_bytes, 320);
    /* folded: k, 3 floats (12 bytes, allocated as 13) in one 64-byte block */
    assert_int_equal(b.folded_bytes, 64);
    /* Add, Relu and ConstantOfShape ask for no scratch; the plan's scratch
     * block is allocated with 64 bytes to spare */
    assert_int_equal(b.scratch_bytes, 64);
    /* parameter copies: c, 12 bytes (13 allocated) -> 64 */
    assert_int_equal(b.param_copy_bytes, 64);
    assert_true(b.overhead_bytes > 0);
    assert_int_equal(b.total_bytes, 320 + 64 + 64 + 64 + b.overhead_bytes);
    assert_int_equal(b.batch, 4);

    /* batch 100: each activation 100 * 3 * 4 = 1200 bytes -> 1216; the
     * largest buffer is the first of the four equal ones, the input */
    assert_int_equal(bf_plan_estimate(mod, 100, &b, &err), BF_OK);
    assert_int_equal(b.arena_bytes, 4 * 1216 + 64);
    assert_int_equal(b.largest.bytes, 1216);
    assert_string_equal(b.largest.what, "input");
    assert_string_equal(b.largest.value, "x");
    char buf[300];
    assert_string_equal(bf_plan_item_str(&b.largest, buf, sizeof buf), "input 'x' [100, 3] float32: 1.2 KiB");

    /* the plan built for real agrees with its estimate */
    bf_plan_budget b2;
    bf_plan *p = NULL;
    bf_plan_opts o = {.budget = &b2};
    assert_int_equal(bf_plan_create_opts(mod, 100, &o, &p, &err), BF_OK);
    assert_int_equal(b2.total_bytes, b.total_bytes);
    assert_int_equal(bf_plan_arena_bytes(p) + 64, b.arena_bytes);
    bf_plan_free(p);
    /* a limit one byte short refuses it, naming both sizes */
    o.max_bytes = b.total_bytes - 1;
    assert_int_equal(bf_plan_create_opts(mod, 100, &o, &p, &err), BF_ELIMIT);
    assert_null(p);
    assert_non_null(strstr(err.msg, "the plan for batch 100 needs"));
    assert_non_null(strstr(err.msg, "(input 'x' [100, 3] float32: 1.2 KiB), over the limit of"));
    o.max_bytes = b.total_bytes;
    assert_int_equal(bf_plan_create_opts(mod, 100, &o, &p, &err), BF_OK);
    bf_plan_free(p);
    bf_model_free(mod);
    free(m.p);
}

static void bytes_are_printed_in_binary_units(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(bf_bytes_str(100, b, sizeof b), "100 B");
    assert_string_equal(bf_bytes_str(1536, b, sizeof b), "1.5 KiB");
    assert_string_equal(bf_bytes_str((uint64_t)512 << 20, b, sizeof b), "512.0 MiB");
    assert_string_equal(bf_bytes_str((uint64_t)4 << 30, b, sizeof b), "4.0 GiB");
}

/* The memory bomb: Flatten and MatMul on the input, and a
 * ConstantOfShape of [32768, 32768] (2^30 floats, 4 GiB) feeding a
 * ReduceMax, in about 200 bytes of file. */
static wb bomb_model(void)
{
    wb g = {0}, keep = {0}, a = {0};
    int64_t xd[3] = {-1, 2, 2}, yd[2] = {-1, 2}, wd[2] = {4, 2}, two = 2;
    int64_t shp[2] = {32768, 32768};
    float w[8] = {1, 0, 0, 1, 1, 0, 0, 1};
    tensor(&g, 5, "w", 1, 2, wd, w, sizeof w);
    tensor(&g, 5, "shp", 7, 1, &two, shp, sizeof shp);
    node(&g, (nodespec){"Flatten", "flat", {"x"}, "f"}, NULL);
    node(&g, (nodespec){"MatMul", "mm", {"f", "w"}, "y"}, NULL);
    node(&g, (nodespec){"ConstantOfShape", "ConstantOfShape_0", {"shp"}, "big"}, NULL);
    wb_str(&a, 1, "keepdims");
    wb_int(&a, 20, 2);
    wb_int(&a, 3, 0);
    wb_msg(&keep, 5, &a);
    node(&g, (nodespec){"ReduceMax", "rmax", {"big"}, "mx"}, &keep);
    value_info(&g, 11, "x", 3, xd);
    value_info(&g, 12, "y", 2, yd);
    value_info(&g, 12, "mx", 0, NULL);
    return model(&g);
}

static void memory_bomb_is_refused_before_allocating(void **state)
{
    (void)state;
    wb m = bomb_model();
    assert_true(m.n < 400);
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_OK);

    bf_test_alloc_track_largest(1);
    bf_plan_budget b;
    assert_int_equal(bf_plan_estimate(mod, 1, &b, &err), BF_OK);
    /* 2^30 floats = 4 GiB, allocated with one byte more, in 64-byte units;
     * and ReduceMax's scalar, folded too: 4 bytes -> 64 */
    uint64_t big = ((uint64_t)4 << 30) + 64;
    assert_int_equal(b.folded_bytes, big + 64);
    assert_int_equal(b.largest.bytes, big);
    assert_string_equal(b.largest.node, "ConstantOfShape_0");
    assert_string_equal(b.largest.op, "ConstantOfShape");
    assert_string_equal(b.largest.what, "folded");
    assert_int_equal(b.largest.ndim, 2);
    assert_int_equal(b.largest.dims[0], 32768);
    assert_int_equal(b.largest.dims[1], 32768);
    assert_true(b.total_bytes > big);
    /* nothing near that size was asked of the allocator */
    assert_true(bf_test_alloc_largest() < ((size_t)2 << 20));

    bf_test_alloc_track_largest(1);
    bf_plan *p = NULL;
    bf_plan_opts o = {.max_bytes = (uint64_t)4 << 30};
    assert_int_equal(bf_plan_create_opts(mod, 1, &o, &p, &err), BF_ELIMIT);
    assert_null(p);
    assert_true(bf_test_alloc_largest() < ((size_t)2 << 20));
    bf_test_alloc_track_largest(0);
    assert_non_null(strstr(err.msg, "the plan for batch 1 needs 4.0 GiB (node 'ConstantOfShape_0' "
                                    "ConstantOfShape folded [32768, 32768] float32: 4.0 GiB), over the "
                                    "limit of 4.0 GiB"));
    /* the sentence a daemon or the CLI shows, from a job holding this plan */
    bf_job_budget jb = {.threads = 1, .batch = 1, .plan = b, .plans_bytes = b.total_bytes, .total_bytes = b.total_bytes};
    assert_int_equal(bf_job_budget_check(&jb, (uint64_t)4 << 30, "campaign", "job_memory", &err), BF_ELIMIT);
    assert_string_equal(err.msg, "the plan needs 4.0 GiB (node 'ConstantOfShape_0' ConstantOfShape folded "
                                 "[32768, 32768] float32: 4.0 GiB), over the 4.0 GiB job memory limit (job_memory)");
    assert_int_equal(bf_job_budget_check(&jb, (uint64_t)8 << 30, "campaign", "job_memory", &err), BF_OK);
    assert_int_equal(bf_job_budget_check(&jb, 0, "campaign", "job_memory", &err), BF_OK);
    bf_model_free(mod);
    free(m.p);
}

/* --- safetensors */

/* A file of header `hdr` and `data_len` zero bytes of data. */
static unsigned char *st_file(const char *hdr, size_t data_len, size_t *len)
{
    size_t h = strlen(hdr);
    *len = 8 + h + data_len;
    unsigned char *b = calloc(1, *len);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    return b;
}

static void safetensors_json_depth(void **state)
{
    (void)state;
    /* at the junk array the depth is 2 (the header object, the tensor's) */
    const char *prefix = "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"junk\": ";
    char hdr[512];
    snprintf(hdr, sizeof hdr, "%s[[[[[[[[[[1]]]]]]]]]]}}", prefix);
    size_t len;
    unsigned char *f = st_file(hdr, 4, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    assert_int_equal(bf_dataset_load_buffer(f, len, "d.safetensors", &ds, &err), BF_ELIMIT);
    assert_null(ds);
    /* the ninth bracket is the junk's seventh '[' */
    char want[128];
    snprintf(want, sizeof want, "nested more than 8 deep at header byte %zu; the limit is 8 (max_json_depth)",
             strlen(prefix) + 6);
    assert_non_null(strstr(err.msg, want));
    free(f);
    /* brackets inside strings are text, not nesting */
    const char *named = "{\"[[[[[[[[[[{{{{\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}";
    f = st_file(named, 4, &len);
    assert_int_equal(bf_dataset_load_buffer(f, len, "d.safetensors", &ds, &err), BF_OK);
    bf_dataset_free(ds);
    free(f);
}

static void safetensors_counts_and_bytes(void **state)
{
    (void)state;
    const char *hdr = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 8], \"data_offsets\": [0, 64]},"
                      " \"labels\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [64, 80]}}";
    size_t len;
    unsigned char *f = st_file(hdr, 80, &len);
    bf_dataset *ds = NULL;
    bf_error err = {0};
    bf_dataset_limits lim = {.max_tensors = 1};
    assert_int_equal(bf_dataset_load_buffer_opts(f, len, "d", &lim, &ds, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "header lists 2 tensors; the limit is 1 (max_tensors)"));
    /* data: 64 bytes for a, 16 for labels, each rounded up to 64 -> 128 */
    lim = (bf_dataset_limits){.max_bytes = 127};
    assert_int_equal(bf_dataset_load_buffer_opts(f, len, "d", &lim, &ds, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "its tensors hold 128 B; the limit is 127 B (max_bytes)"));
    lim.max_bytes = 128;
    assert_int_equal(bf_dataset_load_buffer_opts(f, len, "d", &lim, &ds, &err), BF_OK);
    bf_dataset_free(ds);
    lim = (bf_dataset_limits){.max_header_bytes = (int64_t)strlen(hdr) - 1};
    assert_int_equal(bf_dataset_load_buffer_opts(f, len, "d", &lim, &ds, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "(max_header_bytes)"));
    free(f);
}

/* --- jobs: the sum of their plans, outputs, cache and inputs */

static void job_estimates_add_up(void **state)
{
    (void)state;
    wb m = small_plan_model();
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(load(&m, NULL, &mod, &err), BF_OK);
    /* 10 samples of x[3] */
    const char *hdr = "{\"x\": {\"dtype\": \"F32\", \"shape\": [10, 3], \"data_offsets\": [0, 120]}}";
    size_t len;
    unsigned char *f = st_file(hdr, 120, &len);
    bf_dataset *ds = NULL;
    assert_int_equal(bf_dataset_load_buffer(f, len, "d", &ds, &err), BF_OK);
    bf_plan_budget p4, p2;
    assert_int_equal(bf_plan_estimate(mod, 4, &p4, &err), BF_OK);
    assert_int_equal(bf_plan_estimate(mod, 2, &p2, &err), BF_OK);

    /* eval at batch 4 on one thread: batches of 4, 4 and 2 */
    bf_job_budget b;
    bf_eval_opts eo = {.batch = 4, .threads = 1};
    assert_int_equal(bf_eval_estimate(mod, ds, &eo, &b, &err), BF_OK);
    assert_int_equal(b.batch, 4);
    assert_int_equal(b.rest, 2);
    assert_int_equal(b.model_bytes, 12 + 8);          /* c: 3 floats; shp: one int64 */
    assert_int_equal(b.dataset_bytes, 120);
    assert_int_equal(b.plans_bytes, p4.total_bytes + p2.total_bytes);
    assert_int_equal(b.outputs_bytes, 10 * 3 * 4);    /* y over the set */
    assert_int_equal(b.cache_bytes, 0);
    assert_int_equal(b.total_bytes, 20 + 120 + p4.total_bytes + p2.total_bytes + 120);

    /* a campaign on 2 threads: each worker holds both plans and the
     * outputs, and the campaign the golden outputs (the golden pass's
     * evaluators become the workers'); the cache is the smaller of its
     * budget and an arena per batch (3 batches of p4's arena) */
    bf_campaign_spec spec = {.batch = 4, .target = BF_TARGET_WEIGHTS, .repr = BF_REPR_FP16};
    bf_campaign_opts co = {.threads = 2, .cache_budget = 100};
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.plans_bytes, 2 * (p4.total_bytes + p2.total_bytes));
    assert_int_equal(b.outputs_bytes, 3 * 10 * 3 * 4);
    assert_int_equal(b.cache_bytes, 100);
    assert_int_equal(b.weights_bytes, 12 + 1);        /* c as stored in fp16 (a float buffer, +1) */
    co.cache_budget = (int64_t)1 << 30;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.cache_bytes, 3 * p4.arena_bytes);
    co.exact = 1;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.cache_bytes, 0);
    assert_int_equal(b.total_bytes, 20 + 120 + 13 + 2 * (p4.total_bytes + p2.total_bytes) + 360);
    bf_dataset_free(ds);
    free(f);
    bf_model_free(mod);
    free(m.p);
}

/* x[batch, 3] -> MatMul [3, 512] -> Relu -> MatMul [512, 1]: activations
 * of 4 KiB a sample against an output of 4 bytes, so a plan outweighs the
 * run's bookkeeping (its trial slots, about 420 KiB a thread, and a few
 * bytes a sample) many times over. */
static wb wide_mlp_model(void)
{
    enum { H = 512 };
    static float w1[3 * H], w2[H];
    for (int i = 0; i < 3 * H; i++) w1[i] = (float)(i % 7) * 0.125f - 0.375f;
    for (int i = 0; i < H; i++) w2[i] = (float)(i % 5) * 0.25f - 0.5f;
    wb g = {0};
    int64_t d1[2] = {3, H}, d2[2] = {H, 1}, x[2] = {-1, 3}, y[2] = {-1, 1};
    tensor(&g, 5, "w1", 1, 2, d1, w1, sizeof w1);
    tensor(&g, 5, "w2", 1, 2, d2, w2, sizeof w2);
    node(&g, (nodespec){"MatMul", "fc1", {"x", "w1"}, "h"}, NULL);
    node(&g, (nodespec){"Relu", "act", {"h"}, "r"}, NULL);
    node(&g, (nodespec){"MatMul", "fc2", {"r", "w2"}, "y"}, NULL);
    value_info(&g, 11, "x", 2, x);
    value_info(&g, 12, "y", 2, y);
    return model(&g);
}

/* x [?, 300] -> MatMul(w [300, 20]) (300 deep, so the product packs w
 * whole, exec/ops/sgemm.c: past KDIRECT, once per model, base/wpack.h), or
 * with transposed: MatMul(x, Transpose(w [20, 300])), whose Transpose(w)
 * is a parameter-only value (diff/dxparam.c), 24,000 bytes. */
static wb x300_model(int transposed)
{
    static float w[300 * 20];
    for (int i = 0; i < 300 * 20; i++) w[i] = (float)(i % 9) * 0.125f - 0.5f;
    wb g = {0};
    int64_t dw[2] = {300, 20}, dt[2] = {20, 300}, x[2] = {-1, 300}, y[2] = {-1, 20};
    tensor(&g, 5, "w", 1, 2, transposed ? dt : dw, w, sizeof w);
    if (transposed) node(&g, (nodespec){"Transpose", "t", {"w"}, "wt"}, NULL);
    node(&g, (nodespec){"MatMul", "fc", {"x", transposed ? "wt" : "w"}, "y"}, NULL);
    value_info(&g, 11, "x", 2, x);
    value_info(&g, 12, "y", 2, y);
    return model(&g);
}

/* The model and `samples` rows of x [300] (small integers) as an eval set. */
static bf_model *x300_job(int transposed, int samples, wb *m, unsigned char **f, bf_dataset **ds)
{
    bf_model *mod = NULL;
    bf_error err = {0};
    *m = x300_model(transposed);
    assert_int_equal(load(m, NULL, &mod, &err), BF_OK);
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{\"x\": {\"dtype\": \"F32\", \"shape\": [%d, 300], \"data_offsets\": [0, %d]}}",
             samples, samples * 1200);
    size_t len;
    *f = st_file(hdr, (size_t)samples * 1200, &len);
    for (int i = 0; i < samples * 300; i++) {
        float v = (float)(i % 7) - 3.0f;
        memcpy(*f + len - (size_t)samples * 1200 + (size_t)i * 4, &v, 4);
    }
    assert_int_equal(bf_dataset_load_buffer(*f, len, "d", ds, &err), BF_OK);
    return mod;
}

/* The packed weights in a job's estimate: w packed in 16-column panels,
 * 300 x 32 floats (38,400 bytes), counted once for the model whatever the
 * threads (the copy is shared), not in any plan's total. */
static void packed_weights_counted_once(void **state)
{
    (void)state;
    enum { SAMPLES = 64, PACKED = 300 * 32 * 4 };
    wb m;
    unsigned char *f;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    bf_model *mod = x300_job(0, SAMPLES, &m, &f, &ds);
    bf_plan_budget p32;
    assert_int_equal(bf_plan_estimate(mod, 32, &p32, &err), BF_OK);
    assert_int_equal(p32.packed_bytes, PACKED);
    assert_int_equal(p32.total_bytes,
                     p32.arena_bytes + p32.folded_bytes + p32.scratch_bytes + p32.param_copy_bytes + p32.overhead_bytes);
    for (int threads = 1; threads <= 2; threads++) {
        bf_job_budget b;
        bf_eval_opts eo = {.batch = 32, .threads = threads};
        assert_int_equal(bf_eval_estimate(mod, ds, &eo, &b, &err), BF_OK);
        assert_int_equal(b.packed_bytes, PACKED);
        assert_int_equal(b.plans_bytes, (uint64_t)threads * p32.total_bytes);
        assert_int_equal(b.total_bytes, b.model_bytes + b.dataset_bytes + b.plans_bytes + b.outputs_bytes + PACKED);
        bf_campaign_spec spec = {.batch = 32, .target = BF_TARGET_WEIGHTS, .repr = BF_REPR_FP32};
        bf_campaign_opts co = {.threads = threads, .exact = 1};
        assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
        assert_int_equal(b.packed_bytes, PACKED);
        assert_int_equal(b.total_bytes, b.model_bytes + b.dataset_bytes + b.plans_bytes + b.outputs_bytes + PACKED);
    }
    /* a job that cannot hold them is refused, naming them */
    bf_job_budget b;
    bf_eval_opts eo = {.batch = 32, .threads = 1};
    assert_int_equal(bf_eval_estimate(mod, ds, &eo, &b, &err), BF_OK);
    assert_int_equal(bf_job_budget_check(&b, b.total_bytes - 1, "evaluation", NULL, &err), BF_ELIMIT);
    assert_non_null(strstr(err.msg, "packed weights 37.5 KiB"));
    bf_dataset_free(ds);
    free(f);
    bf_model_free(mod);
    free(m.p);
}

/* A differential campaign's estimate counts the parameter-only values it
 * computes once (a page-rounded buffer and a page each: hand arithmetic),
 * what the run then reports holding; an exact campaign holds none. */
static void param_only_values_counted(void **state)
{
    (void)state;
    enum { SAMPLES = 64 };
    wb m;
    unsigned char *f;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    bf_model *mod = x300_job(1, SAMPLES, &m, &f, &ds);
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), want = (24000 + pg - 1) / pg * pg + pg;
    bf_campaign_spec spec = {.seed = 3, .trials = 8, .tensors = (char *[]){"*"}, .n_tensors = 1,
                             .model_kind = BF_FAULT_BITFLIP, .bits = 1, .repr = BF_REPR_FP32,
                             .sampling = BF_SAMPLE_UNIFORM, .critical_metric = -1, .batch = 32};
    bf_campaign_opts co = {.threads = 1};
    bf_job_budget b;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.param_only_bytes, want);
    assert_int_equal(b.total_bytes, b.model_bytes + b.dataset_bytes + b.plans_bytes + b.outputs_bytes + b.cache_bytes +
                                        b.packed_bytes + want);
    bf_campaign *c = NULL;
    if (bf_campaign_create(mod, ds, &spec, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    bf_campaign_result res;
    if (bf_campaign_run(c, &co, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res.param_bytes, want);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    co.exact = 1;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.param_only_bytes, 0);
    bf_dataset_free(ds);
    free(f);
    bf_model_free(mod);
    free(m.p);
}

/* The campaign estimate against what core really holds at its peak (the
 * test allocator's count, not the estimate's arithmetic) over loading, the
 * golden pass and an exact run on 2 workers (64 trials: 4 chunks of 16, so
 * both run): within a quarter of one worker's plan, so a plan counted too
 * many (the golden pass's, which became the workers') or too few fails. */
static void campaign_estimate_is_the_peak(void **state)
{
    (void)state;
    enum { SAMPLES = 2048 };
    wb m = wide_mlp_model();
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{\"x\": {\"dtype\": \"F32\", \"shape\": [%d, 3], \"data_offsets\": [0, %d]}}", SAMPLES,
             SAMPLES * 12);
    size_t len;
    unsigned char *f = st_file(hdr, SAMPLES * 12, &len);
    for (int i = 0; i < SAMPLES * 3; i++) {
        float v = (float)(i % 11) - 5.0f;
        memcpy(f + len - (size_t)SAMPLES * 12 + (size_t)i * 4, &v, 4);
    }
    bf_model *mod = NULL;
    bf_dataset *ds = NULL;
    bf_campaign *c = NULL;
    bf_error err = {0};
    size_t before = bf_test_alloc_live();
    bf_test_alloc_peak_reset();
    assert_int_equal(load(&m, NULL, &mod, &err), BF_OK);
    assert_int_equal(bf_dataset_load_buffer(f, len, "d", &ds, &err), BF_OK);
    bf_campaign_spec spec = {.seed = 1, .trials = 64, .tensors = (char *[]){"*"}, .n_tensors = 1,
                             .model_kind = BF_FAULT_BITFLIP, .bits = 1, .repr = BF_REPR_FP32,
                             .sampling = BF_SAMPLE_UNIFORM, .critical_metric = -1, .batch = SAMPLES};
    bf_campaign_opts co = {.threads = 2, .exact = 1};
    bf_job_budget b;
    assert_int_equal(bf_campaign_estimate(mod, ds, &spec, &co, &b, &err), BF_OK);
    assert_int_equal(b.plans_bytes, 2 * b.plan.total_bytes);
    assert_true(b.plan.total_bytes > 8u << 20);
    c = NULL;
    if (bf_campaign_create(mod, ds, &spec, &c, &err) != BF_OK) fail_msg("create: %s", err.msg);
    bf_campaign_result res;
    if (bf_campaign_run(c, &co, &res, &err) != BF_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(res.trials_done, 64);
    size_t peak = bf_test_alloc_peak() - before;
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    bf_dataset_free(ds);
    bf_model_free(mod);
    double off = (double)peak - (double)b.total_bytes, plan = (double)b.plan.total_bytes;
    print_message("estimate %llu, peak %zu: %+.2f of a plan (%llu)\n", (unsigned long long)b.total_bytes, peak,
                  off / plan, (unsigned long long)b.plan.total_bytes);
    assert_true(off > -0.25 * plan && off < 0.25 * plan);
    free(f);
    free(m.p);
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
