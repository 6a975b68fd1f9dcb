/* bitflip — the whole engine's vocabulary, one header per concept. */
#ifndef BITFLIP_H
#define BITFLIP_H

#include "bitflip/version.h"
#include "bitflip/error.h"
#include "bitflip/rng.h"
#include "bitflip/tensor.h"
#include "bitflip/repr.h"
#include "bitflip/limits.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "bitflip/fault.h"
#include "bitflip/dataset.h"
#include "bitflip/errmap.h"
#include "bitflip/metrics.h"
#include "bitflip/eval.h"
#include "bitflip/generate.h"
#include "bitflip/sites.h"
#include "bitflip/mitigate.h"
#include "bitflip/campaign_spec.h"
#include "bitflip/campaign.h"
#include "bitflip/spec_rules.h"

#endif
