/* test_campaign: sampling strata, bit choice and the seed. */
#include "test_campaign.h"

/* --- (8) sampling strata, bit choice */

void strata_are_equal(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = base_spec();
    s.sampling = BF_SAMPLE_PER_TENSOR;
    s.trials = 12 * 3;
    bf_campaign *c = tc_make(f->mlp, f->mlp_ds, &s);
    assert_int_equal(bf_campaign_num_sites(c), 12);
    bf_campaign_result res;
    records rs;
    records_init(&rs, s.trials);
    run(c, 2, 0, 1, &rs, &res);
    for (size_t i = 0; i < 12; i++) assert_int_equal(outcomes(&res.by_site[i]), 3);
    for (int t = 0; t < s.trials; t++) {
        assert_int_equal(rs.r[t].faults[0].site, t % 12);
        assert_true(rs.r[t].faults[0].index < bf_campaign_site(c, (size_t)(t % 12))->elements);
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    int pos[] = {0, 7, 23, 30, 31};
    s.sampling = BF_SAMPLE_PER_BIT;
    memcpy(s.positions, pos, sizeof pos);
    s.n_positions = 5;
    s.trials = 50;
    c = tc_make(f->mlp, f->mlp_ds, &s);
    assert_true(bf_campaign_population(c) == 5.0 * 3558);
    records_init(&rs, s.trials);
    run(c, 2, 0, 1, &rs, &res);
    for (int b = 0; b < 64; b++) {
        int allowed = b == 0 || b == 7 || b == 23 || b == 30 || b == 31;
        assert_int_equal(outcomes(&res.by_bit[b]), allowed ? 10 : 0);
    }
    for (int t = 0; t < s.trials; t++) assert_int_equal(rs.r[t].faults[0].mask, 1u << pos[t % 5]);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    /* three distinct allowed bits; a burst of three adjacent ones */
    s.sampling = BF_SAMPLE_UNIFORM;
    s.bits = 3;
    s.trials = 30;
    c = tc_make(f->mlp, f->mlp_ds, &s);
    records_init(&rs, s.trials);
    run(c, 1, 0, 1, &rs, &res);
    uint32_t allowed_mask = 1u | 1u << 7 | 1u << 23 | 1u << 30 | 1u << 31;
    for (int t = 0; t < s.trials; t++) {
        uint32_t m = rs.r[t].faults[0].mask;
        assert_int_equal(__builtin_popcount(m), 3);
        assert_int_equal(m & ~allowed_mask, 0);
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    int run_pos[] = {20, 21, 22, 23, 30, 31};
    memcpy(s.positions, run_pos, sizeof run_pos);
    s.n_positions = 6;
    s.burst = 1;
    c = tc_make(f->mlp, f->mlp_ds, &s);
    records_init(&rs, s.trials);
    run(c, 1, 0, 1, &rs, &res);
    for (int t = 0; t < s.trials; t++) {
        uint32_t m = rs.r[t].faults[0].mask;
        assert_true(m == 7u << 20 || m == 7u << 21);
    }
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);

    /* random_value: any pattern of the representation's bits */
    s.burst = 0;
    s.bits = 1;
    s.n_positions = 0;
    s.model_kind = BF_FAULT_RANDOM_VALUE;
    s.repr = BF_REPR_INT8;
    c = tc_make(f->mlp, f->mlp_ds, &s);
    assert_true(bf_campaign_population(c) == 3558.0);
    records_init(&rs, s.trials);
    run(c, 1, 0, 1, &rs, &res);
    uint32_t seen = 0;
    for (int t = 0; t < s.trials; t++) {
        assert_int_equal(rs.r[t].faults[0].mask & ~0xffu, 0);
        seen |= rs.r[t].faults[0].mask;
    }
    assert_int_equal(seen, 0xffu);
    assert_int_equal(outcomes(&res.total), 30);
    bf_campaign_result_free(&res);
    bf_campaign_free(c);
    free(rs.r);
}

/* The seed decides everything: another seed, other faults. */
void seed_matters(void **state)
{
    fx *f = *state;
    bf_campaign_spec s = base_spec();
    s.trials = 8;
    bf_campaign *c1 = tc_make(f->mlp, f->mlp_ds, &s);
    s.seed = 43;
    bf_campaign *c2 = tc_make(f->mlp, f->mlp_ds, &s);
    records r1, r2;
    records_init(&r1, 8);
    records_init(&r2, 8);
    bf_campaign_result a, b;
    run(c1, 1, 0, 1, &r1, &a);
    run(c2, 1, 0, 1, &r2, &b);
    int differ = 0;
    for (int t = 0; t < 8; t++) differ += r1.r[t].faults[0].index != r2.r[t].faults[0].index;
    assert_true(differ >= 6);
    bf_campaign_result_free(&a);
    bf_campaign_result_free(&b);
    bf_campaign_free(c1);
    bf_campaign_free(c2);
    free(r1.r);
    free(r2.r);
}
