/* bitflip run --local: a fault campaign from a JSON spec, with a live
 * progress line, the result as a table, JSON or CSV, per-trial records,
 * shards, and CI gates with JUnit output. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sys/stat.h>

#include "bitflip/api/result.h"
#include "campaign_cli.h"
#include "cli.h"
#include "shard.h"

static const char help[] =
    "usage: bitflip run --local [OPTIONS] SPEC.json\n"
    "       bitflip run --server URL [--token TOKEN] [OPTIONS] SPEC.json\n"
    "\n"
    "Runs the fault campaign that SPEC.json describes (docs/CAMPAIGNS.md) and\n"
    "reports how the model degrades: outcome rates (masked, tolerable,\n"
    "critical, due) with intervals, metrics under faults, and the tensors and bits\n"
    "that matter most. Paths in the spec are relative to the working directory, or\n"
    "else to the spec's directory. It runs on this machine (--local), or on a\n"
    "bitflipd (--server): the spec's model and dataset (and a profiled campaign's\n"
    "error map, unless it names an upload as \"sha256:ID\") are uploaded, the campaign\n"
    "runs on the daemon's workers, progress comes from its event stream, and the\n"
    "result, trial records and gates are the same as a local run's. A spec with\n"
    "\"mitigations\" runs once per protection (clipping, ABFT, SBP, range checks)\n"
    "on the same faults and reports what each recovers and costs\n"
    "(docs/MITIGATIONS.md; --local only, and not with --shard).\n"
    "\n"
    "  --local              run here, without a daemon\n"
    "  --server URL         run on the bitflipd at URL (or $BITFLIP_SERVER), e.g.\n"
    "                       http://127.0.0.1:8080\n"
    "  --token TOKEN        its bearer token (or $BITFLIP_TOKEN), if it has tokens\n"
    "  --out FILE           write the result document (JSON)\n"
    "  --trials-out FILE    write one JSON line per trial: its faults (tensor, index,\n"
    "                       bits, old and new value), outcome and metrics\n"
    "  --format F           table, json or csv on stdout (default: table on a\n"
    "                       terminal, json otherwise)\n"
    "  --threads N          worker threads (default: all cores; --local only, as are\n"
    "                       --exact, --near-exact, --cache-budget, --stats and\n"
    "                       --shard)\n"
    "  --exact              re-run the whole eval set for every trial instead of\n"
    "                       only what the faults reach (slow; for checking: the\n"
    "                       records are the same bits, see docs/ENGINE.md)\n"
    "  --near-exact         let the differential engine apply a fault's change as\n"
    "                       a sparse update instead of recomputing it: faster on\n"
    "                       MLP and DLRM weight faults, but a record's metrics may\n"
    "                       differ from --exact in their last bits, and its outcome\n"
    "                       at a near tie (docs/ENGINE.md, \"How exact it is\")\n"
    "  --image-major        a one-image-per-call campaign (a detector): each\n"
    "                       image's golden run, then every trial on it (the\n"
    "                       images split between the threads), one image's\n"
    "                       checkpoints held a thread instead of every image's\n"
    "                       (the same records; --stats says when not:\n"
    "                       docs/engine/checkpoints.md, \"Image-major\"). The\n"
    "                       default from 2 threads (SSDlite320's 20 trials in\n"
    "                       two thirds of the time); at 1 thread trial-major is\n"
    "                       as fast or faster, so only when asked for\n"
    "  --trial-major        every trial over every image in turn, all images'\n"
    "                       checkpoints held (the default at 1 thread)\n"
    "  --image-block N      image-major (at any thread count) in blocks of N\n"
    "                       images a thread: their golden runs, then every trial\n"
    "                       on them (N images' checkpoints held a thread; default:\n"
    "                       as many as fit in 8 MiB over the threads, at least 1:\n"
    "                       docs/engine/checkpoints.md, \"Image blocks\")\n"
    "  --cache-budget SIZE  memory for the golden-activation cache, e.g. 256M or\n"
    "                       2G (default 1G); what does not fit is recomputed;\n"
    "                       it also bounds a one-image graph's checkpoints\n"
    "  --stats              print the engine, trial rate, cache size and setup, then\n"
    "                       a line for each part of the engine that ran (chain\n"
    "                       mode and full passes, channel-local steps,\n"
    "                       checkpoints; docs/ENGINE.md) on stderr\n"
    "  --shard I/N          run only trials t with t % N == I; merge the parts with\n"
    "                       'bitflip merge' (docs/SCALE.md)\n"
    "  --shard auto         the same, with I and N from the scheduler: a Slurm array\n"
    "                       (SLURM_ARRAY_TASK_ID, _MIN, _COUNT), a Kubernetes Indexed\n"
    "                       Job (JOB_COMPLETION_INDEX; N from --shards), an AWS Batch\n"
    "                       array (AWS_BATCH_JOB_ARRAY_INDEX, _SIZE), or\n"
    "                       BITFLIP_SHARD_INDEX; N also from $BITFLIP_SHARDS\n"
    "  --shards N           the number of shards, for --shard auto (at most 1000000)\n"
    "  --out-dir DIR        write the result into DIR (made if missing) as\n"
    "                       PREFIX.part-I-of-N.json for a shard (PREFIX.json\n"
    "                       otherwise), atomically: the same\n"
    "                       bytes however often a task is retried. 'bitflip merge\n"
    "                       DIR' merges the parts\n"
    "  --prefix NAME        PREFIX for --out-dir (default: the spec's file name\n"
    "                       without .json)\n"
    "  --gate EXPR          a CI gate such as 'critical_rate<=0.01' or 'auc>=0.74'\n"
    "                       (repeatable; operators <= >= < > ==); with mitigations\n"
    "                       also 'mitigation.NAME.critical_rate<=0.01' and\n"
    "                       'mitigation.NAME.recovery>=0.3'\n"
    "  --junit FILE         write the gates as JUnit XML, one test case each\n"
    CLI_PROGRESS_HELP
    CLI_LIMITS_HELP
    "                       (--local only)\n"
    CLI_RUN_MEMORY_HELP
    "\n"
    "Exit codes: 0 ran and every gate holds, 1 a gate failed, 2 usage or spec error,\n"
    "3 the campaign could not run.\n";

typedef struct run_opts {
    const char *spec_path, *out_path, *trials_path, *junit_path, *format, *server, *token;
    const char *shard_arg, *out_dir, *prefix;
    long long threads, shard_i, shard_n, shards;
    long long cache_budget;
    cli_limits lim;
    int local, exact, near_exact, stats, progress;
    long long image_block;   /* --image-block N (0: the default) */
    int image_major, order_flags;   /* 1 --image-major, -1 --trial-major, 0 neither (by the threads); flags 1|2 given */
    double progress_interval;
    double load_seconds;    /* reading the model and the eval set, for --stats */
    char *out_alloc;        /* out_path when made from --out-dir and --prefix */
    char spec_sha256[65];   /* of the spec file's bytes: a part's campaign identity */
    const char **gates;
    size_t n_gates;
} run_opts;

typedef struct progress_state {
    cli_progress out;
    int final;       /* the run is over: the last report, whatever the interval */
    double start;
    int64_t planned;
    double confidence;
    cli_pub *trials;          /* --trials-out, published when the run is over */
    const bf_campaign *c;
    const bf_campaign_spec *spec;
    int write_failed;
    /* a paired mitigation comparison: the configuration running, and each
     * trial's task metric and BER rate, in trial order */
    const char *mitigation;
    double *metric;
    int *rate, *outcome;
    int64_t n, cap;
    int swept;   /* the trials ran in the create's image-major sweep (on_sweep) */
} progress_state;

static void on_progress(void *user, const bf_campaign_result *r)
{
    progress_state *p = user;
    /* adaptive: the pilot's trials ran, though the counts leave them out */
    int64_t ran = r->trials_done + (r->adaptive_rounds > 1 ? r->adaptive_pilot : 0);
    if (!cli_progress_due(&p->out, p->final || ran >= p->planned)) return;
    double el = cli_now() - p->start, rate = el > 0 ? (double)ran / el : 0;
    double eta = rate > 0 ? (double)(p->planned - ran) / rate : 0;
    double lo = 0, hi = 0;
    int64_t crit = r->total.n[BF_OUTCOME_CRITICAL];
    double cr = r->trials_done ? (double)crit / (double)r->trials_done : 0.0;
    if (r->trials_done) bf_wilson(crit, r->trials_done, p->confidence, &lo, &hi);
    double dlo = 0, dhi = 0, du = r->trials_done ? (double)r->total.n[BF_OUTCOME_DUE] / (double)r->trials_done : 0.0;
    if (r->trials_done) bf_wilson(r->total.n[BF_OUTCOME_DUE], r->trials_done, p->confidence, &dlo, &dhi);
    if (r->trials_done && p->c && p->spec->sampling != BF_SAMPLE_UNIFORM && p->spec->sampling != BF_SAMPLE_LIST) {
        /* a stratified design: the population's rate, as the result gives it */
        bf_design d;
        bf_estimate e;
        bf_campaign_design(p->c, &d);
        bf_rate_estimate(&d, r, -1, -1, BF_OUTCOME_CRITICAL, p->confidence, &e);
        if (isfinite(e.rate)) cr = e.rate, lo = e.lo, hi = e.hi;
        bf_rate_estimate(&d, r, -1, -1, BF_OUTCOME_DUE, p->confidence, &e);
        if (isfinite(e.rate)) du = e.rate, dlo = e.lo, dhi = e.hi;
    }
    /* DUE beside critical: a protection moves trials between the two */
    cli_progress_print(&p->out, "%s%s%lld/%lld trials (%.0f%%)  %.0f trials/s  ETA %.0fs  critical %.2f%% [%.2f%%, %.2f%%]  "
                       "DUE %.2f%% [%.2f%%, %.2f%%]",
                       p->mitigation ? p->mitigation : "", p->mitigation ? ": " : "", (long long)ran,
                       (long long)p->planned, p->planned ? 100.0 * (double)ran / (double)p->planned : 100.0, rate,
                       eta, 100 * cr, 100 * lo, 100 * hi, 100 * du, 100 * dlo, 100 * dhi);
}

/* --image-major: the trials run image by image inside the campaign's
 * create, before on_progress's first report; this says how far the sweep is. */
static void on_sweep(void *user, int64_t images_done, int64_t images)
{
    progress_state *p = user;
    p->swept = 1;
    if (!cli_progress_due(&p->out, images_done >= images)) return;
    double el = cli_now() - p->start;
    double eta = images_done > 0 ? el * (double)(images - images_done) / (double)images_done : 0;
    cli_progress_print(&p->out, "%s%simage-major: golden run and every trial on image %lld/%lld (%.0f%%)  ETA %.0fs",
                       p->mitigation ? p->mitigation : "", p->mitigation ? ": " : "", (long long)images_done,
                       (long long)images, images ? 100.0 * (double)images_done / (double)images : 100.0, eta);
}

/* Called by the engine on this thread, once per trial, in trial order. */
static void on_trial(void *user, const bf_trial_record *rec)
{
    progress_state *p = user;
    if (p->metric && p->n < p->cap) {
        /* the task's higher-is-better metric, as bf_mitigations_render reads it */
        double auc = rec->metrics[BF_METRIC_AUC], tok = rec->metrics[BF_METRIC_TOKEN_ACCURACY], miou = rec->metrics[BF_METRIC_MIOU];
        p->metric[p->n] = isfinite(auc) ? auc : isfinite(tok) ? tok : isfinite(miou) ? miou : rec->metrics[BF_METRIC_ACCURACY];
        p->outcome[p->n] = (int)rec->outcome;
        p->rate[p->n++] = rec->rate_index;
    }
    if (!p->trials) return;
    json_t *j = bf_trial_to_json(p->c, p->spec, rec);
    if (j && p->mitigation) json_object_set_new(j, "mitigation", json_string(p->mitigation));
    char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!line) {
        p->write_failed = 1;   /* out of memory: the records would miss one */
        return;
    }
    pub_write(p->trials, line, strlen(line));
    pub_write(p->trials, "\n", 1);
    free(line);
}

static int parse_args(int argc, char **argv, run_opts *o)
{
    enum { OPT_LOCAL = CLI_OPT_FIRST, OPT_EXACT, OPT_NEAR_EXACT, OPT_STATS, OPT_CACHE_BUDGET, OPT_SERVER, OPT_TOKEN, OPT_OUT, OPT_TRIALS_OUT,
           OPT_JUNIT, OPT_FORMAT, OPT_GATE, OPT_THREADS, OPT_SHARD, OPT_SHARDS, OPT_OUT_DIR, OPT_PREFIX, OPT_PROGRESS,
           OPT_PROGRESS_INTERVAL, OPT_IMAGE_MAJOR, OPT_TRIAL_MAJOR, OPT_IMAGE_BLOCK };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"local", no_argument, NULL, OPT_LOCAL},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"near-exact", no_argument, NULL, OPT_NEAR_EXACT},
        {"image-major", no_argument, NULL, OPT_IMAGE_MAJOR},
        {"trial-major", no_argument, NULL, OPT_TRIAL_MAJOR},
        {"image-block", required_argument, NULL, OPT_IMAGE_BLOCK},
        {"stats", no_argument, NULL, OPT_STATS},
        {"cache-budget", required_argument, NULL, OPT_CACHE_BUDGET},
        {"server", required_argument, NULL, OPT_SERVER},
        {"token", required_argument, NULL, OPT_TOKEN},
        {"out", required_argument, NULL, OPT_OUT},
        {"trials-out", required_argument, NULL, OPT_TRIALS_OUT},
        {"junit", required_argument, NULL, OPT_JUNIT},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"gate", required_argument, NULL, OPT_GATE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"shard", required_argument, NULL, OPT_SHARD},
        {"shards", required_argument, NULL, OPT_SHARDS},
        {"out-dir", required_argument, NULL, OPT_OUT_DIR},
        {"prefix", required_argument, NULL, OPT_PREFIX},
        {"progress", required_argument, NULL, OPT_PROGRESS},
        {"progress-interval", required_argument, NULL, OPT_PROGRESS_INTERVAL},
        CLI_LIMITS_OPTIONS, CLI_OPTION_RUN_MEMORY,
        {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    int c, rc = 0;
    cli_parser_init(&p, "run", argc, argv, "h", longopts);
    while ((c = cli_parser_next(&p, &v)) != CLI_END) {
        switch (c) {
        case 'h': fputs(help, stdout); return -1;
        case OPT_LOCAL: o->local = 1; break;
        case OPT_EXACT: o->exact = 1; break;
        case OPT_NEAR_EXACT: o->near_exact = 1; break;
        case OPT_IMAGE_MAJOR: o->image_major = 1, o->order_flags |= 1; break;
        case OPT_TRIAL_MAJOR: o->image_major = -1, o->order_flags |= 2; break;
        case OPT_IMAGE_BLOCK: rc = parse_count("run", "--image-block", v, 1, 1 << 20, &o->image_block); break;
        case OPT_STATS: o->stats = 1; break;
        case OPT_CACHE_BUDGET: rc = parse_size("run", "--cache-budget", v, &o->cache_budget); break;
        case OPT_SERVER: o->server = v; break;
        case OPT_TOKEN: o->token = v; break;
        case OPT_OUT: o->out_path = v; break;
        case OPT_TRIALS_OUT: o->trials_path = v; break;
        case OPT_JUNIT: o->junit_path = v; break;
        case OPT_FORMAT: o->format = v; break;
        case OPT_GATE: o->gates[o->n_gates++] = v; break;
        case OPT_THREADS: rc = parse_count("run", "--threads", v, 1, 256, &o->threads); break;
        case OPT_SHARD: o->shard_arg = v; break;
        case OPT_SHARDS: rc = parse_count("run", "--shards", v, 1, SHARDS_MAX, &o->shards); break;
        case OPT_OUT_DIR: o->out_dir = v; break;
        case OPT_PREFIX: o->prefix = v; break;
        case OPT_PROGRESS: rc = cli_progress_parse("run", v, &o->progress); break;
        case OPT_PROGRESS_INTERVAL: rc = cli_progress_interval("run", v, &o->progress_interval); break;
        case CLI_ARG:
            if (o->spec_path) return usage_error("run", "one spec at a time (got '%s' and '%s')", o->spec_path, v);
            o->spec_path = v;
            break;
        case CLI_BAD: return EXIT_USAGE;
        default:
            if (!cli_limit_option("run", c, v, &o->lim, &rc)) return EXIT_USAGE;
        }
        if (rc) return rc;
    }
    if (!o->spec_path) return usage_error("run", "which campaign? usage: bitflip run --local SPEC.json");
    if (!o->server && !o->local) o->server = getenv("BITFLIP_SERVER");
    if (!o->token) o->token = getenv("BITFLIP_TOKEN");
    if (o->server && !*o->server) o->server = NULL;
    if (o->local && o->server && !getenv("BITFLIP_SERVER"))
        return usage_error("run", "--local and --server: choose one");
    if (o->local) o->server = NULL;
    if (!o->local && !o->server)
        return usage_error("run", "where? add --local to run here, or --server URL (or set BITFLIP_SERVER) to run on a bitflipd");
    if (o->order_flags == 3)
        return usage_error("run", "--image-major and --trial-major ask for opposite orders: give one");
    if (o->image_block && o->image_major < 0)
        return usage_error("run", "--image-block sets image-major's blocks; --trial-major asks for the other order");
    if (o->server && (o->threads || o->exact || o->near_exact || o->image_major || o->image_block || o->stats || o->cache_budget || o->shard_arg || o->shards ||
                      o->lim.model.no_fuse || o->lim.model.tie_order || o->lim.run_memory))
        return usage_error("run", "--threads, --exact, --near-exact, --image-major, --trial-major, --image-block, --cache-budget, --stats, --shard, --shards, --no-fuse, "
                                  "--tie-order and --run-memory are for "
                                  "--local runs; the daemon has its own workers");
    if (o->format && strcmp(o->format, "table") && strcmp(o->format, "json") && strcmp(o->format, "csv"))
        return usage_error("run", "--format must be table, json or csv, got '%s'", o->format);
    if (o->out_dir && o->out_path)
        return usage_error("run", "--out FILE and --out-dir DIR: choose one (--out-dir names the file from --prefix)");
    if (o->prefix && !o->out_dir) return usage_error("run", "--prefix names a file in --out-dir DIR; add --out-dir");
    if (o->prefix && (!*o->prefix || strchr(o->prefix, '/')))
        return usage_error("run", "--prefix is a file name's start, without '/', got '%s'", o->prefix);
    if (o->shard_arg && !strcmp(o->shard_arg, "auto")) {
        char from[256];
        if ((rc = shard_auto("run", o->shards, &o->shard_i, &o->shard_n, from, sizeof from)) != 0) return rc;
        fprintf(stderr, "bitflip run: shard %lld/%lld (%s)\n", o->shard_i, o->shard_n, from);
    } else if (o->shard_arg) {
        if ((rc = shard_parse("run", o->shard_arg, &o->shard_i, &o->shard_n)) != 0) return rc;
        if (o->shards && o->shards != o->shard_n)
            return usage_error("run", "--shard %s but --shards %lld: make them the same", o->shard_arg, o->shards);
    } else if (o->shards) {
        return usage_error("run", "--shards N is the count for --shard auto; add --shard auto (or give --shard I/N)");
    }
    return 0;
}

/* --out-dir DIR: DIR/PREFIX.part-I-of-N.json for a shard, DIR/PREFIX.json
 * otherwise; PREFIX defaults to the spec's file name without ".json". */
static int out_dir_path(run_opts *o)
{
    struct stat st;
    /* made if missing, as the first shard of a cluster job finds it; its
     * parent must exist (a typo in it fails here, not in a stray tree) */
    if (mkdir(o->out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "bitflip run: cannot make --out-dir %s: %s\n", o->out_dir, strerror(errno));
        return errno == ENOENT ? EXIT_USAGE : EXIT_INFRA;
    }
    if (stat(o->out_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return usage_error("run", "--out-dir %s is not a directory", o->out_dir);
    char prefix[512], name[640];
    if (o->prefix) snprintf(prefix, sizeof prefix, "%s", o->prefix);
    else {
        const char *base = strrchr(o->spec_path, '/');
        base = base ? base + 1 : o->spec_path;
        size_t bl = strlen(base);
        if (bl > 5 && !strcmp(base + bl - 5, ".json")) bl -= 5;
        snprintf(prefix, sizeof prefix, "%.*s", (int)bl, base);
    }
    if (o->shard_arg) shard_part_name(prefix, o->shard_i, o->shard_n, name, sizeof name);
    else snprintf(name, sizeof name, "%s.json", prefix);
    size_t dl = strlen(o->out_dir);
    o->out_alloc = malloc(dl + strlen(name) + 2);
    if (!o->out_alloc) { fprintf(stderr, "bitflip run: out of memory\n"); return EXIT_INFRA; }
    sprintf(o->out_alloc, "%s%s%s", o->out_dir, dl && o->out_dir[dl - 1] == '/' ? "" : "/", name);
    o->out_path = o->out_alloc;
    return 0;
}

/* The hex SHA-256 of the spec file's bytes (libcrypto). */
static int spec_digest(const char *path, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE], buf[65536];
    unsigned int mdlen = 0;
    FILE *f = fopen(path, "rb");
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = f && ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = EVP_DigestUpdate(ctx, buf, n);
    ok = ok && !ferror(f) && EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 32;
    if (f) fclose(f);
    EVP_MD_CTX_free(ctx);
    if (!ok) { fprintf(stderr, "bitflip run: cannot hash %s: %s\n", path, strerror(errno ? errno : EIO)); return EXIT_INFRA; }
    for (unsigned int i = 0; i < mdlen; i++) sprintf(out + 2 * i, "%02x", md[i]);
    return 0;
}

/* After a campaign was refused for memory (its estimate `now`): a smaller
 * golden cache that fits (what does not fit is recomputed), and the largest
 * smaller "batch" (a power of two) whose campaign fits, which is what a user
 * can change in the spec (a campaign keeps every activation of a batch:
 * docs/ENGINE.md); where neither alone fits (a language model's logits, kept
 * whole for every sample: the model and its outputs dominate), the
 * --job-memory that does, so the refusal always ends with something to type. */
static void suggest_fit(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *spec,
                        const bf_campaign_opts *eo, const bf_job_budget *now, long long limit)
{
    int said = 0;
    bf_campaign_spec s = *spec;
    if (now->cache_bytes > 0 && now->total_bytes - now->cache_bytes + ((uint64_t)1 << 20) <= (uint64_t)limit) {
        uint64_t room = ((uint64_t)limit - (now->total_bytes - now->cache_bytes)) & ~(((uint64_t)1 << 20) - 1);
        fprintf(stderr, "bitflip run: with --cache-budget %lluM it fits (values beyond the golden cache are "
                        "recomputed when a trial needs them: slower, the same results)\n",
                (unsigned long long)(room >> 20));
        said = 1;
    }
    for (int64_t b = 1; b < now->batch; b *= 2) {
        int64_t try_b = now->batch / (2 * b) > 0 ? now->batch / (2 * b) : 1;
        bf_error err = {0};
        bf_job_budget jb;
        s.batch = try_b;
        if (bf_campaign_estimate(m, ds, &s, eo, &jb, &err) != BF_OK) break;
        if (jb.total_bytes <= (uint64_t)limit) {
            char need[32];
            fprintf(stderr, "bitflip run: with \"batch\": %lld in the spec the campaign needs %s and fits (the records "
                            "are the same at any batch, unless the model normalises with batch statistics; a smaller "
                            "one is often faster: docs/CAMPAIGNS.md, batch)\n",
                    (long long)try_b, bf_bytes_str(jb.total_bytes, need, sizeof need));
            return;
        }
        if (try_b == 1) break;
    }
    /* whole MiB, rounded up, so the value printed is at least the estimate */
    if (!said && now->total_bytes < UINT64_MAX - ((uint64_t)1 << 20))
        fprintf(stderr, "bitflip run: with --job-memory %lluM it fits (the estimate above; the machine must have that "
                        "much free), or give the eval set fewer samples\n",
                (unsigned long long)((now->total_bytes + ((uint64_t)1 << 20) - 1) >> 20));
}

/* --stats' checkpoint line when the trials ran image-major (bf_campaign_result.ckpt.image_major) */
#define IMAJ_ON                                                                                                    \
    "image-major: each image's golden run, then every trial on it, %lld image%s a thread at a time (--image-block; "  \
    "the trials' time is the golden pass's, below)"

/* the checkpoint line's last part: the order the trials ran in, and why */
static const char *imaj_line(const bf_campaign_result *r, char *buf, size_t n)
{
    if (r->ckpt.image_major)
        snprintf(buf, n, IMAJ_ON, (long long)r->ckpt.image_block, r->ckpt.image_block == 1 ? "" : "s");
    else
        snprintf(buf, n, "trial-major: %s", r->ckpt.imaj_off ? r->ckpt.imaj_off : "?");
    return buf;
}

/* --stats: what the trials' Conv re-runs left out, where they did: the
 * partial sums they resumed from, the positions they computed alone */
static void print_conv_skips(const bf_campaign_result *r, const char *p, const char *sep)
{
    if (r->psum.bytes)
        fprintf(stderr,
                "bitflip run: %s%spartial sums: the golden pass kept the sums inside K of %d Convs (%.1f MiB, "
                "--cache-budget); %lld Conv re-runs whose input moved in one channel resumed from a checkpoint at or "
                "before it, skipping %.2f%% of the Convs' re-run work (%.2f%% of all the trials' re-run work)\n",
                p, sep, r->psum.convs, (double)r->psum.bytes / (1024.0 * 1024.0), (long long)r->psum.resumed,
                100 * r->psum.conv_skipped, 100 * r->psum.skipped);
    if (r->pos.runs)
        fprintf(stderr,
                "bitflip run: %s%spositions: %lld Conv re-runs computed only the output positions their moved input "
                "reaches, %.1f%% of their batches' positions\n",
                p, sep, (long long)r->pos.runs, r->pos.of ? 100.0 * (double)r->pos.positions / (double)r->pos.of : 0.0);
}

/* --stats: the run in one line (trials, rate, engine, threads, cache,
 * setup: what the bench scripts parse), then one line per engine part that ran,
 * in words: the differential engine (chain mode, full passes, the output
 * Gemm, fused epilogues), its channel-local steps, the checkpoints of a
 * one-image-per-call graph; then where the setup went and the share of the
 * work the trials re-ran. Every line starts "bitflip run: " and, for a
 * protected configuration, its name. */
static void print_stats(const run_opts *o, const char *cfg, const bf_campaign_result *r, int threads, int64_t batch,
                        double t_create)
{
    const char *p = cfg ? cfg : "", *sep = cfg ? ": " : "";
    double loop = r->seconds - r->setup_seconds;
    fprintf(stderr,
            "bitflip run: %s%s%lld trials in %.3f s (%.1f trials/s), %s engine, %d threads, batch %lld, golden cache %.1f MiB; "
            "setup %.3f s before the trials (campaign and golden pass%s %.3f s, workers' plans and checks %.3f s)\n",
            p, sep, (long long)r->trials_done, loop, loop > 0 ? (double)r->trials_done / loop : 0.0,
            r->exact ? "exact" : "differential", threads, (long long)batch, (double)r->cache_bytes / (1024.0 * 1024.0),
            t_create + r->setup_seconds, r->exact ? "" : " with the cache", t_create, r->setup_seconds);
    if (r->exact) {   /* full_reason: why a differential campaign ran exactly */
        fprintf(stderr, "bitflip run: %s%sexact engine: %s; %lld activations, BatchNorms or Adds ran inside their "
                        "Conv or Gemm (its epilogue) in each pass\n",
                p, sep, r->full_reason ? r->full_reason : "every trial ran the whole pass", (long long)r->fused_activations);
    } else if (r->ckpt.cuts && !r->chain_trials && !r->full_trials && !r->out_batched && !r->out_in_place && !r->plane_resizes &&
               r->chan_steps == r->chan_kinds.ckpt_conv + r->chan_kinds.ckpt_follow) {
        /* one image per call: the batch engine's counters are all zero, and
         * the checkpoint line below says what the trials did */
        fprintf(stderr,
                "bitflip run: %s%sdifferential engine, one image per call: each trial resumes from the golden pass's "
                "checkpoints (the checkpoints line); %lld Convs in each image's pass with their activation, BatchNorm "
                "or Add inside (the Conv's epilogue)\n",
                p, sep, (long long)r->fused_activations);
    } else {
        fprintf(stderr,
                "bitflip run: %s%sdifferential engine: %lld trials in chain mode (%lld of them redone exactly), %lld "
                "samples through linear segments; %lld trials run as full passes (more faults than a batch has "
                "samples, reaching nearly all of the pass: cheaper in full); %lld times the output Gemm ran once "
                "for every batch's changed rows; %lld %s with their activation, BatchNorm or Add inside (the Conv's "
                "epilogue); %lld batches' changed outputs written in place (%lld on one channel); %lld Resizes "
                "on the planes their input changed on alone (%lld planes)\n",
                p, sep, (long long)r->chain_trials, (long long)r->chain_exact, (long long)r->chain_linear,
                (long long)r->full_trials, (long long)r->out_batched, (long long)r->fused_activations,
                /* one image per call counts a pass's fused chains, as the exact engine does */
                r->ckpt.cuts ? "Convs in each image's pass" : "Conv re-runs in the trials", (long long)r->out_in_place,
                (long long)r->out_in_place_chan, (long long)r->plane_resizes, (long long)r->plane_resize_planes);
        /* chan_steps counts the checkpoints' one-channel Convs and the steps
         * that followed their channel too: they are the checkpoint line's */
        int64_t chan = r->chan_steps - r->chan_kinds.ckpt_conv - r->chan_kinds.ckpt_follow, kinds = r->chan_kinds.resize + r->chan_kinds.concat +
                       r->chan_kinds.conv + r->chan_kinds.gate + r->chan_kinds.reduce;
        fprintf(stderr,
                "bitflip run: %s%schannel-local: %lld steps ran on the one channel a fault changed instead of all "
                "channels: %lld Resize, %lld Concat, %lld depthwise or grouped Conv, %lld gates broadcast over a "
                "plane, %lld ReduceMean or ReduceSum, %lld others (BatchNorm, activations, pooling, Add or Mul with "
                "a golden operand)\n",
                p, sep, (long long)chan, (long long)r->chan_kinds.resize, (long long)r->chan_kinds.concat,
                (long long)r->chan_kinds.conv, (long long)r->chan_kinds.gate, (long long)r->chan_kinds.reduce,
                (long long)(chan - kinds));
    }
    print_conv_skips(r, p, sep);
    if (r->full_reason && !r->exact) fprintf(stderr, "bitflip run: %s%sexact engine: %s\n", p, sep, r->full_reason);
    if (r->tail_ordered > 0)
        fprintf(stderr,
                "bitflip run: %s%sthreads: the last %lld trials were handed out most expensive first (trial %lld "
                "first), so that no worker ends alone on a long one\n",
                p, sep, (long long)r->tail_ordered, (long long)r->tail_first);
    if (r->workers.n > 0)
        fprintf(stderr,
                "bitflip run: %s%sworkers: %d computed %lld trials in %.3f s of their threads' CPU (the busiest %.3f s) "
                "with %lld page faults; they waited %.3f s for room ahead of the fold (or the next adaptive "
                "round) and %.3f s from their last trial to the last worker's (summed over workers)\n",
                p, sep, r->workers.n, (long long)r->workers.trials, r->workers.cpu, r->workers.cpu_max,
                (long long)r->workers.faults, r->workers.wait, r->workers.idle_end);
    char tail[512];
    if (r->ckpt.tail_off)
        snprintf(tail, sizeof tail, "the detection tail's early end is off: %s", r->ckpt.tail_off);
    else
        snprintf(tail, sizeof tail, "%lld images ended before the detection tail's class scores, the rows the faults "
                 "moved selecting the golden classes with the golden scores (counted in the early ends above)",
                 (long long)r->ckpt.early_tail);
    char imaj[400];
    if (r->ckpt.cuts || r->chan_kinds.ckpt_conv)
        fprintf(stderr,
                "bitflip run: %s%scheckpoints (one image per call): each trial resumed each image from the golden "
                "pass's %zu checkpoints (%.1f MiB, --cache-budget; a recorded byte priced at %.1f ns%s), expected "
                "to skip %.1f%% of an image's pass; "
                "%lld images ended early at a checkpoint whose values came back golden; %lld steps the faults could "
                "not reach were not run (%zu of their values kept, %.1f MiB of the above); %lld faulted Convs ran "
                "on their one changed channel over the golden output, %lld of them with their fused BatchNorm, Add or "
                "activation, and %lld steps after them followed the channel on; %lld images ended where that channel "
                "came back golden (counted in the early ends above); %s; %s\n",
                p, sep, r->ckpt.cuts, (double)r->ckpt.bytes / (1024.0 * 1024.0), 1e9 * r->ckpt.byte_price,
                r->ckpt.huge_pages            ? " in 2 MiB pages, this host's 4 KiB fresh pages measured dear"
                : r->ckpt.byte_price > 1.5e-9 ? ", this host's fresh pages measured dear"
                                              : "",
                100 * r->ckpt.expected_skip,
                (long long)r->ckpt.early, (long long)r->ckpt.skipped, r->ckpt.stored,
                (double)r->ckpt.store_bytes / (1024.0 * 1024.0), (long long)r->chan_kinds.ckpt_conv,
                (long long)r->chan_kinds.ckpt_fused, (long long)r->chan_kinds.ckpt_follow, (long long)r->ckpt.early_chan,
                tail, imaj_line(r, imaj, sizeof imaj));
    /* where the setup went, and the model and eval set read before it */
    fprintf(stderr,
            "bitflip run: setup in detail: model and eval set read in %.3f s; golden evaluators' plans %.3f s; "
            "golden pass%s %.3f s (%.3f s of CPU) on %d thread%s; golden cache %.1f MiB (%.1f MiB written by the pass, "
            "the rest computed when first read); parameter-only values %.1f MiB (computed once, outside the "
            "cache's budget; %.1f MiB more in the workers' own copies of those past its limit); embedding index, exact Gemm blocks and chains "
            "%.3f s; the rest of the campaign %.3f s; workers' own plans %.3f s, golden checks %.3f s, "
            "cache made by the run %.3f s, executors %.3f s\n",
            o->load_seconds, r->setup.plans, r->exact ? "" : " filling the cache", r->setup.golden, r->setup.golden_cpu,
            r->setup.golden_threads, r->setup.golden_threads == 1 ? "" : "s",
            (double)r->cache_bytes / (1024.0 * 1024.0), (double)r->cache_pass_bytes / (1024.0 * 1024.0),
            (double)r->param_bytes / (1024.0 * 1024.0), (double)r->param_copy_bytes / (1024.0 * 1024.0), r->setup.index,
            fmax(0.0, t_create - r->setup.plans - r->setup.golden - r->setup.index), r->setup.worker_plans,
            r->setup.checks, r->setup.cache, r->setup.executors);
    if (!r->exact && isfinite(r->work_fraction)) {
        fprintf(stderr, "bitflip run: the trials re-ran %.2f%% of the work of running each in full %s",
                100 * r->work_fraction,
                r->ckpt.cuts ? "(each image from its checkpoint on, by the steps' counted work)"
                              : "(steps run in full or on rows, by their time on the golden pass)");
        for (int i = 0; i < r->n_top_steps; i++)
            fprintf(stderr, "%s %s '%s' %.0f%% (%.2f batches a trial)", i ? "," : "; most in", r->top_steps[i].op,
                    r->top_steps[i].node, 100 * r->top_steps[i].share, r->top_steps[i].per_trial);
        fputc('\n', stderr);
    }
}

/* One configuration of the campaign (mit NULL: unprotected, unpaired):
 * created, run with progress, and rendered into run->doc; for a paired
 * comparison also each trial's metric, rate and outcome (through ps) and
 * the protection's cost. *cp: the campaign, for the caller to free. */
static int run_config(const run_opts *o, const bf_campaign_spec *spec, const bf_model *m, const bf_dataset *ds,
                      const bf_mitigation *mit, int paired, progress_state *ps, bf_mitigation_run *run, bf_campaign **cp)
{
    bf_error err = {0};
    bf_campaign_result res;
    long threads = o->threads ? (long)o->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    /* the differential engine's golden pass is the campaign's: made once,
     * on the run's threads, whose evaluators the workers then adopt; a
     * shard's caches what its own trials read */
    /* image-major by default from 2 threads: the images split between the
     * threads and one golden pass in all, where trial-major's second worker
     * checks a golden pass of its own (SSDlite320, 20 trials, quiet:
     * 0.975 -> 0.645 s wall); at 1 thread it measured level after idle and
     * ~0.1 s slower back to back (docs/perf/detectors/h27.md) */
    int imaj = o->image_major > 0 || (o->image_major == 0 && (threads >= 2 || o->image_block));   /* --image-block asks for it */
    bf_campaign_prep prep = {.differential = !o->exact, .cache_budget = o->cache_budget, .threads = (int)threads,
                             .max_run_bytes = (uint64_t)o->lim.run_memory, .near_exact = o->near_exact,
                             .shard_index = o->shard_i, .shard_count = o->shard_n,
                             .host_pages = o->lim.data.host_pages, .image_major = imaj,
                             .image_block = o->image_block,
                             .sweep_progress = imaj ? on_sweep : NULL, .sweep_user = ps};
    double t_create = cli_now();
    ps->start = t_create;   /* on_sweep's ETA: the create runs the trials */
    ps->swept = 0;
    if (paired) ps->mitigation = mit->name;   /* on_sweep's label too */
    if (bf_campaign_create_prepared(m, ds, spec, mit, &prep, cp, &err) != BF_OK) return report_error("run", &err);
    t_create = cli_now() - t_create;
    bf_campaign *c = *cp;
    int64_t all = bf_campaign_num_trials(c);
    ps->c = c;
    if (!ps->swept) ps->start = cli_now();   /* swept: the trials' rate counts the sweep they ran in */
    ps->planned = all / o->shard_n + (o->shard_i < all % o->shard_n);
    if (paired) {
        ps->cap = ps->planned;
        ps->n = 0;
        run->metric = ps->metric = calloc((size_t)ps->cap + 1, sizeof *ps->metric);
        run->rate = ps->rate = calloc((size_t)ps->cap + 1, sizeof *ps->rate);
        run->outcome = ps->outcome = calloc((size_t)ps->cap + 1, sizeof *ps->outcome);
        if (!ps->metric || !ps->rate || !ps->outcome) return EXIT_INFRA;
    }
    bf_campaign_opts co = {.threads = (int)threads, .shard_index = o->shard_i, .shard_count = o->shard_n,
                           .on_trial = on_trial, .progress = on_progress, .user = ps, .exact = o->exact,
                           .near_exact = o->near_exact, .cache_budget = o->cache_budget};
    ps->final = 0;
    bf_status st = bf_campaign_run(c, &co, &res, &err);
    if (st == BF_OK) {   /* the engine reports while trials run; the log also gets where they ended */
        ps->final = 1;
        on_progress(ps, &res);
    }
    cli_progress_clear(&ps->out);
    if (st != BF_OK) return report_error("run", &err);
    if (o->stats) print_stats(o, mit ? mit->name : NULL, &res, co.threads, bf_campaign_batch(c), t_create);
    run->mit = mit;
    run->n = ps->n;
    run->doc = bf_result_render(bf_result_header(spec, c, &res), &res, 1);
    int rc = EXIT_OK;
    if (paired) {
        /* the cost: the golden pass, best of 5, with and without */
        run->storage = bf_campaign_storage_overhead(c);
        if (bf_campaign_golden_seconds(c, 5, &run->golden_seconds, &err) != BF_OK) rc = report_error("run", &err);
        else if (ps->out.mode == CLI_PROGRESS_BAR) {   /* a log has had the final line */
            const json_t *cr = json_object_get(json_object_get(json_object_get(run->doc, "summary"), "rates"), "critical");
            fprintf(stderr, "  %s: %lld trials, critical %.2f%%\n", mit->name, (long long)res.trials_done,
                    100 * json_number_value(json_object_get(cr, "rate")));
        }
    }
    bf_campaign_result_free(&res);
    return rc;
}

/* The model and eval set, timed (o->load_seconds), with the pages the host
 * measured cheap. */
static int load_run_inputs(run_opts *o, bf_campaign_spec *spec, bf_model **m, bf_dataset **ds)
{
    o->load_seconds = cli_now();
    o->lim.data.host_pages = bf_host_pages_measure();   /* once a process: the eval set's and campaigns' pages */
    /* the model's weights arena in 2 MiB pages where the host measured them
     * cheap and its 4 KiB pages dear, as the eval set and the checkpoints
     * are: the loader writes it whole once (SSDlite320's 14 MB: 0.10 s of
     * CPU instead of 0.16 for `bitflip info` on the AMD VM, where each
     * newly mapped 4 KiB page traps to the host; docs/perf/detectors.md,
     * h24-ssd). Elsewhere 4 KiB pages, as before (docs/perf/dlrm.md, "The
     * huge-pages default": a host that backs 2 MiB pages lazily measures
     * them dear) */
    if (o->lim.data.host_pages.huge) o->lim.model.huge_pages = 1;
    int rc;
    if ((rc = load_inputs("run", o->spec_path, spec, &o->lim, m, ds)) != 0) return rc;
    o->load_seconds = cli_now() - o->load_seconds;
    return EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
    run_opts o = {.shard_n = 1, .progress_interval = CLI_PROGRESS_INTERVAL_DEFAULT};
    cli_limits_init(&o.lim);
    int rc = EXIT_OK;
    bf_campaign_spec spec = {0};
    int have_spec = 0;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_campaign *c = NULL;
    json_t *doc = NULL;
    gate *gates = NULL;
    progress_state ps = {0};
    cli_pub trials = {0};   /* --trials-out */
    size_t n_cfg = 0;
    bf_mitigation_run *runs = NULL;

    o.gates = calloc((size_t)argc + 1, sizeof *o.gates);
    if (!o.gates) { fprintf(stderr, "bitflip run: out of memory\n"); return EXIT_INFRA; }
    if ((rc = parse_args(argc, argv, &o)) != 0) { rc = rc < 0 ? EXIT_OK : rc; goto out; }
    gates = calloc(o.n_gates + 1, sizeof *gates);
    if (!gates) { rc = EXIT_INFRA; goto out; }
    for (size_t i = 0; i < o.n_gates; i++)
        if ((rc = gate_parse("run", o.gates[i], &gates[i])) != 0) goto out;

    if (o.out_dir && (rc = out_dir_path(&o)) != 0) goto out;
    if (o.server) {
        cli_progress prog;
        cli_progress_start(&prog, "run", o.progress, o.progress_interval);
        rc = remote_run(o.server, o.token, o.spec_path, o.out_path, o.format, o.trials_path, gates, o.n_gates, o.junit_path,
                        &prog);
        goto out;
    }
    if ((rc = load_spec("run", o.spec_path, &o.lim, &spec)) != 0) goto out;
    have_spec = 1;
    if (o.shard_arg && (rc = spec_digest(o.spec_path, o.spec_sha256)) != 0) goto out;
    if ((rc = load_run_inputs(&o, &spec, &m, &ds)) != 0) goto out;
    {
        /* what the campaign will hold, before it allocates any of it */
        bf_error err = {0};
        bf_job_budget jb;
        long threads = o.threads ? (long)o.threads : sysconf(_SC_NPROCESSORS_ONLN);
        bf_campaign_opts eo = {.threads = (int)(threads > 0 ? threads : 1), .exact = o.exact,
                               .cache_budget = o.cache_budget};
        if (bf_campaign_estimate(m, ds, &spec, &eo, &jb, &err) != BF_OK) { rc = report_error("run", &err); goto out; }
        if ((rc = check_job_memory("run", "campaign", &jb, o.lim.job_memory)) != 0) {
            suggest_fit(m, ds, &spec, &eo, &jb, o.lim.job_memory);
            goto out;
        }
    }
    /* A paired comparison runs the campaign once per configuration, on the
     * same faults; without mitigations, once, unprotected. */
    n_cfg = spec.n_mitigations ? spec.n_mitigations : 1;
    if (n_cfg > 1 && o.shard_arg) {
        fprintf(stderr, "bitflip run: --shard does not combine with mitigations: every configuration runs every trial, "
                        "paired; drop --shard or the spec's \"mitigations\"\n");
        rc = EXIT_USAGE;
        goto out;
    }
    runs = calloc(n_cfg, sizeof *runs);
    if (!runs) { rc = EXIT_INFRA; goto out; }

    if (o.trials_path) {
        if ((rc = pub_open("run", o.trials_path, &trials)) != 0) goto out;
        ps.trials = &trials;
    }
    cli_progress_start(&ps.out, "run", o.progress, o.progress_interval);
    ps.spec = &spec;
    ps.confidence = spec.stop_confidence > 0 ? spec.stop_confidence : 0.95;
    for (size_t k = 0; k < n_cfg; k++) {
        bf_campaign_free(c);
        c = NULL;
        if ((rc = run_config(&o, &spec, m, ds, spec.n_mitigations ? &spec.mitigations[k] : NULL, n_cfg > 1, &ps,
                             &runs[k], &c)) != 0)
            goto out;
    }
    if (ps.trials) {
        ps.trials = NULL;
        if (ps.write_failed) { fprintf(stderr, "bitflip run: writing %s failed (out of memory)\n", o.trials_path); rc = EXIT_INFRA; goto out; }
        if ((rc = pub_close("run", o.trials_path, &trials)) != 0) goto out;
    }

    doc = runs[0].doc;
    runs[0].doc = NULL;
    if (n_cfg > 1) {
        runs[0].doc = doc;   /* read by the renderer; the document is doc itself */
        json_t *mits = bf_mitigations_render(runs, n_cfg, ps.confidence);
        runs[0].doc = NULL;
        json_object_set_new(doc, "mitigations", mits);
    }
    /* a part says which it is and of which campaign (the spec file's hash):
     * 'bitflip merge' checks both; nothing in it depends on when or where
     * it ran, so a retried task writes the same bytes */
    if (o.shard_arg)
        json_object_set_new(doc, "shard", json_pack("{s:I, s:I, s:s}", "index", (json_int_t)o.shard_i, "count",
                                                    (json_int_t)o.shard_n, "spec_sha256", o.spec_sha256));
    if ((rc = emit_result("run", doc, o.out_path, o.format)) != 0) goto out;
    rc = gates_check("run", doc, gates, o.n_gates, o.junit_path);
out:
    pub_abort(&trials);
    for (size_t k = 0; runs && k < n_cfg; k++) {
        json_decref(runs[k].doc);
        free((double *)runs[k].metric);
        free((int *)runs[k].rate);
        free((int *)runs[k].outcome);
    }
    free(runs);
    json_decref(doc);
    bf_campaign_free(c);
    bf_dataset_free(ds);
    bf_model_free(m);
    if (have_spec) bf_campaign_spec_free(&spec);
    free(gates);
    free(o.gates);
    free(o.out_alloc);
    return rc;
}
