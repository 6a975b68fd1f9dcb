/* The spec's rules for multi-bit upsets in 64-bit storage words
 * (docs/CAMPAIGNS.md, "Multi-bit upsets"): one table, run by
 * spec_rules.c between the burst rules and the BER ones. */
#include "spec_rules_impl.h"

#include "bitflip/repr.h"

static bool word_burst(const bf_campaign_spec *s) { return s->burst == BF_BURST_WORD; }
static bool has_words(const bf_campaign_spec *s, const bf_spec_facts *f) { return s->words != 0 || stated(f, BF_SPEC_WORDS); }

/* a 64-bit word holds a whole number of stored values; the scales of
 * fault_scales are not the weights' storage */
static bool word_storage(const bf_campaign_spec *s, char *msg, size_t len)
{
    int m = bf_repr_bits(s->repr);
    if (s->fault_scales)
        return SAY("does not apply with fault_scales (a multi-bit upset strikes the stored weights' words)");
    return m > 0 && 64 % m != 0 &&
           SAY("needs a representation whose width divides 64 (fp32, fp16, bf16, int8, uint8, int4, uint4, int2, "
               "uint2), so that a 64-bit word holds whole values; '%s' is %d bits", bf_repr_name(s->repr), m);
}

RULE(burst_word_weights)
{
    UNUSED;
    return word_burst(s) && !on_weights(s) &&
           SAY("'word' applies only to target 'weights' (a burst inside a 64-bit word of a tensor's storage)");
}

RULE(burst_word_repr)
{
    UNUSED;
    return word_burst(s) && mbu_model(s) && word_storage(s, msg, len);
}

RULE(burst_word_positions)
{
    UNUSED;
    return word_burst(s) && (s->n_positions != 0 || stated(f, BF_SPEC_POSITIONS)) &&
           SAY("does not apply with burst 'word' (the burst may start at any bit of its 64-bit word)");
}

RULE(burst_word_bits)
{
    UNUSED;
    return word_burst(s) && mbu_model(s) && s->bits > 64 &&
           SAY("must be at most 64 with burst 'word' (the bits of one 64-bit word), got %d", s->bits);
}

RULE(words_chosen_models)
{
    UNUSED;
    return has_words(s, f) && !mbu_model(s) &&
           SAY("applies only to models 'bitflip', 'stuck_at_0', 'stuck_at_1' and 'ber', not '%s'", model_name(s));
}

RULE(words_range)
{
    UNUSED;
    return has_words(s, f) && !(s->words >= 2 && s->words <= BF_MBU_WORDS_MAX) &&
           SAY("must be 2..%d (the neighbouring 64-bit words a column upset strikes), got %d", BF_MBU_WORDS_MAX, s->words);
}

RULE(words_not_burst)
{
    UNUSED;
    return has_words(s, f) && s->burst &&
           SAY("and burst are two multi-bit upsets: give one (words: the same bit of neighbouring words; burst: "
               "adjacent bits)");
}

RULE(words_one_bit)
{
    UNUSED;
    return has_words(s, f) && s->bits > 1 &&
           SAY("a column upset strikes one bit, the same in each word: bits must be 1, got %d", s->bits);
}

RULE(words_weights)
{
    UNUSED;
    return has_words(s, f) && !on_weights(s) &&
           SAY("applies only to target 'weights' (neighbouring 64-bit words of a tensor's storage)");
}

RULE(words_repr)
{
    UNUSED;
    return has_words(s, f) && word_storage(s, msg, len);
}

bool bf__rule_mbu_uniform(const bf_campaign_spec *s, const bf_spec_facts *f, char *field, char *msg, size_t len)
{
    UNUSED;
    return (word_burst(s) || has_words(s, f)) && chosen_bits(s) && s->sampling != BF_SAMPLE_UNIFORM &&
           SAY("must be 'uniform' with a multi-bit upset in 64-bit words (%s): its population is (word, bit) "
               "pairs, not (tensor, bit position) strata or listed bits",
               word_burst(s) ? "faults.burst 'word'" : "faults.words");
}

const rule bf__spec_rules_mbu[] = {
    {"burst-word-weights", BF_SPEC_BURST, ANY, B(TARGET), BF_EINVAL, burst_word_weights},
    {"burst-word-repr", BF_SPEC_BURST, ANY, B(MODEL) | B(REPR) | B(FAULT_SCALES), BF_EINVAL, burst_word_repr},
    {"burst-word-positions", BF_SPEC_POSITIONS, ANY, B(BURST), BF_EINVAL, burst_word_positions},
    {"burst-word-bits", BF_SPEC_BITS, ANY, B(MODEL) | B(BURST), BF_ERANGE, burst_word_bits},
    {"words-chosen-models", BF_SPEC_WORDS, ANY, B(MODEL), BF_EINVAL, words_chosen_models},
    {"words-range", BF_SPEC_WORDS, ANY, 0, BF_ERANGE, words_range},
    {"words-not-burst", BF_SPEC_WORDS, ANY, B(BURST), BF_EINVAL, words_not_burst},
    {"words-one-bit", BF_SPEC_WORDS, ANY, B(BITS), BF_EINVAL, words_one_bit},
    {"words-weights", BF_SPEC_WORDS, ANY, B(TARGET), BF_EINVAL, words_weights},
    {"words-repr", BF_SPEC_WORDS, ANY, B(REPR) | B(FAULT_SCALES), BF_EINVAL, words_repr},
};
const size_t bf__spec_rules_mbu_n = sizeof bf__spec_rules_mbu / sizeof bf__spec_rules_mbu[0];
