/* The checkpoint part of an evaluator (eval_ckpt.h says what). */
#include "exec/eval_ckpt.h"

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
    bf_status st = bf__ckpt_run(e->ck, e->tr, plan, s, golden, &work, &skipped, chan, err);
    if (st != BF_OK) return st;
    atomic_fetch_add(&e->work, work);
    atomic_fetch_add(&e->skipped, skipped);
    if (chan[0]) atomic_fetch_add(&e->chan, chan[0]);
    if (chan[1]) atomic_fetch_add(&e->chan_fused, chan[1]);
    if (chan[2]) atomic_fetch_add(&e->chan_stop, chan[2]);
    if (chan[3]) atomic_fetch_add(&e->chan_follow, chan[3]);
    if (chan[4]) atomic_fetch_add(&e->tail_stop, chan[4]);
    if (*golden) atomic_fetch_add(&e->early, 1);
    return BF_OK;
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
    bf__ckpt_trial_free(e->tr);
    e->tr = NULL;
}
