/* Placeholder renderer: the contract of bitflip/report.h with one text-only
 * figure, so that the daemon's page can be built against it while the real
 * figures are written. */
#include "bitflip/report.h"

json_t *bfr_figures(const bfr_input *in, size_t n, bf_error *err)
{
    if (!in || n == 0) {
        bf_error_set(err, BF_EINVAL, "report: no result given");
        return NULL;
    }
    json_t *doc = json_pack("{s:s, s:[{s:s, s:s, s:s, s:s}]}", "headline", "", "figures", "name", "placeholder", "title",
                            "placeholder", "alt", "placeholder", "svg",
                            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"></svg>");
    if (!doc) bf_error_set(err, BF_ENOMEM, "report: out of memory");
    return doc;
}

bf_status bfr_write(const bfr_input *in, size_t n, bfr_format fmt, FILE *out, const char *figdir,
                    const char *figlink, bf_error *err)
{
    (void)in, (void)n, (void)fmt, (void)out, (void)figdir, (void)figlink;
    return bf_error_set(err, BF_EUNSUPPORTED, "report: not written yet");
}
