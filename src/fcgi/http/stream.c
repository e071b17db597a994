/*
 * stream.c - see http.h. Streamed answers: the status and headers at once,
 * then NDJSON lines or raw bytes, each flushed as it comes; a big piece
 * of bytes goes to nginx as FastCGI records of up to 64k of its own.
 */
#include "config.h"

#include <errno.h>
#include <fastcgi.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http.h"
#include "httppriv.h"

int nb_http_wants_ndjson(const struct nb_req *r)
{
    const char *acc = nb_http_param(r, "HTTP_ACCEPT");
    return acc != NULL && strstr(acc, "application/x-ndjson") != NULL;
}

void nb_http_stream_begin(struct nb_req *r, int status, const char *ctype)
{
    r->stream_ctype = ctype;
    if (ctype != NULL && !strcmp(ctype, "application/x-ndjson"))
        r->stream = HTTP_STREAM_NDJSON;
    else
        r->stream = HTTP_STREAM_BYTES;
    nb_http_send_head(r, status, ctype, 1);
    if (r->capture == NULL)
        FCGX_FFlush(r->fcgi->out);
}

/* All of iov written to fd (blocking, with the send timeout the worker set): 0 or -1. */
static int writev_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t n = writev(fd, iov, cnt);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* Record content of a multiple of 8 bytes: no padding needed. */
#define HTTP_RECORD_MAX (FCGI_MAX_LENGTH & ~7u)

/*
 * Bytes of a streamed answer straight to nginx, as FastCGI stdout records
 * of up to 64k: libfcgi's stream cuts everything into records of 8k, one
 * write each, and nginx then reads and forwards 8k at a time (a 1 MiB
 * download was 128 of each). What the stream holds is flushed first, so
 * the order stays; FCGX_Finish_r ends the stream as usual. 0, or -1 (the
 * client left, or a write blocked for the worker's send timeout: the
 * connection is then shut, so that finishing the request does not wait
 * again).
 */
static int put_records(struct nb_req *r, const unsigned char *p, size_t len)
{
    int fd = r->fcgi->ipcFd, id = r->fcgi->requestId;

    if (FCGX_FFlush(r->fcgi->out) < 0 || FCGX_GetError(r->fcgi->out) != 0)
        return -1;
    while (len > 0) {
        size_t n = len < HTTP_RECORD_MAX ? len : HTTP_RECORD_MAX;
        unsigned char hdr[FCGI_HEADER_LEN] = {FCGI_VERSION_1,
                                              FCGI_STDOUT,
                                              (unsigned char)(id >> 8),
                                              (unsigned char)id,
                                              (unsigned char)(n >> 8),
                                              (unsigned char)n,
                                              0,
                                              0};
        struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)(uintptr_t)p, n}};
        if (writev_all(fd, iov, 2) != 0) {
            shutdown(fd, SHUT_RDWR);
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

/* Below this, a piece goes through libfcgi's stream (one record, one write). */
#define HTTP_DIRECT_MIN 8192

int nb_http_stream_bytes(struct nb_req *r, const void *data, size_t len)
{
    if (r->gone)
        goto gone;
    if (r->capture == NULL && len >= HTTP_DIRECT_MIN)
        return put_records(r, data, len) == 0 ? 0 : (r->gone = 1, -1);
    if (nb_http_put(r, data, len) != 0)
        goto gone;
    if (r->capture != NULL)
        return 0;
    if (FCGX_FFlush(r->fcgi->out) < 0 || FCGX_GetError(r->fcgi->out) != 0)
        goto gone;
    return 0;
gone:
    r->gone = 1;
    return -1;
}

int nb_http_stream_line(struct nb_req *r, yajl_gen g)
{
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    if (r->gone || nb_http_put(r, buf, len) != 0 || nb_http_put(r, "\n", 1) != 0) {
        r->gone = 1;
        return -1;
    }
    yajl_gen_clear(g);
    yajl_gen_reset(g, NULL); /* ready for the next line's value */
    return nb_http_stream_bytes(r, NULL, 0);
}

void nb_http_break_off(struct nb_req *r)
{
    if (r->fcgi == NULL || r->outer != NULL)
        return;
    FCGX_FFlush(r->fcgi->out);
    r->broken = 1;
}
