/* Option parsing for every subcommand: getopt_long, with the CLI's messages
 * (each names the option and points to 'bitflip help CMD') instead of
 * getopt's own, and arguments returned in order as they come, so that a
 * command sees "MODEL DATA" in the order given whatever POSIXLY_CORRECT says. */
#include <getopt.h>
#include <string.h>

#include "cli.h"

void cli_parser_init(cli_parser *p, const char *cmd, int argc, char **argv, const char *shortopts,
                     const struct option *longopts)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    p->longopts = longopts;
    /* '-': arguments come back in order (as CLI_ARG); ':': a missing value is
     * told apart from an unknown option, and getopt prints nothing itself */
    snprintf(p->optstring, sizeof p->optstring, "-:%s", shortopts ? shortopts : "");
    optind = 0;   /* glibc: start afresh, whatever parsed before */
    opterr = 0;
}

static const struct option *by_val(const cli_parser *p, int val)
{
    for (const struct option *o = p->longopts; o && o->name; o++)
        if (!o->flag && o->val == val) return o;
    return NULL;
}

/* What the user typed, without "=value": "--frob" from "--frob=1". */
static void typed(const char *a, char *out, size_t len)
{
    size_t n = strcspn(a, "=");
    if (n >= len) n = len - 1;
    memcpy(out, a, n);
    out[n] = '\0';
}

/* Messages for an unknown or ambiguous "--name": lists the options it abbreviates. */
static int unknown_long(const cli_parser *p, const char *name)
{
    char list[256] = "";
    size_t len = strlen(name + 2), hits = 0, off = 0;
    for (const struct option *o = p->longopts; o && o->name; o++)
        if (len && !strncmp(o->name, name + 2, len) && off < sizeof list) {
            off += (size_t)snprintf(list + off, sizeof list - off, "%s--%s", hits ? ", " : "", o->name);
            hits++;
        }
    if (hits > 1) return usage_error(p->cmd, "option '%s' is ambiguous: %s", name, list);
    return usage_error(p->cmd, "unknown option '%s'", name);
}

int cli_parser_next(cli_parser *p, const char **arg)
{
    *arg = NULL;
    if (p->rest) {   /* after "--" every word is an argument */
        if (optind >= p->argc) return CLI_END;
        *arg = p->argv[optind++];
        return CLI_ARG;
    }
    int c = getopt_long(p->argc, p->argv, p->optstring, p->longopts, NULL);
    if (c == -1) {
        if (optind < p->argc) {   /* stopped at "--" */
            p->rest = 1;
            return cli_parser_next(p, arg);
        }
        return CLI_END;
    }
    if (c == 1) {
        *arg = optarg;
        return CLI_ARG;
    }
    const char *word = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "";
    char name[64];
    if (c == ':') {
        const struct option *o = by_val(p, optopt);
        if (o) usage_error(p->cmd, "--%s needs a value", o->name);
        else usage_error(p->cmd, "-%c needs a value", optopt);
        return CLI_BAD;
    }
    if (c == '?') {
        if (!strncmp(word, "--", 2)) {
            typed(word, name, sizeof name);
            const struct option *o = by_val(p, optopt);
            if (optopt && o && o->has_arg == no_argument && strchr(word, '='))
                usage_error(p->cmd, "--%s takes no value (got '%s')", o->name, word);
            else unknown_long(p, name);
        } else {
            usage_error(p->cmd, "unknown option '-%c'", optopt ? optopt : '?');
        }
        return CLI_BAD;
    }
    *arg = optarg;
    return c;
}
