/* test_limits: the model loader's limits (nesting, counts, sizes, rank, depth) and its walk under truncation and failed allocations. */
#include "test_limits.h"

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

void if_nested_10000_deep_is_refused(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = nested_if(10000, &len);
    /* about what the file weighs (318 KB) */
    assert_true(len > 200000 && len < 800000);
    free(buf);
    check_deep_if(10000);
}

void if_nested_1000_deep_is_refused(void **state)
{
    (void)state;
    check_deep_if(1000);
}

/* Within the limit, the file goes on to the graph checks, which refuse If
 * (bitflip runs no control flow) by name. */
void if_within_depth_reaches_op_check(void **state)
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

void tiny_model_loads(void **state)
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

void too_many_nodes(void **state)
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
void message_count_limit(void **state)
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

void too_many_attributes(void **state)
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

void field_size_limit(void **state)
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
void huge_dims_refused_before_allocating(void **state)
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

void rank_limit(void **state)
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
void type_depth_limit(void **state)
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
void walk_survives_truncation_and_flips(void **state)
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
void allocation_failure_in_the_walk(void **state)
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
