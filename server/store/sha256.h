/* bitflipd — SHA-256 (FIPS 180-4), streaming. Content addresses for blobs and
 * the hashes tokens are stored as. */
#ifndef BFD_SHA256_H
#define BFD_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct bfd_sha256 {
    uint32_t h[8];
    uint64_t len;             /* bytes hashed so far */
    uint8_t buf[64];
    size_t n;                 /* bytes in buf */
} bfd_sha256;

void bfd_sha256_init(bfd_sha256 *s);
void bfd_sha256_update(bfd_sha256 *s, const void *data, size_t len);
void bfd_sha256_final(bfd_sha256 *s, uint8_t out[32]);
/* Lower-case hex of the digest of `data`, NUL-terminated (65 bytes). */
void bfd_sha256_hex(const void *data, size_t len, char out[65]);
void bfd_hex(const uint8_t *bytes, size_t n, char *out);   /* 2n+1 bytes */

#endif
