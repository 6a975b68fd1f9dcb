/* bitflipd — the daemon's shared state and its parts.
 *
 * One thread runs libuv, libmicrohttpd (external epoll: its fd in a uv_poll,
 * its timeout in a uv_timer), SQLite and every campaign's in-memory state.
 * The engine runs in worker processes (work/proc.h): chunks on a pool of
 * them (work/scheduler.h), upload checks in one-shot ones (work/check.h),
 * each under the job memory limit, talking to the loop over pipes. So
 * nothing here is locked, nothing on the loop waits on a worker, and a
 * worker's crash is news for the loop, not the end of it. (libuv's thread
 * pool still finishes uploads' files: fsync and rename, no parsing.) */
#ifndef BFD_DAEMON_H
#define BFD_DAEMON_H

#include <stdint.h>
#include <uv.h>

#include "bitflip/api/limits.h"
#include "store/blob.h"
#include "metrics.h"
#include "store/store.h"

struct MHD_Daemon;
typedef struct bfd_sched bfd_sched;
typedef struct bfd_live bfd_live;
struct bfd_camp;

typedef struct bfd_config {
    char host[256];           /* --listen HOST:PORT */
    int port;                 /* 0: an ephemeral port (printed at start) */
    char *data_dir;
    int workers;              /* worker processes; 0: every core */
    int64_t job_memory;       /* --job-memory: each worker's address-space limit, bytes */
    int log_json;             /* --log-format json */
    char *tokens_file;        /* tenant:token lines, hashed into the store at start */
    char *port_file;          /* write the bound port here (tests, scripts) */
    char *tls_cert, *tls_key; /* PEM files: serve HTTPS (both or neither) */
    int insecure_http;        /* a non-loopback bind without TLS was asked for knowingly */
    /* limits: each exceeded is a clear 4xx */
    int64_t max_upload_bytes;     /* model and dataset bodies (413) */
    int64_t max_json_bytes;       /* campaign specs (413) */
    int64_t max_trials;           /* per campaign (422) */
    int max_connections;          /* concurrent (503 past it, see http.c) */
    int max_connections_per_ip;   /* concurrent from one address (refused past it); 0: no limit */
    int idle_timeout;             /* seconds a connection may stay silent before it is closed */
    int tenant_running;           /* campaigns running at once per tenant */
    int tenant_queued;            /* queued per tenant (429 past it) */
    double heartbeat_seconds;     /* SSE comment lines on idle streams */
    double drain_seconds;         /* SIGTERM: how long running chunks may finish */
    /* --limit KEY=VALUE: the parsers' limits, for the daemon's own spec
     * parse, and as limits_arg ("k=v,k=v" as given, NULL: none) for the
     * children that load uploads (work/proc.h), which parse it again */
    bf_limits limits;
    char *limits_arg;
    /* where campaigns run: "local" worker processes, or "slurm" arrays (work/slurm.h) */
    char *executor;
    char *slurm_partition, *slurm_account;   /* sbatch --partition, --account; NULL: the cluster's defaults */
    char *slurm_dir;          /* shared with the nodes: specs, parts, logs; NULL: DATA_DIR/slurm */
    char *slurm_bitflip;      /* the CLI the tasks run; NULL: the bitflip beside bitflipd */
    double slurm_poll_seconds;
} bfd_config;

void bfd_config_defaults(bfd_config *c);
/* Reads a JSON config file over the current values (flags given after
 * override it); its keys are the long options' names with '_' for '-'
 * ("max_upload_bytes"); every unknown key or wrong value is an error naming it. */
bf_status bfd_config_load(bfd_config *c, const char *path, bf_error *err);
void bfd_config_free(bfd_config *c);
/* --listen HOST:PORT (IPv6 as [::1]:PORT; port 0: any free one). */
bf_status bfd_parse_listen(bfd_config *c, const char *s, bf_error *err);

/* The daemon's settings, one row each: the long option, the config file key
 * and the --help line all come from here, so none can be missing from the
 * others. Options that are actions rather than settings (--config, --check,
 * --help, --version) are main.c's and have type BFD_OPT_ACTION. */
typedef enum bfd_opt_type {
    BFD_OPT_STR,              /* a malloc'd string */
    BFD_OPT_INT,              /* int, lo..hi */
    BFD_OPT_I64,              /* int64_t, lo..hi */
    BFD_OPT_BYTES,            /* int64_t, lo..hi; takes K, M, G suffixes (powers of 1024) */
    BFD_OPT_SECONDS,          /* double, lo..hi */
    BFD_OPT_SWITCH,           /* int set to 1; no value */
    BFD_OPT_LISTEN,           /* host and port */
    BFD_OPT_LOGFMT,           /* text | json */
    BFD_OPT_LIMITS,           /* --limit KEY=VALUE, repeatable: bf_limits and limits_arg */
    BFD_OPT_ACTION,           /* main.c's: not a config field */
} bfd_opt_type;

typedef struct bfd_option {
    const char *name;         /* without "--" */
    const char *arg;          /* the value's name in --help; NULL: a switch */
    bfd_opt_type type;
    size_t off;               /* the field in bfd_config */
    double lo, hi;
    const char *help;
} bfd_option;

extern const bfd_option bfd_options[];   /* ends with a row whose name is NULL */
/* Sets option `o` from its text value (NULL for a switch); the error names the option. */
bf_status bfd_option_set(bfd_config *c, const bfd_option *o, const char *value, bf_error *err);
/* The value of `o` in `c` as --help shows it ("1G", "127.0.0.1:8080", "none"). */
void bfd_option_show(const bfd_config *c, const bfd_option *o, char *buf, size_t n);

typedef struct bfd {
    bfd_config cfg;
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    uv_poll_t mhd_poll;
    uv_timer_t mhd_timer;
    uv_timer_t heartbeat;
    uv_timer_t kick;          /* runs MHD on the next loop turn (never inside its callbacks) */
    uv_async_t wake;          /* news in the scheduler's outbox */
    uv_signal_t sig_term, sig_int;
    uv_timer_t drain_timer;
    bfd_store *store;
    bfd_blobs *blobs;
    bfd_metrics *metrics;
    bfd_sched *sched;
    bfd_live *live;           /* campaigns in memory, by id (work/live.h) */
    /* A campaign has a new event: wakes its SSE streams. Set by main.c to
     * bfd_sse_notify, so work/ reaches http/ without including it. */
    void (*on_event)(struct bfd *d, struct bfd_camp *c);
    int64_t boot;             /* event ids are "<boot>-<seq>": a restart starts a new run of ids */
    int auth;                 /* tokens exist: every /v1 route needs one */
    int draining;             /* SIGTERM seen: refuse new work, ready = 503 */
    double drain_started;
    int port;                 /* bound */
    char *tls_cert_pem, *tls_key_pem;   /* the files' text, for libmicrohttpd (http.c) */
    int connections;          /* open now (past cfg.max_connections: 503, see BFD_CONN_RESERVE) */
    int suspended;            /* requests waiting on work off the loop (uploads being checked) */
    int check_in_process;     /* checks run on the loop, not in a child (work/check.c): fuzz_http's, for speed */
    double started;
} bfd;

double bfd_now(void);         /* unix seconds, wall clock */
double bfd_mono(void);        /* seconds, monotonic */
/* One log line (text or JSON per cfg.log_json) on stderr. */
void bfd_log(const bfd *d, const char *level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Connections past cfg.max_connections still get a 503 with a reason, up to
 * this many more; past that libmicrohttpd stops accepting until one closes
 * (new ones wait in the kernel's listen queue). */
#define BFD_CONN_RESERVE 16
/* Descriptors kept for everything but connections: SQLite's three, the
 * listen socket, epoll, libuv's own, an upload's temp file, blob reads,
 * workers' pipes (this plus 4 per worker). */
#define BFD_FD_HEADROOM 128

/* http.c: the libmicrohttpd side. */
bf_status bfd_http_start(bfd *d, bf_error *err);
void bfd_http_run(bfd *d);    /* let MHD do its work now (not from inside an MHD callback) */
void bfd_http_kick(bfd *d);   /* ... on the next loop turn (safe anywhere on the loop thread) */
void bfd_http_quiesce(bfd *d);/* stop accepting; open requests finish */
void bfd_http_stop(bfd *d);

#endif
