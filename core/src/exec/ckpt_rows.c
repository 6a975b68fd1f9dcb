/* A detector's class scores on the rows that changed, in a one-sample
 * graph's trials (ckpt_impl.h; docs/ENGINE.md "One image per call", item 6).
 *
 * A fault in one output channel of a class head's last Conv (ckpt_chan.c
 * recomputes that channel alone) changes, after the head's Reshape,
 * Transpose and the Concat over the feature levels, one class logit of the
 * anchors that channel feeds: on SSDlite320 one anchor of each position of
 * one level, at most 400 of the 3234 rows of [anchors, classes]. The
 * Softmax over classes is row by row, so every other row of its output is
 * the golden one. Such a trial puts the Softmax's golden output back and
 * recomputes the rows whose input differs from the golden input (compared
 * row by row: which rows moved is read off the values, not worked out from
 * the shapes, so the result does not depend on the steps in between), with
 * the step's own row loop (bf__softmax_row). The selection, TopK and NMS
 * after it run in full.
 *
 * The golden pass keeps the Softmax's input and output in the store, when
 * the trials whose Conv reaches it save more than recording them costs
 * (BYTE_SECONDS a byte, as the cuts), within the budget the cuts, the store
 * and the channel-local Convs left. */
#include <string.h>

#include "base/alloc.h"
#include "exec/ckpt_impl.h"
#include "exec/step_access.h"

/* as ckpt.c: what recording a checkpoint byte costs the golden pass */
#define BYTE_SECONDS 3e-9
/* what a trial pays a byte of the Softmax's input and output on each image:
 * the golden output copied back and the input compared with golden's, both
 * streamed once (the store's FILL_SECONDS, 0.3 ns, is for a value a
 * skipped step's reader then reads again) */
#define ROW_BYTE_SECONDS 0.1e-9
/* as ckpt_chan.c's CHAN_SMALL: a Softmax whose input and output take at
 * most this many bytes an image is kept whatever the trials' count (its
 * recording costs the golden pass well under a microsecond an image) */
#define ROW_SMALL 4096
/* how many steps that only move values may lie between a Conv and the
 * Softmax (SSDlite: Reshape, Transpose, Reshape, Concat) */
#define ROW_DEPTH 8

/* a step that only moves values (each output element one input element) */
static int moves_only(const bf__step *s)
{
    static const char *const ops[] = {"Reshape", "Transpose", "Concat", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (strcmp(s->node->op->name, ops[k]) == 0) return 1;
    return 0;
}

/* The Softmax over rows that value v reaches through steps that only move
 * values, and through nothing else: its step, 0 when v reaches none, -1
 * when something else reads it (or a graph output is one of them). */
static int softmax_from(const bf__ckpt *ck, const bf_plan *p, int v, int depth)
{
    if (depth > ROW_DEPTH) return -1;
    for (size_t k = 0; k < ck->n_outputs; k++)
        if (ck->outputs[k] == v) return -1;
    int found = 0, at = ck->val_step[v];
    for (size_t k = (size_t)(at < 0 ? 0 : at + 1); k < ck->n_steps; k++)
        for (int j = ck->in_first[k]; j < ck->in_first[k + 1]; j++) {
            if (ck->in_val[j] != v) continue;
            const bf__step *s = &p->steps[k];
            int64_t rows, n;
            int r;
            if (s->node->op->shape_only) break;   /* its shape alone */
            if (bf__softmax_rows(s, &rows, &n) && s->node->in[0] == v) r = (int)k;
            else if (moves_only(s) && s->n_out == 1 && s->node->out[0] >= 0) r = softmax_from(ck, p, s->node->out[0], depth + 1);
            else return -1;
            if (r < 0 || (found && r && r != found)) return -1;
            if (r) found = r;
            break;
        }
    return found;
}

bf_status bf__ckpt_choose_rows(bf__ckpt *ck, const bf_plan *p, const double *mass, double mtotal, uint64_t room,
                               int64_t trials, unsigned char *used,
                               size_t (*storable)(const bf__ckpt *, const bf_plan *, int))
{
    size_t n = ck->n_steps;
    ck->row_soft = bf__calloc(n + 1, sizeof *ck->row_soft);
    ck->row_keep = bf__calloc(n + 1, sizeof *ck->row_keep);
    double *share = bf__calloc(n + 1, sizeof *share);
    if (!ck->row_soft || !ck->row_keep || !share) {
        bf__free(share);
        return BF_ENOMEM;
    }
    /* share[k]: what the trials reaching Softmax k keep golden of it, over
     * the faults' mass. Steps that only move values put each element of
     * the Conv's output in one element of the Softmax's input, so a
     * channel of P positions moves at most P of its rows. */
    for (size_t i = 0; i < n && mtotal > 0 && ck->chan_m; i++) {
        if (ck->chan_m[i] <= 0) continue;
        const bf__step *ls = &p->steps[ck->chan_chain[3 * i]];
        int o = ls->n_out == 1 ? ls->node->out[0] : -1, k = o >= 0 ? softmax_from(ck, p, o, 0) : 0;
        int64_t rows, cols;
        if (k <= 0 || !bf__softmax_rows(&p->steps[k], &rows, &cols) || rows < 1) continue;
        double pos = (double)bf_tensor_numel(&p->vals[o]) / (double)ck->chan_m[i];
        ck->row_soft[i] = k;
        ck->row_keep[i] = pos < (double)rows ? 1.0 - pos / (double)rows : 0.0;
        share[k] += mass[i] / mtotal * ck->row_keep[i];
    }
    uint64_t taken = 0;
    for (size_t k = 0; k < n; k++) {
        if (!(share[k] > 0)) continue;
        const bf__step *s = &p->steps[k];
        int x = s->node->in[0], y = s->node->out[0];
        size_t bx = storable(ck, p, x), by = storable(ck, p, y), b = bx + by;
        uint64_t need = 0;
        if (!used[x]) need += ((bx + 63) & ~(size_t)63) * (uint64_t)ck->samples;
        if (!used[y]) need += ((by + 63) & ~(size_t)63) * (uint64_t)ck->samples;
        double cost = (double)(ck->pre_ns[k + 1] - ck->pre_ns[k]) * 1e-9;
        /* on each image of each trial reaching it: the rows kept golden,
         * less the copy and the comparison */
        double reach = 0;
        for (size_t i = 0; i < n; i++)
            if (ck->row_soft[i] == (int)k) reach += mass[i] / mtotal;
        double save = cost * share[k] - reach * ROW_BYTE_SECONDS * (double)b;
        if (bx == 0 || bx != by || need > room - taken || save <= 0 ||
            (trials > 0 && b > ROW_SMALL && save * (double)trials < BYTE_SECONDS * (double)b)) {
            for (size_t i = 0; i < n; i++)
                if (ck->row_soft[i] == (int)k) ck->row_soft[i] = 0;
            continue;
        }
        taken += need;
        used[x] = used[y] = 1;
    }
    bf__free(share);
    return BF_OK;
}

void bf__ckpt_rows_mark(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    tr->row_step = -1;
    tr->row_seen = 0;
    int i = tr->chan_step;
    if (i < 0 || !ck->row_soft || ck->row_soft[i] <= 0) return;
    int k = ck->row_soft[i];
    /* a step the run skips is golden already; one run on a channel is not a Softmax */
    if (tr->act[k] & (BF__STEP_SKIP | BF__STEP_CHAN)) return;
    tr->act[k] |= BF__STEP_CHAN;
    tr->row_step = k;
    /* the work counted (--stats): the rows the channel may move, at most */
    int64_t saved = (int64_t)((double)(ck->pre_ns[k + 1] - ck->pre_ns[k]) * ck->row_keep[i]);
    for (size_t j = (size_t)k + 1; j <= ck->n_steps; j++) tr->run_pre[j] -= saved;
}

int64_t bf__ckpt_rows_run(const bf__ckpt *ck, const unsigned char *block, bf_plan *p, size_t i)
{
    const bf__step *s = &p->steps[i];
    int64_t rows, n;
    if (p->n_vf || !bf__softmax_rows(s, &rows, &n)) return -1;
    int x = s->node->in[0], y = s->node->out[0], jx = ck->store_of[x], jy = ck->store_of[y];
    size_t row = (size_t)n * sizeof(float);
    if (jx < 0 || jy < 0 || !bf__ckpt_in_arena(p, s->in[0]->data) || !bf__ckpt_in_arena(p, s->out[0]->data) ||
        ck->st_bytes[jx] != (size_t)rows * row || ck->st_bytes[jy] != (size_t)rows * row ||
        bf_tensor_nbytes(s->in[0]) != ck->st_bytes[jx] || bf_tensor_nbytes(s->out[0]) != ck->st_bytes[jy])
        return -1;
    const unsigned char *gx = block + ck->st_off[jx], *ax = s->in[0]->data;
    unsigned char *ay = s->out[0]->data;
    if (ay < ax + ck->st_bytes[jx] && ax < ay + ck->st_bytes[jy]) return -1;   /* in place: the copy would clobber it */
    memcpy(ay, block + ck->st_off[jy], ck->st_bytes[jy]);
    int64_t done = 0;
    for (int64_t o = 0; o < rows; o++)
        if (memcmp(ax + (size_t)o * row, gx + (size_t)o * row, row) != 0) {
            bf__softmax_row(s, o);
            done++;
        }
    return done;
}

int bf__ckpt_trial_rows_first(bf__ckpt_trial *tr)
{
    if (!tr || tr->row_seen) return 0;
    tr->row_seen = 1;
    return 1;
}
