/* test_store's shared fixtures (in test_store.c, with the runner) and the tests
 * of its parts, one subject each (the house's 900 lines: tests/arch/size_check.py). */
#ifndef BF_TESTS_SERVER_TEST_STORE_H
#define BF_TESTS_SERVER_TEST_STORE_H

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include <sqlite3.h>

#include "http/auth.h"
#include "store/store.h"

/* the fixtures */
/* 64-hex ids: distinct and easy to read back */
#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ID_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

typedef struct fx {
    char dir[64];
    char db[128];
    bfd_store *s;
} fx;

void remove_tree(const char *path);
int setup(void **state);
int teardown(void **state);
void reopen(fx *f);
void put_item(bfd_store *s, bfd_kind k, const char *tenant, const char *id, const char *name, int *existed);
bfd_campaign_row campaign(const char *id, const char *tenant);
void insert(bfd_store *s, bfd_campaign_row *r);
bfd_state state_of(bfd_store *s, const char *id);
size_t chunk_count(bfd_store *s, const char *id);

/* items.c: items (put, get, paging, sequence numbers, tenants, deletes and blob references) */
void test_item_put_get(void **state);
void test_item_paging(void **state);
void test_item_seq_not_reused(void **state);
void test_tenant_isolation(void **state);
void test_item_delete_and_blob_refs(void **state);

/* campaigns.c: campaigns (insert, idempotency, lists, lifecycle, cancel) and executor jobs */
void test_state_names(void **state);
void test_campaign_insert_get(void **state);
void test_campaign_idempotency(void **state);
void test_campaign_list(void **state);
void test_campaign_lifecycle(void **state);
void test_cancel_queued_and_delete_running(void **state);
void test_executor_job(void **state);
void test_unopenable_path(void **state);

/* tokens.c: tokens, tenant names and random hex */
void test_tokens(void **state);
void test_tenant_names_and_random_hex(void **state);

/* file.c: the database file (reopen, garbage, newer and older schemas), corrupt blobs, error maps */
void test_persists_across_reopen(void **state);
void test_garbage_file_refused(void **state);
void test_newer_schema_refused(void **state);
void test_corrupt_mark_and_heal(void **state);
void test_finish_marks_corrupt(void **state);
void test_schema_1_upgraded(void **state);
void test_schema_3_takes_error_maps(void **state);
void test_campaign_uses_error_map(void **state);

#endif
