/* bitflip ops: the ONNX ops the engine runs, from the engine's own table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitflip/bitflip.h"
#include "cli.h"

static const char help[] =
    "usage: bitflip ops [-h] [--one-per-line]\n"
    "\n"
    "Lists the ONNX ops (default domain, opsets 11 to 18) that bitflip runs, sorted. A model\n"
    "that uses another op fails to load with a message naming the op and a node that uses it.\n"
    "docs/OPS.md says which attributes, modes and types each op supports and where its\n"
    "results follow PyTorch rather than the letter of the ONNX spec.\n";

int cmd_ops(int argc, char **argv)
{
    int one = 0;
    enum { OPT_ONE = CLI_OPT_FIRST };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'}, {"one-per-line", no_argument, NULL, OPT_ONE}, {NULL, 0, NULL, 0}};
    cli_parser p;
    const char *v;
    int c;
    cli_parser_init(&p, "ops", argc, argv, "h", longopts);
    while ((c = cli_parser_next(&p, &v)) != CLI_END) {
        if (c == 'h') { fputs(help, stdout); return EXIT_OK; }
        else if (c == OPT_ONE) one = 1;
        else if (c == CLI_ARG) return usage_error("ops", "takes no arguments, got '%s'", v);
        else return EXIT_USAGE;
    }
    size_t n = bf_supported_ops(NULL, 0);
    const char **names = calloc(n + 1, sizeof *names);
    if (!names) { fputs("bitflip ops: out of memory\n", stderr); return EXIT_INFRA; }
    bf_supported_ops(names, n);
    if (one) {
        for (size_t i = 0; i < n; i++) puts(names[i]);
    } else {
        printf("%zu ONNX ops:\n", n);
        size_t col = 0;
        for (size_t i = 0; i < n; i++) {
            size_t w = strlen(names[i]) + (i + 1 < n);   /* the name and its comma */
            if (col && col + 1 + w > 88) { putchar('\n'); col = 0; }
            printf("%s%s%s", col ? " " : "  ", names[i], i + 1 < n ? "," : "");
            col += (col ? 1 : 2) + w;
        }
        putchar('\n');
    }
    free(names);
    return EXIT_OK;
}
