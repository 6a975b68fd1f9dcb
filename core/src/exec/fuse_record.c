/* The exporter's record of the kernels PyTorch ran (metadata_props
 * "bitflip.kernels", written by bitflip.export), read for fuse.c.
 *
 * An exported nn.LayerNorm and a LayerNorm written out by hand are node for
 * node the same graph, but PyTorch ran the first as one kernel and the
 * second op by op, and under a huge value they overflow differently. Only
 * the exporter can tell them apart, so when the record is present bitflip
 * fuses a pattern only if PyTorch ran the matching kernel in the module
 * scope its nodes carry, once per recorded call; without the record, every
 * pattern is fused (the rule before it existed).
 *
 * The text: a first line "bitflip.kernels 1", then one line per kernel call,
 * "KERNEL<tab>SCOPE<tab>MODULE": KERNEL an ATen op name (layer_norm,
 * group_norm, gelu, hardswish; other names are kept for later versions and
 * fuse nothing), SCOPE the ONNX node-name prefix of the module that called
 * it ("/encoder/layers.0/norm1", "" for the top module), MODULE its type
 * (for people; bitflip does not read it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "exec/fuse.h"

#define HEADER "bitflip.kernels 1"

static const char *const kernel_of_kind[BF__FUSE_KINDS] = {"layer_norm", "gelu", "gelu", "hardswish",
                                                            "group_norm"};

static bf_status bad(const bf_model *m, size_t line, const char *what, bf_error *err)
{
    return bf_error_set(err, BF_EFORMAT,
                        "%s: metadata_props '%s', line %zu: %s (bitflip.export writes '" HEADER
                        "', then KERNEL<tab>SCOPE<tab>MODULE per line; re-export, or drop the key to fuse by "
                        "pattern)",
                        m->label, BF__KERNELS_KEY, line, what);
}

static int call_cmp(const void *a, const void *b)
{
    const bf__kernel_call *x = a, *y = b;
    int c = strcmp(x->kernel, y->kernel);
    if (!c) c = strcmp(x->scope, y->scope);
    if (!c) c = (x->line > y->line) - (x->line < y->line);
    return c;
}

void bf__kernels_free(bf__kernels *k)
{
    bf__free(k->text);
    bf__free(k->calls);
    memset(k, 0, sizeof *k);
}

bf_status bf__kernels_parse(const bf_model *m, bf__kernels *k, bf_error *err)
{
    memset(k, 0, sizeof *k);
    if (!m->kernels) return BF_OK;
    size_t len = strlen(m->kernels), lines = 1;
    for (size_t i = 0; i < len; i++) lines += m->kernels[i] == '\n';
    if (lines > BF__KERNELS_LINES + 1)
        return bf_error_set(err, BF_ELIMIT,
                            "%s: metadata_props '%s' has %zu lines; at most %d kernel calls are read (drop the key "
                            "to fuse by pattern)",
                            m->label, BF__KERNELS_KEY, lines, BF__KERNELS_LINES);
    k->text = bf__malloc(len + 1);
    k->calls = bf__calloc(lines, sizeof *k->calls);
    if (!k->text || !k->calls) {
        bf__kernels_free(k);
        return bf_error_set(err, BF_ENOMEM, "%s: out of memory reading metadata_props '%s'", m->label,
                            BF__KERNELS_KEY);
    }
    memcpy(k->text, m->kernels, len + 1);
    char *p = k->text;
    for (size_t line = 1; p; line++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        size_t n = strlen(p);
        if (n && p[n - 1] == '\r') p[--n] = '\0';
        if (line == 1) {
            if (strcmp(p, HEADER) != 0) {
                bf__kernels_free(k);
                return bad(m, line, "the first line is not '" HEADER "'", err);
            }
        } else if (n) {
            char *t1 = strchr(p, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
            if (!t1 || !t2 || strchr(t2 + 1, '\t') || t1 == p) {
                bf__kernels_free(k);
                return bad(m, line, "expected three fields separated by tabs, the first not empty", err);
            }
            *t1 = *t2 = '\0';
            k->calls[k->n].kernel = p;
            k->calls[k->n].scope = t1 + 1;
            k->calls[k->n].line = line;
            k->n++;
        }
        p = nl ? nl + 1 : NULL;
    }
    /* sorted by (kernel, scope), each pattern's lookup is a binary search:
     * a hostile record of 65,536 lines against a graph of many patterns
     * stays fast; equal keys keep file order (first unused taken) */
    qsort(k->calls, k->n, sizeof *k->calls, call_cmp);
    return BF_OK;
}

/* The scope of a node name: everything before its last '/' ("" if none). */
static size_t scope_len(const char *name)
{
    const char *s = strrchr(name, '/');
    return s ? (size_t)(s - name) : 0;
}

/* Marks used the first unused call of `kern` in scope[0..sl); 1 if one was. */
static int take(bf__kernels *k, const char *kern, const char *first, size_t sl)
{
    /* the first call not below (kernel, scope) */
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const bf__kernel_call *call = &k->calls[mid];
        int c = strcmp(call->kernel, kern);
        if (!c) {
            c = strncmp(call->scope, first, sl);
            if (!c) c = call->scope[sl] != '\0';   /* longer than the node's scope: after it */
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    for (size_t c = lo; c < k->n; c++) {
        bf__kernel_call *call = &k->calls[c];
        if (strcmp(call->kernel, kern) != 0 || strlen(call->scope) != sl || strncmp(call->scope, first, sl) != 0)
            return 0;
        if (call->used) continue;   /* several calls in one scope: the next */
        call->used = 1;
        return 1;
    }
    return 0;
}

int bf__kernels_take(bf__kernels *k, int kind, const char *const *names, int n_names)
{
    if (kind < 0 || kind >= BF__FUSE_KINDS || n_names < 1) return 0;
    const char *first = names[0] ? names[0] : "";
    size_t sl = scope_len(first);
    for (int i = 1; i < n_names; i++) {
        const char *nm = names[i] ? names[i] : "";
        if (scope_len(nm) != sl || strncmp(nm, first, sl) != 0) return 0;   /* nodes of two modules */
    }
    if (take(k, kernel_of_kind[kind], first, sl)) return 1;
    /* A module called again gets its scope suffixed in the ONNX names
     * ("/act_1/Erf", "/blocks_2/ln/Div") while the trace names it as the
     * first call: strip "_<digits>" from each part and look again. */
    char bare[1024];   /* scopes are module paths; a longer one is not looked up again */
    if (sl >= sizeof bare) return 0;
    size_t n = 0;
    for (size_t i = 0; i <= sl; i++) {
        if (i == sl || first[i] == '/') {
            size_t d = n;
            while (d > 0 && bare[d - 1] >= '0' && bare[d - 1] <= '9') d--;
            if (d < n && d >= 2 && bare[d - 1] == '_' && bare[d - 2] != '/') n = d - 1;
            if (i < sl) bare[n++] = '/';
        } else {
            bare[n++] = first[i];
        }
    }
    bare[n] = '\0';
    return n != sl && take(k, kernel_of_kind[kind], bare, n);
}
