/* Worker processes' plumbing: frames, the words for how a child ended,
 * sizes, spawning this binary again, a child's own limits. */
#define _GNU_SOURCE   /* sigabbrev_np */
#include "work/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

/* Sanitizer runtimes reserve terabytes of address space for their shadow
 * memory, so RLIMIT_AS cannot be used under them: their allocator enforces
 * the limit instead (see sanitizer_env). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BFD_SANITIZED 1
#endif
/* clang before 16 (Debian 12's 14: the fuzz build, build-fuzz/bitflipd)
 * defines neither macro; it answers __has_feature instead */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BFD_SANITIZED 1
#endif
#if __has_feature(thread_sanitizer)
#define BFD_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define BFD_TSAN 1
#endif

/* --- frames */

char *bfd_frame_encode(const char *payload, size_t len, size_t *frame_len)
{
    if (len > BFD_FRAME_MAX) return NULL;
    char *f = malloc(len + 4);
    if (!f) return NULL;
    f[0] = (char)(len >> 24);
    f[1] = (char)(len >> 16);
    f[2] = (char)(len >> 8);
    f[3] = (char)len;
    memcpy(f + 4, payload, len);
    *frame_len = len + 4;
    return f;
}

static size_t header_len(const char *b)
{
    const unsigned char *u = (const unsigned char *)b;
    return (size_t)u[0] << 24 | (size_t)u[1] << 16 | (size_t)u[2] << 8 | (size_t)u[3];
}

bf_status bfd_frame_feed(bfd_frame_reader *r, const char *data, size_t n, bf_error *err)
{
    size_t max = r->max ? r->max : BFD_FRAME_MAX;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n) cap *= 2;
        char *b = realloc(r->buf, cap);
        if (!b) return bf_error_set(err, BF_ENOMEM, "out of memory reading a frame");
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, n);
    r->len += n;
    /* every header buffered is checked now, before its body arrives, so the
     * buffer never holds more than one frame under the limit plus one read */
    for (size_t off = 0; off + 4 <= r->len;) {
        size_t fl = header_len(r->buf + off);
        if (fl > max) return bf_error_set(err, BF_ERANGE, "a frame of %zu bytes (the limit is %zu)", fl, max);
        off += 4 + fl;
    }
    return BF_OK;
}

int bfd_frame_next(bfd_frame_reader *r, char **payload, size_t *len)
{
    *payload = NULL;
    *len = 0;
    if (r->len < 4) return 0;
    size_t fl = header_len(r->buf);
    if (r->len < fl + 4) return 0;
    char *p = malloc(fl + 1);
    if (!p) return BF_ENOMEM;
    memcpy(p, r->buf + 4, fl);
    p[fl] = '\0';
    memmove(r->buf, r->buf + 4 + fl, r->len - 4 - fl);
    r->len -= 4 + fl;
    *payload = p;
    *len = fl;
    return 1;
}

void bfd_frame_reader_free(bfd_frame_reader *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
}

static int read_full(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k == 0 && got == 0 ? 0 : -1;
        got += (size_t)k;
    }
    return 1;
}

int bfd_frame_read_fd(int fd, char **payload, size_t *len, bf_error *err)
{
    char h[4];
    *payload = NULL;
    int rc = read_full(fd, h, 4);
    if (rc == 0) return 0;
    if (rc < 0) return bf_error_set(err, BF_EIO, "reading a frame's header: %s", errno ? strerror(errno) : "cut short");
    size_t fl = header_len(h);
    if (fl > BFD_FRAME_MAX) return bf_error_set(err, BF_ERANGE, "a frame of %zu bytes (the limit is %zu)", fl, BFD_FRAME_MAX);
    char *p = malloc(fl + 1);
    if (!p) return bf_error_set(err, BF_ENOMEM, "out of memory for a frame of %zu bytes", fl);
    if (fl && read_full(fd, p, fl) != 1) {
        free(p);
        return bf_error_set(err, BF_EIO, "a frame of %zu bytes was cut short", fl);
    }
    p[fl] = '\0';
    *payload = p;
    *len = fl;
    return 1;
}

bf_status bfd_frame_write_fd(int fd, const char *payload, size_t len, bf_error *err)
{
    size_t n = 0;
    char *f = bfd_frame_encode(payload, len, &n);
    if (!f) return bf_error_set(err, BF_ENOMEM, "cannot frame %zu bytes", len);
    size_t off = 0;
    while (off < n) {
        ssize_t k = write(fd, f + off, n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            free(f);
            return bf_error_set(err, BF_EIO, "writing a frame: %s", strerror(errno));
        }
        off += (size_t)k;
    }
    free(f);
    return BF_OK;
}

/* --- words */

void bfd_size_text(int64_t bytes, char *buf, size_t size)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%lld bytes", (long long)bytes);
        return;
    }
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    /* whole MiB and KiB read better without a decimal; GiB keep one (4.0 GiB) */
    if (u < 2 && v == (double)(int64_t)v) snprintf(buf, size, "%.0f %s", v, unit[u]);
    else snprintf(buf, size, "%.1f %s", v, unit[u]);
}

bf_status bfd_parse_size(const char *s, int64_t *out, bf_error *err)
{
    /* one size parser for the daemon, its children and the CLI */
    if (bf_parse_size(s, out) == 0) return BF_OK;
    return bf_error_set(err, BF_EINVAL, "'%s' is not a size (say 512M, 4G or a number of bytes)", s ? s : "");
}

static void signal_name(int sig, char *buf, size_t size)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) snprintf(buf, size, "SIG%s", abbrev);
    else snprintf(buf, size, "signal %d", sig);
}

void bfd_exit_reason(int64_t exit_status, int term_signal, int64_t job_memory, char *buf, size_t size)
{
    char name[32], lim[32];
    if (term_signal == 0) {
        snprintf(buf, size, "exited with status %lld", (long long)exit_status);
        return;
    }
    signal_name(term_signal, name, sizeof name);
    bfd_size_text(job_memory, lim, sizeof lim);
    /* SIGKILL that the daemon did not send is most often the kernel's OOM
     * killer (a cgroup limit below the job memory limit) */
    if (term_signal == SIGKILL)
        snprintf(buf, size, "killed by %s (out of memory? the job memory limit is %s)", name, lim);
    else
        snprintf(buf, size, "killed by %s", name);
}

void bfd_oom_reason(int64_t job_memory, const char *detail, char *buf, size_t size)
{
    char lim[32];
    bfd_size_text(job_memory, lim, sizeof lim);
    snprintf(buf, size, "needs more than the %s job memory limit (--job-memory)%s%s", lim, detail && *detail ? ": " : "",
             detail ? detail : "");
}

/* --- processes */

#ifdef BFD_SANITIZED
extern char **environ;

/* The child's environment: ours, with the sanitizer told to return NULL for
 * an allocation over the limit (what RLIMIT_AS gives otherwise) and to leave
 * SIGSEGV alone (a crash then reads as a crash, not as its own abort). */
static char **sanitizer_env(int64_t job_memory, char **mine_out)
{
#if defined(BFD_TSAN)
    const char *var = "TSAN_OPTIONS";
#else
    const char *var = "ASAN_OPTIONS";
#endif
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return NULL;
    size_t k = 0, vl = strlen(var);
    const char *old = getenv(var);
    char *mine = malloc(strlen(old ? old : "") + 160);
    if (!mine) { free(env); return NULL; }
    sprintf(mine, "%s=%s%sallocator_may_return_null=1:max_allocation_size_mb=%lld:handle_segv=0", var, old ? old : "",
            old && *old ? ":" : "", (long long)(job_memory >> 20));
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], var, vl) || environ[i][vl] != '=') env[k++] = environ[i];
    env[k++] = mine;
    env[k] = NULL;
    *mine_out = mine;
    return env;
}
#endif

bf_status bfd_proc_spawn(uv_loop_t *loop, uv_process_t *p, uv_exit_cb on_exit, const char *const *args, uv_pipe_t *in,
                         uv_pipe_t *out, int64_t job_memory, const char *limits, bf_error *err)
{
    /* the name, up to 4 args, --job-memory N, --limits LIST, NULL */
    char *argv[10], mem[32];
    size_t n = 0;
    argv[n++] = "bitflipd";
    for (size_t i = 0; args[i] && n < 5; i++) argv[n++] = (char *)args[i];
    snprintf(mem, sizeof mem, "%lld", (long long)job_memory);
    argv[n++] = "--job-memory";
    argv[n++] = mem;
    if (limits && *limits) {
        argv[n++] = "--limits";
        argv[n++] = (char *)limits;
    }
    argv[n] = NULL;
    uv_stdio_container_t io[3];
    io[0].flags = in ? UV_CREATE_PIPE | UV_READABLE_PIPE : UV_IGNORE;
    io[0].data.stream = (uv_stream_t *)in;
    io[1].flags = out ? UV_CREATE_PIPE | UV_WRITABLE_PIPE : UV_IGNORE;
    io[1].data.stream = (uv_stream_t *)out;
    io[2].flags = UV_INHERIT_FD;
    io[2].data.fd = 2;
    /* /proc/self/exe in the child (after fork) is still this binary, even if
     * the file was replaced on disk since the daemon started */
    uv_process_options_t o = {.exit_cb = on_exit, .file = "/proc/self/exe", .args = argv, .stdio_count = 3,
                              .stdio = io};
#ifdef BFD_SANITIZED
    /* out of memory here: the child inherits our environment, without the limit */
    char *mine = NULL, **env = sanitizer_env(job_memory, &mine);
    if (env) o.env = env;
#endif
    int rc = uv_spawn(loop, p, &o);
#ifdef BFD_SANITIZED
    free(mine);
    free(env);
#endif
    if (rc != 0) return bf_error_set(err, BF_EIO, "cannot start a worker process: %s", uv_strerror(rc));
    return BF_OK;
}

bf_status bfd_proc_child_init(int64_t job_memory, bf_error *err)
{
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        return bf_error_set(err, BF_EIO, "cannot ask to die with the daemon: %s", strerror(errno));
    /* the daemon may have died between fork and prctl: then we were adopted */
    if (getppid() != parent || parent == 1) return bf_error_set(err, BF_ECANCELED, "the daemon is gone");
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);   /* a worker's core dump is the size of its model: not worth the disk */
#ifndef BFD_SANITIZED
    struct rlimit as = {(rlim_t)job_memory, (rlim_t)job_memory};
    if (setrlimit(RLIMIT_AS, &as) != 0)
        return bf_error_set(err, BF_EIO, "cannot set the job memory limit: %s", strerror(errno));
#else
    (void)job_memory;
#endif
    return BF_OK;
}

int64_t bfd_proc_arg_memory(int argc, char **argv)
{
    int64_t v = BFD_JOB_MEMORY_DEFAULT;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--job-memory") && bfd_parse_size(argv[i + 1], &v, NULL) != BF_OK) v = BFD_JOB_MEMORY_DEFAULT;
    return v;
}

bf_status bfd_limits_parse_list(bf_limits *l, const char *list, bf_error *err)
{
    /* no key or value holds a ',' (sizes are 64M, 1.5G): it can split them */
    char kv[256];
    const char *p = list ? list : "";
    do {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len >= sizeof kv) return bf_error_set(err, BF_EINVAL, "--limit: '%.*s...' is too long", 32, p);
        memcpy(kv, p, len);
        kv[len] = '\0';
        bf_status st = bf_limits_set(l, kv, err);
        if (st != BF_OK) return st;
        p = comma ? comma + 1 : NULL;
    } while (p);
    return BF_OK;
}

bf_status bfd_proc_arg_limits(int argc, char **argv, bf_limits *l, bf_error *err)
{
    memset(l, 0, sizeof *l);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--limits")) return bfd_limits_parse_list(l, argv[i + 1], err);
    return BF_OK;
}
