/* The checkpoint part of an evaluator (eval_ckpt.h says what). */
#include "exec/eval_ckpt.h"

#include "base/alloc.h"

bf_status bf__eval_ckpt_set(bf__eval_ckpt *e, const bf__ckpt *ck, bf__ckpt *rec, const float *golden_out, int usable,
                            bf_error *err)
{
    e->ck = usable && golden_out ? ck : NULL;
    e->rec = rec;
    e->out = golden_out;
    bf__ckpt_trial_free(e->tr);
    e->tr = NULL;
    return e->ck ? bf__ckpt_trial_new(e->ck, &e->tr, err) : BF_OK;
}

bf_status bf__eval_ckpt_run(bf__eval_ckpt *e, bf_plan *plan, int64_t s, int *golden, bf_error *err)
{
    *golden = 0;
    if (e->rec) return bf__ckpt_record(e->rec, plan, s, err);
    if (!e->ck) return bf_plan_run(plan, err);
    int64_t work = 0, skipped = 0, chan[5] = {0, 0, 0, 0, 0};
    size_t need = bf__ckpt_tail_scratch(e->ck);
    if (need > e->tail_cap) {
        float *y = bf__realloc(e->tail_y, need * sizeof *y);
        if (!y) return bf_error_set(err, BF_ENOMEM, "out of memory for the detection tail's check (%zu scores)", need);
        e->tail_y = y, e->tail_cap = need;
    }
    bf_status st = bf__ckpt_run(e->ck, e->tr, e->tail_y, plan, s, golden, &work, &skipped, chan, err);
    if (st != BF_OK) return st;
    bf__ckpt_counts k = {.work = work, .early = *golden != 0, .skipped = skipped, .chan = chan[0],
                         .chan_fused = chan[1], .chan_stop = chan[2], .chan_follow = chan[3], .tail_stop = chan[4]};
    bf__eval_ckpt_add(e, &k);
    return BF_OK;
}

void bf__ckpt_counts_add(bf__ckpt_counts *to, const bf__ckpt_counts *from)
{
    to->work += from->work, to->early += from->early, to->skipped += from->skipped;
    to->chan += from->chan, to->chan_fused += from->chan_fused, to->chan_stop += from->chan_stop;
    to->chan_follow += from->chan_follow, to->tail_stop += from->tail_stop;
}

bf__ckpt_counts bf__eval_ckpt_counts(const bf__eval_ckpt *e)
{
    return (bf__ckpt_counts){.work = atomic_load(&e->work), .early = atomic_load(&e->early),
                             .skipped = atomic_load(&e->skipped), .chan = atomic_load(&e->chan),
                             .chan_fused = atomic_load(&e->chan_fused), .chan_stop = atomic_load(&e->chan_stop),
                             .chan_follow = atomic_load(&e->chan_follow), .tail_stop = atomic_load(&e->tail_stop)};
}

/* only the counts that moved: most runs end no channel and no tail, and an
 * atomic add of 0 still takes the line */
void bf__eval_ckpt_add(bf__eval_ckpt *e, const bf__ckpt_counts *k)
{
    if (k->work) atomic_fetch_add(&e->work, k->work);
    if (k->early) atomic_fetch_add(&e->early, k->early);
    if (k->skipped) atomic_fetch_add(&e->skipped, k->skipped);
    if (k->chan) atomic_fetch_add(&e->chan, k->chan);
    if (k->chan_fused) atomic_fetch_add(&e->chan_fused, k->chan_fused);
    if (k->chan_stop) atomic_fetch_add(&e->chan_stop, k->chan_stop);
    if (k->chan_follow) atomic_fetch_add(&e->chan_follow, k->chan_follow);
    if (k->tail_stop) atomic_fetch_add(&e->tail_stop, k->tail_stop);
}

int bf__eval_ckpt_skips_value(const bf__eval_ckpt *e, int64_t v)
{
    return !e->rec && e->ck && bf__ckpt_trial_skips_value(e->ck, e->tr, v);
}

void bf__eval_ckpt_pass_done(bf__eval_ckpt *e)
{
    if (e->tr) bf__ckpt_trial_clear(e->tr);
}

void bf__eval_ckpt_free(bf__eval_ckpt *e)
{
    bf__free(e->tail_y);
    e->tail_y = NULL, e->tail_cap = 0;
    bf__ckpt_trial_free(e->tr);
    e->tr = NULL;
}
