/* bitflipd — bearer tokens. A token is "bft_" + 64 hex digits from the
 * kernel's random source; only its sha256 is stored, so a stolen database
 * gives no tokens. */
#ifndef BFD_AUTH_H
#define BFD_AUTH_H

#include <stddef.h>

#include "bitflip/error.h"

#define BFD_TOKEN_LEN 68      /* "bft_" + 64 hex */

/* A fresh token (BFD_TOKEN_LEN + 1 bytes with the NUL). */
bf_status bfd_token_new(char out[BFD_TOKEN_LEN + 1], bf_error *err);
/* sha256 hex of the token's bytes (fails only when out of memory). */
bf_status bfd_token_hash(const char *token, char hash_hex[65], bf_error *err);
/* A tenant name is 1..64 of [A-Za-z0-9._-]: it appears in logs and labels. */
int bfd_tenant_valid(const char *name);
/* Random lower-case hex, 2*nbytes digits + NUL, for ids. */
bf_status bfd_random_hex(char *out, size_t nbytes, bf_error *err);

#endif
