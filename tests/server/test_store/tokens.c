/* test_store: tokens, tenant names and random hex. */
#include "test_store.h"

/* --- tokens and auth */

void test_tokens(void **state)
{
    fx *f = *state;
    bf_error err = {0};
    char t1[BFD_TOKEN_LEN + 1], t2[BFD_TOKEN_LEN + 1], h1[65], h2[65];
    char *tenant = NULL;
    int64_t count = -1;
    assert_int_equal(bfd_token_new(t1, &err), BF_OK);
    assert_int_equal(bfd_token_new(t2, &err), BF_OK);
    assert_int_equal(strlen(t1), 68);
    assert_memory_equal(t1, "bft_", 4);
    for (int i = 4; i < 68; i++) assert_non_null(strchr("0123456789abcdef", t1[i]));
    assert_string_not_equal(t1, t2);

    /* the hash is sha256 of the token text (digest from Python's hashlib) */
    char known[] = "bft_0000000000000000000000000000000000000000000000000000000000000000";
    assert_int_equal(bfd_token_hash(known, h1, &err), BF_OK);
    assert_string_equal(h1, "3c1d0a93187a12329af53bc922b575f0e195daa52ee4fafc257172e52bf63abd");

    assert_int_equal(bfd_token_hash(t1, h1, &err), BF_OK);
    assert_int_equal(bfd_token_hash(t2, h2, &err), BF_OK);
    assert_int_equal(bfd_token_count(f->s, &count, &err), BF_OK);
    assert_int_equal(count, 0);
    assert_int_equal(bfd_token_put(f->s, h1, "alice", &err), BF_OK);
    assert_int_equal(bfd_token_put(f->s, h2, "bob", &err), BF_OK);
    assert_int_equal(bfd_token_count(f->s, &count, &err), BF_OK);
    assert_int_equal(count, 2);
    assert_int_equal(bfd_token_lookup(f->s, h1, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "alice");
    free(tenant);
    assert_int_equal(bfd_token_lookup(f->s, h2, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "bob");
    free(tenant);
    /* the token itself is not what is stored */
    assert_int_equal(bfd_token_lookup(f->s, t1, &tenant, &err), BF_ENOTFOUND);
    assert_null(tenant);
    assert_null(strstr(err.msg, t1));
    assert_int_equal(bfd_token_put(f->s, h1, "mallory", &err), BF_EINVAL);

    /* hashes sharing the leading digits the index narrows by are told apart
     * by the whole (constant-time) compare */
    char near[65];
    memcpy(near, h1, sizeof near);
    near[63] = near[63] == '0' ? '1' : '0';
    assert_int_equal(bfd_token_lookup(f->s, near, &tenant, &err), BF_ENOTFOUND);
    assert_int_equal(bfd_token_put(f->s, near, "carol", &err), BF_OK);
    assert_int_equal(bfd_token_lookup(f->s, near, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "carol");
    free(tenant);
    assert_int_equal(bfd_token_lookup(f->s, h1, &tenant, &err), BF_OK);
    assert_string_equal(tenant, "alice");
    free(tenant);
    assert_int_equal(bfd_token_lookup(f->s, "abc", &tenant, &err), BF_ENOTFOUND);
}

void test_tenant_names_and_random_hex(void **state)
{
    (void)state;
    char name[80];
    assert_true(bfd_tenant_valid("a"));
    assert_true(bfd_tenant_valid("Team-7_ml.prod"));
    memset(name, 'x', 64);
    name[64] = '\0';
    assert_true(bfd_tenant_valid(name));
    name[64] = 'x';
    name[65] = '\0';
    assert_false(bfd_tenant_valid(name));
    assert_false(bfd_tenant_valid(""));
    assert_false(bfd_tenant_valid(NULL));
    assert_false(bfd_tenant_valid("a b"));
    assert_false(bfd_tenant_valid("a/b"));
    assert_false(bfd_tenant_valid("a\nb"));
    assert_false(bfd_tenant_valid("caf\xc3\xa9"));
    assert_false(bfd_tenant_valid("x\""));

    bf_error err = {0};
    char hex[81];
    memset(hex, '#', sizeof hex);
    assert_int_equal(bfd_random_hex(hex, 40, &err), BF_OK);   /* more than one internal piece */
    assert_int_equal(strlen(hex), 80);
    for (int i = 0; i < 80; i++) assert_non_null(strchr("0123456789abcdef", hex[i]));
    assert_int_equal(bfd_random_hex(hex, 8, &err), BF_OK);
    assert_int_equal(strlen(hex), 16);
    assert_int_equal(bfd_random_hex(hex, 0, &err), BF_OK);
    assert_string_equal(hex, "");
}
