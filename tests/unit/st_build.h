/* A safetensors file built in memory from tensors given here, for the unit
 * tests of hostile and odd eval sets (layouts the Python writer refuses to
 * make): shapes, dtypes and offsets exactly as the test says. */
#ifndef BF_TEST_ST_BUILD_H
#define BF_TEST_ST_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/model.h"

typedef struct th_st_tensor {
    const char *name, *dtype;   /* dtype as safetensors spells it: "F32", "I64", ... */
    int ndim;
    int64_t dims[4];
    const void *data;
    size_t bytes;
} th_st_tensor;

/* The file's bytes (malloc'd; the caller frees), its length in *len. */
uint8_t *th_st_build(const th_st_tensor *t, int n, size_t *len);

/* Builds t[0..n) (th_st_build), loads it as eval set "hostile" and creates
 * an evaluator of m on it: fails the test unless the status is `want` and
 * the message holds needle (if not NULL); prints "refused: " and the
 * message when the status is not BF_OK. Returns the evaluator's task when
 * one was created, else -1. */
int th_st_outcome(const bf_model *m, const th_st_tensor *t, int n, bf_status want, const char *needle);

#endif
