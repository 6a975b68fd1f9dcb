/* bitflipd — SHA-256 through OpenSSL's libcrypto (EVP), streaming: content
 * addresses for blobs, the hashes tokens are stored as, Idempotency-Key body
 * hashes. A well-kept library rather than our own rounds: it is reviewed,
 * tested against the NIST vectors on every release, and uses the CPU's SHA
 * extensions where there are some. */
#ifndef BFD_SHA256_H
#define BFD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "bitflip/error.h"

typedef struct bfd_sha256 {
    void *ctx;                /* EVP_MD_CTX, NULL until init and after final/free */
} bfd_sha256;

/* Starts a digest. Fails only when libcrypto cannot allocate its context. */
bf_status bfd_sha256_init(bfd_sha256 *s, bf_error *err);
bf_status bfd_sha256_update(bfd_sha256 *s, const void *data, size_t len, bf_error *err);
/* Writes the digest and frees the context (s may be inited again). */
bf_status bfd_sha256_final(bfd_sha256 *s, uint8_t out[32], bf_error *err);
/* Frees the context of an unfinished digest (a zeroed or finished one is fine). */
void bfd_sha256_free(bfd_sha256 *s);
/* Lower-case hex of the digest of `data`, NUL-terminated (65 bytes); on a
 * failure (out of memory) out is "" and the status says so. */
bf_status bfd_sha256_hex(const void *data, size_t len, char out[65], bf_error *err);
void bfd_hex(const uint8_t *bytes, size_t n, char *out);   /* 2n+1 bytes */
/* Whether two hex digests are the same, in time that does not depend on
 * where they differ (CRYPTO_memcmp): for comparing secrets' hashes. Both
 * must be 64-digit strings. */
int bfd_digest_equal(const char a[65], const char b[65]);

#endif
