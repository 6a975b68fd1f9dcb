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
    CLI_LIMITS_HELP;

int cmd_plan(int argc, char **argv)
{
    const char *spec_path = NULL;
    double margin = 0, conf = 0;
    cli_limits lim;
    long long threads = 0, cache_budget = 0;
    int exact = 0, rc = 0;
    cli_limits_init(&lim);
    enum { OPT_EXACT = CLI_OPT_FIRST, OPT_THREADS, OPT_CACHE_BUDGET, OPT_MARGIN, OPT_CONFIDENCE };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"cache-budget", required_argument, NULL, OPT_CACHE_BUDGET},
        {"margin", required_argument, NULL, OPT_MARGIN},
        {"confidence", required_argument, NULL, OPT_CONFIDENCE},
        CLI_LIMITS_OPTIONS,
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
            char t[32], a[32], b[32], cc[32], d[32], e[32], f[32], g[32], what[320];
            printf("memory            %s at peak on %d thread%s (job memory limit %s)\n",
                   bf_bytes_str(jb.total_bytes, t, sizeof t), jb.threads, jb.threads == 1 ? "" : "s",
                   bf_bytes_str((uint64_t)lim.job_memory, g, sizeof g));
            printf("  plans %s (%s each at batch %lld%s), golden cache %s, outputs %s, stored weights %s,\n"
                   "  eval set %s, model %s\n",
                   bf_bytes_str(jb.plans_bytes, a, sizeof a), bf_bytes_str(jb.plan.total_bytes, b, sizeof b),
                   (long long)jb.batch, jb.rest ? " and one for the last batch" : "",
                   bf_bytes_str(jb.cache_bytes, cc, sizeof cc), bf_bytes_str(jb.outputs_bytes, d, sizeof d),
                   bf_bytes_str(jb.weights_bytes, e, sizeof e), bf_bytes_str(jb.dataset_bytes, f, sizeof f),
                   bf_bytes_str(jb.model_bytes, t, sizeof t));
            printf("  the plan's largest buffer: %s\n", bf_plan_item_str(&jb.plan.largest, what, sizeof what));
            rc = check_job_memory("plan", "campaign", &jb, lim.job_memory);
        }
        if (rc) {}
        else if (bf_campaign_create(m, ds, &spec, &c, &err) != BF_OK) rc = report_error("plan", &err);
        else {
            double pop = bf_campaign_population(c);
            printf("fault population  %.6g faults (%zu tensors)\n", pop, bf_campaign_num_sites(c));
            for (size_t i = 0; i < bf_campaign_num_sites(c); i++) {
                const bf_site *s = bf_campaign_site(c, i);
                printf("  %-32s %12lld elements x %2d bits%s%s\n", s->name, (long long)s->elements, s->bits,
                       s->torch_name ? "   " : "", s->torch_name ? s->torch_name : "");
            }
            printf("margin %.4g at confidence %.4g (z = %.4f): %lld trials (Leveugle et al. 2009, p = 0.5)\n", margin, conf,
                   bf_z_for_confidence(conf), (long long)bf_leveugle_trials(pop, margin, conf));
            printf("the spec asks for %lld trials\n", (long long)bf_campaign_num_trials(c));
        }
    }
    bf_campaign_free(c);
    bf_dataset_free(ds);
    bf_model_free(m);
    bf_campaign_spec_free(&spec);
    return rc;
}
