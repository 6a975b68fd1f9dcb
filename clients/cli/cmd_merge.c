/* bitflip merge: shards of one campaign into the result of the whole. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/api/result.h"
#include "campaign_cli.h"
#include "cli.h"

static const char help[] =
    "usage: bitflip merge [--out FILE] [--format table|json|csv] [--gate EXPR]... [--junit FILE] PART.json...\n"
    "\n"
    "Merges the results of 'bitflip run --shard I/N' (one file per shard, every shard\n"
    "once) into the result the unsharded campaign gives: the same counts, sums and\n"
    "intervals, byte for byte. Gates and JUnit output work as for 'bitflip run'.\n";

int cmd_merge(int argc, char **argv)
{
    const char *out_path = NULL, *format = NULL, *junit = NULL;
    const char **parts = calloc((size_t)argc + 1, sizeof *parts);
    gate *gates = calloc((size_t)argc + 1, sizeof *gates);
    size_t n_parts = 0, n_gates = 0;
    int rc = EXIT_OK;
    json_t *first = NULL, *doc = NULL;
    bf_campaign_result total = {0}, part = {0};
    unsigned char *seen = NULL;
    int64_t count = 0;
    bf_error err = {0};
    if (!parts || !gates) { rc = EXIT_INFRA; goto out; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(help, stdout); goto out; }
        if (!strcmp(a, "--out") || !strcmp(a, "--format") || !strcmp(a, "--junit") || !strcmp(a, "--gate")) {
            if (!v) { rc = usage_error("merge", "%s needs a value", a); goto out; }
            if (!strcmp(a, "--out")) out_path = v;
            else if (!strcmp(a, "--format")) format = v;
            else if (!strcmp(a, "--junit")) junit = v;
            else if ((rc = gate_parse("merge", v, &gates[n_gates++])) != 0) goto out;
            i++;
        } else if (a[0] == '-' && a[1]) { rc = usage_error("merge", "unknown option '%s'", a); goto out; }
        else parts[n_parts++] = a;
    }
    if (!n_parts) { rc = usage_error("merge", "which results? usage: bitflip merge PART.json..."); goto out; }
    if (format && strcmp(format, "table") && strcmp(format, "json") && strcmp(format, "csv")) {
        rc = usage_error("merge", "--format must be table, json or csv, got '%s'", format);
        goto out;
    }
    for (size_t i = 0; i < n_parts; i++) {
        json_error_t je;
        json_t *d = json_load_file(parts[i], 0, &je);
        if (!d) { fprintf(stderr, "bitflip merge: %s: %s (line %d)\n", parts[i], je.text, je.line); rc = EXIT_USAGE; goto out; }
        const json_t *sh = json_object_get(d, "shard");
        int64_t idx = sh ? json_integer_value(json_object_get(sh, "index")) : 0;
        int64_t cnt = sh ? json_integer_value(json_object_get(sh, "count")) : 1;
        if (i == 0) {
            count = cnt;
            seen = calloc((size_t)(cnt > 0 ? cnt : 1), 1);
            if (!seen) { json_decref(d); rc = EXIT_INFRA; goto out; }
        }
        if (cnt != count || idx < 0 || idx >= count) {
            fprintf(stderr, "bitflip merge: %s is shard %lld/%lld, but %s is one of %lld shards\n", parts[i], (long long)idx,
                    (long long)cnt, parts[0], (long long)count);
            json_decref(d);
            rc = EXIT_USAGE;
            goto out;
        }
        if (seen[idx]++) {
            fprintf(stderr, "bitflip merge: shard %lld/%lld is given twice (%s)\n", (long long)idx, (long long)count, parts[i]);
            json_decref(d);
            rc = EXIT_USAGE;
            goto out;
        }
        if (first && (!json_equal(json_object_get(d, "campaign"), json_object_get(first, "campaign")) ||
                      !json_equal(json_object_get(d, "golden"), json_object_get(first, "golden")))) {
            fprintf(stderr, "bitflip merge: %s is from another campaign (or model, data or engine) than %s\n", parts[i], parts[0]);
            json_decref(d);
            rc = EXIT_USAGE;
            goto out;
        }
        bf_status st = bf_result_parse(d, i == 0 ? &total : &part, &err);
        if (st == BF_OK && i > 0) st = bf_campaign_result_merge(&total, &part, &err);
        if (i > 0) bf_campaign_result_free(&part);   /* also what a failed parse allocated */
        if (st != BF_OK) { fprintf(stderr, "bitflip merge: %s: %s\n", parts[i], err.msg); json_decref(d); rc = EXIT_USAGE; goto out; }
        if (!first) first = d;
        else json_decref(d);
    }
    for (int64_t k = 0; k < count; k++)
        if (!seen[k]) {
            fprintf(stderr, "bitflip merge: shard %lld/%lld is missing\n", (long long)k, (long long)count);
            rc = EXIT_USAGE;
            goto out;
        }
    json_t *header = json_pack("{s:O, s:O, s:O}", "bitflip", json_object_get(first, "bitflip"), "campaign",
                               json_object_get(first, "campaign"), "golden", json_object_get(first, "golden"));
    doc = bf_result_render(header, &total, count);
    if ((rc = emit_result("merge", doc, out_path, format)) != 0) goto out;
    rc = gates_check("merge", doc, gates, n_gates, junit);
out:
    bf_campaign_result_free(&total);
    json_decref(first);
    json_decref(doc);
    free(seen);
    free(parts);
    free(gates);
    return rc;
}
