/* Helpers shared by the campaign commands (run, merge, plan). */
#ifndef BF_CAMPAIGN_CLI_H
#define BF_CAMPAIGN_CLI_H

#include <jansson.h>

#include "bitflip/bitflip.h"
#include "bitflip/campaign.h"

#include "bitflip/api/atomic_file.h"
#include "bitflip/api/gate.h"
#include "cli.h"

typedef bf_gate gate;

/* Each returns 0 or an exit code, having printed why. */
int gate_parse(const char *cmd, const char *expr, gate *out);
/* Checks every gate against the document: prints each, writes JUnit if
 * asked; EXIT_OK if all hold, EXIT_GATE if one fails, EXIT_USAGE for a gate
 * on a metric the result cannot have. */
int gates_check(const char *cmd, const json_t *doc, const gate *gates, size_t n, const char *junit_path);

/* Reads and validates a spec; on problems prints every one with its JSON
 * Pointer and returns EXIT_USAGE. */
int load_spec(const char *cmd, const char *path, const cli_limits *lim, bf_campaign_spec *spec);
/* Loads the spec's model and dataset, and for model "profiled" its error
 * map into spec->errmap (paths relative to the working directory, else to
 * the spec's directory). */
int load_inputs(const char *cmd, const char *spec_path, bf_campaign_spec *spec, const cli_limits *lim,
                bf_model **m, bf_dataset **ds);

/* A path from a spec: as given if it exists (or is absolute), else relative
 * to the spec's directory (malloc'd; NULL when out of memory). */
char *resolve_input(const char *spec_path, const char *p);

/* Runs the campaign on a bitflipd (remote.c): uploads the spec's model and
 * dataset, submits, follows its events with a progress line, fetches the
 * result; then as a local run (output, trial records, gates, JUnit). */
int remote_run(const char *url, const char *token, const char *spec_path, const char *out_path, const char *format,
               const char *trials_path, const gate *gates, size_t n_gates, const char *junit_path, cli_progress *prog);

/* Writes the document (indented JSON) to `path` atomically
 * (bitflip/api/atomic_file.h: a temporary file in the same directory, fsync,
 * rename, fsync of the directory); readers see the old file or the whole new
 * one. A path that is not a regular file (a symbolic link such as
 * /dev/stdout, a device, a FIFO) is written through, in place. 0, or
 * EXIT_INFRA with the reason on stderr. */
int write_json_atomic(const char *cmd, const json_t *doc, const char *path);
/* The same for text; a file published by rename gets mode 0666 less the umask. */
int write_text_atomic(const char *cmd, const char *path, const char *text);
int write_bytes_atomic(const char *cmd, const char *path, const void *data, size_t len);

/* A file written piece by piece (trial records) and published at the end
 * as write_bytes_atomic publishes: by rename for a regular file (nothing
 * under its name until pub_close), written through for /dev/stdout and the
 * like. A failed write is remembered and reported by pub_close. */
typedef struct cli_pub {
    FILE *through;            /* not a regular file */
    bf_afile *af;             /* a regular one */
    int failed;
    bf_error err;
} cli_pub;
/* 0, or EXIT_INFRA with the reason on stderr. */
int pub_open(const char *cmd, const char *path, cli_pub *p);
void pub_write(cli_pub *p, const void *data, size_t len);
/* Publishes; 0, or EXIT_INFRA with the reason on stderr (nothing published). */
int pub_close(const char *cmd, const char *path, cli_pub *p);
/* Drops what was written (the target stays as it was); fine on a closed one. */
void pub_abort(cli_pub *p);

/* Writes the document to out_path (if any) and prints it on stdout in
 * `format` (NULL: table on a terminal, JSON otherwise). */
int emit_result(const char *cmd, const json_t *doc, const char *out_path, const char *format);

#endif
