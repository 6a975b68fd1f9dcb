/* The batch a campaign runs at when its spec leaves "batch" out.
 *
 * A trial re-runs whole batches from its fault on (docs/ENGINE.md), and the
 * batch never changes a record's bits (every kernel computes each output's
 * chain alone), only the time: where a sample's activations are large, a
 * small batch keeps a layer's re-run in the core's caches. Measured on
 * 224x224 models (docs/perf/trials/resnet18.md, h48-batch; docs/perf/
 * trials/batch.md): resnet18's trials were fastest at 4 (13% faster than at
 * 64), mobilenet_v2's (against 2, 8 and 16) and ViT-S/16's (against 8 and
 * 16) too; at 64 mobilenet_v2's campaign did not even fit the 4 GiB job
 * memory at 1 thread, nor ViT-S/16's at 2. Where a sample's activations are small
 * (an LSTM, DLRM, the digits models) 64 is as fast or faster: the products'
 * rows are the batch. So the default is 64, halved while a batch's share of
 * the plan (its bytes per sample, from shapes) passes BF__AUTO_BATCH_BYTES,
 * down to 4. A model that normalises with batch statistics keeps 64 (its
 * results depend on the batch, so the default must not move with the
 * model's size), as does one whose batch dimension is fixed (it runs at its
 * own). */
#include "bitflip/campaign.h"

#include "campaign/campaign_impl.h"
#include "exec/plan_impl.h"

/* a batch's bytes of plan at most this much: 64 for a model whose sample
 * takes at most 1 MiB (the LSTM's 0.6, DLRM's KiBs), 4 for one whose sample
 * takes more than 8 MiB (the 224x224 CNNs and ViT-S/16 at 22-166 MiB) */
#define BF__AUTO_BATCH_BYTES ((uint64_t)64 << 20)
#define BF__AUTO_BATCH_MIN 4

int64_t bf_campaign_default_batch(const bf_model *m)
{
    if (bf__model_fixed_batch(m) || bf_model_batch_statistics(m)) return BF_CAMPAIGN_BATCH_DEFAULT;
    bf_plan_opts po = {0};
    bf_plan_budget one, full;
    bf_error e = {0};
    /* a model the estimate cannot size (symbolic dimensions the eval set
     * binds later, a one-sample graph) keeps the default: the campaign
     * settles its batch as before */
    if (bf__plan_estimate_opts(m, 1, &po, &one, NULL, &e) != BF_OK ||
        bf__plan_estimate_opts(m, BF_CAMPAIGN_BATCH_DEFAULT, &po, &full, NULL, &e) != BF_OK ||
        full.total_bytes <= one.total_bytes)
        return BF_CAMPAIGN_BATCH_DEFAULT;
    uint64_t per = (full.total_bytes - one.total_bytes) / (BF_CAMPAIGN_BATCH_DEFAULT - 1);
    int64_t b = BF_CAMPAIGN_BATCH_DEFAULT;
    /* per over the limit's share, not b x per: a hostile model's saturated
     * estimate would overflow the product */
    while (b > BF__AUTO_BATCH_MIN && per > BF__AUTO_BATCH_BYTES / (uint64_t)b) b /= 2;
    return b;
}
