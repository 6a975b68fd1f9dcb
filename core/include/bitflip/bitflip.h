/* bitflip — the whole engine's vocabulary, one header per concept. */
#ifndef BITFLIP_H
#define BITFLIP_H

#include "bitflip/error.h"
#include "bitflip/tensor.h"
#include "bitflip/model.h"
#include "bitflip/plan.h"
#include "bitflip/fault.h"
#include "bitflip/dataset.h"
#include "bitflip/errmap.h"
#include "bitflip/metrics.h"
#include "bitflip/eval.h"

#define BITFLIP_VERSION "0.1.0"

#endif
