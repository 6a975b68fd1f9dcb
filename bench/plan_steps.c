/* Where a golden pass spends its time, step by step: the plan `bitflip eval`
 * builds (shared buffers, fused activations) at batch B, its inputs filled
 * with uniform random floats in [0, 1), run 1 + R times; each step's thread
 * CPU time summed over the last R runs (the first touches the arena and the
 * scratch for the first time, which `bitflip eval`'s best pass does not
 * pay either), and for a Conv, MatMul or Gemm its multiply-adds, so its GFLOP/s against the
 * core's peak (docs/BENCHMARKS.md, "resnet18's pass layer by layer").
 *
 *   build/bitflip-bench-steps MODEL.onnx [B [R]]     (B 32, R 3)
 *
 * One line per step (op, name, output shape, ms per pass, GFLOP/s for a
 * Conv, MatMul or Gemm), then the total by op kind. STEPS_UNFUSED=1 in the
 * environment: the plan without fused activations, as a differential
 * campaign's golden pass ran every Conv before h13-mbv2 (each Relu or Clip a
 * step of its own). STEPS_DATA=EVAL.safetensors: the inputs are the eval
 * set's first B samples instead (a DLRM's integer indices, which random
 * floats would put out of range). Not part of the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "exec/plan_impl.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the watch's at(), called before each step: the thread CPU time since the
 * last call goes to the step before (plan.c's own step_time is wall time,
 * which on a loaded machine counts the other processes' turns) */
typedef struct clock_state {
    double *cost, last;
    size_t prev;
} clock_state;

static int tick(void *user, bf_plan *p, size_t step)
{
    (void)p;
    clock_state *c = user;
    double t = cpu_now();
    if (step > 0) c->cost[c->prev] += t - c->last;
    c->prev = step, c->last = cpu_now();
    return 0;
}

static int64_t numel(const bf_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->dims[d];
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bitflip-bench-steps MODEL.onnx [BATCH [RUNS]]\n");
        return 2;
    }
    int64_t batch = argc > 2 ? atoll(argv[2]) : 32;
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    if (batch < 1 || runs < 1) return 2;
    bf_error err = {0};
    bf_model *m = NULL;
    bf_plan *p = NULL;
    if (bf_model_load_file(argv[1], &m, &err) != BF_OK) {
        fprintf(stderr, "bitflip-bench-steps: %s\n", err.msg);
        return 1;
    }
    bf_plan_opts po = {.share_buffers = 1, .fuse_activations = !getenv("STEPS_UNFUSED")};
    if (bf_plan_create_opts(m, batch, &po, &p, &err) != BF_OK) {
        fprintf(stderr, "bitflip-bench-steps: %s\n", err.msg);
        return 1;
    }
    bf_dataset *ds = NULL;
    if (getenv("STEPS_DATA") && bf_dataset_load_file(getenv("STEPS_DATA"), &ds, &err) != BF_OK) {
        fprintf(stderr, "bitflip-bench-steps: %s\n", err.msg);
        return 1;
    }
    size_t n = bf_plan_num_steps(p);
    double *cost = calloc(n + 1, sizeof *cost);
    if (!cost) return 1;
    unsigned char *mark = malloc(n + 1);
    if (!mark) return 1;
    memset(mark, 1, n + 1);
    clock_state cs = {cost, 0, 0};
    bf__plan_watch w = {.mark = mark, .at = tick, .user = &cs};
    double total = 0;
    for (int r = 0; r <= runs; r++) {
        if (r == 1) memset(cost, 0, n * sizeof *cost);
        /* the same inputs before every run: with shared buffers a later step may
         * write over the input's buffer, and a run fed the last run's leftovers
         * (denormals, NaNs) measured 12x slower from the fifth run on */
        srand(1);
        for (size_t i = 0; i < m->n_inputs; i++) {
            bf_tensor *t = bf_plan_input(p, i);
            const bf_tensor *src = ds ? bf_dataset_find(ds, bf_model_input(m, i)->name) : NULL;
            if (src) {
                if (bf_dataset_copy_rows(src, 0, batch, t, &err) != BF_OK) {
                    fprintf(stderr, "bitflip-bench-steps: %s\n", err.msg);
                    return 1;
                }
                continue;
            }
            if (t->dtype != BF_F32) continue;
            float *d = t->data;
            for (int64_t e = 0; e < numel(t); e++) d[e] = (float)rand() / ((float)RAND_MAX + 1.0f);
        }
        double t0 = cpu_now();
        if (bf__plan_run_from(p, 0, &w, NULL, &err) != BF_OK) {
            fprintf(stderr, "bitflip-bench-steps: %s\n", err.msg);
            return 1;
        }
        double t1 = cpu_now();
        if (n) cost[cs.prev] += t1 - cs.last;
        if (r) total += t1 - t0;
    }
    printf("| step | op | name | output | ms/pass | share | GFLOP/s |\n|---|---|---|---|---|---|---|\n");
    double conv_flop = 0, conv_t = 0, steps = 0;
    /* the total by op kind (matrix products' GFLOP/s too) */
    enum { MAXOPS = 64 };
    const char *op_name[MAXOPS];
    double op_t[MAXOPS], op_flop[MAXOPS];
    int n_ops = 0;
    for (size_t i = 0; i < n; i++) steps += cost[i] / runs;
    for (size_t i = 0; i < n; i++) {
        const bf__step *s = &p->steps[i];
        double t = cost[i] / runs;
        if (t < 1e-6 * total / runs) continue;   /* skipped (fused) steps and trivia */
        char shape[64] = "";
        const bf_tensor *o = s->n_out ? s->out[0] : NULL;
        for (int d = 0; o && d < o->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "x" : "", (long long)o->dims[d]);
        double gf = 0, flop = 0;
        if (!strcmp(s->node->op_type, "Conv") && s->n_in > 1 && s->in[1]) {
            const bf_tensor *wt = s->in[1];
            double kc = 1;
            for (int d = 1; d < wt->ndim; d++) kc *= (double)wt->dims[d];
            flop = 2.0 * (double)numel(o) * kc;
            conv_flop += flop, conv_t += t;
        } else if ((!strcmp(s->node->op_type, "MatMul") || !strcmp(s->node->op_type, "Gemm")) && s->n_in > 1 &&
                   s->in[0] && s->in[0]->ndim >= 1) {
            /* MatMul's K is A's last dim; a Gemm here has transA 0 (ViT's, the LM's) */
            flop = 2.0 * (double)numel(o) * (double)s->in[0]->dims[s->in[0]->ndim - 1];
        }
        if (flop > 0) gf = flop / t * 1e-9;
        int q = 0;
        while (q < n_ops && strcmp(op_name[q], s->node->op_type)) q++;
        if (q == n_ops && n_ops < MAXOPS) op_name[n_ops] = s->node->op_type, op_t[n_ops] = op_flop[n_ops] = 0, n_ops++;
        if (q < n_ops) op_t[q] += t, op_flop[q] += flop;
        printf("| %zu | %s | %s | %s | %.2f | %.1f%% | ", i, s->node->op_type, s->node->name, shape, t * 1e3,
               100.0 * t / (total / runs));
        if (gf > 0) printf("%.1f |\n", gf);
        else printf("- |\n");
    }
    printf("\npass %.1f ms (thread CPU), steps %.1f ms; Convs %.1f ms, %.1f GFLOP/s, %.1f%% of the pass\n",
           total / runs * 1e3, steps * 1e3, conv_t * 1e3, conv_t > 0 ? conv_flop / conv_t * 1e-9 : 0.0,
           100.0 * conv_t / (total / runs));
    printf("\n| op | ms/pass | share | GFLOP/s |\n|---|---|---|---|\n");
    for (int q = 0; q < n_ops; q++) {
        int b = q;   /* largest first: selection over what is left */
        for (int r = q + 1; r < n_ops; r++)
            if (op_t[r] > op_t[b]) b = r;
        const char *tn = op_name[q];
        double tt = op_t[q], tf = op_flop[q];
        op_name[q] = op_name[b], op_t[q] = op_t[b], op_flop[q] = op_flop[b];
        op_name[b] = tn, op_t[b] = tt, op_flop[b] = tf;
        printf("| %s | %.2f | %.1f%% | ", op_name[q], op_t[q] * 1e3, 100.0 * op_t[q] / (total / runs));
        if (op_flop[q] > 0) printf("%.1f |\n", op_flop[q] / op_t[q] * 1e-9);
        else printf("- |\n");
    }
    /* the same plan run whole without a watch, as bitflip eval runs it: the
     * pairs a watch turns off (the 1x1 -> depthwise and the first Conv ->
     * MaxPool pairs, plan_impl.h's pwdw) run then; the same inputs, the
     * runs alternated with watched ones so both see the same load */
    double bare = 0, watched = 0;
    size_t n_pw = 0, n_sp = 0;
    for (int r = 0; r < 2 * runs; r++) {
        srand(1);
        for (size_t i = 0; !ds && i < m->n_inputs; i++) {
            bf_tensor *t = bf_plan_input(p, i);
            if (t->dtype != BF_F32) continue;
            float *d = t->data;
            for (int64_t e = 0; e < numel(t); e++) d[e] = (float)rand() / ((float)RAND_MAX + 1.0f);
        }
        if (ds) break;   /* the data path's inputs: the watched table only */
        double t0 = cpu_now();
        if (bf__plan_run_from(p, 0, r % 2 ? &w : NULL, NULL, &err) != BF_OK) {
            fprintf(stderr, "bitflip-bench-steps: %s\n", err.msg);
            return 1;
        }
        *(r % 2 ? &watched : &bare) += cpu_now() - t0;
        if (r % 2 == 0) n_pw = p->tab.n_pwdw, n_sp = p->tab.n_stpool;
    }
    if (!ds)
        printf("\npass without a watch %.1f ms, with one %.1f ms (thread CPU, %d runs each, alternated; "
               "pairs run without: %zu 1x1 -> depthwise, %zu Conv -> MaxPool)\n",
               bare / runs * 1e3, watched / runs * 1e3, runs, n_pw, n_sp);
    free(cost), free(mark);
    bf_plan_free(p);
    bf_dataset_free(ds);
    bf_model_free(m);
    return 0;
}
