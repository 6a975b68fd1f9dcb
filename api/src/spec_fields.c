/* The campaign-spec parser's tools, shared by its files (spec_impl.h):
 * problems kept with their JSON Pointers, pointers and value text for
 * messages, "did you mean" suggestions, and the typed field getters that
 * report a wrong type or range at the field. */
#include "bitflip/api/spec.h"
#include "spec_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- problems */

static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

bool bf__spec_push(ctx *c, const char *pointer, char *message /* owned */)
{
    bf_spec_problems *p = c->pr;
    char *ptr = message ? strdup(pointer) : NULL;
    if (ptr && p->count == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        bf_spec_problem *items = realloc(p->items, cap * sizeof *items);
        if (items) {
            p->items = items;
            p->cap = cap;
        } else {
            free(ptr);
            ptr = NULL;
        }
    }
    if (!ptr) {
        free(message);
        c->nomem = true;
        return false;
    }
    p->items[p->count].pointer = ptr;
    p->items[p->count].message = message;
    p->count++;
    return true;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void bf__spec_problem(ctx *c, const char *pointer, const char *fmt, ...)
{
    c->found++;
    if (!c->pr || c->nomem || c->found > BF_SPEC_MAX_PROBLEMS) return;
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    bf__spec_push(c, pointer, msg);
}

void bf_spec_problems_free(bf_spec_problems *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->count; i++) {
        free(p->items[i].pointer);
        free(p->items[i].message);
    }
    free(p->items);
    p->items = NULL;
    p->count = p->cap = 0;
}

json_t *bf_spec_problems_json(const bf_spec_problems *p)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && p && i < p->count; i++) {
        json_t *e = json_pack("{s:s, s:s}", "pointer", p->items[i].pointer, "detail",
                              p->items[i].message);
        if (json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

/* ------------------------------------------------- pointers and value text */

/* base + "/" + key with RFC 6901 escapes (~ -> ~0, / -> ~1). */
static char *pointer_key(const char *base, const char *key)
{
    size_t nb = strlen(base), n = nb + 2;
    for (const char *k = key; *k; k++) n += (*k == '~' || *k == '/') ? 2 : 1;
    char *s = malloc(n);
    if (!s) return NULL;
    memcpy(s, base, nb);
    char *d = s + nb;
    *d++ = '/';
    for (const char *k = key; *k; k++) {
        if (*k == '~' || *k == '/') {
            *d++ = '~';
            *d++ = *k == '~' ? '0' : '1';
        } else {
            *d++ = *k;
        }
    }
    *d = '\0';
    return s;
}

ptrbuf bf__spec_ptr_at(const char *base, const char *field)
{
    ptrbuf p;
    if (snprintf(p.s, sizeof p.s, "%s/%s", base, field) < 0) p.s[0] = '\0';
    return p;
}

ptrbuf bf__spec_ptr_index(const char *base, size_t i)
{
    ptrbuf p;
    if (snprintf(p.s, sizeof p.s, "%s/%zu", base, i) < 0) p.s[0] = '\0';
    return p;
}

static textbuf quote(const char *str, size_t len)
{
    textbuf t;
    size_t o = 0;
    t.s[o++] = '\'';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)str[i];
        if (o >= 44 && (ch & 0xC0) != 0x80) {
            memcpy(t.s + o, "...", 3);
            o += 3;
            break;
        }
        if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(t.s + o, sizeof t.s - o, "\\u%04x", ch);
        } else {
            t.s[o++] = (char)ch;
        }
    }
    t.s[o++] = '\'';
    t.s[o] = '\0';
    return t;
}

/* The shortest %g that reads back as the same double. */
static textbuf number_text(double d)
{
    textbuf t;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t.s, sizeof t.s, "%.*g", prec, d);
        if (strtod(t.s, NULL) == d) break;
    }
    return t;
}

/* What a value is, for "got ...": "string 'abc'", "40", "1.5", "true",
 * "null", "an array", "an object". */
textbuf bf__spec_describe(const json_t *v)
{
    textbuf t;
    switch (json_typeof(v)) {
    case JSON_STRING: {
        textbuf q = quote(json_string_value(v), json_string_length(v));
        if (snprintf(t.s, sizeof t.s, "string %s", q.s) < 0) t.s[0] = '\0';
        return t;
    }
    case JSON_INTEGER:
        snprintf(t.s, sizeof t.s, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return t;
    case JSON_REAL: return number_text(json_real_value(v));
    case JSON_TRUE: snprintf(t.s, sizeof t.s, "true"); return t;
    case JSON_FALSE: snprintf(t.s, sizeof t.s, "false"); return t;
    case JSON_NULL: snprintf(t.s, sizeof t.s, "null"); return t;
    case JSON_ARRAY: snprintf(t.s, sizeof t.s, "an array"); return t;
    case JSON_OBJECT: snprintf(t.s, sizeof t.s, "an object"); return t;
    }
    snprintf(t.s, sizeof t.s, "a value");
    return t;
}

void bf__spec_wrong_type(ctx *c, const char *ptr, const char *expected, const json_t *v)
{
    bf__spec_problem(c, ptr, "must be %s, got %s", expected, bf__spec_describe(v).s);
}

/* ---------------------------------------------------------- suggestions */

static unsigned char lower(unsigned char ch) { return ch >= 'A' && ch <= 'Z' ? ch + 32 : ch; }

/* Levenshtein distance, ASCII case folded; > 3 as soon as it must be. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (nb >= 64) return SIZE_MAX;
    if ((na > nb ? na - nb : nb - na) > 3) return SIZE_MAX;
    size_t row[65];
    for (size_t j = 0; j <= nb; j++) row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t cost = lower((unsigned char)a[i - 1]) == lower((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* The nearest name within 3 edits (and fewer edits than `typed` has
 * characters, so "x" suggests nothing); ties go to the earlier name. */
static const char *nearest(const char *typed, const char *const *names, size_t n)
{
    size_t best = SIZE_MAX, len = strlen(typed);
    const char *pick = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(typed, names[i]);
        if (d <= 3 && d < len && d < best) {
            best = d;
            pick = names[i];
        }
    }
    return pick;
}

/* "'a', 'b' or 'c'" */
static textbuf name_list(const char *const *names, size_t n)
{
    textbuf t;
    size_t o = 0;
    t.s[0] = '\0';
    for (size_t i = 0; i < n && o < sizeof t.s; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        o += (size_t)snprintf(t.s + o, sizeof t.s - o, "%s'%s'", sep, names[i]);
    }
    return t;
}

/* ---------------------------------------------------------- field access */

/* Reports unknown keys of `obj` (at pointer `base`); slots[i] = the value of
 * names[i], or NULL. */
void bf__spec_take_fields(ctx *c, json_t *obj, const char *base, const fieldset *fs, json_t **slots)
{
    const char *key;
    json_t *v;
    for (size_t i = 0; i < fs->n; i++) slots[i] = NULL;
    json_object_foreach(obj, key, v) {
        size_t i = 0;
        while (i < fs->n && strcmp(key, fs->names[i]) != 0) i++;
        if (i < fs->n) {
            slots[i] = v;
            continue;
        }
        char *ptr = pointer_key(base, key);
        if (!ptr) {
            c->nomem = true;
            return;
        }
        const char *other = NULL;
        for (size_t j = 0; j < fs->n_elsewhere; j++)
            if (strcmp(key, fs->elsewhere[j]) == 0) other = fs->elsewhere[j];
        const char *near = nearest(key, fs->names, fs->n);
        if (other)
            bf__spec_problem(c, ptr, "unknown field here; '%s' belongs in %s", other, fs->elsewhere_where);
        else if (near)
            bf__spec_problem(c, ptr, "unknown field; did you mean '%s'?", near);
        else
            bf__spec_problem(c, ptr, "unknown field; the fields here are %s", name_list(fs->names, fs->n).s);
        free(ptr);
    }
}

/* Each get_* returns true with the value stored, or false with a problem
 * reported (the caller then treats the field as unknown-valued). */

static bool get_string(ctx *c, const json_t *v, const char *ptr, const char **out)
{
    if (!json_is_string(v)) {
        bf__spec_wrong_type(c, ptr, "a string", v);
        return false;
    }
    if (json_string_length(v) == 0) {
        bf__spec_problem(c, ptr, "must not be empty");
        return false;
    }
    *out = json_string_value(v);
    return true;
}

bool bf__spec_dup_string(ctx *c, const json_t *v, const char *ptr, char **out)
{
    const char *s;
    if (!get_string(c, v, ptr, &s)) return false;
    if (!(*out = strdup(s))) {
        c->nomem = true;
        return false;
    }
    return true;
}

bool bf__spec_get_bool(ctx *c, const json_t *v, const char *ptr, int *out)
{
    if (!json_is_boolean(v)) {
        bf__spec_wrong_type(c, ptr, "a boolean (true or false)", v);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* An integer in [lo, hi]: JSON integers, and numbers with no fraction (1e6,
 * 5.0), as JSON Schema's "integer" reads them. `what` follows the range in
 * the message ("for fp16"). */
bool bf__spec_get_int(ctx *c, const json_t *v, const char *ptr, int64_t lo, int64_t hi,
                    const char *what, int64_t *out)
{
    bool in;
    int64_t x = 0;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
        in = x >= lo && x <= hi;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d)) {
            bf__spec_wrong_type(c, ptr, "an integer", v);
            return false;
        }
        /* 2^63 is the first double past INT64_MAX */
        in = d >= (double)lo && d < 9223372036854775808.0 && d <= (double)hi;
        if (in) x = (int64_t)d;
    } else {
        bf__spec_wrong_type(c, ptr, "an integer", v);
        return false;
    }
    if (!in) {
        if (hi == INT64_MAX)
            bf__spec_problem(c, ptr, "must be >= %" PRId64 "%s, got %s", lo, what, bf__spec_describe(v).s);
        else
            bf__spec_problem(c, ptr, "must be %" PRId64 "..%" PRId64 "%s, got %s", lo, hi, what,
                    bf__spec_describe(v).s);
        return false;
    }
    *out = x;
    return true;
}

bool bf__spec_get_number(ctx *c, const json_t *v, const char *ptr, double *out)
{
    if (!json_is_number(v)) {
        bf__spec_wrong_type(c, ptr, "a number", v);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

/* One of `names`: its index, or -1 with a problem. */
int bf__spec_get_enum(ctx *c, const json_t *v, const char *ptr, const char *const *names, size_t n)
{
    if (!json_is_string(v)) {
        bf__spec_problem(c, ptr, "must be a string: %s, got %s", name_list(names, n).s, bf__spec_describe(v).s);
        return -1;
    }
    const char *s = json_string_value(v);
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return (int)i;
    const char *near = nearest(s, names, n);
    if (near)
        bf__spec_problem(c, ptr, "must be %s, got %s; did you mean '%s'?", name_list(names, n).s,
                quote(s, json_string_length(v)).s, near);
    else
        bf__spec_problem(c, ptr, "must be %s, got %s", name_list(names, n).s,
                quote(s, json_string_length(v)).s);
    return -1;
}

/* An array (non-empty unless allow_empty), or false with a problem. */
bool bf__spec_get_array(ctx *c, const json_t *v, const char *ptr, const char *of, size_t *n)
{
    if (!json_is_array(v)) {
        bf__spec_problem(c, ptr, "must be an array of %s, got %s", of, bf__spec_describe(v).s);
        return false;
    }
    if ((*n = json_array_size(v)) == 0) {
        bf__spec_problem(c, ptr, "must not be empty (an array of %s)", of);
        return false;
    }
    return true;
}
