/* Internal to model/: what the conversion of an unpacked ONNX model into
 * our graph shares between its files: onnx_convert.c (the main graph, and
 * the name map and attribute converter the others use), onnx_init.c (the
 * initializers' data), onnx_subgraph.c (graph attributes), called by
 * onnx_load.c. */
#ifndef BF_ONNX_CONVERT_H
#define BF_ONNX_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "model/graph.h"
#include "model/onnx_load.h"

/* name -> value index, an open-addressing table used only while loading */
typedef struct bf__name_map {
    size_t cap;              /* a power of two */
    int *slots;              /* value index + 1; 0 = empty */
    const bf__value *values; /* the table the indices point into */
} bf__name_map;

/* The value index named `name`, or -1. */
int bf__name_find(const bf__name_map *m, const char *name);
/* Adds name -> value (the caller checked it is not there; the map has room). */
void bf__name_insert(bf__name_map *m, const char *name, int value);

/* BF_ENOMEM naming the model being loaded. */
bf_status bf__load_oom(bf_error *err, const bf_model *m);
/* A copy of s, "" for NULL (NULL only out of memory). */
char *bf__dup_or_empty(const char *s);
/* One attribute of node np into a; a graph attribute stays BF__ATTR_OTHER
 * (bf__convert_subgraphs makes the main graph's BF__ATTR_GRAPH later). */
bf_status bf__convert_attr(bf_model *m, const Onnx__NodeProto *np, const Onnx__AttributeProto *ap, bf__attr *a,
                           bf_error *err);
/* Adds a value named `name` to m (and map); fails on a duplicate definition. */
bf_status bf__add_value(bf_model *m, bf__name_map *map, const char *name, bf__value_kind kind, int producer, int *idx,
                        bf_error *err);

/* Where the loader found the initializers' data (onnx_strip.c) and, for a
 * mapped file, how much of it was given back to the kernel already. */
typedef struct bf__raw_src {
    bf__raw_range *ranges;   /* one per main-graph initializer; NULL: unpacked whole */
    uint8_t *map;            /* the file's read-only mapping, or NULL (a caller's buffer) */
    size_t released;         /* map bytes before this were given back */
    const char *dir;         /* the model file's directory (external data is read from it), or NULL: a buffer */
} bf__raw_src;

/* onnx_init.c: the weights arena for mp's large initializers (their sizes
 * known from the unpacked headers and the cut ranges, and only for data
 * that is there: dims alone could ask for gigabytes). NULL when there are
 * none or no arena can be made: the heap then. */
struct bf__warena *bf__onnx_arena(const Onnx__ModelProto *mp, const bf__raw_range *ranges, int huge);
/* onnx_init.c: the main graph's initializers as values of m: float ones
 * are parameters, the rest constants. */
bf_status bf__convert_initializers(const Onnx__GraphProto *g, bf_model *m, bf__name_map *map, bf__raw_src *src,
                                   bf_error *err);
/* onnx_subgraph.c: the graph attributes of the main graph's nodes, kept as
 * bf__subgraphs (those of their own nodes too, nested), once every value
 * of the main graph (`outer`) exists. */
bf_status bf__convert_subgraphs(const Onnx__GraphProto *gp, bf_model *m, const bf__name_map *outer, bf_error *err);
/* onnx_convert.c: the model's graph into m, step by step, in the order
 * errors are reported: header, initializers, inputs, nodes, their inputs,
 * subgraphs, outputs. */
bf_status bf__onnx_convert(const Onnx__ModelProto *mp, bf_model *m, bf__raw_src *src, bf_error *err);

#endif
