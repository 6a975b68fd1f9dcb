/* The derived models of mitigate.c: the base's values and nodes kept under
 * their ids, nodes inserted after the ones they protect, readers rewired.
 * Shared by the files that insert nodes (mitigate_abft.c, mitigate_clip.c). */
#ifndef BF_MITIGATE_EDIT_H
#define BF_MITIGATE_EDIT_H

#include "mitigate/mitigate_impl.h"
#include "exec/op.h"

typedef struct bf__edit {
    bf_model *m;
    size_t cap_values, cap_nodes;
    int *after;             /* per node: the node it runs right after (-1: base order) */
    int *cur;               /* per base value: what its readers read now */
    size_t base_values, base_nodes;
} bf__edit;

bf_status bf__edit_oom(bf_error *err);
/* Starts e as a copy of base (arrays owned, contents shared). */
bf_status bf__edit_derive(const bf_model *base, bf__edit *e, bf_error *err);
/* Gives up: frees what e made. */
void bf__edit_abort(bf__edit *e);
/* Hands the model over (*out; e is spent). */
bf_status bf__edit_finish(bf__edit *e, bf_model **out, bf_error *err);
/* p, freed with the derived model (NULL in, NULL out; on failure p is freed). */
void *bf__edit_own(bf__edit *e, void *p);
/* a + b, owned by the derived model. */
char *bf__edit_own_str(bf__edit *e, const char *a, const char *b);
int bf__edit_add_value(bf__edit *e, const char *name, bf__value_kind kind, bf_tensor *init);
/* A float constant of the given shape, zeroed, its data in *data; -1 on failure
 * (a NULL name included: names come from bf__edit_own_str, which may fail). */
int bf__edit_add_const(bf__edit *e, const char *name, int ndim, const int64_t *dims, float **data);
/* A node running right after node `after`; returns its (one) output value, -1 on failure. */
int bf__edit_add_node(bf__edit *e, int after, const char *name, const char *op_type, const bf__op *op, const int *in,
                      int n_in, bf__attr *attrs, size_t n_attrs, const char *out_name);
/* Readers of `from` (but nodes [skip_lo, skip_hi)) and graph outputs read `to` instead. */
void bf__edit_rewire(bf__edit *e, int from, int to, size_t skip_lo, size_t skip_hi);
/* Attributes: a copy of n's with room for `extra` more; setters replace or append. */
bf__attr *bf__edit_attrs_copy(bf__edit *e, const bf__node *n, size_t extra);
void bf__edit_attr_set_int(bf__attr *a, size_t *n, const char *name, int64_t v);
void bf__edit_attr_set_float(bf__attr *a, size_t *n, const char *name, float v);
void bf__edit_attr_set_string(bf__attr *a, size_t *n, const char *name, const char *v);

/* mitigate_abft.c: the checksums and check of linear node ni (nothing if
 * ABFT cannot protect it). */
bf_status bf__abft_insert(bf__edit *e, const float *const *stored, int ni, const bf_abft_opts *o, bf_error *err);
/* mitigate_clip.c: clipping where o says, bounds profiled over ds if asked. */
bf_status bf__clip_insert(bf__edit *e, const bf_dataset *ds, const float *const *stored, int64_t batch,
                          const bf_clip_opts *o, bf_error *err);

#endif
