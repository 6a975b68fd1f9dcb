/* Loading large initializers without extra copies (model/onnx_strip.c, the
 * weights arena of base/warena.h) and faulting them through private views
 * (exec/plan.c), and row lookups reading a faulty table's clean rows from
 * the model (exec/op.h). References are independent of the loader: the bytes the
 * test itself packed, protobuf-c's own unpacking of the fixture files (the
 * loader's old path), and a matrix product computed here in double.
 * Hostile inputs: every truncation of a model whose weights are cut out of
 * the protobuf, a raw_data length that runs past its tensor, a raw_data
 * shorter than its dims need, allocation failure at every point, no memfd
 * for a view, a file whose pread is interrupted, short or failing. */
#define _GNU_SOURCE   /* syscall, for pread's stand-in */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_fail.h"
#include "alloc_loop.h"
#include "bitflip/bitflip.h"
#include "campaign_check.h"
#include "exec/plan_impl.h"
#include "onnx.pb-c.h"

/* y = relu(x W^T + b): x [batch, K], W [N, K] as raw_data (150 KiB: in the
 * arena and cut out of the protobuf), b [N] as float_data (on the heap) */
#define K 128
#define N 300

typedef struct big {
    float w[N * K], b[N];
    uint8_t *buf;
    size_t len;
} big;

static float urand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static Onnx__ValueInfoProto *vinfo(const char *name, int64_t d1, Onnx__TypeProto *tp, Onnx__TypeProto__Tensor *tt,
                                   Onnx__TensorShapeProto *sh, Onnx__TensorShapeProto__Dimension *d,
                                   Onnx__TensorShapeProto__Dimension **dp, Onnx__ValueInfoProto *v)
{
    onnx__value_info_proto__init(v);
    v->name = (char *)name;
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = 1;
    onnx__tensor_shape_proto__init(sh);
    onnx__tensor_shape_proto__dimension__init(&d[0]);
    d[0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d[0].dim_param = (char *)"batch";
    onnx__tensor_shape_proto__dimension__init(&d[1]);
    d[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d[1].dim_value = d1;
    dp[0] = &d[0];
    dp[1] = &d[1];
    sh->n_dim = 2;
    sh->dim = dp;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    return v;
}

static void make_big(big *m, int64_t w_rows_declared)
{
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < N * K; i++) m->w[i] = urand(&s) * 0.1f;
    for (int i = 0; i < N; i++) m->b[i] = urand(&s);

    Onnx__TensorProto w, b;
    int64_t wd[2] = {w_rows_declared, K}, bd[1] = {N};
    onnx__tensor_proto__init(&w);
    w.name = (char *)"fc.weight";
    w.has_data_type = 1;
    w.data_type = 1;
    w.n_dims = 2;
    w.dims = wd;
    w.has_raw_data = 1;
    w.raw_data.len = sizeof m->w;
    w.raw_data.data = (uint8_t *)m->w;
    onnx__tensor_proto__init(&b);
    b.name = (char *)"fc.bias";
    b.has_data_type = 1;
    b.data_type = 1;
    b.n_dims = 1;
    b.dims = bd;
    b.n_float_data = N;
    b.float_data = m->b;
    Onnx__TensorProto *inits[2] = {&w, &b};

    Onnx__AttributeProto tb;
    onnx__attribute_proto__init(&tb);
    tb.name = (char *)"transB";
    tb.has_type = 1;
    tb.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    tb.has_i = 1;
    tb.i = 1;
    Onnx__AttributeProto *attrs[1] = {&tb};
    char *g_in[3] = {(char *)"x", (char *)"fc.weight", (char *)"fc.bias"}, *g_out[1] = {(char *)"h"};
    char *r_in[1] = {(char *)"h"}, *r_out[1] = {(char *)"y"};
    Onnx__NodeProto gemm, relu;
    onnx__node_proto__init(&gemm);
    gemm.op_type = (char *)"Gemm";
    gemm.name = (char *)"fc";
    gemm.n_input = 3;
    gemm.input = g_in;
    gemm.n_output = 1;
    gemm.output = g_out;
    gemm.n_attribute = 1;
    gemm.attribute = attrs;
    onnx__node_proto__init(&relu);
    relu.op_type = (char *)"Relu";
    relu.name = (char *)"act";
    relu.n_input = 1;
    relu.input = r_in;
    relu.n_output = 1;
    relu.output = r_out;
    Onnx__NodeProto *nodes[2] = {&gemm, &relu};

    Onnx__TypeProto tp[2];
    Onnx__TypeProto__Tensor tt[2];
    Onnx__TensorShapeProto sh[2];
    Onnx__TensorShapeProto__Dimension d[2][2], *dp[2][2];
    Onnx__ValueInfoProto vi[2];
    Onnx__ValueInfoProto *ins[1] = {vinfo("x", K, &tp[0], &tt[0], &sh[0], d[0], dp[0], &vi[0])};
    Onnx__ValueInfoProto *outs[1] = {vinfo("y", N, &tp[1], &tt[1], &sh[1], d[1], dp[1], &vi[1])};

    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = (char *)"big";
    g.n_node = 2;
    g.node = nodes;
    g.n_initializer = 2;
    g.initializer = inits;
    g.n_input = 1;
    g.input = ins;
    g.n_output = 1;
    g.output = outs;
    m->buf = tc_pack_model(&g, 13, &m->len);
}

static char *write_temp(const uint8_t *buf, size_t len)
{
    char *path = malloc(64);
    assert_non_null(path);
    snprintf(path, 64, "/tmp/bf_test_arena_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    return path;
}

/* y[r][j] for input rows x and weights w, in double */
static double ref_y(const float *x, const float *w, const float *b, int r, int j)
{
    double acc = b[j];
    for (int k = 0; k < K; k++) acc += (double)x[r * K + k] * (double)w[j * K + k];
    return acc > 0 ? acc : 0;
}

static void run_and_check(bf_plan *p, const float *x, const float *w, const float *b, int batch)
{
    bf_error err = {0};
    memcpy(bf_plan_input(p, 0)->data, x, (size_t)batch * K * sizeof(float));
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    const float *y = bf_plan_output(p, 0)->data;
    for (int r = 0; r < batch; r++)
        for (int j = 0; j < N; j++) {
            double want = ref_y(x, w, b, r, j);
            if (fabs(y[r * N + j] - want) > 1e-5 * (1 + fabs(want)))
                fail_msg("y[%d][%d] = %.9g, the reference says %.9g", r, j, y[r * N + j], want);
        }
}

static const bf_tensor *param(const bf_model *m, const char *name)
{
    int64_t i = bf_model_find_param(m, name);
    assert_true(i >= 0);
    return bf_model_param(m, (size_t)i)->tensor;
}

/* The file (mapped) and the buffer give the weights the test packed, bit for
 * bit, and a plan computes what the matrix product here says. */
static void large_weights_load_exactly(void **state)
{
    (void)state;
    big m;
    make_big(&m, N);
    char *path = write_temp(m.buf, m.len);
    bf_model *a = NULL, *b = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_file(path, &a, &err), BF_OK);
    assert_int_equal(bf_model_load_buffer(m.buf, m.len, "big.onnx", &b, &err), BF_OK);
    assert_memory_equal(param(a, "fc.weight")->data, m.w, sizeof m.w);
    assert_memory_equal(param(b, "fc.weight")->data, m.w, sizeof m.w);
    assert_memory_equal(param(a, "fc.bias")->data, m.b, sizeof m.b);

    float x[4 * K];
    uint64_t s = 7;
    for (int i = 0; i < 4 * K; i++) x[i] = urand(&s);
    bf_plan *p = NULL;
    assert_int_equal(bf_plan_create(a, 4, &p, &err), BF_OK);
    run_and_check(p, x, m.w, m.b, 4);
    bf_plan_free(p);
    bf_model_free(a);
    bf_model_free(b);
    unlink(path);
    free(path);
    free(m.buf);
}

/* pread's stand-in for the loader (model/onnx_tensor.c, read_file, which
 * reads a mapped file's large tensors with it): the real call, counted, or
 * (pread_bad) per tensor one call interrupted, one short, then one failing,
 * so that the loop's retry and short read and the fallback (the rest copied
 * from the mapping) give the tensor's bytes */
static int pread_bad, pread_calls;
ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    int k = pread_calls++ % 3;
    if (pread_bad && k == 0) { errno = EINTR; return -1; }
    if (pread_bad && k == 1 && n > 1000) n = 1000;
    if (pread_bad && k == 2) { errno = EIO; return -1; }
    return (ssize_t)syscall(SYS_pread64, fd, buf, n, off);
}

/* A model file's large weights read with pread into the weights arena, in
 * 4 KiB pages and in huge pages (bf_load_limits.huge_pages: the arena
 * populated whole first either way), and through a pread that is
 * interrupted, reads short and fails: the bytes the test packed, bit for
 * bit, each time. */
static void weights_read_from_the_file_exactly(void **state)
{
    (void)state;
    big m;
    make_big(&m, N);
    char *path = write_temp(m.buf, m.len);
    for (int round = 0; round < 3; round++) {
        bf_load_limits lim = {.huge_pages = round == 1};
        bf_model *a = NULL;
        bf_error err = {0};
        pread_bad = round == 2;
        pread_calls = 0;
        assert_int_equal(bf_model_load_file_opts(path, &lim, &a, &err), BF_OK);
        pread_bad = 0;
        assert_true(pread_calls >= (round == 2 ? 3 : 1));   /* the path taken: W is read, not copied */
        assert_memory_equal(param(a, "fc.weight")->data, m.w, sizeof m.w);
        assert_memory_equal(param(a, "fc.bias")->data, m.b, sizeof m.b);
        bf_model_free(a);
    }
    unlink(path);
    free(path);
    free(m.buf);
}

/* Two plans fault the same arena tensor at once: each sees its own fault
 * only, the model none; after the restore and the view's release, golden. */
static void faults_in_views_stay_private(void **state)
{
    (void)state;
    big m;
    make_big(&m, N);
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_buffer(m.buf, m.len, "big.onnx", &mod, &err), BF_OK);
    size_t wp = (size_t)bf_model_find_param(mod, "fc.weight");
    bf_plan *p1 = NULL, *p2 = NULL;
    assert_int_equal(bf_plan_create(mod, 2, &p1, &err), BF_OK);
    assert_int_equal(bf_plan_create(mod, 2, &p2, &err), BF_OK);
    float x[2 * K];
    uint64_t s = 11;
    for (int i = 0; i < 2 * K; i++) x[i] = urand(&s);

    static float w1[N * K], w2[N * K];
    memcpy(w1, m.w, sizeof m.w);
    memcpy(w2, m.w, sizeof m.w);
    /* element 5 of row 0 and element 7 of row 299, exponent bit 30: far apart pages */
    int64_t i1 = 5, i2 = (int64_t)(N - 1) * K + 7;
    bf_bitflip f1 = {.param = wp, .index = i1, .bit = 30}, f2 = {.param = wp, .index = i2, .bit = 30};
    float old1, new1, old2, new2;
    assert_int_equal(bf_plan_flip_bit(p1, &f1, &old1, &new1, &err), BF_OK);
    assert_int_equal(bf_plan_flip_bit(p2, &f2, &old2, &new2, &err), BF_OK);
    uint32_t u;
    memcpy(&u, &w1[i1], 4);
    u ^= 1u << 30;
    memcpy(&w1[i1], &u, 4);
    memcpy(&u, &w2[i2], 4);
    u ^= 1u << 30;
    memcpy(&w2[i2], &u, 4);
    assert_memory_equal(&new1, &w1[i1], 4);
    run_and_check(p1, x, w1, m.b, 2);
    run_and_check(p2, x, w2, m.b, 2);
    assert_memory_equal(param(mod, "fc.weight")->data, m.w, sizeof m.w);

    /* restore, give the pages back: golden again, in both */
    assert_int_equal(bf_plan_flip_bit(p1, &f1, NULL, NULL, &err), BF_OK);
    assert_int_equal(bf_plan_flip_bit(p2, &f2, NULL, NULL, &err), BF_OK);
    bf__plan_param_golden(p1, wp);
    bf__plan_param_golden(p2, wp);
    run_and_check(p1, x, m.w, m.b, 2);
    run_and_check(p2, x, m.w, m.b, 2);
    /* and a second fault after the release writes the view again */
    assert_int_equal(bf_plan_flip_bit(p1, &f2, NULL, NULL, &err), BF_OK);
    run_and_check(p1, x, w2, m.b, 2);
    bf_plan_free(p1);
    bf_plan_free(p2);
    bf_model_free(mod);
    free(m.buf);
}

/* Every float initializer of every real-model fixture, loaded from its file
 * (mapped, weights cut out of the protobuf), is bit-identical to what
 * protobuf-c unpacks from the whole file (the loader's old path). */
static void real_fixtures_match_protobuf_c(void **state)
{
    (void)state;
    const char *dir = BF_FIXTURES "/real";
    DIR *d = opendir(dir);
    if (!d) skip();
    struct dirent *e;
    int models = 0;
    long compared = 0;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 5, ".onnx") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        rewind(f);
        uint8_t *buf = malloc((size_t)len + 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, (size_t)len, buf);
        assert_non_null(mp);
        bf_model *m = NULL;
        bf_error err = {0};
        if (bf_model_load_file(path, &m, &err) != BF_OK) fail_msg("%s: %s", path, err.msg);
        for (size_t i = 0; i < mp->graph->n_initializer; i++) {
            const Onnx__TensorProto *tp = mp->graph->initializer[i];
            if (tp->data_type != 1) continue;
            int64_t k = bf_model_find_param(m, tp->name);
            if (k < 0) fail_msg("%s: float initializer '%s' is not a parameter", path, tp->name);
            const bf_tensor *t = bf_model_param(m, (size_t)k)->tensor;
            const void *want = tp->has_raw_data ? (const void *)tp->raw_data.data : (const void *)tp->float_data;
            size_t n = tp->has_raw_data ? tp->raw_data.len : tp->n_float_data * sizeof(float);
            assert_int_equal(n, bf_tensor_nbytes(t));
            if (n && memcmp(t->data, want, n) != 0) fail_msg("%s: '%s' differs from protobuf-c's", path, tp->name);
            compared++;
        }
        onnx__model_proto__free_unpacked(mp, NULL);
        bf_model_free(m);
        free(buf);
        models++;
    }
    closedir(d);
    assert_true(models > 0);
    assert_true(compared > models);
}

static void expect_refused(const uint8_t *buf, size_t len, const char *needle)
{
    bf_model *m = NULL;
    bf_error err = {0};
    uint8_t *copy = malloc(len + 1);   /* exact size, so ASan sees any overread */
    assert_non_null(copy);
    memcpy(copy, buf, len);
    bf_status st = bf_model_load_buffer(copy, len, "bad.onnx", &m, &err);
    free(copy);
    if (st == BF_OK) fail_msg("a broken model (%zu bytes) loaded", len);
    assert_null(m);
    if (!err.msg[0] || (needle && !strstr(err.msg, needle))) fail_msg("message: '%s' (wanted '%s')", err.msg, needle);
}

static void truncations_are_refused(void **state)
{
    (void)state;
    big m;
    make_big(&m, N);
    /* every cut in the headers, and every 97th inside the weights */
    for (size_t cut = 0; cut < m.len; cut += cut < 200 || cut > m.len - 200 ? 1 : 97)
        expect_refused(m.buf, cut, NULL);
    /* a cut inside the raw data says how many bytes were promised */
    expect_refused(m.buf, m.len / 2, "truncated file?");
    /* and so does a truncated file, which is mapped, not read */
    char *path = write_temp(m.buf, m.len / 2);
    bf_model *mod = NULL;
    bf_error err = {0};
    assert_int_not_equal(bf_model_load_file(path, &mod, &err), BF_OK);
    assert_null(mod);
    if (!strstr(err.msg, "truncated file?")) fail_msg("message: %s", err.msg);
    unlink(path);
    free(path);
    free(m.buf);
}

/* raw_data claiming more bytes than its tensor holds (it would overlap the
 * next field), or fewer than the dims need */
static void bad_raw_lengths_are_refused(void **state)
{
    (void)state;
    big m;
    make_big(&m, N);
    /* TensorProto.raw_data: tag 0x4a, then the length as a varint */
    uint8_t want[4] = {0x4a, (uint8_t)((N * K * 4) & 0x7f) | 0x80, (uint8_t)(((N * K * 4) >> 7) & 0x7f) | 0x80,
                       (uint8_t)((N * K * 4) >> 14)};
    size_t at = 0;
    for (size_t i = 0; i + 4 <= m.len; i++)
        if (memcmp(m.buf + i, want, 4) == 0) { at = i; break; }
    assert_true(at > 0);
    uint8_t *bad = malloc(m.len);
    assert_non_null(bad);
    for (unsigned extra = 1; extra <= 64; extra *= 4) {
        memcpy(bad, m.buf, m.len);
        uint32_t v = N * K * 4 + extra;
        bad[at + 1] = (uint8_t)((v & 0x7f) | 0x80);
        bad[at + 2] = (uint8_t)(((v >> 7) & 0x7f) | 0x80);
        bad[at + 3] = (uint8_t)(v >> 14);
        expect_refused(bad, m.len, NULL);
    }
    free(bad);
    free(m.buf);
    make_big(&m, N + 1);   /* dims promise one row more than raw_data holds */
    expect_refused(m.buf, m.len, "raw_data has 153600 bytes");
    free(m.buf);
}

/* An embedding table in the arena (R rows of D floats: 64 rows a 4 KiB
 * page) looked up by a Gather on input ids. */
#define R 2048
#define D 16

static uint8_t *make_table(float *table, size_t *len)
{
    uint64_t s = 2654435761ull;
    for (int i = 0; i < R * D; i++) table[i] = urand(&s);
    Onnx__TensorProto w;
    int64_t wd[2] = {R, D};
    onnx__tensor_proto__init(&w);
    w.name = (char *)"emb.weight";
    w.has_data_type = 1;
    w.data_type = 1;
    w.n_dims = 2;
    w.dims = wd;
    w.has_raw_data = 1;
    w.raw_data.len = (size_t)R * D * sizeof(float);
    w.raw_data.data = (uint8_t *)table;
    Onnx__TensorProto *inits[1] = {&w};
    char *g_in[2] = {(char *)"emb.weight", (char *)"ids"}, *g_out[1] = {(char *)"y"};
    Onnx__NodeProto gather;
    onnx__node_proto__init(&gather);
    gather.op_type = (char *)"Gather";
    gather.name = (char *)"lookup";
    gather.n_input = 2;
    gather.input = g_in;
    gather.n_output = 1;
    gather.output = g_out;
    Onnx__NodeProto *nodes[1] = {&gather};

    Onnx__TypeProto tp[2];
    Onnx__TypeProto__Tensor tt[2];
    Onnx__TensorShapeProto sh[2];
    Onnx__TensorShapeProto__Dimension d[2][2], *dp[2][2];
    Onnx__ValueInfoProto vi[2];
    Onnx__ValueInfoProto *ins[1] = {vinfo("ids", 1, &tp[0], &tt[0], &sh[0], d[0], dp[0], &vi[0])};
    tt[0].elem_type = 7;   /* int64 [batch] */
    sh[0].n_dim = 1;
    Onnx__ValueInfoProto *outs[1] = {vinfo("y", D, &tp[1], &tt[1], &sh[1], d[1], dp[1], &vi[1])};
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = (char *)"table";
    g.n_node = 1;
    g.node = nodes;
    g.n_initializer = 1;
    g.initializer = inits;
    g.n_input = 1;
    g.input = ins;
    g.n_output = 1;
    g.output = outs;
    return tc_pack_model(&g, 13, len);
}

/* Pages of [p, p + len) mapped in this process (/proc/self/pagemap's
 * present bit); -1 when the kernel does not say. */
static long mapped_pages(const void *p, size_t len)
{
    long pg = sysconf(_SC_PAGESIZE), n = 0;
    FILE *f = fopen("/proc/self/pagemap", "rb");
    if (!f) return -1;
    for (uintptr_t a = (uintptr_t)p; a < (uintptr_t)p + len; a += (uintptr_t)pg) {
        uint64_t e;
        if (fseek(f, (long)(a / (uintptr_t)pg * 8), SEEK_SET) != 0 || fread(&e, 8, 1, f) != 1) {
            fclose(f);
            return -1;
        }
        n += (long)(e >> 63);
    }
    fclose(f);
    return n;
}

/* A trial's faults in an arena table: every lookup gives the faulty rows
 * (the reference: the table copied and corrupted here), and the plan reads
 * the clean rows from the model's tensor, so the view maps only the pages
 * the faults wrote (reading the rest through it made each worker's view as
 * resident as the table during a BER trial's whole batches). A fault
 * written through bf_plan_param_data (untracked: any page may differ)
 * makes lookups read the view itself, still right. */
static void lookups_read_clean_rows_from_the_model(void **state)
{
    (void)state;
    static float table[R * D], want[R * D];
    size_t len;
    uint8_t *buf = make_table(table, &len);
    bf_model *mod = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_buffer(buf, len, "table.onnx", &mod, &err), BF_OK);
    size_t q = (size_t)bf_model_find_param(mod, "emb.weight");
    assert_int_equal(bf_plan_create(mod, R, &p, &err), BF_OK);
    int64_t *ids = bf_plan_input(p, 0)->data;
    for (int64_t r = 0; r < R; r++) ids[r] = (r * 613) % R;   /* every row, out of order */

    /* rows 70 (page 1) and 2000 (page 31): two pages of 32 */
    memcpy(want, table, sizeof want);
    int64_t at[2] = {70 * D + 3, 2000 * D + 15};
    for (int k = 0; k < 2; k++) {
        want[at[k]] = -want[at[k]] * 1024.0f;
        assert_int_equal(bf__plan_param_write(p, q, at[k], want[at[k]], &err), BF_OK);
    }
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    const float *y = bf_plan_output(p, 0)->data;
    for (int64_t r = 0; r < R; r++)
        if (memcmp(y + r * D, want + ids[r] * D, D * sizeof(float)) != 0)
            fail_msg("lookup %lld (row %lld) differs from the corrupted table", (long long)r, (long long)ids[r]);
    long mapped = mapped_pages(p->param_copy[q], p->param_view[q]);
    if (mapped < 0) skip();
    if (p->param_view[q] && mapped != 2)
        fail_msg("the view maps %ld pages of the table; the faults wrote 2 and nothing else reads it", mapped);
    assert_memory_equal(param(mod, "emb.weight")->data, table, sizeof table);

    /* restored and given back: golden, nothing mapped */
    for (int k = 0; k < 2; k++) assert_int_equal(bf__plan_param_write(p, q, at[k], table[at[k]], &err), BF_OK);
    bf__plan_param_golden(p, q);
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    for (int64_t r = 0; r < R; r++) assert_memory_equal(y + r * D, table + ids[r] * D, D * sizeof(float));

    /* untracked: a bit flipped through the public API */
    bf_bitflip f = {.param = q, .index = 5 * D, .bit = 30};
    float old, now;
    assert_int_equal(bf_plan_flip_bit(p, &f, &old, &now, &err), BF_OK);
    memcpy(want, table, sizeof want);
    want[5 * D] = now;
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    for (int64_t r = 0; r < R; r++) assert_memory_equal(y + r * D, want + ids[r] * D, D * sizeof(float));
    bf_plan_free(p);
    bf_model_free(mod);
    free(buf);
}

/* A plan's fault in an arena table when no view can be had (memfd_create
 * failing: the process out of descriptors): the plan copies the table on
 * the heap, every lookup gives the faulty row, the model's table stays
 * golden (base/warena.h, the fallback). */
static void without_a_view_faults_go_to_a_heap_copy(void **state)
{
    (void)state;
    static float table[R * D], want[R * D];
    size_t len;
    uint8_t *buf = make_table(table, &len);
    bf_model *mod = NULL;
    bf_plan *p = NULL;
    bf_error err = {0};
    assert_int_equal(bf_model_load_buffer(buf, len, "table.onnx", &mod, &err), BF_OK);
    size_t q = (size_t)bf_model_find_param(mod, "emb.weight");
    assert_int_equal(bf_plan_create(mod, R, &p, &err), BF_OK);
    int64_t *ids = bf_plan_input(p, 0)->data;
    for (int64_t r = 0; r < R; r++) ids[r] = (r * 613) % R;
    memcpy(want, table, sizeof want);
    want[70 * D + 3] = -want[70 * D + 3] * 1024.0f;

    struct rlimit old;
    th_no_free_descriptors(&old);
    bf_status st = bf__plan_param_write(p, q, 70 * D + 3, want[70 * D + 3], &err);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(st, BF_OK);
    assert_int_equal(p->param_view[q], 0);   /* a heap copy, not a view */
    assert_int_equal(bf_plan_run(p, &err), BF_OK);
    const float *y = bf_plan_output(p, 0)->data;
    for (int64_t r = 0; r < R; r++)
        if (memcmp(y + r * D, want + ids[r] * D, D * sizeof(float)) != 0)
            fail_msg("lookup %lld (row %lld) differs from the corrupted table", (long long)r, (long long)ids[r]);
    assert_memory_equal(param(mod, "emb.weight")->data, table, sizeof table);
    bf_plan_free(p);
    bf_model_free(mod);
    free(buf);
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    big m;
    make_big(&m, N);
    int succeeded = 0;
    for (long n = 0; n < 300 && !succeeded; n++) {
        bf_model *mod = NULL;
        bf_plan *p = NULL;
        bf_error err = {0};
        bf_test_alloc_fail_after(n);
        bf_status st = bf_model_load_buffer(m.buf, m.len, "t.onnx", &mod, &err);
        if (st == BF_OK) st = bf_plan_create(mod, 2, &p, &err);
        if (st == BF_OK) {
            bf_bitflip f = {.param = 0, .index = 3, .bit = 1};
            st = bf_plan_flip_bit(p, &f, NULL, NULL, &err);
        }
        bf_test_alloc_fail_after(-1);
        if (st == BF_OK) succeeded = 1;
        else if (st != BF_ENOMEM) fail_msg("allocation %ld failing gave status %d: %s", n, st, err.msg);
        bf_plan_free(p);
        bf_model_free(mod);
    }
    assert_true(succeeded);
    free(m.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(large_weights_load_exactly),
        cmocka_unit_test(weights_read_from_the_file_exactly),
        cmocka_unit_test(faults_in_views_stay_private),
        cmocka_unit_test(real_fixtures_match_protobuf_c),
        cmocka_unit_test(truncations_are_refused),
        cmocka_unit_test(bad_raw_lengths_are_refused),
        cmocka_unit_test(lookups_read_clean_rows_from_the_model),
        cmocka_unit_test(without_a_view_faults_go_to_a_heap_copy),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
