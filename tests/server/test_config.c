/* The option table (config.c): every option parses from its text and from
 * the config file under its '_' name, byte sizes take K/M/G, out-of-range
 * and malformed values are refused naming the option, --help shows the
 * defaults, and every option has a unique name and help. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon.h"
#include "work/proc.h"

static const bfd_option *opt(const char *name)
{
    for (const bfd_option *o = bfd_options; o->name; o++)
        if (!strcmp(o->name, name)) return o;
    fail_msg("no option --%s", name);
    return NULL;
}

static void test_table(void **state)
{
    (void)state;
    int n = 0;
    for (const bfd_option *o = bfd_options; o->name; o++, n++) {
        assert_non_null(o->help);
        assert_true(strlen(o->help) > 5);
        for (const bfd_option *p = o + 1; p->name; p++) assert_string_not_equal(o->name, p->name);
    }
    assert_true(n >= 20);
    /* every limit the issue names is a flag */
    const char *limits[] = {"max-upload-bytes", "max-json-bytes", "max-trials", "max-connections",
                            "max-connections-per-ip", "idle-timeout", "tenant-running", "tenant-queued",
                            "heartbeat-seconds", "drain-seconds", "tls-cert", "tls-key", "insecure-http"};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) assert_non_null(opt(limits[i]));
}

static void test_values(void **state)
{
    (void)state;
    bfd_config c;
    bf_error err = {0};
    char buf[64];
    bfd_config_defaults(&c);
    bfd_option_show(&c, opt("max-upload-bytes"), buf, sizeof buf);
    assert_string_equal(buf, "1G");
    bfd_option_show(&c, opt("listen"), buf, sizeof buf);
    assert_string_equal(buf, "127.0.0.1:8080");
    assert_int_equal(bfd_option_set(&c, opt("max-upload-bytes"), "2M", &err), BF_OK);
    assert_int_equal(c.max_upload_bytes, 2 << 20);
    assert_int_equal(bfd_option_set(&c, opt("max-upload-bytes"), "3KiB", &err), BF_OK);
    assert_int_equal(c.max_upload_bytes, 3 << 10);
    assert_int_equal(bfd_option_set(&c, opt("max-upload-bytes"), "12345", &err), BF_OK);
    assert_int_equal(c.max_upload_bytes, 12345);
    assert_int_equal(bfd_option_set(&c, opt("max-upload-bytes"), "9999999999G", &err), BF_EINVAL);
    assert_int_equal(bfd_option_set(&c, opt("max-upload-bytes"), "0", &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "--max-upload-bytes"));
    assert_int_equal(bfd_option_set(&c, opt("max-json-bytes"), "17M", &err), BF_EINVAL);
    assert_int_equal(bfd_option_set(&c, opt("idle-timeout"), "2", &err), BF_OK);
    assert_int_equal(c.idle_timeout, 2);
    assert_int_equal(bfd_option_set(&c, opt("idle-timeout"), "2s", &err), BF_EINVAL);
    assert_int_equal(bfd_option_set(&c, opt("max-connections-per-ip"), "0", &err), BF_OK);
    assert_int_equal(c.max_connections_per_ip, 0);
    assert_int_equal(bfd_option_set(&c, opt("heartbeat-seconds"), "0.5", &err), BF_OK);
    assert_true(c.heartbeat_seconds == 0.5);
    assert_int_equal(bfd_option_set(&c, opt("heartbeat-seconds"), "nan", &err), BF_EINVAL);
    assert_int_equal(bfd_option_set(&c, opt("insecure-http"), NULL, &err), BF_OK);
    assert_int_equal(c.insecure_http, 1);
    assert_int_equal(bfd_option_set(&c, opt("tls-cert"), "/etc/cert.pem", &err), BF_OK);
    assert_int_equal(bfd_option_set(&c, opt("tls-cert"), "/etc/other.pem", &err), BF_OK);   /* the last wins */
    assert_string_equal(c.tls_cert, "/etc/other.pem");
    assert_int_equal(bfd_option_set(&c, opt("workers"), NULL, &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "--workers needs a value"));
    assert_int_equal(bfd_option_set(&c, opt("log-format"), "xml", &err), BF_EINVAL);
    assert_int_equal(bfd_option_set(&c, opt("listen"), "[::1]:9", &err), BF_OK);
    assert_string_equal(c.host, "[::1]");
    assert_int_equal(c.port, 9);
    bfd_config_free(&c);   /* the strings set above: ASan says whether they leak */
}

static void test_config_file(void **state)
{
    (void)state;
    char path[] = "/tmp/bfd-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("{\"max_upload_bytes\": \"2G\", \"max_trials\": 5, \"idle_timeout\": 9, \"insecure_http\": true,\n"
          " \"heartbeat_seconds\": 2.5, \"tls_key\": \"k.pem\", \"listen\": \"0.0.0.0:1\", \"log_format\": \"json\"}\n",
          f);
    fclose(f);
    bfd_config c;
    bf_error err = {0};
    bfd_config_defaults(&c);
    assert_int_equal(bfd_config_load(&c, path, &err), BF_OK);
    assert_int_equal(c.max_upload_bytes, (int64_t)2 << 30);
    assert_int_equal(c.max_trials, 5);
    assert_int_equal(c.idle_timeout, 9);
    assert_int_equal(c.insecure_http, 1);
    assert_true(c.heartbeat_seconds == 2.5);
    assert_string_equal(c.tls_key, "k.pem");
    assert_string_equal(c.host, "0.0.0.0");
    assert_int_equal(c.log_json, 1);

    /* unknown keys, wrong types, actions and out-of-range values name the key and the file */
    const char *bad[] = {"{\"max_uploads\": 1}", "{\"max_trials\": \"5\"}", "{\"insecure_http\": 1}",
                         "{\"check\": true}", "{\"idle_timeout\": 0}", "{\"tls_cert\": 3}", "[1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(bad[i], f);
        fclose(f);
        assert_int_not_equal(bfd_config_load(&c, path, &err), BF_OK);
        assert_non_null(strstr(err.msg, path));
    }
    bfd_config_free(&c);
    unlink(path);
}

/* --limit: repeatable and K=V,K=V into bfd_config.limits, the text kept
 * for the children (limits_arg), a bad one refused with nothing of it kept;
 * the config file's "limit" as an object or an array of "K=V" */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_limits(void **state)
{
    (void)state;
    bfd_config c;
    bf_error err = {0};
    char buf[256];
    bfd_config_defaults(&c);
    const bfd_option *o = opt("limit");
    bfd_option_show(&c, o, buf, sizeof buf);
    assert_string_equal(buf, "");   /* the defaults: --help shows none */
    assert_int_equal(bfd_option_set(&c, o, "model.graph-depth=2", &err), BF_OK);
    assert_int_equal(bfd_option_set(&c, o, "data.bytes=1G,spec.depth=3", &err), BF_OK);
    assert_int_equal(c.limits.model.max_graph_depth, 2);
    assert_true(c.limits.data.max_bytes == (int64_t)1 << 30);
    assert_int_equal(c.limits.spec.max_depth, 3);
    assert_string_equal(c.limits_arg, "model.graph-depth=2,data.bytes=1G,spec.depth=3");
    /* the second of the list is bad: the first is not kept either */
    assert_int_equal(bfd_option_set(&c, o, "model.rank=4,nosuch=1", &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "no limit 'nosuch'; the limits are model.graph-depth"));
    assert_int_equal(c.limits.model.max_rank, 0);
    assert_string_equal(c.limits_arg, "model.graph-depth=2,data.bytes=1G,spec.depth=3");
    assert_int_equal(bfd_option_set(&c, o, "model.graph-depth=zero", &err), BF_EINVAL);
    assert_non_null(strstr(err.msg, "model.graph-depth must be an integer from 1 to 1000000000, got 'zero'"));
    /* what a child parses back from --limits is what the daemon holds */
    char *argv[] = {"bitflipd", "--worker", "--job-memory", "1G", "--limits", c.limits_arg, NULL};
    bf_limits child;
    assert_int_equal(bfd_proc_arg_limits(6, argv, &child, &err), BF_OK);
    assert_memory_equal(&child, &c.limits, sizeof child);
    bfd_config_free(&c);

    char path[] = "/tmp/bfd-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    bfd_config_defaults(&c);
    write_text(path, "{\"limit\": {\"model.graph-depth\": 16, \"data.bytes\": \"2G\"}}");
    assert_int_equal(bfd_config_load(&c, path, &err), BF_OK);
    assert_int_equal(c.limits.model.max_graph_depth, 16);
    assert_true(c.limits.data.max_bytes == (int64_t)2 << 30);
    bfd_config_free(&c);
    bfd_config_defaults(&c);
    write_text(path, "{\"limit\": [\"spec.array=7\", \"model.nodes=9\"]}");
    assert_int_equal(bfd_config_load(&c, path, &err), BF_OK);
    assert_true(c.limits.spec.max_array == 7);
    assert_true(c.limits.model.max_nodes == 9);
    const char *bad[] = {"{\"limit\": 3}", "{\"limit\": {\"nosuch\": 1}}", "{\"limit\": {\"spec.depth\": true}}",
                         "{\"limit\": [3]}", "{\"limit\": [\"spec.depth\"]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i]);
        assert_int_not_equal(bfd_config_load(&c, path, &err), BF_OK);
        assert_non_null(strstr(err.msg, path));
    }
    bfd_config_free(&c);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
