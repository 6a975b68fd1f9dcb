/* The door check on an ONNX file: one pass over the protobuf wire format,
 * before protobuf-c unpacks anything, enforcing bf_load_limits.
 *
 * Why before: protobuf-c unpacks nested messages by recursion with no depth
 * limit (a graph in an If's then_branch holding an If, 10,000 deep, overflows
 * the stack), and it allocates a struct per message and an array per
 * repeated field, so a small file of many empty messages becomes a large
 * allocation. This walk uses an explicit stack (no recursion), allocates only
 * that stack, and follows only the fields whose type is a message that can
 * nest or multiply: ModelProto.graph / training_info / functions,
 * GraphProto.node / initializer / sparse_initializer / input / output /
 * value_info, NodeProto.attribute, AttributeProto.t / g / sparse_tensor / tp /
 * tensors / graphs / sparse_tensors / type_protos, TypeProto and its
 * children, TensorShapeProto.dim, TensorProto.dims. Other fields are skipped
 * by length. Field numbers are onnx.proto's. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bitflip/limits.h"
#include "model/onnx_load.h"

bf_load_limits bf_load_limits_resolve(const bf_load_limits *lim)
{
    bf_load_limits r = lim ? *lim : (bf_load_limits){0};
    if (r.max_graph_depth <= 0) r.max_graph_depth = BF_LIMIT_GRAPH_DEPTH_DEFAULT;
    if (r.max_type_depth <= 0) r.max_type_depth = BF_LIMIT_TYPE_DEPTH_DEFAULT;
    if (r.max_field_bytes <= 0) r.max_field_bytes = BF_LIMIT_FIELD_BYTES_DEFAULT;
    if (r.max_nodes <= 0) r.max_nodes = BF_LIMIT_NODES_DEFAULT;
    if (r.max_initializers <= 0) r.max_initializers = BF_LIMIT_INITIALIZERS_DEFAULT;
    if (r.max_attributes <= 0) r.max_attributes = BF_LIMIT_ATTRIBUTES_DEFAULT;
    if (r.max_messages <= 0) r.max_messages = BF_LIMIT_MESSAGES_DEFAULT;
    if (r.max_rank <= 0) r.max_rank = BF_LIMIT_RANK_DEFAULT;
    if (r.max_tensor_elements <= 0) r.max_tensor_elements = BF_LIMIT_TENSOR_ELEMENTS_DEFAULT;
    return r;
}

typedef enum msg {
    M_NONE, M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_TENSOR, M_SPARSE, M_VALUE_INFO, M_TYPE,
    M_TYPE_TENSOR, M_TYPE_SEQ, M_TYPE_MAP, M_TYPE_OPT, M_SHAPE, M_DIM, M_TRAINING, M_FUNCTION
} msg;

static const char *const msg_names[] = {
    "?", "ModelProto", "GraphProto", "NodeProto", "AttributeProto", "TensorProto",
    "SparseTensorProto", "ValueInfoProto", "TypeProto", "TypeProto.Tensor", "TypeProto.Sequence",
    "TypeProto.Map", "TypeProto.Optional", "TensorShapeProto", "TensorShapeProto.Dimension",
    "TrainingInfoProto", "FunctionProto"};

/* The message type of field `field` of a `parent`, M_NONE for scalars,
 * strings, bytes and messages that cannot nest (followed by length only). */
static msg child_of(msg parent, uint64_t field)
{
    switch (parent) {
    case M_MODEL:
        return field == 7 ? M_GRAPH : field == 20 ? M_TRAINING : field == 25 ? M_FUNCTION : M_NONE;
    case M_GRAPH:
        if (field == 1) return M_NODE;
        if (field == 5) return M_TENSOR;
        if (field == 15) return M_SPARSE;
        if (field == 11 || field == 12 || field == 13) return M_VALUE_INFO;
        return M_NONE;
    case M_NODE: return field == 5 ? M_ATTR : M_NONE;
    case M_ATTR:
        if (field == 5 || field == 10) return M_TENSOR;
        if (field == 6 || field == 11) return M_GRAPH;
        if (field == 22 || field == 23) return M_SPARSE;
        if (field == 14 || field == 15) return M_TYPE;
        return M_NONE;
    case M_SPARSE: return field == 1 || field == 2 ? M_TENSOR : M_NONE;
    case M_VALUE_INFO: return field == 2 ? M_TYPE : M_NONE;
    case M_TYPE:
        if (field == 1 || field == 8) return M_TYPE_TENSOR;
        if (field == 4) return M_TYPE_SEQ;
        if (field == 5) return M_TYPE_MAP;
        if (field == 9) return M_TYPE_OPT;
        return M_NONE;
    case M_TYPE_TENSOR: return field == 2 ? M_SHAPE : M_NONE;
    case M_TYPE_SEQ: case M_TYPE_OPT: return field == 1 ? M_TYPE : M_NONE;
    case M_TYPE_MAP: return field == 2 ? M_TYPE : M_NONE;
    case M_SHAPE: return field == 1 ? M_DIM : M_NONE;
    case M_TRAINING: return field == 1 || field == 2 ? M_GRAPH : M_NONE;
    case M_FUNCTION: return field == 7 ? M_NODE : M_NONE;
    default: return M_NONE;
    }
}

typedef struct frame {
    msg type;
    size_t start, pos, end;   /* the message's bytes */
    size_t at;                /* byte offset of the field (key) that opened it */
    int64_t nodes, inits, attrs, rank;
    uint64_t numel;           /* TensorProto: product of dims so far, saturating */
    int numel_over, has_zero_dim;
} frame;

/* The first string field `field` directly inside [start, end), as text
 * ("" if absent or malformed); used only to name things in errors. */
static void scan_string(const uint8_t *buf, size_t start, size_t end, uint64_t field, char *out,
                        size_t n)
{
    size_t pos = start;
    out[0] = '\0';
    while (pos < end) {
        uint64_t key, v;
        if (!bf__pb_varint(buf, end, &pos, &key)) return;
        switch (key & 7) {
        case 0: if (!bf__pb_varint(buf, end, &pos, &v)) return; break;
        case 1: if (end - pos < 8) return; pos += 8; break;
        case 5: if (end - pos < 4) return; pos += 4; break;
        case 2:
            if (!bf__pb_varint(buf, end, &pos, &v) || v > end - pos) return;
            if (key >> 3 == field) {
                size_t k = v < n - 1 ? (size_t)v : n - 1;
                for (size_t i = 0; i < k; i++) {
                    uint8_t c = buf[pos + i];
                    out[i] = c >= 0x20 && c < 0x7f && c != '\'' ? (char)c : '?';
                }
                out[k] = '\0';
                return;
            }
            pos += (size_t)v;
            break;
        default: return;
        }
    }
}

/* " (node 'x' op If attribute 'then_branch')": the innermost node and
 * attribute on the stack, to say where in the model a limit was hit. */
static void describe_place(const uint8_t *buf, const frame *st, size_t sp, char *out, size_t n)
{
    char node[96] = "", op[48] = "", attr[64] = "";
    int have_node = 0, have_attr = 0;
    for (size_t i = sp; i-- > 0;) {
        if (!have_attr && st[i].type == M_ATTR && !have_node) {
            scan_string(buf, st[i].start, st[i].end, 1, attr, sizeof attr);
            have_attr = 1;
        }
        if (!have_node && st[i].type == M_NODE) {
            scan_string(buf, st[i].start, st[i].end, 3, node, sizeof node);
            scan_string(buf, st[i].start, st[i].end, 4, op, sizeof op);
            have_node = 1;
        }
    }
    if (!have_node) { out[0] = '\0'; return; }
    if (have_attr)
        snprintf(out, n, " (node '%s' op %s attribute '%s')", node, op[0] ? op : "?", attr);
    else
        snprintf(out, n, " (node '%s' op %s)", node, op[0] ? op : "?");
}

static bf_status malformed(const uint8_t *buf, size_t len, const char *label, size_t at,
                           const char *what, bf_error *err)
{
    char why[300];
    bf__onnx_diagnose(buf, len, why, sizeof why);
    if (strncmp(why, "the wire structure is intact", 28) == 0)
        snprintf(why, sizeof why, "byte offset %zu: %s", at, what);
    return bf_error_set(err, BF_EFORMAT, "%s: not a valid ONNX model (%zu bytes): %s", label, len, why);
}

/* A tensor's dims are known once its message ends (they may follow its data). */
static bf_status finish(const uint8_t *buf, const frame *st, size_t sp, const bf_load_limits *lim,
                        const char *label, bf_error *err)
{
    const frame *f = &st[sp - 1];
    if (f->type != M_TENSOR || !f->numel_over || f->has_zero_dim) return BF_OK;
    char name[96], place[300];
    scan_string(buf, f->start, f->end, 8, name, sizeof name);
    describe_place(buf, st, sp, place, sizeof place);
    return bf_error_set(err, BF_ELIMIT,
                        "%s: tensor '%s' at byte offset %zu%s has more than %" PRId64
                        " elements (the product of its dims); the limit is %" PRId64
                        " (max_tensor_elements)",
                        label, name, f->at, place, lim->max_tensor_elements, lim->max_tensor_elements);
}

static void add_dim(frame *f, uint64_t raw, const bf_load_limits *lim)
{
    int64_t d = (int64_t)raw;
    f->rank++;
    if (d < 0) return;   /* refused, with its name, when the tensor is converted */
    if (d == 0) { f->has_zero_dim = 1; return; }
    if (f->numel_over || f->numel > (uint64_t)lim->max_tensor_elements / (uint64_t)d) f->numel_over = 1;
    else f->numel *= (uint64_t)d;
}

static bf_status count_limit(const uint8_t *buf, const frame *st, size_t sp, size_t at,
                             const char *what, int64_t limit, const char *key,
                             const char *label, bf_error *err)
{
    char place[300];
    describe_place(buf, st, sp, place, sizeof place);
    return bf_error_set(err, BF_ELIMIT,
                        "%s: %s has more than %" PRId64 " %s at byte offset %zu%s; the limit is %" PRId64
                        " (%s)",
                        label, msg_names[st[sp - 1].type], limit, what, at, place, limit, key);
}

/* The innermost message (a tensor, or a declared shape) has more dims
 * than lim->max_rank. */
static bf_status rank_limit(const uint8_t *buf, const frame *stack, size_t sp, const bf_load_limits *lim,
                            const char *label, bf_error *err)
{
    char place[300];
    describe_place(buf, stack, sp, place, sizeof place);
    return bf_error_set(err, BF_ELIMIT,
                        "%s: a %s at byte offset %zu%s has more than %d dims; the limit is %d (max_rank)",
                        label, stack[sp - 1].type == M_SHAPE ? "declared shape" : "tensor",
                        stack[sp - 1].at, place, lim->max_rank, lim->max_rank);
}

/* The limits on entering a child message (of type `child`, at byte `at`)
 * of the innermost frame: the counts of what multiplies (nodes,
 * initializers, attributes, a shape's dims), the nesting of subgraphs and
 * types, and the messages in all (*messages counts this one). */
static bf_status enter_limits(const uint8_t *buf, frame *stack, size_t sp, msg child, size_t at, int graph_depth,
                              int type_depth, int64_t *messages, const bf_load_limits *lim, const char *label,
                              bf_error *err)
{
    frame *f = &stack[sp - 1];
    /* counts of what multiplies */
    if (f->type == M_GRAPH || f->type == M_FUNCTION) {
        if (child == M_NODE && ++f->nodes > lim->max_nodes)
            return count_limit(buf, stack, sp, at, "nodes", lim->max_nodes, "max_nodes", label, err);
        if ((child == M_TENSOR || child == M_SPARSE) && ++f->inits > lim->max_initializers)
            return count_limit(buf, stack, sp, at, "initializers", lim->max_initializers, "max_initializers", label,
                               err);
    }
    if (f->type == M_NODE && ++f->attrs > lim->max_attributes)
        return count_limit(buf, stack, sp, at, "attributes", lim->max_attributes, "max_attributes", label, err);
    if (f->type == M_SHAPE && ++f->rank > lim->max_rank) return rank_limit(buf, stack, sp, lim, label, err);
    if (child == M_GRAPH && graph_depth + 1 > lim->max_graph_depth) {
        char place[300];
        describe_place(buf, stack, sp, place, sizeof place);
        return bf_error_set(err, BF_ELIMIT,
                            "%s: ONNX subgraphs nested more than %d deep at byte offset %zu%s; the "
                            "limit is %d (max_graph_depth)",
                            label, lim->max_graph_depth, at, place, lim->max_graph_depth);
    }
    if (child == M_TYPE && type_depth + 1 > lim->max_type_depth) {
        char place[300];
        describe_place(buf, stack, sp, place, sizeof place);
        return bf_error_set(err, BF_ELIMIT,
                            "%s: ONNX types (sequences, maps, optionals) nested more than %d deep at "
                            "byte offset %zu%s; the limit is %d (max_type_depth)",
                            label, lim->max_type_depth, at, place, lim->max_type_depth);
    }
    if (++*messages > lim->max_messages) {
        char place[300];
        describe_place(buf, stack, sp, place, sizeof place);
        return bf_error_set(err, BF_ELIMIT,
                            "%s: the model holds more than %" PRId64 " messages (nodes, attributes, "
                            "tensors, types, dims; the one past the limit at byte offset %zu%s); the "
                            "limit is %" PRId64 " (max_messages)",
                            label, lim->max_messages, at, place, lim->max_messages);
    }
    return BF_OK;
}

bf_status bf__onnx_check_limits(const uint8_t *buf, size_t len, const bf_load_limits *limits,
                                const char *label, bf_error *err)
{
    bf_load_limits lim = bf_load_limits_resolve(limits);
    bf_status st = BF_OK;
    size_t cap = 64, sp = 0;
    int graph_depth = 0, type_depth = 0;
    int64_t messages = 0;
    frame *stack = bf__malloc(cap * sizeof *stack);
    if (!stack) return bf_error_set(err, BF_ENOMEM, "%s: out of memory checking the model", label);
    stack[sp++] = (frame){.type = M_MODEL, .start = 0, .pos = 0, .end = len, .numel = 1};

    while (sp > 0) {
        frame *f = &stack[sp - 1];
        if (f->pos >= f->end) {
            if ((st = finish(buf, stack, sp, &lim, label, err)) != BF_OK) goto out;
            if (f->type == M_GRAPH) graph_depth--;
            if (f->type == M_TYPE) type_depth--;
            sp--;
            continue;
        }
        size_t at = f->pos;
        uint64_t key, v;
        if (!bf__pb_varint(buf, f->end, &f->pos, &key)) { st = malformed(buf, len, label, at, "a field tag is cut short", err); goto out; }
        uint64_t field = key >> 3, wt = key & 7;
        if (field == 0) { st = malformed(buf, len, label, at, "invalid field number 0", err); goto out; }
        switch (wt) {
        case 0:
            if (!bf__pb_varint(buf, f->end, &f->pos, &v)) { st = malformed(buf, len, label, at, "a varint is cut short", err); goto out; }
            if (f->type == M_TENSOR && field == 1) {
                add_dim(f, v, &lim);
                if (f->rank > lim.max_rank) goto rank;
            }
            if (f->type == M_SPARSE && field == 3) f->rank++;
            break;
        case 1: case 5: {
            size_t w = wt == 1 ? 8 : 4;
            if (f->end - f->pos < w) { st = malformed(buf, len, label, at, "a fixed-width field is cut short", err); goto out; }
            f->pos += w;
            break;
        }
        case 2: {
            if (!bf__pb_varint(buf, f->end, &f->pos, &v)) { st = malformed(buf, len, label, at, "a length is cut short", err); goto out; }
            if (v > f->end - f->pos) {
                st = malformed(buf, len, label, at, "a field is longer than what remains", err);
                goto out;
            }
            msg child = child_of(f->type, field);
            /* a message we follow is bounded by what it holds; the limit is
             * on what a parser takes in one piece: bytes, strings, packed
             * numbers, messages skipped whole */
            if (child == M_NONE && v > (uint64_t)lim.max_field_bytes) {
                char place[300];
                describe_place(buf, stack, sp, place, sizeof place);
                st = bf_error_set(err, BF_ELIMIT,
                                  "%s: field %" PRIu64 " of %s at byte offset %zu%s is %" PRIu64
                                  " bytes; the limit is %" PRId64 " (max_field_bytes)",
                                  label, field, msg_names[f->type], at, place, v, lim.max_field_bytes);
                goto out;
            }
            size_t body = f->pos;
            f->pos += (size_t)v;
            if (f->type == M_TENSOR && field == 1) {   /* packed dims */
                size_t p = body;
                while (p < body + (size_t)v) {
                    uint64_t d;
                    if (!bf__pb_varint(buf, body + (size_t)v, &p, &d)) { st = malformed(buf, len, label, at, "packed dims are cut short", err); goto out; }
                    add_dim(f, d, &lim);
                }
            }
            if (f->type == M_TENSOR && field == 1 && f->rank > lim.max_rank) goto rank;
            if (child == M_NONE) break;
            if ((st = enter_limits(buf, stack, sp, child, at, graph_depth, type_depth, &messages, &lim, label, err)))
                goto out;
            if (sp == cap) {
                frame *bigger = bf__realloc(stack, 2 * cap * sizeof *stack);
                if (!bigger) { st = bf_error_set(err, BF_ENOMEM, "%s: out of memory checking the model", label); goto out; }
                stack = bigger;
                cap *= 2;
            }
            if (child == M_GRAPH) graph_depth++;
            if (child == M_TYPE) type_depth++;
            stack[sp++] = (frame){.type = child, .start = body, .pos = body, .end = body + (size_t)v,
                                  .at = at, .numel = 1};
            break;
        }
        default:
            st = malformed(buf, len, label, at, "a wire type that is not valid protobuf", err);
            goto out;
        }
        continue;
    rank:
        st = rank_limit(buf, stack, sp, &lim, label, err);
        goto out;
    }
out:
    bf__free(stack);
    return st;
}
