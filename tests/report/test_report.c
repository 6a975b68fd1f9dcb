/* libbitflip-report's pieces against values written out by hand: XML
 * escaping (entities, bytes XML forbids, cutting), numbers for people,
 * ticks, and the errors and headline of bfr_figures on hand-built
 * documents (the Wilson bounds below were computed with the formula in
 * Python's statistics module, not by bitflip). */
#define _GNU_SOURCE   /* open_memstream, mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "report_impl.h"

static char *xml(const char *s, size_t max)
{
    bfr__buf b = {0};
    bfr__xml(&b, s, max);
    return bfr__buf_take(&b);
}

static void test_xml_escape(void **state)
{
    (void)state;
    char *s = xml("</svg><script>alert('x')</script> & \"onload=\"", 0);
    assert_string_equal(s, "&lt;/svg&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;onload=&quot;");
    free(s);
    /* a control character and a lone continuation byte: U+FFFD each; tab kept */
    s = xml("a\x01" "b\x80" "c\td", 0);
    assert_string_equal(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\td");
    free(s);
    /* U+FFFE is not an XML character; U+00E9 is */
    s = xml("\xef\xbf\xbe\xc3\xa9", 0);
    assert_string_equal(s, "\xef\xbf\xbd\xc3\xa9");
    free(s);
    /* cut at 5 characters, the fifth an ellipsis; a multi-byte one counts once */
    s = xml("\xc3\xa9" "bcdefgh", 5);
    assert_string_equal(s, "\xc3\xa9" "bcd\xe2\x80\xa6");
    free(s);
    s = xml("abcde", 5);   /* exactly the limit: not cut */
    assert_string_equal(s, "abcde");
    free(s);
}

static void test_numbers(void **state)
{
    (void)state;
    char s[64];
    bfr__pct_ci(s, sizeof s, 144.0 / 3200, 0.0383465690944616, 0.052744535934224304);
    assert_string_equal(s, "4.5% [3.8, 5.3]");
    bfr__pct_ci(s, sizeof s, 0, 0, 0.0012);   /* 0%: the decimals of the upper bound */
    assert_string_equal(s, "0.00% [0.00, 0.12]");
    bfr__pct_ci(s, sizeof s, 3.0 / 2500, 0.0004081903430066553, 0.0035223535762275273);
    assert_string_equal(s, "0.120% [0.041, 0.352]");
    bfr__count(s, sizeof s, 12800);
    assert_string_equal(s, "12,800");
    bfr__count(s, sizeof s, -1234567);
    assert_string_equal(s, "-1,234,567");
    bfr__count(s, sizeof s, 999);
    assert_string_equal(s, "999");
    bfr__sci(s, sizeof s, 1e-5);
    assert_string_equal(s, "10\xe2\x81\xbb\xe2\x81\xb5");   /* 10⁻⁵ */
    bfr__sci(s, sizeof s, 2.5e-5);
    assert_string_equal(s, "2.5\xc3\x97" "10\xe2\x81\xbb\xe2\x81\xb5");
    bfr__sci(s, sizeof s, 0.01);
    assert_string_equal(s, "0.01");
    bfr__num(s, sizeof s, 0.80181884765625, 4);
    assert_string_equal(s, "0.8018");
    bfr__num(s, sizeof s, 2.0, 3);
    assert_string_equal(s, "2");
}

static void test_ticks(void **state)
{
    (void)state;
    double lo = 0, hi = 0.37, t[16];
    int n = bfr__ticks(&lo, &hi, 0, t, 6);
    assert_int_equal(n, 5);   /* 0, 0.1, 0.2, 0.3, 0.4 */
    assert_float_equal(t[4], 0.4, 1e-12);
    assert_float_equal(hi, 0.4, 1e-12);
    lo = 2e-6, hi = 1e-3;
    n = bfr__ticks(&lo, &hi, 1, t, 8);
    assert_int_equal(n, 4);   /* 10^-6 .. 10^-3 */
    assert_float_equal(t[0], 1e-6, 1e-18);
    assert_float_equal(t[3], 1e-3, 1e-15);
    lo = 1e300, hi = -1e300;   /* a fuzzed document: a sane axis, no loop */
    n = bfr__ticks(&lo, &hi, 0, t, 6);
    assert_true(n >= 2 && n <= 6);
}

static json_t *hand_doc(void)
{
    /* 3,200 single-bit faults, 144 critical: 100 of them in "fc1" (800 faults), 44 in "conv" (2,400) */
    return json_pack("{s:{s:s, s:s, s:i, s:s, s:i, s:s, s:f, s:[{s:s, s:i}, {s:s, s:i}]},"
                     " s:{s:i, s:{s:i, s:i, s:i, s:i}, s:{s:{s:f, s:[f, f]}}},"
                     " s:[{s:s, s:i, s:{s:i, s:i, s:i, s:i}}, {s:s, s:s, s:i, s:{s:i, s:i, s:i, s:i}}]}",
                     "campaign", "model", "m.onnx", "fault_model", "bitflip", "bits", 1, "representation", "fp32",
                     "trials", 3200, "target", "weights", "confidence", 0.95, "sites", "name", "conv", "bits", 32,
                     "name", "onnx::Gemm_7", "bits", 32,
                     "summary", "trials", 3200, "outcomes", "masked", 3000, "tolerable", 56, "critical", 144, "due", 0,
                     "rates", "critical", "rate", 0.045, "ci", 0.0383465690944616, 0.052744535934224304,
                     "by_tensor", "tensor", "conv", "trials", 2400, "outcomes", "masked", 2300, "tolerable", 56, "critical", 44,
                     "due", 0, "tensor", "onnx::Gemm_7", "torch_name", "fc1.weight", "trials", 800, "outcomes", "masked", 700,
                     "tolerable", 0, "critical", 100, "due", 0);
}

static void test_headline(void **state)
{
    (void)state;
    json_t *doc = hand_doc();
    assert_non_null(doc);
    bfr_input in = {doc, NULL};
    bf_error err = {0};
    json_t *figs = bfr_figures(&in, 1, &err);
    assert_non_null(figs);
    /* 100 of the 144 critical faults: 69% */
    assert_string_equal(json_string_value(json_object_get(figs, "headline")),
                        "critical rate 4.5% [3.8, 5.3] at 1 bit per trial (3,200 trials); tensor fc1.weight holds 69% of "
                        "critical faults");
    /* no by_rate, no mitigations, no by_bit: outcomes and tensors only */
    json_t *f = json_object_get(figs, "figures");
    assert_int_equal(json_array_size(f), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(f, 0), "name")), "outcomes");
    assert_string_equal(json_string_value(json_object_get(json_array_get(f, 1), "name")), "tensors");
    /* fc1 (12.5%) above conv (1.8%): its label comes first in the SVG */
    const char *svg = json_string_value(json_object_get(json_array_get(f, 1), "svg"));
    assert_non_null(strstr(svg, "fc1.weight"));
    assert_true(strstr(svg, ">fc1.weight<") < strstr(svg, ">conv<"));
    json_decref(figs);
    json_decref(doc);
}

/* A language-model result: its metrics table (golden, mean under faults,
 * interval, trials) in both formats, the language model's first and the
 * perplexity's count of finite trials said. */
static void test_lm_metrics(void **state)
{
    (void)state;
    json_t *doc = hand_doc();
    assert_non_null(doc);
    json_object_set_new(doc, "golden", json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "task", "language_model", "perplexity", 1.25,
                                                 "token_accuracy", 0.875, "generation_match", 1.0, "first_divergence", 6.0,
                                                 "edit_distance", 0.0));
    json_object_set_new(json_object_get(doc, "summary"), "metrics",
                        json_pack("{s:{s:i, s:f, s:[f, f]}, s:{s:i, s:f, s:[f, f]}, s:{s:i, s:f, s:[f, f]},"
                                  " s:{s:i, s:f, s:[f, f]}, s:{s:i, s:f, s:[f, f]}}",
                                  "edit_distance", "n", 3200, "mean", 4.5, "ci", 4.25, 4.75,
                                  "mse", "n", 3200, "mean", 0.5, "ci", 0.25, 0.75,
                                  "perplexity", "n", 3000, "mean", 1.5, "ci", 1.375, 1.625,
                                  "token_accuracy", "n", 3200, "mean", 0.5, "ci", 0.25, 0.75,
                                  "generation_match", "n", 3200, "mean", 0.125, "ci", 0.0625, 0.1875));
    bfr_input in = {doc, "gpt"};
    bf_error err = {0};
    char *html = NULL, *md = NULL;
    size_t hl = 0, ml = 0;
    FILE *f = open_memstream(&html, &hl);
    assert_int_equal(bfr_write(&in, 1, BFR_HTML, f, NULL, NULL, &err), BF_OK);
    fclose(f);
    const char *t = strstr(html, "<table id=\"metrics\">");
    assert_non_null(t);
    const char *ppl = strstr(t, "<tr><td>gpt</td><td>perplexity</td><td class=\"num\">1.25</td><td class=\"num\">1.5</td>"
                                "<td class=\"num\">[1.375, 1.625]</td><td class=\"num\">3000 of 3200</td></tr>");
    const char *gm = strstr(t, "<tr><td>gpt</td><td>generation_match</td><td class=\"num\">1</td><td class=\"num\">0.125</td>"
                               "<td class=\"num\">[0.0625, 0.1875]</td><td class=\"num\">3200</td></tr>");
    const char *ed = strstr(t, "<td>edit_distance</td><td class=\"num\">0</td><td class=\"num\">4.5</td>");
    const char *mse = strstr(t, "<td>mse</td><td class=\"num\">-</td><td class=\"num\">0.5</td>");   /* no golden mse given */
    assert_true(ppl && gm && ed && mse);
    assert_true(ppl < gm && gm < ed && ed < mse);   /* the language model's first, in the table's order */
    assert_non_null(strstr(t, "<td>token_accuracy</td><td class=\"num\">0.875</td>"));
    char dir[] = "/tmp/bfr_lm_XXXXXX";
    assert_non_null(mkdtemp(dir));
    f = open_memstream(&md, &ml);
    assert_int_equal(bfr_write(&in, 1, BFR_MARKDOWN, f, dir, "fig", &err), BF_OK);
    fclose(f);
    assert_non_null(strstr(md, "| gpt | perplexity | 1.25 | 1.5 | [1.375, 1.625] | 3000 of 3200 |"));
    assert_non_null(strstr(md, "| gpt | generation\\_match | 1 | 0.125 | [0.0625, 0.1875] | 3200 |"));
    /* a classifier's result without metrics: no table */
    json_t *plain = hand_doc();
    bfr_input in2 = {plain, NULL};
    free(html);
    html = NULL;
    f = open_memstream(&html, &hl);
    assert_int_equal(bfr_write(&in2, 1, BFR_HTML, f, NULL, NULL, &err), BF_OK);
    fclose(f);
    assert_null(strstr(html, "id=\"metrics\""));
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(html);
    free(md);
    json_decref(plain);
    json_decref(doc);
}

static void test_errors(void **state)
{
    (void)state;
    bf_error err = {0};
    assert_null(bfr_figures(NULL, 0, &err));
    assert_int_equal(err.status, BF_EINVAL);
    json_t *arr = json_array(), *running = json_pack("{s:s, s:s}", "id", "c1", "state", "queued");
    bfr_input in[2] = {{running, "mine"}, {arr, NULL}};
    assert_null(bfr_figures(in, 1, &err));
    assert_non_null(strstr(err.msg, "result 1 (mine) is a campaign that is queued"));
    assert_null(bfr_figures(in + 1, 1, &err));
    assert_int_equal(err.status, BF_EFORMAT);
    assert_non_null(strstr(err.msg, "result 1 is not a JSON object"));
    assert_int_equal(bfr_check(arr, "x.json", &err), BF_EFORMAT);
    assert_non_null(strstr(err.msg, "x.json is not a JSON object"));
    json_decref(arr);
    json_decref(running);
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* bfr_trial_figure on a hand-built view: the boxes over the threshold are
 * drawn (and only they), clipped to the image, labelled "class score"; the
 * masks' changed pixels counted; views that do not hold together refused. */
static void test_trial_figure(void **state)
{
    (void)state;
    float px[3 * 3 * 4];
    for (int i = 0; i < 36; i++) px[i] = (float)i;
    bfr_detection g[3] = {{{0, 0, 2, 2}, 7, 0.9f}, {{1, 1, 400, 3}, 2, 0.6f}, {{0, 0, 1, 1}, 3, 0.4f}};
    bfr_detection f[1] = {{{0, 0, 2, 2}, 7, 0.55f}};
    bfr_trial_view v = {.task = "detection", .trial = 4, .image = 2, .outcome = "critical", .fault = ", w[3] <b>",
                        .pixels = px, .channels = 3, .height = 3, .width = 4, .golden = g, .n_golden = 3, .faulty = f,
                        .n_faulty = 1, .score_threshold = 0.5};
    bf_error err = {0};
    json_t *fig = bfr_trial_figure(&v, &err);
    assert_non_null(fig);
    const char *svg = json_string_value(json_object_get(fig, "svg"));
    assert_string_equal(json_string_value(json_object_get(fig, "name")), "trial");
    assert_int_equal(count(svg, "<g class=\"bfr-box-golden\""), 2);   /* 0.4 is under the threshold */
    assert_int_equal(count(svg, "<g class=\"bfr-box-faulty\""), 1);
    assert_non_null(strstr(svg, ">7 0.90</text>"));
    assert_non_null(strstr(svg, "golden: 2 detections"));
    assert_non_null(strstr(svg, "faulty: 1 detection<"));
    assert_non_null(strstr(svg, "w[3] &lt;b&gt;"));                  /* text escaped */
    assert_non_null(strstr(svg, "href=\"data:image/png;base64,iVBORw0KGgo"));   /* the PNG signature */
    /* scale 75 (300 / 4): the box to x = 400 is clipped at the image's width, 4 x 75 = 300 wide less x0 = 75 */
    assert_non_null(strstr(svg, "width=\"225.0\" height=\"150.0\" fill=\"none\""));
    json_decref(fig);

    int gm[12] = {0}, fm[12] = {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255};
    bfr_trial_view sv = {.task = "segmentation", .trial = 0, .image = 0, .pixels = px, .channels = 1, .height = 3, .width = 4,
                         .golden_mask = gm, .faulty_mask = fm};
    fig = bfr_trial_figure(&sv, &err);
    assert_non_null(fig);
    assert_non_null(strstr(json_string_value(json_object_get(fig, "svg")), "faulty mask: 2 pixels changed (16.67%)"));
    assert_int_equal(count(json_string_value(json_object_get(fig, "svg")), "<image "), 3);
    json_decref(fig);

    bfr_trial_view bad = v;
    bad.task = "classification";
    assert_null(bfr_trial_figure(&bad, &err));
    assert_int_equal(err.status, BF_EINVAL);
    assert_non_null(strstr(err.msg, "task is classification"));
    bad = v, bad.pixels = NULL;
    assert_null(bfr_trial_figure(&bad, &err));
    bad = v, bad.width = BFR_PICTURE_MAX_SIDE + 1;
    assert_null(bfr_trial_figure(&bad, &err));
    assert_non_null(strstr(err.msg, "sides of 1 to 4096"));
    bad = v, bad.channels = 2;
    assert_null(bfr_trial_figure(&bad, &err));
    bad = sv, bad.faulty_mask = NULL;
    assert_null(bfr_trial_figure(&bad, &err));
    assert_non_null(strstr(err.msg, "golden and the faulty masks"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xml_escape), cmocka_unit_test(test_trial_figure), cmocka_unit_test(test_numbers), cmocka_unit_test(test_ticks),
        cmocka_unit_test(test_headline),   cmocka_unit_test(test_errors),  cmocka_unit_test(test_lm_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
