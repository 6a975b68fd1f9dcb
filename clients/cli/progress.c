/* Progress reports on stderr, in the form the reader can use: a line
 * redrawn in place with \r on a terminal (bar), a newline-terminated line
 * every few seconds in a log (plain), or nothing. No ANSI escape or colour
 * is ever written (the bar is cleared with spaces), so NO_COLOR and
 * TERM=dumb are honoured by construction. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_progress_parse(const char *cmd, const char *v, int *mode)
{
    static const char *const names[] = {"auto", "bar", "plain", "none"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(v, names[i])) { *mode = i; return 0; }
    return usage_error(cmd, "--progress must be auto, bar, plain or none, got '%s'", v);
}

int cli_progress_interval(const char *cmd, const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0 && x <= 86400))
        return usage_error(cmd, "--progress-interval wants seconds from 0 to 86400, got '%s'", v);
    *out = x;
    return 0;
}

void cli_progress_start(cli_progress *p, const char *cmd, int mode, double interval)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    if (mode == CLI_PROGRESS_AUTO) mode = isatty(STDERR_FILENO) ? CLI_PROGRESS_BAR : CLI_PROGRESS_PLAIN;
    p->mode = mode;
    p->interval = interval;
    p->start = p->last = cli_now();
}

int cli_progress_due(cli_progress *p, int final)
{
    if (p->mode == CLI_PROGRESS_NONE) return 0;
    double t = cli_now();
    /* a bar redraws ten times a second at most; a log gets a line per
     * interval, the first one interval in; both get the final state */
    double gap = p->mode == CLI_PROGRESS_BAR ? 0.1 : p->interval;
    if (final) { p->last = t; return 1; }
    if (t - p->last < gap) return 0;
    p->last = t;
    return 1;
}

void cli_progress_print(cli_progress *p, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (p->mode == CLI_PROGRESS_PLAIN) {
        fprintf(stderr, "bitflip %s: %s\n", p->cmd, line);
    } else if (p->mode == CLI_PROGRESS_BAR) {
        size_t len = strlen(line);
        /* a shorter line than the last one blanks what it leaves over */
        fprintf(stderr, "\r  %s%*s", line, p->shown > len ? (int)(p->shown - len) : 0, "");
        p->shown = len > p->shown ? len : p->shown;
    }
    fflush(stderr);
}

void cli_progress_clear(cli_progress *p)
{
    if (p->mode == CLI_PROGRESS_BAR && p->shown) fprintf(stderr, "\r%*s\r", (int)p->shown + 2, "");
    p->shown = 0;
}
