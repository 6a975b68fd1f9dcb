/* The Slurm executor's command-line side (work/slurm_cmd.h), without a
 * cluster: the argv sbatch, squeue and scancel get, word for word; the task
 * script, run by sh against a fake bitflip as a Slurm task would run it; and
 * the executor's reading of what the clients print. Expected values are
 * written out by hand from Slurm's documented options and output formats. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "work/slurm_cmd.h"

/* What sh makes of `word` (printf '%s' WORD): the quoting must give back the string. */
static char *through_sh(const char *word)
{
    char *cmd = malloc(strlen(word) + 32);
    assert_non_null(cmd);
    sprintf(cmd, "printf '%%s' %s", word);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = calloc(1, 4096);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 4095, p);
    buf[n] = 0;
    assert_int_equal(pclose(p), 0);
    free(cmd);
    return buf;
}

static void quoting_survives_sh(void **state)
{
    (void)state;
    char *q = bfd_sh_quote("abc");
    assert_string_equal(q, "'abc'");
    free(q);
    q = bfd_sh_quote("it's");
    assert_string_equal(q, "'it'\\''s'");
    free(q);
    q = bfd_sh_quote("");
    assert_string_equal(q, "''");
    free(q);
    const char *nasty[] = {"a b", "$HOME", "`id`", "x;rm -rf /", "'", "''", "\"q\"", "tab\there", "back\\slash"};
    for (size_t i = 0; i < sizeof nasty / sizeof nasty[0]; i++) {
        q = bfd_sh_quote(nasty[i]);
        char *back = through_sh(q);
        assert_string_equal(back, nasty[i]);
        free(back);
        free(q);
    }
}

static void array_lists_use_ranges(void **state)
{
    (void)state;
    const int a[] = {0, 1, 2, 3, 5, 7, 8}, b[] = {4}, c[] = {1, 3, 5}, d[] = {9, 10}, e[] = {3, 2, 1};
    char *s = bfd_slurm_array_list(a, 7);
    assert_string_equal(s, "0-3,5,7-8");
    free(s);
    s = bfd_slurm_array_list(b, 1);
    assert_string_equal(s, "4");
    free(s);
    s = bfd_slurm_array_list(c, 3);
    assert_string_equal(s, "1,3,5");
    free(s);
    s = bfd_slurm_array_list(d, 2);
    assert_string_equal(s, "9-10");
    free(s);
    s = bfd_slurm_array_list(e, 3);   /* only ascending runs fold */
    assert_string_equal(s, "3,2,1");
    free(s);
    s = bfd_slurm_array_list(NULL, 0);
    assert_string_equal(s, "");
    free(s);
}

static void limits_become_cli_options(void **state)
{
    (void)state;
    char *s = bfd_slurm_limit_opts(NULL, 1024);
    assert_string_equal(s, " --job-memory 1024");
    free(s);
    s = bfd_slurm_limit_opts("", 0);
    assert_string_equal(s, " --job-memory 0");
    free(s);
    s = bfd_slurm_limit_opts("model.max_nodes=10,spec.max_trials=5", 2147483648LL);
    assert_string_equal(s, " --job-memory 2147483648 --limit 'model.max_nodes=10' --limit 'spec.max_trials=5'");
    free(s);
    s = bfd_slurm_limit_opts(",a=1,,", 1);   /* empty items are no options */
    assert_string_equal(s, " --job-memory 1 --limit 'a=1'");
    free(s);
}

static const int CHUNKS[] = {0, 1, 2, 5};

static bfd_sbatch_in example(const char *dir, const char *trials, const char *bitflip, const char *spec)
{
    bfd_sbatch_in in = {.campaign_id = "0123456789abcdef0123456789abcdef", .dir = dir, .trials_dir = trials,
                        .bitflip = bitflip, .spec_path = spec, .partition = "debug", .account = "",
                        .limits = "a=1", .job_memory = 1024, .n_chunks = 6, .chunks = CHUNKS, .n_submit = 4};
    return in;
}

static void sbatch_argv_word_for_word(void **state)
{
    (void)state;
    bfd_sbatch_in in = example("/s/c1", "/data/trials/c1", "/usr/bin/bitflip", "/s/c1/spec.json");
    char **argv = NULL;
    bf_error err = {0};
    assert_int_equal(bfd_sbatch_argv(&in, &argv, &err), BF_OK);
    const char *want[] = {"sbatch", "--parsable", "--job-name=bitflipd-0123456789ab", "--array=0-2,5",
                          "--output=/s/c1/task-%a.log", "--chdir=/s/c1", "--cpus-per-task=1", "--partition=debug",
                          "--wrap"};
    size_t n = sizeof want / sizeof want[0];
    for (size_t i = 0; i < n; i++) assert_string_equal(argv[i], want[i]);   /* no --account: it was "" */
    char *script = bfd_slurm_task_script(&in);
    assert_string_equal(argv[n], script);
    assert_null(argv[n + 1]);
    free(script);
    bfd_argv_free(argv);

    in.partition = NULL;
    in.account = "lab";
    assert_int_equal(bfd_sbatch_argv(&in, &argv, &err), BF_OK);
    assert_string_equal(argv[7], "--account=lab");
    assert_string_equal(argv[8], "--wrap");
    assert_null(argv[10]);
    bfd_argv_free(argv);
    bfd_argv_free(NULL);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 8192);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 8191, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void spit(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* The script as Slurm runs it (sh, with the array variables set), against a
 * fake bitflip that writes its arguments into the part: in directories
 * whose names need the quoting. */
static void task_script_runs_and_publishes(void **state)
{
    (void)state;
    char root[] = "/tmp/bf_slurm_cmd_XXXXXX";
    assert_non_null(mkdtemp(root));
    char dir[256], trials[256], bitflip[256], spec[512], path[600];
    snprintf(dir, sizeof dir, "%s/it's a dir", root);
    snprintf(trials, sizeof trials, "%s/trials $x", root);
    snprintf(bitflip, sizeof bitflip, "%s/fake bitflip", root);
    snprintf(spec, sizeof spec, "%s/spec.json", dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(mkdir(trials, 0700), 0);
    /* the fake: its arguments, one per line, into --out; a record into --trials-out */
    spit(bitflip,
         "#!/bin/sh\n"
         "for a in \"$@\"; do echo \"$a\"; done > \"$TMPARGS\"\n"
         "while [ $# -gt 0 ]; do case \"$1\" in --out) o=$2;; --trials-out) r=$2;; esac; shift; done\n"
         "cp \"$TMPARGS\" \"$o\"; echo '{\"trial\":0}' > \"$r\"\n",
         0755);
    bfd_sbatch_in in = example(dir, trials, bitflip, spec);
    in.n_chunks = 4;
    char *script = bfd_slurm_task_script(&in);
    assert_non_null(script);

    char args_file[600];
    snprintf(args_file, sizeof args_file, "%s/args", root);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("SLURM_ARRAY_TASK_ID", "2", 1);
        setenv("SLURM_JOB_ID", "77", 1);
        setenv("TMPARGS", args_file, 1);
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* the part holds what bitflip was given, word for word */
    snprintf(path, sizeof path, "%s/part-2.json", dir);
    char *part = slurp(path);
    assert_non_null(part);
    char want[2048];
    snprintf(want, sizeof want,
             "run\n--local\n%s\n--shard\n2/4\n--threads\n1\n--job-memory\n1024\n--limit\na=1\n--format\njson\n"
             "--out\n%s/part-2.json.tmp77\n--trials-out\n%s/2.jsonl.tmp77\n",
             spec, dir, trials);
    assert_string_equal(part, want);
    free(part);
    snprintf(path, sizeof path, "%s/2.jsonl", trials);
    char *rec = slurp(path);
    assert_string_equal(rec, "{\"trial\":0}\n");
    free(rec);
    snprintf(path, sizeof path, "%s/part-2.time", dir);
    char *times = slurp(path);
    assert_non_null(times);
    assert_true(bfd_slurm_task_seconds(times) >= 0);   /* two readings of this run's clock */
    free(times);
    /* nothing left under a temp name */
    const char *dirs[] = {dir, trials};
    for (int k = 0; k < 2; k++) {
        DIR *d = opendir(dirs[k]);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) assert_null(strstr(e->d_name, ".tmp"));
        closedir(d);
    }
    free(script);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", root);
    assert_int_equal(system(rm), 0);
}

static void sbatch_answers(void **state)
{
    (void)state;
    char id[32] = "untouched";
    assert_int_equal(bfd_sbatch_job_id("1234\n", id, sizeof id), 1);
    assert_string_equal(id, "1234");
    assert_int_equal(bfd_sbatch_job_id("98765;cluster1\n", id, sizeof id), 1);   /* --parsable on a federation */
    assert_string_equal(id, "98765");
    strcpy(id, "untouched");
    assert_int_equal(bfd_sbatch_job_id("", id, sizeof id), 0);
    assert_int_equal(bfd_sbatch_job_id(NULL, id, sizeof id), 0);
    assert_int_equal(bfd_sbatch_job_id("Submitted batch job 12\n", id, sizeof id), 0);
    assert_int_equal(bfd_sbatch_job_id("12345678901234567890123456789012\n", id, sizeof id), 0);   /* 32 digits: no room */
    assert_string_equal(id, "untouched");
}

static void squeue_and_scancel(void **state)
{
    (void)state;
    char *argv[9];
    bfd_squeue_argv("4242", argv);
    const char *want[] = {"squeue", "-h", "-r", "--states=all", "-j", "4242", "-o", "%K %T"};
    for (size_t i = 0; i < 8; i++) assert_string_equal(argv[i], want[i]);
    assert_null(argv[8]);
    char *cancel[3];
    bfd_scancel_argv("4242", cancel);
    assert_string_equal(cancel[0], "scancel");
    assert_string_equal(cancel[1], "4242");
    assert_null(cancel[2]);

    int task = -1;
    char st[40] = "";
    assert_int_equal(bfd_squeue_line("3 RUNNING", &task, st), 1);
    assert_int_equal(task, 3);
    assert_string_equal(st, "RUNNING");
    assert_int_equal(bfd_squeue_line("12 OUT_OF_MEMORY", &task, st), 1);
    assert_int_equal(task, 12);
    assert_string_equal(st, "OUT_OF_MEMORY");
    assert_int_equal(bfd_squeue_line("", &task, st), 0);
    assert_int_equal(bfd_squeue_line("ARRAY_TASK_ID STATE", &task, st), 0);
    assert_int_equal(bfd_squeue_line("7", &task, st), 0);

    assert_true(bfd_squeue_job_gone(1, "slurm_load_jobs error: Invalid job id specified"));
    assert_false(bfd_squeue_job_gone(0, "Invalid job id"));
    assert_false(bfd_squeue_job_gone(-1, "Invalid job id"));   /* squeue did not run at all */
    assert_false(bfd_squeue_job_gone(1, "slurm_load_jobs error: Socket timed out on send/recv operation"));

    const char *ran[] = {"RUNNING", "COMPLETING", "COMPLETED"};
    const char *alive[] = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"};
    const char *ended[] = {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED",
                           "DEADLINE"};
    for (size_t i = 0; i < 3; i++) assert_true(bfd_slurm_state_ran(ran[i]));
    assert_false(bfd_slurm_state_ran("PENDING"));
    assert_false(bfd_slurm_state_ran("FAILED"));
    for (size_t i = 0; i < 7; i++) assert_true(bfd_slurm_state_alive(alive[i]));
    for (size_t i = 0; i < 8; i++) assert_false(bfd_slurm_state_alive(ended[i]));
    /* COMPLETED without its part is a task that failed to write it */
    assert_false(bfd_slurm_state_alive("COMPLETED"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quoting_survives_sh),
        cmocka_unit_test(array_lists_use_ranges),
        cmocka_unit_test(limits_become_cli_options),
        cmocka_unit_test(sbatch_argv_word_for_word),
        cmocka_unit_test(task_script_runs_and_publishes),
        cmocka_unit_test(sbatch_answers),
        cmocka_unit_test(squeue_and_scancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
