/* bitflip: inspect models, evaluate them, inject faults. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "bitflip " BITFLIP_VERSION " - hardware fault injection for neural networks\n"
    "\n"
    "usage: bitflip COMMAND [OPTIONS] ARGS\n"
    "\n"
    "commands:\n"
    "  info MODEL.onnx                 inputs, outputs, ops and every parameter tensor\n"
    "                                  (the fault surface)\n"
    "  eval MODEL.onnx DATA.safetensors\n"
    "                                  golden metrics over an eval set, samples/s, and\n"
    "                                  the effect of bit flips (--flip)\n"
    "  generate MODEL.onnx PROMPTS.safetensors\n"
    "                                  a language model's greedy decoding, golden and\n"
    "                                  under faults (docs/LM.md)\n"
    "  run --local SPEC.json           a fault campaign: outcome rates with intervals,\n"
    "                                  the tensors and bits that matter, CI gates\n"
    "  merge DIR | PART.json...        shards of one campaign into its whole result\n"
    "                                  (docs/SCALE.md)\n"
    "  plan SPEC.json                  fault population and the trials a margin needs\n"
    "  ops                             the ONNX ops bitflip runs\n"
    "  report RESULT.json...           the results' figures as HTML or Markdown\n"
    "                                  (docs/REPORT.md)\n"
    "  slurm submit --shards N SPEC.json\n"
    "                                  a campaign as a Slurm array job and its merge\n"
    "  help [COMMAND]                  this text, or a command's options\n"
    "\n"
    "Run 'bitflip help COMMAND' (or 'bitflip COMMAND -h') for a command's options;\n"
    "they take '--opt value' or '--opt=value'. Exit codes: 0 ok, 1 a CI gate\n"
    "failed, 2 usage or spec error, 3 a file or model could not be read or run.\n";

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bitflip %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(run 'bitflip help %s' for usage)\n", cmd);
    return EXIT_USAGE;
}

int report_error(const char *cmd, const bf_error *err)
{
    fprintf(stderr, "bitflip %s: %s\n", cmd, err->msg[0] ? err->msg : bf_strerror(err->status));
    return EXIT_INFRA;
}

int parse_count(const char *cmd, const char *opt, const char *s, long long min, long long max,
                long long *out)
{
    char *end;
    long long v;
    if (!s) return usage_error(cmd, "%s needs a value", opt);
    v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > max)
        return usage_error(cmd, "%s must be an integer from %lld to %lld, got '%s'", opt, min, max, s);
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) { fputs(usage, stdout); return EXIT_OK; }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        /* the CPU path too: a bug report says which kernels ran (the same bits either way) */
        printf("bitflip %s (cpu path %s)\n", BITFLIP_VERSION, bf_cpu_path());
        return EXIT_OK;
    }
    if (!strcmp(cmd, "help")) {
        if (argc < 3) { fputs(usage, stdout); return EXIT_OK; }
        char *help_argv[] = {argv[2], (char *)"--help", NULL};
        if (!strcmp(argv[2], "info")) return cmd_info(2, help_argv);
        if (!strcmp(argv[2], "eval")) return cmd_eval(2, help_argv);
        if (!strcmp(argv[2], "generate")) return cmd_generate(2, help_argv);
        if (!strcmp(argv[2], "run")) return cmd_run(2, help_argv);
        if (!strcmp(argv[2], "merge")) return cmd_merge(2, help_argv);
        if (!strcmp(argv[2], "plan")) return cmd_plan(2, help_argv);
        if (!strcmp(argv[2], "ops")) return cmd_ops(2, help_argv);
        if (!strcmp(argv[2], "report")) return cmd_report(2, help_argv);
        if (!strcmp(argv[2], "slurm")) return cmd_slurm(2, help_argv);
        fprintf(stderr, "bitflip: no command '%s'\n\n%s", argv[2], usage);
        return EXIT_USAGE;
    }
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate")) return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "merge")) return cmd_merge(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan")) return cmd_plan(argc - 1, argv + 1);
    if (!strcmp(cmd, "ops")) return cmd_ops(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "slurm")) return cmd_slurm(argc - 1, argv + 1);
    fprintf(stderr, "bitflip: no command '%s'\n\n%s", cmd, usage);
    return EXIT_USAGE;
}
