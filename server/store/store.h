/* bitflipd — metadata in SQLite (DIR/bitflip.db, WAL, synchronous=FULL).
 *
 * What lives here: uploaded models and datasets (per tenant; the bytes are
 * blobs, see blob.h), campaigns and their state, the finished chunks of
 * running campaigns (the checkpoints a restart resumes from), token hashes,
 * and a boot counter. Every function is one transaction, so a crash leaves
 * either the old row or the new one.
 *
 * One bfd_store is used from one thread at a time (the daemon's loop thread;
 * `bitflipd token` uses its own). Strings in rows are malloc'd and freed by
 * the matching *_clear; fixed arrays are NUL-terminated. Lookups of a row that
 * does not exist (or belongs to another tenant) return BF_ENOTFOUND. */
#ifndef BFD_STORE_H
#define BFD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"

typedef struct bfd_store bfd_store;

/* Opens (creating if needed) the database at `path`, sets WAL and the
 * schema (versioned with PRAGMA user_version; an unknown newer version is an
 * error that says so). */
bf_status bfd_store_open(const char *path, bfd_store **out, bf_error *err);
void bfd_store_close(bfd_store *s);
/* Increments and returns the boot counter (1 on the first start). */
bf_status bfd_store_boot(bfd_store *s, int64_t *boot, bf_error *err);

/* --- models, datasets and error maps ------------------------------------ */

typedef enum bfd_kind { BFD_MODEL = 0, BFD_DATASET = 1, BFD_ERRMAP = 2, BFD_KIND_COUNT } bfd_kind;
/* "model", "dataset", "error map" */
const char *bfd_kind_name(bfd_kind k);

typedef struct bfd_item {
    int64_t seq;              /* insertion order, for paging */
    char id[65];              /* = the sha256 hex of the bytes: content-addressed */
    char *tenant;
    char *name;               /* as given at upload ("" if none) */
    int64_t size;             /* bytes */
    char *summary_json;       /* the graph or dataset summary, a JSON object */
    double created;           /* unix seconds */
    int corrupt;              /* its blob failed bfd_blob_verify; cleared by uploading the bytes again */
} bfd_item;

void bfd_item_clear(bfd_item *it);
/* Inserts; if the tenant already has this id, leaves it and sets *existed.
 * Called once the blob has just been written from verified bytes, so every
 * row of that blob (any tenant) stops being corrupt. */
bf_status bfd_item_put(bfd_store *s, bfd_kind k, const bfd_item *it, int *existed, bf_error *err);
bf_status bfd_item_get(bfd_store *s, bfd_kind k, const char *tenant, const char *id, bfd_item *out, bf_error *err);
/* The tenant's items with seq > after_seq, oldest first, at most `limit`;
 * *more is set when further items exist. */
bf_status bfd_item_list(bfd_store *s, bfd_kind k, const char *tenant, int64_t after_seq, int limit,
                        bfd_item **items, size_t *n, int *more, bf_error *err);
void bfd_item_list_free(bfd_item *items, size_t n);
bf_status bfd_item_delete(bfd_store *s, bfd_kind k, const char *tenant, const char *id, bf_error *err);
/* Marks every row (any tenant) of kind k naming blob `sha` corrupt: the
 * blob no longer hashes to its name. */
bf_status bfd_item_mark_corrupt(bfd_store *s, bfd_kind k, const char *sha, bf_error *err);
/* Rows (any tenant, either kind) still naming blob `sha`: 0 means the blob
 * may be removed. */
bf_status bfd_blob_refs(bfd_store *s, const char *sha, int64_t *refs, bf_error *err);

/* --- campaigns ---------------------------------------------------------- */

typedef enum bfd_state {
    BFD_QUEUED = 0, BFD_RUNNING, BFD_SUCCEEDED, BFD_FAILED, BFD_CANCELED, BFD_STATE_COUNT
} bfd_state;

const char *bfd_state_name(bfd_state st);   /* "queued", ... */
int bfd_state_parse(const char *name);      /* -1 if unknown */

typedef struct bfd_campaign_row {
    int64_t seq;              /* set by insert */
    char id[33];              /* "c" + 16 hex, chosen by the caller */
    char *tenant;
    bfd_state state;
    char *spec_json;          /* the spec as submitted (without "gates") */
    char *gates_json;         /* JSON array of gate strings, or NULL */
    char model_id[65], dataset_id[65];
    char *idem_key;           /* Idempotency-Key, or NULL */
    char idem_hash[65];       /* sha256 of the request body ("" without a key) */
    double created, started, finished;   /* unix seconds; 0 = not yet */
    int64_t trials_planned;
    int n_chunks;
    char *result_json;        /* the final result document, or NULL */
    char *error;              /* why it failed, or NULL */
    char *verdict;            /* "pass" / "fail" against the gates, or NULL */
} bfd_campaign_row;

void bfd_campaign_row_clear(bfd_campaign_row *r);
bf_status bfd_campaign_insert(bfd_store *s, bfd_campaign_row *r, bf_error *err);
/* tenant NULL: any tenant's. */
bf_status bfd_campaign_get(bfd_store *s, const char *tenant, const char *id, bfd_campaign_row *out, bf_error *err);
bf_status bfd_campaign_find_idem(bfd_store *s, const char *tenant, const char *key, bfd_campaign_row *out,
                                 bf_error *err);
/* The tenant's campaigns (state < 0: any state) with seq > after_seq, oldest
 * first, at most `limit`; result_json holds only {"summary": {"trials",
 * "outcomes"}} of the result (NULL without one), not the whole document. */
bf_status bfd_campaign_list(bfd_store *s, const char *tenant, int state, int64_t after_seq, int limit,
                            bfd_campaign_row **rows, size_t *n, int *more, bf_error *err);
/* Every queued or running campaign of every tenant, oldest first, with all
 * fields: what a restart resumes. */
bf_status bfd_campaign_unfinished(bfd_store *s, bfd_campaign_row **rows, size_t *n, bf_error *err);
void bfd_campaign_rows_free(bfd_campaign_row *rows, size_t n);
/* Queued or running campaigns of the tenant that use model, dataset or error
 * map `id` (an error map by its spec's "sha256:ID"). */
bf_status bfd_campaign_using(bfd_store *s, const char *tenant, bfd_kind k, const char *id, int64_t *count,
                             bf_error *err);
bf_status bfd_campaign_set_running(bfd_store *s, const char *id, double started, bf_error *err);
/* Final state; result_json, error and verdict may be NULL. Drops the
 * campaign's chunk checkpoints in the same transaction. An error that calls
 * a blob corrupt (bfd_blob_corrupt_named: a worker's bfd_blob_verify found
 * it) marks that model's or dataset's rows corrupt in the same transaction. */
bf_status bfd_campaign_finish(bfd_store *s, const char *id, bfd_state st, double finished, const char *result_json,
                              const char *error, const char *verdict, bf_error *err);
/* Removes the campaign and its chunks. */
bf_status bfd_campaign_delete(bfd_store *s, const char *id, bf_error *err);
/* Campaigns per state over all tenants (for /metrics). */
bf_status bfd_campaign_counts(bfd_store *s, int64_t counts[BFD_STATE_COUNT], bf_error *err);

/* --- checkpoints: finished chunks of a running campaign ------------------ */

bf_status bfd_chunk_put(bfd_store *s, const char *campaign_id, int idx, const char *result_json, bf_error *err);
/* The campaign's finished chunks, by index: idx[i], json[i] (malloc'd). */
bf_status bfd_chunk_list(bfd_store *s, const char *campaign_id, int **idx, char ***json, size_t *n, bf_error *err);
void bfd_chunk_list_free(int *idx, char **json, size_t n);

/* --- worker deaths: what keeps a poison campaign from crashing forever ---
 *
 * A campaign whose workers died twice is failed, never run a third time.
 * Deaths are counted here, durably, before the daemon decides (retry or
 * fail), and chunks handed to workers are counted as in flight, so that a
 * daemon that died itself (the OOM killer took it, kill -9) is seen at the
 * next start as one death of every campaign that had chunks in flight. */

/* One more (+1) or one fewer (-1) chunk of the campaign on a worker; the
 * count never goes below 0. */
bf_status bfd_campaign_inflight(bfd_store *s, const char *id, int delta, bf_error *err);
/* Every campaign's in-flight count to 0: a clean shutdown stopped them. */
bf_status bfd_campaign_inflight_clear(bfd_store *s, bf_error *err);
/* Records a death of the campaign's worker, and why: deaths + 1, `reason`
 * appended to the reasons ("; " between), in flight one fewer (`all`: none,
 * for the deaths a restart finds). *deaths and *reasons (malloc'd) are the
 * new totals. */
bf_status bfd_campaign_death(bfd_store *s, const char *id, const char *reason, int all, int *deaths, char **reasons,
                             bf_error *err);
/* The campaign's deaths and chunks in flight. */
bf_status bfd_campaign_deaths(bfd_store *s, const char *id, int *deaths, int *inflight, bf_error *err);

/* --- executor jobs: a campaign run by a cluster scheduler ----------------
 *
 * The scheduler's job id of a campaign (--executor slurm: its array job), so
 * that a restarted daemon follows the running job instead of submitting the
 * campaign again (work/slurm.h). */

/* Records `job` (at most 63 characters) for the campaign; BF_ENOTFOUND if there is no such campaign. */
bf_status bfd_campaign_set_job(bfd_store *s, const char *id, const char *job, bf_error *err);
/* The job recorded for the campaign into job[n] ("" when none). */
bf_status bfd_campaign_job(bfd_store *s, const char *id, char *job, size_t n, bf_error *err);

/* --- tokens ------------------------------------------------------------- */

/* Stores the hash of a token (see auth.h) for `tenant`. */
bf_status bfd_token_put(bfd_store *s, const char *hash_hex, const char *tenant, bf_error *err);
/* The tenant of a token hash (malloc'd), or BF_ENOTFOUND. */
bf_status bfd_token_lookup(bfd_store *s, const char *hash_hex, char **tenant, bf_error *err);
bf_status bfd_token_count(bfd_store *s, int64_t *count, bf_error *err);

#endif
