/* /metrics: exact lines for hand-computed inputs, label escaping, every family
 * announced by HELP and TYPE, and a line-format check of the whole exposition
 * (the subset of text format 0.0.4 that bitflipd emits). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "metrics.h"

static const int64_t no_campaigns[5] = {0};

static bfd_metrics *new_metrics(void)
{
    bfd_metrics *m = NULL;
    bf_error err = {0};
    assert_int_equal(bfd_metrics_new(&m, &err), BF_OK);
    assert_non_null(m);
    return m;
}

static char *render(bfd_metrics *m)
{
    char *text = bfd_metrics_render(m, no_campaigns, "0.1.0", "abc123");
    assert_non_null(text);
    return text;
}

/* `line` is one whole line of `text` (no partial matches). */
#define assert_line(text, line) assert_line_((text), (line), __LINE__)
static void assert_line_(const char *text, const char *line, int at)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return;
    fail_msg("line %d: no line \"%s\" in:\n%s", at, line, text);
}

/* --- the line-format check */

static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

/* A sample value: a float strtod reads whole, or one of the format's specials. */
static int value_ok(const char *s, size_t n)
{
    char tmp[64];
    char *end = NULL;
    if (n == 0 || n >= sizeof tmp) return 0;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (!strcmp(tmp, "+Inf") || !strcmp(tmp, "-Inf") || !strcmp(tmp, "NaN")) return 1;
    if (!strchr("+-0123456789.", tmp[0])) return 0;   /* strtod would take "inf", "0x1p3"... */
    if (strpbrk(tmp, "xXnN")) return 0;
    strtod(tmp, &end);
    return *end == '\0';
}

/* `name{l="v",...} value` or `name value`; returns 0 and says why otherwise. */
static int sample_ok(const char *line, size_t n, char *name, size_t name_max, const char **why)
{
    size_t i = 0;
    if (i >= n || !is_name_start(line[i])) return *why = "metric name", 0;
    while (i < n && is_name_char(line[i])) i++;
    if (i >= name_max) return *why = "name too long", 0;
    memcpy(name, line, i);
    name[i] = '\0';
    if (i < n && line[i] == '{') {
        i++;
        for (;;) {
            if (i >= n || !is_name_start(line[i]) || line[i] == ':') return *why = "label name", 0;
            while (i < n && is_name_char(line[i]) && line[i] != ':') i++;
            if (i + 1 >= n || line[i] != '=' || line[i + 1] != '"') return *why = "=\" after label name", 0;
            i += 2;
            while (i < n && line[i] != '"') {
                if (line[i] == '\\') {
                    if (i + 1 >= n || !strchr("\\\"n", line[i + 1])) return *why = "escape", 0;
                    i++;
                }
                i++;
            }
            if (i >= n) return *why = "unterminated label value", 0;
            i++;
            if (i < n && line[i] == ',') {
                i++;
                continue;
            }
            if (i < n && line[i] == '}') {
                i++;
                break;
            }
            return *why = ", or } after label value", 0;
        }
    }
    if (i >= n || line[i] != ' ') return *why = "one space before the value", 0;
    i++;
    if (!value_ok(line + i, n - i)) return *why = "value", 0;
    return 1;
}

/* Does sample `name` belong to family `fam` of type `type`? */
static int in_family(const char *name, const char *fam, const char *type)
{
    size_t f = strlen(fam);
    if (!strcmp(name, fam)) return strcmp(type, "histogram") != 0;
    if (strcmp(type, "histogram") != 0 || strncmp(name, fam, f) != 0) return 0;
    return !strcmp(name + f, "_bucket") || !strcmp(name + f, "_sum") || !strcmp(name + f, "_count");
}

/* The whole exposition: every line a comment (# HELP or # TYPE, HELP first,
 * each family once) or a sample of the family the last TYPE announced; ends
 * with a newline. Returns the number of families. */
static int check_exposition(const char *text)
{
    char fam[128] = "", type[32] = "", help_for[128] = "", name[128];
    char seen[16][128];
    int n_fam = 0, lineno = 0;
    assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
    for (const char *p = text; *p; lineno++) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);
        const char *why = NULL;
        char a[128], b[128];
        if (n > 0 && p[0] == '#') {
            if (n > 7 && !strncmp(p, "# HELP ", 7)) {
                if (sscanf(p + 7, "%127s", a) != 1) fail_msg("line %d: HELP without a name", lineno);
                strcpy(help_for, a);
            } else if (n > 7 && !strncmp(p, "# TYPE ", 7)) {
                if (sscanf(p + 7, "%127s %127s", a, b) != 2) fail_msg("line %d: TYPE needs name and type", lineno);
                if (strcmp(a, help_for) != 0) fail_msg("line %d: TYPE %s not after its HELP", lineno, a);
                if (strcmp(b, "counter") && strcmp(b, "gauge") && strcmp(b, "histogram"))
                    fail_msg("line %d: type %s", lineno, b);
                for (int i = 0; i < n_fam; i++)
                    if (!strcmp(seen[i], a)) fail_msg("line %d: family %s twice", lineno, a);
                assert_true(n_fam < 16);
                strcpy(seen[n_fam++], a);
                strcpy(fam, a);
                strcpy(type, b);
            } else {
                fail_msg("line %d: comment that is neither HELP nor TYPE: %.*s", lineno, (int)n, p);
            }
        } else {
            if (!sample_ok(p, n, name, sizeof name, &why))
                fail_msg("line %d: bad sample (%s): %.*s", lineno, why, (int)n, p);
            if (!in_family(name, fam, type))
                fail_msg("line %d: %s outside its family (last TYPE: %s %s)", lineno, name, fam, type);
        }
        p = nl + 1;
    }
    return n_fam;
}

/* --- tests */

static void empty_exposition_is_well_formed(void **state)
{
    (void)state;
    bfd_metrics *m = new_metrics();
    char *text = render(m);
    assert_int_equal(check_exposition(text), 8);
    static const char *const families[][2] = {
        {"bitflip_campaigns", "gauge"},
        {"bitflip_trials_total", "counter"},
        {"bitflip_trial_duration_seconds", "histogram"},
        {"bitflip_queue_wait_seconds", "histogram"},
        {"bitflip_http_requests_total", "counter"},
        {"bitflip_sse_clients", "gauge"},
        {"bitflip_worker_deaths_total", "counter"},
        {"bitflip_build_info", "gauge"},
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        char line[160];
        snprintf(line, sizeof line, "# TYPE %s %s", families[i][0], families[i][1]);
        assert_line(text, line);
        snprintf(line, sizeof line, "# HELP %s ", families[i][0]);
        assert_non_null(strstr(text, line));
    }
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"+Inf\"} 0");
    assert_line(text, "bitflip_trial_duration_seconds_sum 0");
    assert_line(text, "bitflip_trial_duration_seconds_count 0");
    assert_line(text, "bitflip_sse_clients 0");
    assert_line(text, "bitflip_build_info{version=\"0.1.0\",commit=\"abc123\"} 1");
    assert_line(text, "bitflip_campaigns{state=\"canceled\"} 0");
    free(text);
    bfd_metrics_free(m);
}

static void trial_histogram_by_hand(void **state)
{
    (void)state;
    bfd_metrics *m = new_metrics();
    /* 3 trials of 2 ms: above le=0.001, within le=0.01 and every bound after. */
    bfd_metrics_trial_seconds(m, 0.002, 3);
    char *text = render(m);
    check_exposition(text);
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"1e-05\"} 0");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"0.0001\"} 0");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"0.001\"} 0");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"0.01\"} 3");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"0.1\"} 3");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"1\"} 3");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"10\"} 3");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"+Inf\"} 3");
    assert_line(text, "bitflip_trial_duration_seconds_sum 0.006");
    assert_line(text, "bitflip_trial_duration_seconds_count 3");
    free(text);

    /* Bounds are inclusive (le = less or equal): 1 ms lands in le="0.001".
     * 20 s is past every bound: only +Inf. Nonsense is not counted. */
    bfd_metrics_trial_seconds(m, 0.001, 1);
    bfd_metrics_trial_seconds(m, 20, 2);
    bfd_metrics_trial_seconds(m, NAN, 5);
    bfd_metrics_trial_seconds(m, INFINITY, 5);
    bfd_metrics_trial_seconds(m, 1, 0);
    bfd_metrics_trial_seconds(m, 1, -4);
    text = render(m);
    check_exposition(text);
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"0.0001\"} 0");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"0.001\"} 1");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"0.01\"} 4");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"10\"} 4");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"+Inf\"} 6");
    assert_line(text, "bitflip_trial_duration_seconds_sum 40.007");
    assert_line(text, "bitflip_trial_duration_seconds_count 6");
    free(text);
    bfd_metrics_free(m);
}

static void queue_wait_histogram_by_hand(void **state)
{
    (void)state;
    bfd_metrics *m = new_metrics();
    bfd_metrics_queue_wait(m, 1);       /* on a bound: le="1" */
    bfd_metrics_queue_wait(m, 59.5);    /* le="60" */
    bfd_metrics_queue_wait(m, 7200);    /* past 3600: +Inf only */
    bfd_metrics_queue_wait(m, -0.25);   /* a clock step: counted as 0 */
    char *text = render(m);
    check_exposition(text);
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"0.01\"} 1");
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"0.1\"} 1");
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"1\"} 2");
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"10\"} 2");
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"60\"} 3");
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"600\"} 3");
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"3600\"} 3");
    assert_line(text, "bitflip_queue_wait_seconds_bucket{le=\"+Inf\"} 4");
    assert_line(text, "bitflip_queue_wait_seconds_sum 7260.5");
    assert_line(text, "bitflip_queue_wait_seconds_count 4");
    /* the other histogram is untouched */
    assert_line(text, "bitflip_trial_duration_seconds_count 0");
    free(text);
    bfd_metrics_free(m);
}

static void counters_and_gauges(void **state)
{
    (void)state;
    bfd_metrics *m = new_metrics();
    const int64_t chunk[BF_OUTCOME_COUNT] = {1, 2, 3, 4};
    bfd_metrics_outcomes(m, chunk);
    bfd_metrics_outcomes(m, chunk);
    bfd_metrics_sse(m, +1);
    bfd_metrics_sse(m, +1);
    bfd_metrics_sse(m, -1);
    const int64_t campaigns[5] = {3, 1, 40, 2, 5};
    char *text = bfd_metrics_render(m, campaigns, "0.1.0", "abc123");
    assert_non_null(text);
    check_exposition(text);
    assert_line(text, "bitflip_trials_total{outcome=\"masked\"} 2");
    assert_line(text, "bitflip_trials_total{outcome=\"tolerable\"} 4");
    assert_line(text, "bitflip_trials_total{outcome=\"critical\"} 6");
    assert_line(text, "bitflip_trials_total{outcome=\"due\"} 8");
    assert_line(text, "bitflip_campaigns{state=\"queued\"} 3");
    assert_line(text, "bitflip_campaigns{state=\"running\"} 1");
    assert_line(text, "bitflip_campaigns{state=\"succeeded\"} 40");
    assert_line(text, "bitflip_campaigns{state=\"failed\"} 2");
    assert_line(text, "bitflip_campaigns{state=\"canceled\"} 5");
    assert_line(text, "bitflip_sse_clients 1");
    free(text);

    /* NULL counts render as zeros; NULL version and commit as "unknown". */
    text = bfd_metrics_render(m, NULL, NULL, NULL);
    assert_non_null(text);
    check_exposition(text);
    assert_line(text, "bitflip_campaigns{state=\"queued\"} 0");
    assert_line(text, "bitflip_build_info{version=\"unknown\",commit=\"unknown\"} 1");
    free(text);
    bfd_metrics_free(m);
}

static void http_counter_table(void **state)
{
    (void)state;
    bfd_metrics *m = new_metrics();
    bfd_metrics_http(m, "/v1/models", 201);
    bfd_metrics_http(m, "/v1/models/{id}", 404);
    bfd_metrics_http(m, "/v1/models", 201);
    bfd_metrics_http(m, "/v1", 200);
    bfd_metrics_http(m, "/v1/models", 200);
    bfd_metrics_http(m, NULL, 404);
    /* enough distinct series to grow the table past its first allocation */
    char route[32];
    for (int i = 0; i < 40; i++) {
        snprintf(route, sizeof route, "/r%02d", i);
        bfd_metrics_http(m, route, 200 + i % 3);
        bfd_metrics_http(m, route, 200 + i % 3);
    }
    char *text = render(m);
    check_exposition(text);
    assert_line(text, "bitflip_http_requests_total{route=\"/v1/models\",code=\"201\"} 2");
    assert_line(text, "bitflip_http_requests_total{route=\"/v1/models\",code=\"200\"} 1");
    assert_line(text, "bitflip_http_requests_total{route=\"/v1/models/{id}\",code=\"404\"} 1");
    assert_line(text, "bitflip_http_requests_total{route=\"/v1\",code=\"200\"} 1");
    assert_line(text, "bitflip_http_requests_total{route=\"other\",code=\"404\"} 1");
    assert_line(text, "bitflip_http_requests_total{route=\"/r00\",code=\"200\"} 2");
    assert_line(text, "bitflip_http_requests_total{route=\"/r39\",code=\"200\"} 2");
    /* sorted by route, then code: the order is stable from scrape to scrape */
    const char *a = strstr(text, "route=\"/v1\",code=\"200\"");
    const char *b = strstr(text, "route=\"/v1/models\",code=\"200\"");
    const char *c = strstr(text, "route=\"/v1/models\",code=\"201\"");
    assert_true(a && b && c && a < b && b < c);
    free(text);
    bfd_metrics_free(m);
}

static void label_values_are_escaped(void **state)
{
    (void)state;
    bfd_metrics *m = new_metrics();
    bfd_metrics_http(m, "/v1/\"quoted\"", 400);
    bfd_metrics_http(m, "a\\b\nc", 400);
    char *text = bfd_metrics_render(m, no_campaigns, "0.1.0-\"rc\"", "dirty\\tree");
    assert_non_null(text);
    check_exposition(text);
    assert_line(text, "bitflip_http_requests_total{route=\"/v1/\\\"quoted\\\"\",code=\"400\"} 1");
    assert_line(text, "bitflip_http_requests_total{route=\"a\\\\b\\nc\",code=\"400\"} 1");
    assert_line(text, "bitflip_build_info{version=\"0.1.0-\\\"rc\\\"\",commit=\"dirty\\\\tree\"} 1");
    free(text);
    bfd_metrics_free(m);
}

/* The checker itself must reject what it is there to catch. */
static void checker_rejects_bad_lines(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "1abc 1", "abc", "abc  1", "abc 1 2", "abc{le=\"1} 1", "abc{le=1} 1",
        "abc{le=\"a\\tb\"} 1", "abc{l-e=\"1\"} 1", "abc inf", "abc 0x10",
    };   /* "abc 1 2" is a timestamp, valid in the format but never sent by bitflipd */
    static const char *const good[] = {
        "abc 1", "abc_sum 0.006", "a:b{x=\"\\\"\\\\\\n\",y=\"\"} -1.5e-05", "abc +Inf", "abc NaN",
    };
    char name[128];
    const char *why = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (sample_ok(bad[i], strlen(bad[i]), name, sizeof name, &why)) fail_msg("accepted: %s", bad[i]);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (!sample_ok(good[i], strlen(good[i]), name, sizeof name, &why))
            fail_msg("rejected (%s): %s", why, good[i]);
}

/* Several threads recording at once lose nothing (and give TSan something to
 * look at). */
enum { N_THREADS = 4, N_EACH = 2000 };

static void *hammer(void *arg)
{
    bfd_metrics *m = arg;
    const int64_t one[BF_OUTCOME_COUNT] = {1, 0, 0, 1};
    for (int i = 0; i < N_EACH; i++) {
        bfd_metrics_http(m, i % 2 ? "/v1" : "/v1/campaigns", 200);
        bfd_metrics_outcomes(m, one);
        bfd_metrics_trial_seconds(m, 0.5, 2);
        bfd_metrics_sse(m, i % 2 ? -1 : +1);
    }
    return NULL;
}

static void concurrent_recording(void **state)
{
    (void)state;
    bfd_metrics *m = new_metrics();
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, hammer, m), 0);
    for (int i = 0; i < N_THREADS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    char *text = render(m);
    check_exposition(text);
    assert_line(text, "bitflip_http_requests_total{route=\"/v1\",code=\"200\"} 4000");
    assert_line(text, "bitflip_http_requests_total{route=\"/v1/campaigns\",code=\"200\"} 4000");
    assert_line(text, "bitflip_trials_total{outcome=\"masked\"} 8000");
    assert_line(text, "bitflip_trials_total{outcome=\"due\"} 8000");
    assert_line(text, "bitflip_trial_duration_seconds_bucket{le=\"1\"} 16000");
    assert_line(text, "bitflip_trial_duration_seconds_sum 8000");
    assert_line(text, "bitflip_sse_clients 0");
    free(text);
    bfd_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_exposition_is_well_formed),
        cmocka_unit_test(trial_histogram_by_hand),
        cmocka_unit_test(queue_wait_histogram_by_hand),
        cmocka_unit_test(counters_and_gauges),
        cmocka_unit_test(http_counter_table),
        cmocka_unit_test(label_values_are_escaped),
        cmocka_unit_test(checker_rejects_bad_lines),
        cmocka_unit_test(concurrent_recording),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
