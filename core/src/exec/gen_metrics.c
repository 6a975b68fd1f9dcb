/* Generation's metrics: how far faulty token sequences are from golden ones
 * (bitflip/generate.h, bf_gen_metrics). */
#include "base/alloc.h"
#include "bitflip/generate.h"

/* The classic two-row dynamic programme: row holds the previous and the
 * current row of the distance table. */
int64_t bf_gen_edit_distance(const int64_t *a, const int64_t *b, int64_t m, int64_t *row)
{
    int64_t *prev = row, *cur = row + m + 1;
    for (int64_t j = 0; j <= m; j++) prev[j] = j;
    for (int64_t i = 1; i <= m; i++) {
        cur[0] = i;
        for (int64_t j = 1; j <= m; j++) {
            int64_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]), del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        int64_t *t = prev;
        prev = cur;
        cur = t;
    }
    return prev[m];
}

bf_status bf_gen_compare(const int64_t *golden, const int64_t *faulty, int64_t n, int64_t m, int64_t *scratch,
                         bf_gen_metrics *out, bf_error *err)
{
    int64_t *own = NULL;
    if (n < 1 || m < 1) return bf_error_set(err, BF_EINVAL, "no tokens to compare (%lld prompts of %lld)", (long long)n, (long long)m);
    if (!scratch && !(scratch = own = bf__malloc((size_t)(2 * (m + 1)) * sizeof *scratch)))
        return bf_error_set(err, BF_ENOMEM, "out of memory");
    double match = 0, first = 0, dist = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t *a = golden + i * m, *b = faulty + i * m;
        int64_t k = 0;
        while (k < m && a[k] == b[k]) k++;
        match += k == m;
        first += (double)k;
        dist += (double)(k == m ? 0 : bf_gen_edit_distance(a, b, m, scratch));
    }
    bf__free(own);
    *out = (bf_gen_metrics){.prompts = n, .new_tokens = m, .generation_match = match / (double)n,
                            .first_divergence = first / (double)n, .edit_distance = dist / (double)n};
    return BF_OK;
}
