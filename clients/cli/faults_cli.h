/* Fault arguments of the commands that take them on the command line
 * (bitflip generate; the same PARAM:INDEX:BIT syntax as bitflip eval's --flip). */
#ifndef BF_FAULTS_CLI_H
#define BF_FAULTS_CLI_H

#include "bitflip/bitflip.h"

/* "PARAM:INDEX:BIT", PARAM an ONNX name or the PyTorch name `bitflip info`
 * shows (which may itself hold ':': the numbers are read from the right).
 * 0, or EXIT_USAGE having printed why. */
int cli_parse_flip(const char *cmd, const bf_model *m, const char *spec, bf_bitflip *out);

/* "LAYER:k|v:HEAD:POS:DIM:BIT" into a KV-cache fault (prompt -1); ranges are
 * checked later against the generation. 0 or EXIT_USAGE. */
int cli_parse_kv_flip(const char *cmd, const char *spec, bf_kv_fault *out);

/* "VALUE:STEP:INDEX:BIT": a bit flip of element INDEX (within one prompt's
 * slice at that step) of the node output or graph input VALUE (its ONNX
 * name, or a site name `bitflip info` lists: bf_model_site) in the run of
 * step STEP only, every prompt (sample -1). 0 or EXIT_USAGE. */
int cli_parse_act_flip(const char *cmd, const bf_model *m, const char *spec, bf_gen_value_fault *out);

#endif
