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

/* onnx_meta.c: keeps the metadata_props bitflip reads (m->kernels). */
struct bf_model;
bf_status bf__onnx_metadata(const Onnx__ModelProto *mp, struct bf_model *m, bf_error *err);
/* onnx_meta.c: BF_EUNSUPPORTED, saying what to do, when a node of the graph
 * calls a function local to the model (export_modules_as_functions). */
bf_status bf__onnx_check_functions(const Onnx__ModelProto *mp, const struct bf_model *m, bf_error *err);

/* onnx_wire.c: the protobuf varint at buf[*pos] (buf holds `len` bytes), *pos
 * moved past it; 0 if it is truncated or longer than 10 bytes. The door
 * check, the diagnostic walk and the initializer cutter all read with it. */
int bf__pb_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *v);

/* Where an initializer's raw_data lies in the model's buffer, when the
 * loader cut it out before unpacking (onnx_strip.c); cut = 0: not cut (the
 * TensorProto holds its data as protobuf-c unpacked it). */
typedef struct bf__raw_range {
    size_t off, len;
    int cut;
    const uint8_t *data;   /* set by the loader: the buffer + off */
    int droppable;         /* data is a read-only file mapping: its pages may be given back once read */
    int fd;                /* with droppable: the mapped file, whose bytes at off are read
                            * with pread into their tensor rather than copied from the mapping */
} bf__raw_range;

typedef struct bf__stripped {
    uint8_t *buf;          /* the model without the cut fields; NULL: not stripped */
    size_t len;
    bf__raw_range *ranges; /* one per main-graph initializer, in file order */
    size_t n_ranges;
} bf__stripped;

/* Cuts the large raw_data of the main graph's initializers out of a model
 * buffer. BF_OK with out->buf NULL when the buffer's wire format is broken
 * (the caller unpacks it whole, to report how); fails only out of memory. */
bf_status bf__onnx_strip(const uint8_t *buf, size_t len, bf__stripped *out, bf_error *err);
void bf__onnx_stripped_free(bf__stripped *s);

/* onnx_external.c: whether tp keeps its data in an external file, and its
 * bytes read from `dir` (the model file's directory) into *data (bf__malloc;
 * the caller frees), the location checked to stay inside dir and the range
 * to lie inside the file. */
int bf__tensor_is_external(const Onnx__TensorProto *tp);
bf_status bf__external_read(const Onnx__TensorProto *tp, const char *dir, const char *what, uint8_t **data,
                            size_t *len, bf_error *err);

struct bf__warena;
/* bf__tensor_from_proto with the raw_data cut out (cut, or NULL) and large
 * data placed in the weights arena (or NULL: the heap). */
bf_status bf__tensor_from_proto_at(const Onnx__TensorProto *tp, const char *what, const bf__raw_range *cut,
                                   struct bf__warena *arena, bf_tensor **out, bf_error *err);
/* The bytes bf__tensor_from_proto_at would allocate for tp's data; 0 when
 * it would refuse tp (or tp is empty). */
size_t bf__tensor_proto_nbytes(const Onnx__TensorProto *tp, const bf__raw_range *cut);

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
