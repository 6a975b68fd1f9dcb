/* bitflip plan: how many trials a campaign needs (Leveugle et al., DATE 2009). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "campaign_cli.h"
#include "cli.h"

static const char help[] =
    "usage: bitflip plan [--margin E] [--confidence C] SPEC.json\n"
    "\n"
    "Prints the campaign's fault population (every bit of every selected tensor) and\n"
    "the number of trials for which an outcome rate is known within +-E at confidence\n"
    "C, from Leveugle et al., 'Statistical fault injection: quantified error and\n"
    "confidence' (DATE 2009), with the worst-case p = 0.5:\n"
    "  n = N / (1 + E^2 (N - 1) / (z^2 p (1 - p)))\n"
    "E and C default to the spec's stop margin and confidence, else 0.01 and 0.95.\n";

int cmd_plan(int argc, char **argv)
{
    const char *spec_path = NULL;
    double margin = 0, conf = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(help, stdout); return EXIT_OK; }
        if (!strcmp(a, "--margin") || !strcmp(a, "--confidence")) {
            char *end;
            double x = v ? strtod(v, &end) : 0;
            if (!v || end == v || *end || !(x > 0 && x < 1)) return usage_error("plan", "%s wants a number in (0, 1)", a);
            if (!strcmp(a, "--margin")) margin = x; else conf = x;
            i++;
        } else if (a[0] == '-' && a[1]) return usage_error("plan", "unknown option '%s'", a);
        else spec_path = a;
    }
    if (!spec_path) return usage_error("plan", "which campaign? usage: bitflip plan SPEC.json");
    bf_campaign_spec spec = {0};
    int rc = load_spec("plan", spec_path, &spec);
    if (rc) return rc;
    if (!margin) margin = spec.stop_margin > 0 ? spec.stop_margin : 0.01;
    if (!conf) conf = spec.stop_confidence > 0 ? spec.stop_confidence : 0.95;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_campaign *c = NULL;
    bf_error err = {0};
    if ((rc = load_inputs("plan", spec_path, &spec, &m, &ds)) == 0) {
        if (bf_campaign_create(m, ds, &spec, &c, &err) != BF_OK) rc = report_error("plan", &err);
        else {
            double pop = bf_campaign_population(c);
            printf("fault population  %.6g faults (%zu tensors)\n", pop, bf_campaign_num_sites(c));
            for (size_t i = 0; i < bf_campaign_num_sites(c); i++) {
                const bf_site *s = bf_campaign_site(c, i);
                printf("  %-32s %12lld elements x %2d bits\n", s->name, (long long)s->elements, s->bits);
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
