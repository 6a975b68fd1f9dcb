/* bitflip report --spec SPEC --trial K --image I: the picture of what trial
 * K's faults did to image I (golden and faulty detections, or masks). The
 * result is checked against the spec (seed, trials, task) before the trial
 * runs again in libbitflip-report (bfr_trial_picture, report/src/trial_run.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/report.h"
#include "campaign_cli.h"
#include "report_trial.h"

static const char *task_of(const json_t *doc)
{
    const json_t *g = json_object_get(doc, "golden");
    if (!g) g = json_object_get(json_object_get(doc, "result"), "golden");
    return json_string_value(json_object_get(g, "task"));
}

static const json_t *campaign_of(const json_t *doc)
{
    const json_t *c = json_object_get(doc, "campaign");
    return c ? c : json_object_get(json_object_get(doc, "result"), "campaign");
}

int report_trial_figure(const report_trial_req *q, const json_t *result, json_t **fig)
{
    const char *task = task_of(result);
    if (!task || (strcmp(task, "detection") && strcmp(task, "segmentation")))
        return usage_error("report", "--trial draws detections or masks, but %s is a result of a %s campaign", q->result_path,
                           task ? task : "task-less");
    cli_limits lim;
    cli_limits_init(&lim);
    bf_campaign_spec spec;
    int rc = load_spec("report", q->spec_path, &lim, &spec);
    if (rc) return rc;
    bf_model *m = NULL;
    bf_dataset *ds = NULL;
    bf_error err = {0};
    const json_t *camp = campaign_of(result);
    json_int_t seed = json_integer_value(json_object_get(camp, "seed"));
    /* the tie order the campaign's TopK or NMS ran with (absent: the model
     * has neither, or the result predates the field: the default, onnx) */
    const json_t *jt = json_object_get(camp, "tie_order");
    const char *ties = json_string_value(jt);
    if (ties && !strcmp(ties, "pytorch")) lim.model.tie_order = BF_TIE_ORDER_PYTORCH;
    if (jt && (!ties || (strcmp(ties, "onnx") && strcmp(ties, "pytorch"))))
        rc = usage_error("report", "%s: campaign.tie_order must be \"onnx\" or \"pytorch\" (the --tie-order the "
                         "campaign ran with)", q->result_path);
    else if (json_is_integer(json_object_get(camp, "seed")) && (uint64_t)seed != (uint64_t)spec.seed)
        rc = usage_error("report", "%s ran with seed %lld, %s has seed %llu: give the spec that made the result", q->result_path,
                         (long long)seed, q->spec_path, (unsigned long long)spec.seed);
    else if ((rc = load_inputs("report", q->spec_path, &spec, &lim, &m, &ds)) != 0) {}
    else {
        bfr_trial_req r = {.trial = q->trial, .image = q->image,
                           .trials = json_is_integer(json_object_get(camp, "trials")) ? json_integer_value(json_object_get(camp, "trials")) : -1};
        if (!(*fig = bfr_trial_picture(m, ds, &spec, &r, &err))) {
            if (err.status == BF_ERANGE || err.status == BF_EINVAL) rc = usage_error("report", "%s", err.msg);
            else rc = report_error("report", &err);
        }
    }
    bf_dataset_free(ds);
    bf_model_free(m);
    bf_campaign_spec_free(&spec);
    return rc;
}
