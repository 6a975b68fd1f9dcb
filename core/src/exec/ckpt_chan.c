/* Channel-local Convs in a one-sample graph's trials (ckpt.h, ckpt_impl.h;
 * docs/ENGINE.md "One image per call").
 *
 * A trial whose faults all lie in one output channel of one Conv (its
 * weight or bias, read by no other step) changes that channel of the
 * Conv's output alone: every other channel reads the golden input and
 * golden weights, so the full step would give their golden bits. Such a
 * trial need not run the whole Conv: the golden pass keeps the Conv's
 * output in the store, and the trial puts it back and recomputes the one
 * channel with bf__conv_channel, the path the differential engine's
 * try_conv takes, which gives the whole step's bits for that channel
 * (tests/unit/test_conv_exact.c). On SSDlite a third of the weights are
 * the class heads' last 1x1 Convs (546 output channels each, the first of
 * them alone 9% of a pass): a fault there used to run its Conv whole in
 * every image. What follows the Conv (the heads' Reshape, Transpose and
 * Concat, Softmax, the per-class selection and NMS) runs as before.
 *
 * Only a Conv run alone (no activation, BatchNormalization or Add computed
 * in its epilogue: its own output is then never written), without value
 * faults, whose output the store can hold; each is kept when the trials
 * save more than recording it costs the golden pass (BYTE_SECONDS, as the
 * cuts), within the budget the cuts and the store left. */
#include <string.h>

#include "base/alloc.h"
#include "exec/ckpt_impl.h"
#include "exec/step_access.h"

/* as ckpt.c: what recording a checkpoint byte costs the golden pass */
#define BYTE_SECONDS 3e-9

/* The weight or bias of Conv step i as a parameter read by no other step:
 * its index, else -1. */
static int own_param(const bf__ckpt *ck, const bf__step *s, int i, int j)
{
    if (s->n_in <= j || s->node->in[j] < 0) return -1;
    int q = ck->val_param[s->node->in[j]];
    return q >= 0 && ck->param_lo[q] == i && ck->param_hi[q] == i ? q : -1;
}

bf_status bf__ckpt_choose_chan(bf__ckpt *ck, const bf_plan *p, const double *mass, double mtotal, uint64_t room,
                               int64_t trials, unsigned char *used, size_t (*storable)(const bf__ckpt *, const bf_plan *, int))
{
    size_t n = ck->n_steps;
    ck->chan_m = bf__calloc(n + 1, sizeof *ck->chan_m);
    ck->chan_div = bf__calloc(ck->n_params + 1, sizeof *ck->chan_div);
    if (!ck->chan_m || !ck->chan_div) return BF_ENOMEM;
    uint64_t taken = 0;
    for (size_t i = 0; i < n && mtotal > 0; i++) {
        const bf__step *s = &p->steps[i];
        int64_t c, m, isp, osp;
        if (!(mass[i] > 0) || ck->cut_of[i] < 0 || s->n_out != 1 || s->node->out[0] < 0 ||
            !bf__conv_shape(s, &c, &m, &isp, &osp) || m < 2)
            continue;
        int o = s->node->out[0], qw = own_param(ck, s, (int)i, 1), qb = own_param(ck, s, (int)i, 2);
        size_t bytes = storable(ck, p, o);
        int64_t wn = qw >= 0 ? bf_tensor_numel(&p->vals[s->node->in[1]]) : 0;
        if (qw < 0 || bytes == 0 || wn % m != 0) continue;
        uint64_t need = used[o] ? 0 : ((bytes + 63) & ~(size_t)63) * (uint64_t)ck->samples;
        /* what each trial landing here saves on each image: the other channels */
        double save = mass[i] / mtotal * (double)(ck->pre_ns[i + 1] - ck->pre_ns[i]) * 1e-9 * (1.0 - 1.0 / (double)m);
        if (need > room - taken || (trials > 0 && save * (double)trials < BYTE_SECONDS * (double)bytes)) continue;
        taken += need;
        used[o] = 1;
        ck->chan_m[i] = m;
        ck->chan_div[qw] = wn / m;
        if (qb >= 0) ck->chan_div[qb] = -1;   /* a bias: its element is the channel */
    }
    return BF_OK;
}

void bf__ckpt_trial_element(const bf__ckpt *ck, bf__ckpt_trial *tr, size_t q, int64_t index)
{
    if (tr->chan_step == -2) return;
    int64_t div = q < ck->n_params && ck->chan_div ? ck->chan_div[q] : 0;
    if (div == 0 || index < 0) {
        tr->chan_step = -2;
        return;
    }
    int i = ck->param_lo[q];
    int64_t oc = div < 0 ? index : index / div;
    if (tr->chan_step == -1) {
        tr->chan_step = i;
        tr->chan_oc = oc;
        tr->chan_slot = div < 0 ? 2 : 1;   /* bf__conv_channel's (slot, index) */
        tr->chan_index = index;
    } else if (tr->chan_step != i || tr->chan_oc != oc) {
        tr->chan_step = -2;
    }
}

void bf__ckpt_chan_mark(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    int i = tr->chan_step;
    int golden_in = i >= 0;
    /* its run-time inputs golden (the faults' reach, as the run sees it):
     * else the other channels would not be the golden ones */
    for (int j = golden_in ? ck->in_first[i] : 0; golden_in && j < ck->in_first[i + 1]; j++)
        golden_in = ck->val_param[ck->in_val[j]] >= 0 || !tr->taint[ck->in_val[j]];
    if (!golden_in || tr->all || tr->from < 0 || ck->cut[tr->from] > i || !ck->chan_m || ck->chan_m[i] <= 0) {
        tr->chan_step = -2;
        return;
    }
    tr->act[i] |= BF__STEP_CHAN;
    /* the work counted (--stats): the one channel of the Conv */
    int64_t cost = ck->pre_ns[i + 1] - ck->pre_ns[i], saved = cost - cost / ck->chan_m[i];
    for (size_t k = (size_t)i + 1; k <= ck->n_steps; k++) tr->run_pre[k] -= saved;
}

int bf__ckpt_chan_run(const bf__ckpt *ck, const bf__ckpt_trial *tr, const unsigned char *block, bf_plan *p, size_t i)
{
    const bf__step *s = &p->steps[i];
    int bn, add;
    /* this plan's own facts (the recording plan's may differ): a fused
     * epilogue or a value fault needs the whole step */
    if (!tr || (int)i != tr->chan_step || p->n_vf || p->step_hit[i] || p->fused_skip[i] || s->n_out != 1 ||
        (p->fuse && bf__plan_fused_last(p, i, &bn, &add)))
        return 0;
    int o = s->node->out[0], j = o >= 0 ? ck->store_of[o] : -1;
    if (j < 0 || !bf__ckpt_in_arena(p, p->vals[o].data) || bf_tensor_nbytes(&p->vals[o]) != ck->st_bytes[j]) return 0;
    memcpy(p->vals[o].data, block + ck->st_off[j], ck->st_bytes[j]);
    const float *bias = s->n_in > 2 && s->in[2] ? s->in[2]->data : NULL;
    /* 0 (no Conv after all): the step runs whole over the golden copy */
    return bf__conv_channel(s, tr->chan_slot, tr->chan_index, s->in[0]->data, s->in[1]->data, bias, s->out[0]->data,
                            p->scratch);
}
