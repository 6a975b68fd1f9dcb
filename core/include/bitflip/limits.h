/* bitflip — limits on what the parsers accept from a file.
 *
 * Models and eval sets are hostile input (uploads). Before a parser builds
 * anything from a file it checks the file against these limits, so that a
 * file that would crash a recursive parser, or make it allocate far more than
 * the file's own size, is refused with an error naming the field, the node
 * and the byte offset. docs/LIMITS.md lists every limit with its CLI flag and
 * default.
 *
 * In every struct here a field left 0 takes its default, so callers set only
 * what they change: `bf_load_limits lim = {.max_graph_depth = 8};`. */
#ifndef BITFLIP_LIMITS_H
#define BITFLIP_LIMITS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ONNX: checked over the protobuf wire format before it is unpacked. */
typedef struct bf_load_limits {
    /* Graphs inside attributes inside graphs (If, Loop, Scan bodies).
     * protobuf-c unpacks nested messages recursively: unbounded nesting
     * overflows the stack. */
    int max_graph_depth;
    /* TypeProto inside TypeProto (sequence of map of optional ...). */
    int max_type_depth;
    /* Bytes of any one length-delimited field (a tensor's raw_data, a
     * string, a whole graph). */
    int64_t max_field_bytes;
    int64_t max_nodes;          /* per graph (or function) */
    int64_t max_initializers;   /* per graph, dense and sparse */
    int64_t max_attributes;     /* per node */
    /* Messages of the kinds followed, in all: protobuf-c allocates a struct
     * (100 to 200 bytes) for each, so an empty message of 2 bytes in the
     * file is a 100x amplification. */
    int64_t max_messages;
    int max_rank;               /* dims of a tensor or of a declared shape */
    /* Product of a tensor's dims (overflow-safe): bounds what converting an
     * initializer or attribute tensor allocates. */
    int64_t max_tensor_elements;
    /* Not a limit: 1 runs the patterns PyTorch exports in several nodes
     * (LayerNorm below opset 17, GELU, Hardswish at opset 13, GroupNorm
     * below opset 18) node by node,
     * as the file spells them, instead of as the one op PyTorch ran
     * (docs/OPS.md, "Fused patterns"); their NaN/Inf under huge values then
     * follow the ONNX nodes, not PyTorch. */
    int no_fuse;
    /* Not a limit: 1 puts the large initializers (the weights arena,
     * core/src/base/warena.h) in transparent huge pages, which golden eval's
     * random embedding rows read faster, at a cost on first touch that on
     * some VMs exceeds what a short run saves (docs/BENCHMARKS.md, "The
     * huge-pages default"); 0 (the default): 4 KiB pages. BITFLIP_HUGE_PAGES
     * in the environment overrides it: 0 never, any other value always.
     * `bitflip eval` sets it by the work it is given, `bitflip run` by
     * the host's measured pages (bf_host_pages.huge; docs/ENGINE.md). */
    int huge_pages;
    /* Not a limit: the order among equal values where a selection keeps
     * some of them. BF_TIE_ORDER_ONNX (0, the default): the spec's (TopK:
     * the lower index first; NonMaxSuppression: the higher score, then the
     * lower box index). BF_TIE_ORDER_PYTORCH: PyTorch 1.13's CPU order, so
     * an untrained model's tied scores keep the boxes PyTorch kept: TopK as
     * torch.topk leaves ties, and a NonMaxSuppression of more than 1000
     * boxes in the order torchvision's batched_nms returns in eager mode
     * (docs/OPS.md, "Ties"). `bitflip-conformance` uses it, since its
     * goldens are PyTorch's. */
    int tie_order;
} bf_load_limits;

#define BF_TIE_ORDER_ONNX 0
#define BF_TIE_ORDER_PYTORCH 1

#define BF_LIMIT_GRAPH_DEPTH_DEFAULT 64
#define BF_LIMIT_TYPE_DEPTH_DEFAULT 32
#define BF_LIMIT_FIELD_BYTES_DEFAULT ((int64_t)1 << 30)       /* 1 GiB */
#define BF_LIMIT_NODES_DEFAULT 1000000
#define BF_LIMIT_INITIALIZERS_DEFAULT 1000000
#define BF_LIMIT_ATTRIBUTES_DEFAULT 1000
#define BF_LIMIT_MESSAGES_DEFAULT 2000000
#define BF_LIMIT_RANK_DEFAULT 8                                /* BF_MAX_DIMS */
#define BF_LIMIT_TENSOR_ELEMENTS_DEFAULT ((int64_t)1 << 32)    /* 16 GiB of fp32 */

/* The limits with every 0 field replaced by its default. */
bf_load_limits bf_load_limits_resolve(const bf_load_limits *lim);

/* Not a limit: what this host's fresh memory costs, measured once by the
 * caller (bf_host_pages_measure: the CLI once a process, the daemon once
 * at its start) and handed to what writes many MiB once: an eval set's
 * load (bf_dataset_limits), a campaign's golden cache and checkpoints
 * (bf_campaign_prep). core/ keeps no state between calls, so without it
 * (measured 0) each of those measures the host again, about 3 ms of CPU
 * each where 4 KiB pages are dear (docs/perf/trials.md, h22-camp). */
typedef struct bf_host_pages {
    int measured;       /* 1: the fields below are a measurement; 0: none */
    /* 1: memory written once goes in 2 MiB pages: this host's 4 KiB fresh
     * pages cost over 1.2 ns a byte and its 2 MiB ones under 0.6 (the AMD
     * VM of docs/perf/detectors.md, h21-ssd); never where
     * BITFLIP_HUGE_PAGES=0 */
    int huge;
    double small_cost;  /* seconds a byte of fresh 4 KiB pages, mapped and written once */
} bf_host_pages;
/* This host's fresh pages, measured now: 1 MiB of 4 KiB pages mapped and
 * written, and where those are dear three 2 MiB pages (0.4 ms of CPU where
 * 4 KiB pages are cheap, about 3 where dear). Always .measured = 1. */
bf_host_pages bf_host_pages_measure(void);

/* safetensors eval sets. */
typedef struct bf_dataset_limits {
    int64_t max_header_bytes;   /* the JSON header */
    int max_json_depth;         /* nesting of the header's JSON */
    int64_t max_tensors;        /* entries in the header */
    int64_t max_bytes;          /* the data section, i.e. what loading allocates */
    /* Not a limit: the host's pages (above), for a set of 8 MiB or more:
     * in 2 MiB pages when .huge; not measured: measured at the load */
    bf_host_pages host_pages;
} bf_dataset_limits;

#define BF_LIMIT_ST_HEADER_BYTES_DEFAULT ((int64_t)100 << 20)  /* 100 MiB */
/* {"name": {"shape": [..]}} is 3 deep; __metadata__ is 2 */
#define BF_LIMIT_ST_JSON_DEPTH_DEFAULT 8
#define BF_LIMIT_ST_TENSORS_DEFAULT 4096
#define BF_LIMIT_ST_BYTES_DEFAULT ((int64_t)16 << 30)          /* 16 GiB */

bf_dataset_limits bf_dataset_limits_resolve(const bf_dataset_limits *lim);

#ifdef __cplusplus
}
#endif
#endif
