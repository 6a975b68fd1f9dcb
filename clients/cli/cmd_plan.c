/* bitflip plan: how many trials a campaign needs (Leveugle et al., DATE 2009). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "campaign_cli.h"
#include "cli.h"

static const char help[] =
    "usage: bitflip plan [--margin E] [--confidence C] [OPTIONS] SPEC.json\n"
    "\n"
    "Prints the campaign's fault population (every bit of every selected tensor) and\n"
    "the number of trials for which an outcome rate is known within +-E at confidence\n"
    "C, from Leveugle et al., 'Statistical fault injection: quantified error and\n"
    "confidence' (DATE 2009), with the worst-case p = 0.5:\n"
    "  n = N / (1 + E^2 (N - 1) / (z^2 p (1 - p)))\n"
    "E and C default to the spec's stop margin and confidence, else 0.01 and 0.95.\n"
    "\n"
    "It also prints the memory the campaign will hold at its peak (plans, golden\n"
    "cache, outputs, eval set, model), worked out from shapes as 'bitflip run\n"
    "--local' does before it starts, for N threads.\n"
    "\n"
    "  --threads N          threads to size the campaign for (default: all cores)\n"
    "  --cache-budget SIZE  its golden-activation cache budget (default 1G)\n"
    "  --exact              size it for --exact (no cache)\n"
    "  --sample N           also run about N of its trials (shard 0 of trials/N) as\n"
    "                       'bitflip run --local' would, on --threads, and project\n"
    "                       the whole campaign's time from their rate and the setup\n"
    "  --wall DURATION      with --sample: how many shards of --threads each finish\n"
    "                       within DURATION (90s, 30m, 2h), for --shard auto on a\n"
    "                       cluster (docs/SCALE.md)\n"
    CLI_LIMITS_HELP
    CLI_RUN_MEMORY_HELP;

/* "90", "90s", "30m", "2h", "1.5h" in seconds; 0 or EXIT_USAGE. */
static int parse_duration(const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    double unit = !strcmp(end, "") || !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : 0;
    if (end == v || unit == 0 || !(x > 0) || x * unit > 365.0 * 86400)
        return usage_error("plan", "--wall wants a duration such as 90s, 30m or 2h, got '%s'", v);
    *out = x * unit;
    return 0;
}

/* Seconds for a reader: "0.84 s", "12.5 min", "3.2 h". */
static const char *duration_str(double sec, char *buf, size_t len)
{
    if (sec < 60) snprintf(buf, len, "%.2f s", sec);
    else if (sec < 7200) snprintf(buf, len, "%.1f min", sec / 60);
    else snprintf(buf, len, "%.1f h", sec / 3600);
    return buf;
}

/* --sample: about `sample` trials timed as a run would time them (the
 * campaign prepared for the differential engine, its setup apart), the
 * whole campaign's time projected, and with --wall the shards it needs. */
static int plan_time(const bf_model *m, const bf_dataset *ds, const bf_campaign_spec *spec, int threads, int exact,
                     long long cache_budget, long long sample, double wall, const char *wall_text, long long run_memory)
{
    char d1[32], d2[32];
    bf_campaign_prep prep = {.differential = !exact, .cache_budget = cache_budget, .threads = threads,
                             .max_run_bytes = (uint64_t)run_memory};
    bf_campaign *c = NULL;
    bf_campaign_result res;
    bf_error err = {0};
    double t0 = cli_now();
    if (bf_campaign_create_prepared(m, ds, spec, NULL, &prep, &c, &err) != BF_OK) return report_error("plan", &err);
    double t_create = cli_now() - t0;
    long long all = (long long)bf_campaign_num_trials(c);
    long long parts = sample < all ? (all + sample - 1) / sample : 1;
    bf_campaign_opts co = {.threads = threads, .shard_index = 0, .shard_count = parts, .exact = exact,
                           .cache_budget = cache_budget};
    if (bf_campaign_run(c, &co, &res, &err) != BF_OK) {
        bf_campaign_free(c);
        return report_error("plan", &err);
    }
    bf_campaign_free(c);
    double setup = t_create + res.setup_seconds, loop = res.seconds - res.setup_seconds;
    long long done = (long long)res.trials_done;
    bf_campaign_result_free(&res);
    size_t configs = spec->n_mitigations ? spec->n_mitigations : 1;
    if (!(loop > 0) || done == 0) {
        printf("time              %lld trials ran too fast to time: sample more (--sample)\n", done);
        return 0;
    }
    double rate = (double)done / loop;
    printf("time              %lld trials sampled (shard 0/%lld) on %d thread%s: %.6g trials/s, setup %.3g s\n", done,
           parts, threads, threads == 1 ? "" : "s", rate, setup);
    printf("  the whole campaign (%lld trials%s): about %s on %d thread%s\n", all,
           configs > 1 ? ", once per protection" : "",
           duration_str(setup + (double)configs * (double)all / rate, d1, sizeof d1), threads, threads == 1 ? "" : "s");
    if (wall <= 0) return 0;
    if (configs > 1) {
        printf("shards            none: a spec with mitigations runs paired and does not shard\n");
        return 0;
    }
    if (wall <= setup) {
        fprintf(stderr, "bitflip plan: a shard's setup alone takes %.3g s, more than --wall %.6g s: allow more time\n", setup,
                wall);
        return EXIT_USAGE;
    }
    /* every shard pays the setup, then runs its share of the trials */
    long long k = (long long)ceil((double)all / (rate * (wall - setup)));
    if (k < 1) k = 1;
    if (k > all) k = all;
    double each = setup + (double)((all + k - 1) / k) / rate;
    printf("shards            %lld of %d thread%s each to finish within %s (--shard auto --shards %lld), about %s each\n",
           k, threads, threads == 1 ? "" : "s", wall_text, k, duration_str(each, d2, sizeof d2));
    return 0;
}

/* A spec's further fault groups (docs/CAMPAIGNS.md): drawn in the same
 * trials as group 0, from their own sites. */
static void print_groups(const bf_campaign *c)
{
    for (size_t g = 1; g < bf_campaign_num_groups(c); g++) {
        printf("fault group %zu      %zu tensors, drawn in the same trials\n", g, bf_campaign_group_num_sites(c, g));
        for (size_t i = 0; i < bf_campaign_group_num_sites(c, g); i++) {
            const bf_site *s = bf_campaign_group_site(c, g, i);
            printf("  %-32s %12lld elements x %2d bits per sample%s%s\n", s->name, (long long)s->elements, s->bits,
                   s->site ? "   " : "", s->site ? s->site : "");
        }
    }
}

/* The estimate's terms (bf_campaign_estimate), as `bitflip plan` prints them. */
static void print_memory(const bf_job_budget *jb, long long job_memory)
{
    char t[32], a[32], b[32], cc[32], d[32], e[32], f[32], g[32], pk[32], pv[32], what[320];
    printf("memory            %s at peak on %d thread%s (job memory limit %s)\n",
           bf_bytes_str(jb->total_bytes, t, sizeof t), jb->threads, jb->threads == 1 ? "" : "s",
           bf_bytes_str((uint64_t)job_memory, g, sizeof g));
    printf("  plans %s (%s each at batch %lld%s), golden cache %s, outputs %s, stored weights %s,\n"
           "  packed weights %s, parameter-only values %s, eval set %s, model %s\n",
           bf_bytes_str(jb->plans_bytes, a, sizeof a), bf_bytes_str(jb->plan.total_bytes, b, sizeof b),
           (long long)jb->batch, jb->rest ? " and one for the last batch" : "",
           bf_bytes_str(jb->cache_bytes, cc, sizeof cc), bf_bytes_str(jb->outputs_bytes, d, sizeof d),
           bf_bytes_str(jb->weights_bytes, e, sizeof e), bf_bytes_str(jb->packed_bytes, pk, sizeof pk),
           bf_bytes_str(jb->param_only_bytes, pv, sizeof pv),
           bf_bytes_str(jb->dataset_bytes, f, sizeof f),
           bf_bytes_str(jb->model_bytes, t, sizeof t));
    printf("  the plan's largest buffer: %s\n", bf_plan_item_str(&jb->plan.largest, what, sizeof what));
}

int cmd_plan(int argc, char **argv)
{
    const char *spec_path = NULL;
    double margin = 0, conf = 0;
    cli_limits lim;
    long long threads = 0, cache_budget = 0, sample = 0;
    double wall = 0;
    const char *wall_text = NULL;
    int exact = 0, rc = 0;
    cli_limits_init(&lim);
    enum { OPT_EXACT = CLI_OPT_FIRST, OPT_THREADS, OPT_CACHE_BUDGET, OPT_MARGIN, OPT_CONFIDENCE, OPT_SAMPLE, OPT_WALL };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"cache-budget", required_argument, NULL, OPT_CACHE_BUDGET},
        {"margin", required_argument, NULL, OPT_MARGIN},
        {"confidence", required_argument, NULL, OPT_CONFIDENCE},
        {"sample", required_argument, NULL, OPT_SAMPLE},
        {"wall", required_argument, NULL, OPT_WALL},
        CLI_LIMITS_OPTIONS, CLI_OPTION_RUN_MEMORY,
        {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    int oc;
    cli_parser_init(&p, "plan", argc, argv, "h", longopts);
    while ((oc = cli_parser_next(&p, &v)) != CLI_END) {
        switch (oc) {
        case 'h': fputs(help, stdout); return EXIT_OK;
        case OPT_EXACT: exact = 1; break;
        case OPT_THREADS: rc = parse_count("plan", "--threads", v, 1, 256, &threads); break;
        case OPT_CACHE_BUDGET: rc = parse_size("plan", "--cache-budget", v, &cache_budget); break;
        case OPT_SAMPLE: rc = parse_count("plan", "--sample", v, 1, 1000000000, &sample); break;
        case OPT_WALL: rc = parse_duration(v, &wall); wall_text = v; break;
        case OPT_MARGIN:
        case OPT_CONFIDENCE: {
            const char *name = oc == OPT_MARGIN ? "--margin" : "--confidence";
            char *end;
            double x = strtod(v, &end);
            if (end == v || *end || !(x > 0 && x < 1)) return usage_error("plan", "%s wants a number in (0, 1), got '%s'", name, v);
            if (oc == OPT_MARGIN) margin = x; else conf = x;
            break;
        }
        case CLI_ARG:
            if (spec_path) return usage_error("plan", "one spec at a time (got '%s' and '%s')", spec_path, v);
            spec_path = v;
            break;
        case CLI_BAD: return EXIT_USAGE;
        default:
            if (!cli_limit_option("plan", oc, v, &lim, &rc)) return EXIT_USAGE;
        }
        if (rc) return rc;
    }
    if (!spec_path) return usage_error("plan", "which campaign? usage: bitflip plan SPEC.json");
    if (wall > 0 && !sample) return usage_error("plan", "--wall needs --sample N: the shards come from a measured rate");
    bf_campaign_spec spec = {0};
    rc = load_spec("plan", spec_path, &lim, &spec);
    if (rc) return rc;
    if (!margin) margin = spec.stop_margin > 0 ? spec.stop_margin : 0.01;
    if (!conf) conf = spec.stop_confidence > 0 ? spec.stop_confidence : 0.95;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_campaign *c = NULL;
    bf_error err = {0};
    if ((rc = load_inputs("plan", spec_path, &spec, &lim, &m, &ds)) == 0) {
        bf_job_budget jb;
        if (!threads) threads = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
        bf_campaign_opts co = {.threads = (int)threads, .exact = exact, .cache_budget = cache_budget};
        if (bf_campaign_estimate(m, ds, &spec, &co, &jb, &err) != BF_OK) rc = report_error("plan", &err);
        else {
            print_memory(&jb, lim.job_memory);
            rc = check_job_memory("plan", "campaign", &jb, lim.job_memory);
        }
        if (rc) {}
        else if (bf_campaign_create_prepared(m, ds, &spec, NULL, &(bf_campaign_prep){.max_run_bytes = (uint64_t)lim.run_memory},
                                             &c, &err) != BF_OK)
            rc = report_error("plan", &err);
        else {
            double pop = bf_campaign_population(c);
            printf("fault population  %.6g faults (%zu tensors)\n", pop, bf_campaign_num_sites(c));
            for (size_t i = 0; i < bf_campaign_num_sites(c); i++) {
                const bf_site *s = bf_campaign_site(c, i);
                printf("  %-32s %12lld elements x %2d bits%s%s%s%s\n", s->name, (long long)s->elements, s->bits,
                       s->torch_name ? "   " : "", s->torch_name ? s->torch_name : "", s->site ? "   " : "",
                       s->site ? s->site : "");
            }
            print_groups(c);
            printf("margin %.4g at confidence %.4g (z = %.4f): %lld trials (Leveugle et al. 2009, p = 0.5)\n", margin, conf,
                   bf_z_for_confidence(conf), (long long)bf_leveugle_trials(pop, margin, conf));
            printf("the spec asks for %lld trials\n", (long long)bf_campaign_num_trials(c));
            if (bf_campaign_tie_order(c))   /* the result's campaign.tie_order */
                printf("ties              %s order (--tie-order): a TopK or NonMaxSuppression keeps equal values so\n",
                       bf_campaign_tie_order(c));
            if (spec.sampling == BF_SAMPLE_EXHAUSTIVE)
                printf("sampling exhaustive: every fault once, %lld trials (the limit is %lld); --sample N times them\n",
                       (long long)bf_campaign_num_trials(c), (long long)BF_EXHAUSTIVE_MAX);
            if (spec.sampling == BF_SAMPLE_ADAPTIVE) {
                bf_design d;
                bf_campaign_design(c, &d);
                long long strata = (long long)d.n_sites * d.n_pos;
                printf("sampling adaptive: %zu tensors x %d bit positions = %lld strata; a pilot of %lld trials (allocation "
                       "only), one more per stratum, then rounds until the stop targets hold (docs/STATISTICS.md)\n",
                       d.n_sites, d.n_pos, strata, 2 * strata);
            }
            if (sample) rc = plan_time(m, ds, &spec, (int)threads, exact, cache_budget, sample, wall, wall_text, lim.run_memory);
        }
    }
    bf_campaign_free(c);
    bf_dataset_free(ds);
    bf_model_free(m);
    bf_campaign_spec_free(&spec);
    return rc;
}
