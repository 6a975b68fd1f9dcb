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
 * A Conv whose epilogue computes a BatchNormalization, a residual Add or
 * an activation (plan_impl.h's fusion: its own output is then never
 * written; most of a mobilenet's weights) is taken with that chain: the
 * store keeps the chain's last output, and the trial recomputes the one
 * channel with bf__conv_channel_epi, the one-channel product followed by
 * the fused epilogue's own operations on that channel's planes (the same
 * bits as the whole fused step: test_conv_fuse's one_channel_of_a_chain).
 * The chain's other operands (a residual Add's, the BatchNormalization's
 * parameters) must be golden.
 *
 * The changed channel is followed on while the value holding it has one
 * reader that changes one channel of its own output alone, its other
 * inputs golden: a unary map or Clip, a BatchNormalization, a depthwise or
 * grouped Conv (with its fused chain), computed by the kernels the
 * differential engine's channel-local steps use (diff/diffchan.c) over
 * their golden output, kept too. A recomputed channel equal to its golden
 * bits then leaves the whole image golden (the faults changed nothing else,
 * and every value before it in the walk had it as its one reader): the run
 * stops there, as at a checkpoint that came back golden.
 *
 * Without value faults, a Conv whose output (or chain's) the store can
 * hold; each is kept when the trials save more than recording it costs the
 * golden pass (ck->byte_s, as the cuts), within the budget the cuts and
 * the store left. */
#include <string.h>

#include "base/alloc.h"
#include "exec/ckpt_impl.h"
#include "exec/step_access.h"

/* as ckpt_reach.c: what putting a stored byte back costs a trial, on each
 * image (a pointwise Conv of few input channels costs little more than
 * the copy of its golden output) */
#define FILL_SECONDS 0.3e-9
/* A value of at most this many bytes a sample is kept whatever the rule
 * says: recording it costs the golden pass well under a microsecond an
 * image, and the saving the rule weighs leaves out the images that end
 * where a channel comes back golden (an SE block's gate, 4 bytes a
 * channel, saturating in its HardSigmoid) */
#define CHAN_SMALL 4096
/* The share of the images of a trial with faults in one channel of a Conv
 * whose recomputed channel comes back golden (the rest of the pass then
 * not run), as the choice weighs it: SSDlite320 under 40 trials of
 * uniform faults in its backbone's weights ended 315 of their 640 images
 * at the channel (a ReLU6 or HardSwish zeroing it, a weight multiplying
 * zeros); half that, to stay on the safe side of a guess. Those faults
 * lie mostly in the last blocks, whose planes are 10x10: a channel of
 * more positions comes back golden less often (every position must), so
 * the share is taken as P_GOLDEN * P_PLANE / positions past P_PLANE */
#define P_GOLDEN 0.25
#define P_PLANE 100.0

/* The weight or bias of Conv step i as a parameter read by no other step:
 * its index, else -1. */
static int own_param(const bf__ckpt *ck, const bf__step *s, int i, int j)
{
    if (s->n_in <= j || s->node->in[j] < 0) return -1;
    int q = ck->val_param[s->node->in[j]];
    return q >= 0 && ck->param_lo[q] == i && ck->param_hi[q] == i ? q : -1;
}

/* The chain Conv step i's fused run computes (the recording plan's): its
 * last step, BatchNormalization, residual Add (0: none) into ch3; the
 * golden cost of those steps. */
static int64_t chain_of(const bf__ckpt *ck, const bf_plan *p, int i, int *ch3)
{
    int last = p->fuse_to[i] > i ? p->fuse_to[i] : i;
    ch3[0] = last, ch3[1] = last != i ? p->fuse_bn[i] : 0, ch3[2] = last != i ? p->fuse_add[i] : 0;
    int64_t cost = ck->pre_ns[i + 1] - ck->pre_ns[i];
    for (int k = 0; k < 3; k++)
        if (ch3[k] > i && (k == 0 || ch3[k] != last)) cost += ck->pre_ns[ch3[k] + 1] - ck->pre_ns[ch3[k]];
    return cost;
}

/* Every input of step k golden in a trial whose faults lie in Conv step
 * i's weights alone: parameters, or values computed before i (or by no
 * step), but for v and the values of the fused chain of step f (ch3: its
 * BatchNormalization and Add) that k belongs to. */
static int before_origin(const bf__ckpt *ck, int k, int i, int v, int f, const int *ch3)
{
    for (int j = ck->in_first[k]; j < ck->in_first[k + 1]; j++) {
        int u = ck->in_val[j], at = ck->val_step[u];
        if (u == v || ck->val_param[u] >= 0 || at < i) continue;
        if (k == f || (at != f && at != ch3[1] && at != ch3[2])) return 0;
    }
    return 1;
}

/* The step following the channel on from value v (the output of a chosen
 * Conv's chain, or of a step following it, i the Conv): v's one reader, a
 * float unary map or Clip, a BatchNormalization, or a Conv whose output
 * channels each read their own group's input channels (depthwise: the same
 * channel), with its fused chain (ch3), v its first input and its other
 * inputs golden; 0: none. */
static int follower(const bf__ckpt *ck, const bf_plan *p, int v, int i, int *ch3)
{
    int f = 0, at = ck->val_step[v];
    for (size_t k = 0; k < ck->n_outputs; k++)
        if (ck->outputs[k] == v) return 0;
    for (size_t k = (size_t)(at + 1); k < ck->n_steps; k++)
        for (int j = ck->in_first[k]; j < ck->in_first[k + 1]; j++)
            if (ck->in_val[j] == v) {
                if (f) return 0;   /* a second reader */
                f = (int)k;
            }
    const bf__step *s = f ? &p->steps[f] : NULL;
    if (!s || ck->dyn[f] || s->n_out != 1 || s->node->in[0] != v || p->fuse_mid[f]) return 0;
    ch3[0] = f, ch3[1] = ch3[2] = 0;
    int kind = bf__map_f32(s) || bf__bnorm_of(s, NULL);
    if (!kind && bf__conv_group_in(s) > 0) {
        chain_of(ck, p, f, ch3);
        kind = 1;
    }
    if (!kind || !before_origin(ck, f, i, v, f, ch3)) return 0;
    for (int k = 0; k < 3; k++)
        if (ch3[k] > f && !before_origin(ck, ch3[k], i, -1, f, ch3)) return 0;
    return f;
}

bf_status bf__ckpt_choose_chan(bf__ckpt *ck, const bf_plan *p, const double *mass, double mtotal, uint64_t room,
                               int64_t trials, unsigned char *used, size_t (*storable)(const bf__ckpt *, const bf_plan *, int))
{
    size_t n = ck->n_steps;
    ck->chan_m = bf__calloc(n + 1, sizeof *ck->chan_m);
    ck->chan_div = bf__calloc(ck->n_params + 1, sizeof *ck->chan_div);
    ck->chan_chain = bf__calloc(3 * (n + 1), sizeof *ck->chan_chain);
    ck->chan_next = bf__calloc(n + 1, sizeof *ck->chan_next);
    if (!ck->chan_m || !ck->chan_div || !ck->chan_chain || !ck->chan_next) return BF_ENOMEM;
    uint64_t taken = 0;
    for (size_t i = 0; i < n && mtotal > 0; i++) {
        const bf__step *s = &p->steps[i];
        int64_t c, m, isp, osp;
        if (!(mass[i] > 0) || ck->cut_of[i] < 0 || s->n_out != 1 || s->node->out[0] < 0 ||
            !bf__conv_shape(s, &c, &m, &isp, &osp) || m < 2)
            continue;
        /* the chain's last step: what its fused run writes */
        int ch3[3];
        int64_t cost = chain_of(ck, p, (int)i, ch3);
        int last = ch3[0];
        const bf__step *ls = &p->steps[last];
        if (ls->n_out != 1 || ls->node->out[0] < 0 || ls->dyn) continue;
        int o = ls->node->out[0], qw = own_param(ck, s, (int)i, 1), qb = own_param(ck, s, (int)i, 2);
        size_t bytes = storable(ck, p, o);
        int64_t wn = qw >= 0 ? bf_tensor_numel(&p->vals[s->node->in[1]]) : 0;
        if (qw < 0 || bytes == 0 || wn % m != 0) continue;
        uint64_t need = used[o] ? 0 : ((bytes + 63) & ~(size_t)63) * (uint64_t)ck->samples;
        /* what each trial landing here saves on each image: the other
         * channels of the Conv and of the steps its epilogue computes, and
         * with P_GOLDEN the rest of the pass */
        double rest = (double)(ck->pre_ns[n] - ck->pre_ns[last + 1]) * 1e-9;
        double pg = P_GOLDEN * (osp > P_PLANE ? P_PLANE / (double)osp : 1.0);
        double save = mass[i] / mtotal *
                      ((double)cost * 1e-9 * (1.0 - 1.0 / (double)m) + pg * rest - FILL_SECONDS * (double)bytes);
        if (save <= 0 && bytes > CHAN_SMALL) continue;
        if (need > room - taken ||
            (trials > 0 && bytes > CHAN_SMALL && save * (double)trials < ck->byte_s * (double)bytes))
            continue;
        taken += need;
        used[o] = 1;
        ck->chan_m[i] = m;
        memcpy(&ck->chan_chain[3 * i], ch3, sizeof ch3);
        ck->chan_div[qw] = wn / m;
        if (qb >= 0) ck->chan_div[qb] = -1;   /* a bias: its element is the channel */
        /* the steps following the channel on, each kept while the trials
         * save more than its golden output costs (and catch a channel
         * that comes back golden there: a HardSigmoid's saturation) */
        int at = (int)i, v = o, f, fc[3];
        while ((f = follower(ck, p, v, (int)i, fc)) > 0) {
            int fo = p->steps[fc[0]].node->out[0], tmp[3];
            if (fo < 0 || p->steps[fc[0]].n_out != 1) break;
            int64_t fcost = chain_of(ck, p, f, tmp), c1 = p->vals[fo].ndim > 1 ? p->vals[fo].dims[1] : 1;
            size_t fb = storable(ck, p, fo);
            uint64_t fneed = fb == 0 || used[fo] ? 0 : ((fb + 63) & ~(size_t)63) * (uint64_t)ck->samples;
            double fsave = mass[i] / mtotal *
                           ((double)fcost * 1e-9 * (1.0 - 1.0 / (double)(c1 > 1 ? c1 : 2)) - FILL_SECONDS * (double)fb);
            if (fb == 0 || c1 < 1 || fneed > room - taken || (fsave <= 0 && fb > CHAN_SMALL) ||
                (trials > 0 && fb > CHAN_SMALL && fsave * (double)trials < ck->byte_s * (double)fb))
                break;
            taken += fneed;
            used[fo] = 1;
            memcpy(&ck->chan_chain[3 * f], fc, sizeof fc);
            ck->chan_next[at] = f;
            if (ck->chan_m[f] == 0) ck->chan_m[f] = -c1;   /* its channels, for --stats (< 0: no Conv chosen) */
            at = f, v = fo;
        }
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

/* Step k's run-time inputs golden (the faults' reach, as the run sees
 * it), but for the values the chain's own steps (i, the BN, the Add)
 * compute: else other channels than the Conv's one would move. A faulted
 * parameter other than the Conv's own made the trial no channel's already
 * (bf__ckpt_trial_element). */
static int golden_inputs(const bf__ckpt *ck, const bf__ckpt_trial *tr, int k, int i)
{
    const int *ch = &ck->chan_chain[3 * i];
    for (int j = ck->in_first[k]; j < ck->in_first[k + 1]; j++) {
        int v = ck->in_val[j], at = ck->val_step[v];
        if (ck->val_param[v] >= 0 || !tr->taint[v]) continue;
        if (k == i || at < 0 || (at != i && at != ch[1] && at != ch[2])) return 0;
    }
    return 1;
}

void bf__ckpt_chan_mark(const bf__ckpt *ck, bf__ckpt_trial *tr)
{
    int i = tr->chan_step;
    if (i < 0 || tr->all || tr->from < 0 || ck->cut[tr->from] > i || !ck->chan_m || ck->chan_m[i] <= 0) {
        tr->chan_step = -2;
        return;
    }
    const int *ch = &ck->chan_chain[3 * i];
    int ok = golden_inputs(ck, tr, i, i);
    for (int k = 0; k < 3 && ok; k++)
        if (ch[k] > i) ok = golden_inputs(ck, tr, ch[k], i);
    if (!ok) {
        tr->chan_step = -2;
        return;
    }
    tr->act[i] |= BF__STEP_CHAN;
    /* the work counted (--stats): the one channel of the Conv (of the
     * steps its epilogue computes, timed near nothing: the Conv ran them),
     * and of each step following the channel on (its inputs golden but the
     * one it follows: chosen so) */
    int64_t cost = ck->pre_ns[i + 1] - ck->pre_ns[i], saved = cost - cost / ck->chan_m[i];
    for (size_t k = (size_t)i + 1; k <= ck->n_steps; k++) tr->run_pre[k] -= saved;
    for (int f = ck->chan_next[i]; f > 0; f = ck->chan_next[f]) {
        int64_t c = ck->chan_m[f] < 0 ? -ck->chan_m[f] : ck->chan_m[f];
        tr->act[f] |= BF__STEP_CHAN;
        cost = ck->pre_ns[f + 1] - ck->pre_ns[f], saved = c > 0 ? cost - cost / c : 0;
        for (size_t k = (size_t)f + 1; k <= ck->n_steps; k++) tr->run_pre[k] -= saved;
    }
}

/* the recomputed channel's planes (every sample's) bit for bit the golden
 * ones kept in the block */
static int channel_golden(const bf_tensor *y, const unsigned char *golden, int64_t ch)
{
    int64_t n = y->dims[0], c = y->ndim > 1 ? y->dims[1] : 1, in = 1;
    for (int d = 2; d < y->ndim; d++) in *= y->dims[d];
    const float *a = y->data, *g = (const float *)golden;
    for (int64_t k = 0; k < n; k++)
        if (memcmp(a + (k * c + ch) * in, g + (k * c + ch) * in, (size_t)in * sizeof *a) != 0) return 0;
    return 1;
}

/* The golden output of step i's chain (chan_chain) back in place on plan
 * p, if this plan fuses step i as the recording plan did and the store
 * holds it: the output's value, else -1. */
static int golden_back(const bf__ckpt *ck, const unsigned char *block, bf_plan *p, size_t i, int *fused)
{
    int bn, add;
    const int *ch = &ck->chan_chain[3 * i];
    int r = p->fuse && bf__conv_step(&p->steps[i]) ? bf__plan_fused_last(p, i, &bn, &add) : 0;
    if (ch[0] <= 0 && i > 0) return -1;
    if (r ? r != ch[0] || bn != ch[1] || add != ch[2] : ch[0] != (int)i) return -1;
    const bf__step *ls = &p->steps[ch[0]];
    int o = ls->node->out[0], j = o >= 0 ? ck->store_of[o] : -1;
    if (ls->n_out != 1 || j < 0 || !bf__ckpt_in_arena(p, p->vals[o].data) ||
        bf_tensor_nbytes(&p->vals[o]) != ck->st_bytes[j] || p->vals[o].ndim < 2 || p->vals[o].dtype != BF_F32)
        return -1;
    memcpy(p->vals[o].data, block + ck->st_off[j], ck->st_bytes[j]);
    *fused = r > 0;
    return o;
}

/* Step f following channel ch on (chan_next), over its golden output: its
 * output channel, or -1 when it cannot (nothing written but the golden
 * copy, which the step's whole run then overwrites). */
static int64_t follow(const bf__ckpt *ck, const unsigned char *block, bf_plan *p, size_t f, int64_t ch, int *o)
{
    const bf__step *s = &p->steps[f];
    int fused = 0;
    if (p->step_hit[f] || p->fused_skip[f] || s->n_out != 1 || (*o = golden_back(ck, block, p, f, &fused)) < 0)
        return -1;
    const bf_tensor *y = &p->vals[*o];
    int64_t n = y->dims[0], c = y->dims[1], in = 1;
    for (int d = 2; d < y->ndim; d++) in *= y->dims[d];
    int64_t cg = bf__conv_group_in(s);
    if (cg > 0) {
        int64_t oc = ch / cg;
        if (oc >= c) return -1;
        if (fused) return bf__plan_fused_channel(p, f, oc) ? oc : -1;
        const float *bias = s->n_in > 2 && s->in[2] ? s->in[2]->data : NULL;
        return bf__conv_channel_n(s, oc, n, s->in[0]->data, s->in[1]->data, bias, s->out[0]->data, p->scratch) ? oc
                                                                                                              : -1;
    }
    if (ch >= c || fused) return -1;
    if (bf__bnorm_of(s, NULL)) return bf__bnorm_channel(s, ch) ? ch : -1;
    if (!bf__map_f32(s) || bf_tensor_numel(s->in[0]) != n * c * in) return -1;
    for (int64_t k = 0; k < n; k++) bf__map_span(s, (k * c + ch) * in, in);
    return ch;
}

int bf__ckpt_chan_run(const bf__ckpt *ck, const bf__ckpt_trial *tr, const unsigned char *block, bf_plan *p, size_t i,
                      int *fused, bf__chan_walk *walk)
{
    const bf__step *s = &p->steps[i];
    *fused = 0;
    if (!tr || p->n_vf) return 0;
    int o;
    int64_t oc;
    if ((int)i == tr->chan_step) {
        walk->ch = -1;
        if (p->step_hit[i] || p->fused_skip[i] || s->n_out != 1 || (o = golden_back(ck, block, p, i, fused)) < 0)
            return 0;
        oc = tr->chan_oc;
        if (*fused) {
            /* 0 (no Conv after all): the step runs whole, fused, over the golden copy */
            if (!bf__plan_fused_channel(p, i, oc)) return 0;
        } else {
            const float *bias = s->n_in > 2 && s->in[2] ? s->in[2]->data : NULL;
            if (!bf__conv_channel(s, tr->chan_slot, tr->chan_index, s->in[0]->data, s->in[1]->data, bias,
                                  s->out[0]->data, p->scratch))
                return 0;
        }
    } else {
        int64_t ch = walk->ch;
        walk->ch = -1;
        if (ch < 0 || (int)i != walk->next || (oc = follow(ck, block, p, i, ch, &o)) < 0) return 0;
        *fused = 0;
    }
    if (channel_golden(&p->vals[o], block + ck->st_off[ck->store_of[o]], oc)) return 2;
    walk->ch = oc;
    walk->next = ck->chan_next[i];
    return 1;
}
