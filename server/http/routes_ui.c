/* The web page (GET / and its assets, compiled in from server/ui/), the
 * campaign spec's JSON Schema the page validates against, and a campaign's
 * figures as JSON (libbitflip-report, the renderer `bitflip report` uses).
 *
 * The page and its assets go out with a Content-Security-Policy that allows
 * no inline script or style, nothing from another origin, and images only
 * from the page itself or blob:/data: URLs (the figures); the page gets no
 * other paths than these. */
#include <stdlib.h>
#include <string.h>

#include "bitflip/report.h"
#include "http/routes.h"
#include "store/blob.h"
#include "work/campaigns.h"
#include "work/check.h"

/* Why each directive: scripts and styles only from our own files (no inline,
 * no eval); images from blob: (figures) and data: (none today, for icons);
 * fetch() only to this daemon; the page cannot be framed (clickjacking) nor
 * change its base URL or post forms elsewhere. */
#define UI_CSP                                                                                                          \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "      \
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

extern const char bfd_ui_index_html[], bfd_ui_app_js[], bfd_ui_validate_js[], bfd_ui_sse_js[], bfd_ui_app_css[],
    bfd_campaign_schema[];
extern const size_t bfd_ui_index_html_len, bfd_ui_app_js_len, bfd_ui_validate_js_len, bfd_ui_sse_js_len,
    bfd_ui_app_css_len, bfd_campaign_schema_len;

static void ui_headers(bfd_req *r)
{
    bfd_reply_header(r, "Content-Security-Policy", UI_CSP);
    bfd_reply_header(r, "X-Content-Type-Options", "nosniff");
    bfd_reply_header(r, "Referrer-Policy", "no-referrer");
    /* assets change with the binary; a restart after an upgrade must not
     * pair a new page with an old cached script */
    bfd_reply_header(r, "Cache-Control", "no-cache");
}

void bfd_h_ui_page(bfd *d, bfd_req *r)
{
    (void)d;
    ui_headers(r);
    bfd_reply_static(r, 200, "text/html; charset=utf-8", bfd_ui_index_html, bfd_ui_index_html_len);
}

void bfd_h_ui_app_js(bfd *d, bfd_req *r)
{
    (void)d;
    ui_headers(r);
    bfd_reply_static(r, 200, "text/javascript; charset=utf-8", bfd_ui_app_js, bfd_ui_app_js_len);
}

void bfd_h_ui_validate_js(bfd *d, bfd_req *r)
{
    (void)d;
    ui_headers(r);
    bfd_reply_static(r, 200, "text/javascript; charset=utf-8", bfd_ui_validate_js, bfd_ui_validate_js_len);
}

void bfd_h_ui_sse_js(bfd *d, bfd_req *r)
{
    (void)d;
    ui_headers(r);
    bfd_reply_static(r, 200, "text/javascript; charset=utf-8", bfd_ui_sse_js, bfd_ui_sse_js_len);
}

void bfd_h_ui_app_css(bfd *d, bfd_req *r)
{
    (void)d;
    ui_headers(r);
    bfd_reply_static(r, 200, "text/css; charset=utf-8", bfd_ui_app_css, bfd_ui_app_css_len);
}

void bfd_h_campaign_schema(bfd *d, bfd_req *r)
{
    (void)d;
    bfd_reply_header(r, "X-Content-Type-Options", "nosniff");
    bfd_reply_static(r, 200, "application/schema+json", bfd_campaign_schema, bfd_campaign_schema_len);
}

void bfd_h_campaign_figures(bfd *d, bfd_req *r)
{
    bfd_campaign_row row = {0};
    json_t *doc = NULL, *figs = NULL;
    json_error_t je;
    bf_error err = {0};
    if (bfd_req_campaign(d, r, &row) != 0) return;
    if (row.state != BFD_SUCCEEDED || !row.result_json) {
        bfd_reply_problem(r, 409, NULL, "campaign %s is %s%s%s; its figures exist once it has succeeded (follow "
                          "/v1/campaigns/%s/events)", row.id, bfd_state_name(row.state), row.error ? ": " : "",
                          row.error ? row.error : "", row.id);
        goto out;
    }
    if (!(doc = json_loads(row.result_json, 0, &je))) {
        bf_error_set(&err, BF_EFORMAT, "the stored result does not parse: %s", je.text);
        bfd_reply_internal(r, "reading the result", &err);
        goto out;
    }
    bfr_input in = {.result = doc, .label = NULL};
    if (!(figs = bfr_figures(&in, 1, &err))) { bfd_reply_internal(r, "drawing the figures", &err); goto out; }
    bfd_reply_json(r, 200, figs);   /* takes figs */
out:
    json_decref(doc);
    bfd_campaign_row_clear(&row);
}

/* --- a trial's picture: GET /v1/campaigns/{id}/picture?trial=K&image=I ---- */

static void picture_drawn(void *user, bfd_check_result *res)
{
    bfd_req *r = user;
    r->work = NULL;
    json_t *fig = res->st == BF_OK && res->summary ? json_loads(res->summary, 0, NULL) : NULL;
    if (fig) bfd_reply_json(r, 200, fig);   /* takes fig */
    else if (res->out_of_range) bfd_reply_problem(r, 400, NULL, "%s", res->why);
    else if (res->refused || res->over_limit) bfd_reply_problem(r, 422, NULL, "cannot draw this trial: %s", res->why);
    else {
        bfd_reply_header(r, "Retry-After", "1");
        bfd_reply_problem(r, 503, NULL, "cannot draw the trial now (%s); retry", res->why);
    }
    bfd_req_resume(r);
}

/* a query parameter as an index from 0; -1 (having replied 400) if it is not one */
static long long index_arg(bfd_req *r, const char *name)
{
    const char *v = bfd_req_arg(r, name);
    char *end = NULL;
    long long n = v && *v ? strtoll(v, &end, 10) : -1;
    if (!v || !*v || *end || n < 0 || n > (long long)1e15) {
        bfd_reply_problem(r, 400, NULL, "%s must be an index from 0, got '%.40s'", name, v ? v : "");
        return -1;
    }
    return n;
}

/* Runs the trial again in a child (bfd_picture_start: it loads uploads, so
 * not in the daemon) and replies with the figure, as bfr_trial_picture
 * draws it; the request waits, suspended. */
void bfd_h_campaign_picture(bfd *d, bfd_req *r)
{
    bfd_campaign_row row = {0};
    json_t *doc = NULL;
    char *model = NULL, *dataset = NULL;
    bf_error err = {0};
    long long trial, image;
    if (bfd_req_campaign(d, r, &row) != 0) return;
    if ((trial = index_arg(r, "trial")) < 0 || (image = index_arg(r, "image")) < 0) goto out;
    if (row.state != BFD_SUCCEEDED || !row.result_json || !(doc = json_loads(row.result_json, 0, NULL))) {
        bfd_reply_problem(r, 409, NULL, "campaign %s is %s; its trials can be drawn once it has succeeded", row.id,
                          bfd_state_name(row.state));
        goto out;
    }
    const json_t *camp = json_object_get(doc, "campaign");
    const char *task = json_string_value(json_object_get(json_object_get(doc, "golden"), "task"));
    if (!task || (strcmp(task, "detection") && strcmp(task, "segmentation"))) {
        bfd_reply_problem(r, 422, NULL, "campaign %s is a %s campaign: a trial's picture is of detections or masks", row.id,
                          task ? task : "task-less");
        goto out;
    }
    json_int_t trials = json_integer_value(json_object_get(camp, "trials"));
    if (trial >= trials) {
        bfd_reply_problem(r, 400, NULL, "trial %lld is out of range: the campaign has %lld trials (0 to %lld)", trial,
                          (long long)trials, (long long)trials - 1);
        goto out;
    }
    if (!(model = bfd_blob_path(d->blobs, row.model_id)) || !(dataset = bfd_blob_path(d->blobs, row.dataset_id))) {
        bfd_reply_problem(r, 500, NULL, "out of memory");
        goto out;
    }
    if (bfd_picture_start(d, model, dataset, row.spec_json, trial, image, trials, picture_drawn, r, &err) != BF_OK) {
        bfd_reply_header(r, "Retry-After", "1");
        bfd_reply_problem(r, 503, NULL, "cannot draw the trial now (%s); retry", err.msg);
        goto out;
    }
    r->work = r;
    bfd_req_suspend(r);
out:
    free(model);
    free(dataset);
    json_decref(doc);
    bfd_campaign_row_clear(&row);
}
