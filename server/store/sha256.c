/* SHA-256 by libcrypto's EVP interface. EVP_sha256() is the implicitly
 * fetched default-provider digest; every EVP call can fail (no memory, a
 * provider not loaded), so each result is checked. */
#include "store/sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

bf_status bfd_sha256_init(bfd_sha256 *s, bf_error *err)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    s->ctx = NULL;
    if (!ctx) return bf_error_set(err, BF_ENOMEM, "sha256: out of memory");
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return bf_error_set(err, BF_EIO, "sha256: libcrypto cannot start a digest");
    }
    s->ctx = ctx;
    return BF_OK;
}

bf_status bfd_sha256_update(bfd_sha256 *s, const void *data, size_t len, bf_error *err)
{
    if (!s->ctx) return bf_error_set(err, BF_EINVAL, "sha256: digest not started");
    if (len && EVP_DigestUpdate(s->ctx, data, len) != 1)
        return bf_error_set(err, BF_EIO, "sha256: libcrypto refused %zu bytes", len);
    return BF_OK;
}

bf_status bfd_sha256_final(bfd_sha256 *s, uint8_t out[32], bf_error *err)
{
    unsigned n = 0;
    bf_status st = BF_OK;
    if (!s->ctx) return bf_error_set(err, BF_EINVAL, "sha256: digest not started");
    if (EVP_DigestFinal_ex(s->ctx, out, &n) != 1 || n != 32)
        st = bf_error_set(err, BF_EIO, "sha256: libcrypto cannot finish the digest");
    bfd_sha256_free(s);
    return st;
}

void bfd_sha256_free(bfd_sha256 *s)
{
    EVP_MD_CTX_free(s->ctx);   /* NULL is fine */
    s->ctx = NULL;
}

bf_status bfd_sha256_hex(const void *data, size_t len, char out[65], bf_error *err)
{
    uint8_t d[32];
    unsigned n = 0;
    out[0] = '\0';
    if (EVP_Digest(data, len, d, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return bf_error_set(err, BF_ENOMEM, "sha256: libcrypto cannot hash %zu bytes", len);
    bfd_hex(d, sizeof d, out);
    return BF_OK;
}

void bfd_hex(const uint8_t *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

int bfd_digest_equal(const char a[65], const char b[65])
{
    return CRYPTO_memcmp(a, b, 64) == 0;
}
