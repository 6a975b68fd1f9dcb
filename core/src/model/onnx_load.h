/* Internal: conversion of ONNX protobuf structs into bitflip's graph. */
#ifndef BF_ONNX_LOAD_H
#define BF_ONNX_LOAD_H

#include "bitflip/limits.h"
#include "bitflip/tensor.h"
#include "onnx.pb-c.h"

/* Our dtype for an ONNX TensorProto.DataType (floats widen or narrow to fp32,
 * small integers widen to int64); BF_DTYPE_INVALID if unreadable. */
bf_dtype bf__onnx_dtype(int32_t onnx_type);
const char *bf__onnx_dtype_name(int32_t onnx_type);

/* A new tensor (struct and data from bf__ alloc) from `tp`; `what` names it in
 * errors ("initializer 'fc.weight'"). */
bf_status bf__tensor_from_proto(const Onnx__TensorProto *tp, const char *what, bf_tensor **out,
                                bf_error *err);
void bf__tensor_free(bf_tensor *t);

/* When protobuf-c rejects a buffer it does not say where: this walks the
 * wire format of the top level and of the graph to find the first field that
 * is cut short or malformed, and describes it with its byte offset. */
void bf__onnx_diagnose(const uint8_t *buf, size_t len, char *out, size_t out_len);

/* The door check: walks the wire format (no recursion, no allocation but
 * its own stack) and refuses a buffer past `lim` (NULL: defaults), or one
 * whose wire structure is broken, before protobuf-c unpacks it. */
bf_status bf__onnx_check_limits(const uint8_t *buf, size_t len, const bf_load_limits *lim,
                                const char *label, bf_error *err);

#endif
