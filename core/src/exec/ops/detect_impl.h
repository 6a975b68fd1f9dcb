/* Internals of the detection op family: NonMaxSuppression (detect.c), the
 * box selection of torchvision's detectors, and RoiAlign (detect_roialign.c),
 * the pooling of their second stages. docs/OPS.md, "Detectors", says which
 * rules follow torchvision and which the ONNX spec. */
#ifndef BF_OPS_DETECT_IMPL_H
#define BF_OPS_DETECT_IMPL_H

#include "exec/op.h"

bf_status bf__roialign_prepare(bf__prep *p, bf_error *err);
bf_status bf__roialign_run(const bf__ctx *c, bf_error *err);

#endif
