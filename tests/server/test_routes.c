/* The router's judgement of request targets (bfd_target_check, on the
 * target as sent, before libmicrohttpd decodes it) and path matching
 * (bfd_route_match): hostile targets by hand, each with the byte it names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "http/http.h"

/* `target` is refused and the reason contains `names` */
static void refused(const char *target, const char *names)
{
    char why[256] = "";
    if (bfd_target_check(target, why, sizeof why) != -1) fail_msg("'%s' was accepted", target);
    if (!strstr(why, names)) fail_msg("'%s': reason '%s' lacks '%s'", target, why, names);
}

static void accepted(const char *target)
{
    char why[256] = "";
    if (bfd_target_check(target, why, sizeof why) != 0) fail_msg("'%s' was refused: %s", target, why);
}

static void test_empty_segments(void **state)
{
    (void)state;
    refused("/v1//models", "empty segment ('//') at byte 3");
    refused("//v1/models", "at byte 0");
    refused("/v1/models//", "at byte 10");
    refused("/v1/campaigns/c1//events", "at byte 16");
    accepted("/v1/models/");   /* one trailing slash is forgiven, as before */
    accepted("/");
    accepted("/v1/models?page_token=a//b");   /* a query value may hold anything printable */
    accepted("http://lab:8080/v1/models");    /* absolute-form: the authority's "//" is not a segment */
    refused("http://lab:8080/v1//models", "at byte 18");
    refused("http://lab:8080/v1/models/%00", "encoded control byte (%00) at byte 26");
    accepted("http://lab:8080");
    refused("http://lab\x01:8080/v1/models", "control byte (0x01) at byte 10");
}

static void test_control_bytes(void **state)
{
    (void)state;
    refused("/v1/models/abc%00def", "encoded control byte (%00) at byte 14");
    refused("/v1/models/%1f", "(%1f) at byte 11");
    refused("/v1/models/%7F", "(%7F)");
    refused("/v1/models/a\x01" "b", "control byte (0x01) at byte 12");
    refused("/v1/models/a\tb", "(0x09)");
    refused("/v1/models/a\x7f", "(0x7F)");
    refused("/v1/campaigns?state=queued%00x", "the query has an encoded control byte (%00) at byte 26");
    refused("/v1/campaigns?state=\x1b", "the query has a control byte (0x1B)");
    accepted("/v1/models/%20");   /* a space is printable: a 404 for the id, not a 400 */
    accepted("/v1/models/%zz");   /* not an escape at all: left as it is */
    accepted("/v1/models/%0");    /* nor a truncated one */
    accepted("/v1/models/%");
    accepted("/v1/models/%41%42");
}

static void test_encoded_slash(void **state)
{
    (void)state;
    refused("/v1/models%2Fabc", "encoded slash (%2F) at byte 10");
    refused("/v1/models/..%2f..%2fetc", "(%2f) at byte 13");
    accepted("/v1/models?page_token=a%2Fb");   /* in the query it is data */
}

static void test_route_match(void **state)
{
    (void)state;
    bfd_req r;
    int other = 0;
    memset(&r, 0, sizeof r);
    const bfd_route *rt = bfd_route_match("GET", "/v1/campaigns/c42/events", &r, &other);
    assert_non_null(rt);
    assert_string_equal(rt->path, "/v1/campaigns/{id}/events");
    assert_string_equal(r.id, "c42");
    rt = bfd_route_match("GET", "/v1/models/", &r, &other);
    assert_non_null(rt);
    assert_string_equal(rt->path, "/v1/models");
    assert_null(bfd_route_match("GET", "/v1/models/a/b", &r, &other));
    assert_int_equal(other, 0);
    assert_null(bfd_route_match("PUT", "/v1/models", &r, &other));
    assert_int_equal(other, 1);   /* a 405, not a 404 */
    /* an id longer than any id matches the route but is empty, so never found */
    char longp[200];
    snprintf(longp, sizeof longp, "/v1/models/%0120d", 7);
    assert_non_null(bfd_route_match("GET", longp, &r, &other));
    assert_string_equal(r.id, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_segments),
        cmocka_unit_test(test_control_bytes),
        cmocka_unit_test(test_encoded_slash),
        cmocka_unit_test(test_route_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
