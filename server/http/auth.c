/* Tokens and ids from getrandom(2): the kernel's CSPRNG, which blocks only
 * until it is first seeded at boot and needs no file descriptor (so it works
 * in a chroot or with every fd in use). glibc declares it in <sys/random.h>
 * with no feature macro. */
#include <stddef.h>   /* auth.h uses size_t without including it */

#include "http/auth.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "store/sha256.h"

static bf_status random_bytes(uint8_t *buf, size_t n, bf_error *err)
{
    size_t got = 0;
    while (got < n) {   /* a signal can cut a request short; large ones may be split */
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return bf_error_set(err, BF_EIO, "getrandom: %s", strerror(errno));
        }
        got += (size_t)r;
    }
    return BF_OK;
}

bf_status bfd_random_hex(char *out, size_t nbytes, bf_error *err)
{
    uint8_t buf[32];
    bf_status st = BF_OK;
    /* in pieces, so any length works without an allocation */
    for (size_t done = 0; done < nbytes;) {
        size_t take = nbytes - done < sizeof buf ? nbytes - done : sizeof buf;
        if ((st = random_bytes(buf, take, err))) goto out;
        bfd_hex(buf, take, out + 2 * done);
        done += take;
    }
    out[2 * nbytes] = '\0';

out:
    memset(buf, 0, sizeof buf);   /* these bytes may be a token */
    if (st) out[0] = '\0';          /* never half an id */
    return st;
}

bf_status bfd_token_new(char out[BFD_TOKEN_LEN + 1], bf_error *err)
{
    memcpy(out, "bft_", 4);
    bf_status st = bfd_random_hex(out + 4, (BFD_TOKEN_LEN - 4) / 2, err);
    if (st) out[0] = '\0';
    return st;
}

bf_status bfd_token_hash(const char *token, char hash_hex[65], bf_error *err)
{
    return bfd_sha256_hex(token, strlen(token), hash_hex, err);
}

int bfd_tenant_valid(const char *name)
{
    if (!name) return 0;
    size_t n = 0;
    for (const char *p = name; *p; p++, n++) {
        char c = *p;
        /* spelled out rather than isalnum(): that one follows the locale */
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        if (!ok || n >= 64) return 0;
    }
    return n >= 1;
}
