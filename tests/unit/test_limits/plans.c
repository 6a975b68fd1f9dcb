/* test_limits: the plan and safetensors estimates. */
#include "test_limits.h"

/* --- plans: memory known before allocating */

void estimate_matches_hand_arithmetic(void **state)
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

void bytes_are_printed_in_binary_units(void **state)
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

void memory_bomb_is_refused_before_allocating(void **state)
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

void safetensors_json_depth(void **state)
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

void safetensors_counts_and_bytes(void **state)
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
