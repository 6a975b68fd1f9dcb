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
 * floats would put out of range). STEPS_INPLACE=K: right after each step ran
 * in the pass, the watch runs it K times more in place (bf__plan_run_from
 * from it, stopped at the next step: its fused epilogue too; the same
 * buffers, data and packed weights, only the caches and TLB warm now) and
 * two more columns give the reruns' mean and the in-pass time over it: a
 * step slowed by what the pass around it does (cold operands, page walks:
 * docs/perf/vit.md, h26-gemm) reads well over 1. A step that writes over
 * an input of its own (an in-place Add; none of the bench models' plans
 * has one) has that input copied before it runs and put back before each
 * rerun, so every rerun reads the pass's inputs and leaves the pass's
 * output; the last line says whether the output of the passes with reruns
 * equals a plain pass's. Not part of the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bitflip/dataset.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "exec/plan_impl.h"
#include "exec/step_access.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the watch's at(), called before each step: the thread CPU time since the
 * last call goes to the step before (plan.c's own step_time is wall time,
 * which on a loaded machine counts the other processes' turns) */
enum { MAXSNAP = 8 };
typedef struct clock_state {
    double *cost, last;
    size_t prev;
    int inplace;          /* STEPS_INPLACE's K: reruns a step; 0 off */
    double *again;        /* per step: the K reruns' thread CPU, summed; -1 not rerun */
    double rerun;         /* all reruns' thread CPU: kept out of the pass's */
    unsigned char *keep;  /* fused_skip as the pass left it, restored after a rerun */
    int skipped;          /* c->prev was computed inside an earlier step: nothing to rerun */
    /* the inputs c->prev's group writes over (an in-place Add, a residual in
     * a product's epilogue), as they were before it ran: put back before
     * each rerun, so it reruns on the pass's inputs */
    int n_snap;
    const bf_tensor *snap_of[MAXSNAP];
    void *snap[MAXSNAP];
    size_t snap_bytes[MAXSNAP];
} clock_state;

/* the nested run's watch: stop at the first step after the one rerun */
static int stop_after(void *user, bf_plan *p, size_t step)
{
    (void)p;
    return step > *(const size_t *)user;
}

static int overlap(const bf_tensor *a, const bf_tensor *b)
{
    if (!a || !b || !a->data || !b->data) return 0;
    const char *pa = a->data, *pb = b->data;
    return pa < pb + bf_tensor_nbytes(b) && pb < pa + bf_tensor_nbytes(a);
}

/* before step i runs: the inputs of i and the steps it may compute in its
 * epilogue (up to bf__plan_fused_last's) whose bytes the group's output
 * (its last step's: the ones between are not written) overlaps, copied; 0
 * when more than MAXSNAP (then i is not rerun) */
static int snapshot(clock_state *c, const bf_plan *p, size_t i)
{
    int bn = 0, add = 0, r = p->fuse ? bf__plan_fused_last(p, i, &bn, &add) : 0;
    size_t last = r > (int)i ? (size_t)r : i;
    c->n_snap = 0;
    /* a copy whose output shares its input's bytes (a Reshape in the shared
     * arena) writes back what it reads: its rerun needs no copy */
    static const char *const copies[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
    for (size_t q = 0; q < sizeof copies / sizeof *copies; q++)
        if (last == i && !strcmp(p->steps[i].node->op_type, copies[q])) return 1;
    for (size_t j = i; j <= last; j++)
        for (int k = 0; k < p->steps[j].n_in; k++) {
            const bf_tensor *x = p->steps[j].in[k];
            int hit = 0, inner = 0, seen = 0;
            for (size_t g = i; g <= last; g++)
                for (int o = 0; o < p->steps[g].n_out; o++) {
                    inner |= p->steps[g].out[o] == x;   /* computed inside the group */
                    /* a fused group writes its last step's output alone */
                    hit |= g == last && overlap(p->steps[g].out[o], x);
                }
            for (int q = 0; q < c->n_snap; q++) seen |= c->snap_of[q] == x;
            if (!hit || inner || seen) continue;
            if (c->n_snap == MAXSNAP) return 0;
            size_t nb = bf_tensor_nbytes(x);
            if (c->snap_bytes[c->n_snap] < nb) {
                void *d = realloc(c->snap[c->n_snap], nb);
                if (!d) return 0;
                c->snap[c->n_snap] = d, c->snap_bytes[c->n_snap] = nb;
            }
            memcpy(c->snap[c->n_snap], x->data, nb);
            c->snap_of[c->n_snap++] = x;
        }
    return 1;
}

/* the step that just ran (c->prev), K times more in place on the inputs it
 * ran on; its thread CPU to again[], and the pass's fused_skip put back as
 * the pass left it (a run stopped by its watch clears it) */
static void rerun(clock_state *c, bf_plan *p, int snapped)
{
    size_t i = c->prev;
    if (c->skipped || !snapped) {
        c->again[i] = -1;
        return;
    }
    memcpy(c->keep, p->fused_skip, p->n_steps);
    unsigned char *mark = c->keep + p->n_steps;   /* every step marked */
    bf__plan_watch w = {.mark = mark, .at = stop_after, .user = &i};
    bf_error err = {0};
    double t = 0, t0 = cpu_now();
    for (int k = 0; k < c->inplace; k++) {
        for (int q = 0; q < c->n_snap; q++) memcpy(c->snap_of[q]->data, c->snap[q], bf_tensor_nbytes(c->snap_of[q]));
        double u = cpu_now();   /* the copies back not counted */
        if (bf__plan_run_from(p, i, &w, NULL, &err) != BF_OK) {
            fprintf(stderr, "bitflip-bench-steps: step %zu again: %s\n", i, err.msg);
            exit(1);
        }
        t += cpu_now() - u;
        memcpy(p->fused_skip, c->keep, p->n_steps);
    }
    c->rerun += cpu_now() - t0;
    if (c->again[i] >= 0) c->again[i] += t;
}

static int tick(void *user, bf_plan *p, size_t step)
{
    clock_state *c = user;
    double t = cpu_now();
    if (step > 0) c->cost[c->prev] += t - c->last;
    if (c->inplace) {
        if (step > 0) rerun(c, p, c->n_snap >= 0);
        double u = cpu_now();   /* the copies: kept out of the pass's time too */
        c->skipped = p->fused_skip[step];   /* run_one skips it: fused into a step before */
        c->n_snap = c->skipped ? 0 : snapshot(c, p, step) ? c->n_snap : -1;
        c->rerun += cpu_now() - u;
    }
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
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: bitflip-bench-steps MODEL.onnx [BATCH (32) [RUNS (3)]]\n"
                "  each step's thread CPU per pass of BATCH samples over RUNS runs (after one to warm)\n"
                "  STEPS_UNFUSED=1     activations as steps of their own\n"
                "  STEPS_DATA=F        inputs from the eval set F (.safetensors) instead of random floats\n"
                "  STEPS_INPLACE=K     rerun each step K times in place right after it ran: columns\n"
                "                      'in place ms' (their mean) and 'pass / in place' (over 1: slowed\n"
                "                      by the pass around it: cold operands, page walks)\n");
        return argc < 2 ? 2 : 0;
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
    clock_state cs = {.cost = cost};
    double *again = NULL;
    unsigned char *keep = NULL;
    if (getenv("STEPS_INPLACE")) {
        if (p->n_dyn || p->tab.csel) {   /* a nested run resets their run-time state */
            fprintf(stderr, "bitflip-bench-steps: STEPS_INPLACE: the plan has dynamic steps; not rerun\n");
        } else {
            cs.inplace = atoi(getenv("STEPS_INPLACE")) > 0 ? atoi(getenv("STEPS_INPLACE")) : 3;
            again = calloc(n + 1, sizeof *again);
            keep = malloc(2 * n + 1);
            if (!again || !keep) return 1;
            memset(keep + n, 1, n + 1);
            cs.again = again, cs.keep = keep;
        }
    }
    bf__plan_watch w = {.mark = mark, .at = tick, .user = &cs};
    double total = 0;
    for (int r = 0; r <= runs; r++) {
        if (r == 1) memset(cost, 0, n * sizeof *cost);
        if (r == 1 && again)
            for (size_t i = 0; i < n; i++) again[i] = again[i] < 0 ? -1 : 0;
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
        cs.rerun = 0;
        double t0 = cpu_now();
        if (bf__plan_run_from(p, 0, &w, NULL, &err) != BF_OK) {
            fprintf(stderr, "bitflip-bench-steps: %s\n", err.msg);
            return 1;
        }
        double t1 = cpu_now();
        if (n) cost[cs.prev] += t1 - cs.last;
        if (n && cs.inplace) rerun(&cs, p, cs.n_snap >= 0);
        if (r) total += t1 - t0 - cs.rerun;
    }
    if (again)
        printf("| step | op | name | output | ms/pass | share | GFLOP/s | in place ms | pass / in place |\n"
               "|---|---|---|---|---|---|---|---|---|\n");
    else printf("| step | op | name | output | ms/pass | share | GFLOP/s |\n|---|---|---|---|---|---|---|\n");
    double all_t = 0, all_again = 0;
    double conv_flop = 0, conv_t = 0, steps = 0;
    /* the total by op kind (matrix products' GFLOP/s too) */
    enum { MAXOPS = 64 };
    const char *op_name[MAXOPS];
    double op_t[MAXOPS], op_flop[MAXOPS], op_again[MAXOPS] = {0}, op_tr[MAXOPS] = {0};
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
        if (gf > 0) printf("%.1f |", gf);
        else printf("- |");
        if (again && again[i] >= 0) {
            double a = again[i] / runs / cs.inplace;
            printf(" %.2f | %.2f |", a * 1e3, a > 0 ? t / a : 0.0);
            if (q < n_ops) op_again[q] += a, op_tr[q] += t;
            all_t += t, all_again += a;
        } else if (again) {
            printf(" - | - |");
        }
        printf("\n");
    }
    printf("\npass %.1f ms (thread CPU), steps %.1f ms; Convs %.1f ms, %.1f GFLOP/s, %.1f%% of the pass\n",
           total / runs * 1e3, steps * 1e3, conv_t * 1e3, conv_t > 0 ? conv_flop / conv_t * 1e-9 : 0.0,
           100.0 * conv_t / (total / runs));
    if (again)
        printf("steps rerun in place (K = %d): %.1f ms in the pass, %.1f ms in place, pass / in place %.3f\n",
               cs.inplace, all_t * 1e3, all_again * 1e3, all_again > 0 ? all_t / all_again : 0.0);
    if (again) printf("\n| op | ms/pass | share | GFLOP/s | in place ms | pass / in place |\n|---|---|---|---|---|---|\n");
    else printf("\n| op | ms/pass | share | GFLOP/s |\n|---|---|---|---|\n");
    for (int q = 0; q < n_ops; q++) {
        int b = q;   /* largest first: selection over what is left */
        for (int r = q + 1; r < n_ops; r++)
            if (op_t[r] > op_t[b]) b = r;
        const char *tn = op_name[q];
        double tt = op_t[q], tf = op_flop[q], ta = op_again[q], tr = op_tr[q];
        op_name[q] = op_name[b], op_t[q] = op_t[b], op_flop[q] = op_flop[b], op_again[q] = op_again[b], op_tr[q] = op_tr[b];
        op_name[b] = tn, op_t[b] = tt, op_flop[b] = tf, op_again[b] = ta, op_tr[b] = tr;
        printf("| %s | %.2f | %.1f%% | ", op_name[q], op_t[q] * 1e3, 100.0 * op_t[q] / (total / runs));
        if (op_flop[q] > 0) printf("%.1f |", op_flop[q] / op_t[q] * 1e-9);
        else printf("- |");
        if (again && op_again[q] > 0) printf(" %.2f | %.2f |", op_again[q] * 1e3, op_tr[q] / op_again[q]);
        else if (again) printf(" - | - |");
        printf("\n");
    }
    cs.inplace = 0;   /* the passes below: as bitflip eval runs them */
    /* the check that the reruns left the pass's values: the first output
     * of the last pass with reruns against the first one without (the
     * same inputs) */
    const bf_tensor *out0 = m->n_outputs ? bf_plan_output(p, 0) : NULL;
    size_t out_bytes = out0 && out0->data ? bf_tensor_nbytes(out0) : 0;
    void *kept = again && out_bytes ? malloc(out_bytes) : NULL;
    if (kept) memcpy(kept, out0->data, out_bytes);
    int same = -1;
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
        if (r == 0 && kept) same = !memcmp(kept, out0->data, out_bytes);
        if (r % 2 == 0) n_pw = p->tab.n_pwdw, n_sp = p->tab.n_stpool;
    }
    if (!ds)
        printf("\npass without a watch %.1f ms, with one %.1f ms (thread CPU, %d runs each, alternated; "
               "pairs run without: %zu 1x1 -> depthwise, %zu Conv -> MaxPool)\n",
               bare / runs * 1e3, watched / runs * 1e3, runs, n_pw, n_sp);
    if (same >= 0)
        printf("the output of the passes with reruns %s the pass's without (STEPS_INPLACE: bytes compared)\n",
               same ? "equals" : "DIFFERS FROM");
    free(cost), free(mark), free(again), free(keep), free(kept);
    for (int q = 0; q < MAXSNAP; q++) free(cs.snap[q]);
    bf_plan_free(p);
    bf_dataset_free(ds);
    bf_model_free(m);
    return 0;
}
