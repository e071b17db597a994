/*
 * listener.c - see listener.h.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "listener.h"

/* Split "ADDR:PORT" / "[ADDR]:PORT" into a socket address. */
static int parse_addr_port(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *err,
                           size_t errlen)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = strrchr(s, ':');
    const char *h = s;
    size_t hlen;
    char *end;
    long port;

    if (colon == NULL || colon == s) {
        snprintf(err, errlen, "--listen %s is not ADDR:PORT", s);
        return -1;
    }
    hlen = (size_t)(colon - s);
    if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host)) {
        snprintf(err, errlen, "--listen %s: address too long", s);
        return -1;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    if (errno != 0 || *end != '\0' || end == colon + 1 || port < 0 || port > 65535) {
        snprintf(err, errlen, "--listen %s: port must be 0-65535", s);
        return -1;
    }
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *len = sizeof(*in4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*in6);
        return 0;
    }
    snprintf(err, errlen, "--listen %s: %s is not a numeric IP address", s, host);
    return -1;
}

int listener_tcp_bind(const char *addr_port, int *port, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd, one = 1, saved;

    if (parse_addr_port(addr_port, &ss, &len, err, errlen) == -1) {
        errno = EINVAL;
        return -1;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        saved = errno;
        snprintf(err, errlen, "socket: %s", strerror(saved));
        errno = saved;
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
        goto fail;
    if (bind(fd, (struct sockaddr *)&ss, len) == -1) {
        saved = errno;
        if (saved == EADDRINUSE)
            snprintf(err, errlen, "port %d is in use",
                     ntohs(((struct sockaddr_in *)&ss)->sin_port));
        else
            snprintf(err, errlen, "cannot bind %s: %s", addr_port, strerror(saved));
        close(fd);
        errno = saved;
        return -1;
    }
    if (listen(fd, LISTENER_BACKLOG) == -1)
        goto fail;
    len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
        goto fail;
    /* sin_port and sin6_port sit at the same offset */
    *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return fd;

fail:
    saved = errno;
    snprintf(err, errlen, "cannot listen on %s: %s", addr_port, strerror(saved));
    close(fd);
    errno = saved;
    return -1;
}

/* Is something accepting on the socket file at path? (non-blocking: a
 * full backlog answers EAGAIN, which still means alive) */
static int unix_is_live(const struct sockaddr_un *sun)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int live;

    if (fd == -1)
        return 0;
    live = connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0 || errno == EAGAIN;
    close(fd);
    return live;
}

static int group_lookup(const char *group, gid_t *gid)
{
    struct group *gr;
    char *end;
    unsigned long n;

    errno = 0;
    gr = getgrnam(group);
    if (gr != NULL) {
        *gid = gr->gr_gid;
        return 0;
    }
    n = strtoul(group, &end, 10);
    if (*group != '\0' && *end == '\0' && n < UINT_MAX) {
        *gid = (gid_t)n;
        return 0;
    }
    return -1;
}

int listener_unix_bind(const char *path, mode_t mode, const char *group, struct listener_unix *lu,
                       char *err, size_t errlen)
{
    struct sockaddr_un sun;
    struct stat st;
    gid_t gid = (gid_t)-1;
    int fd, saved;

    if (strlen(path) >= sizeof(sun.sun_path) || strlen(path) >= sizeof(lu->path)) {
        snprintf(err, errlen, "unix socket path %s is too long", path);
        errno = ENAMETOOLONG;
        return -1;
    }
    if (group != NULL && *group != '\0' && group_lookup(group, &gid) == -1) {
        snprintf(err, errlen, "unknown group %s", group);
        errno = EINVAL;
        return -1;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    strcpy(sun.sun_path, path);

    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "%s exists and is not a socket", path);
            errno = EEXIST;
            return -1;
        }
        if (unix_is_live(&sun)) {
            snprintf(err, errlen, "unix socket %s is in use", path);
            errno = EADDRINUSE;
            return -1;
        }
        /* left behind by a forwarder that died: take its place */
        if (unlink(path) == -1 && errno != ENOENT) {
            saved = errno;
            snprintf(err, errlen, "cannot remove stale socket %s: %s", path, strerror(saved));
            errno = saved;
            return -1;
        }
    }

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        saved = errno;
        snprintf(err, errlen, "socket: %s", strerror(saved));
        errno = saved;
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
        saved = errno;
        if (saved == EADDRINUSE)
            snprintf(err, errlen, "unix socket %s is in use", path);
        else
            snprintf(err, errlen, "cannot bind %s: %s", path, strerror(saved));
        close(fd);
        errno = saved;
        return -1;
    }
    /* mode and group before listen(): nobody can connect until they hold */
    if (chmod(path, mode) == -1 || (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) == -1) ||
        stat(path, &st) == -1) {
        saved = errno;
        snprintf(err, errlen, "cannot set mode/group of %s: %s", path, strerror(saved));
        goto fail;
    }
    if (listen(fd, LISTENER_BACKLOG) == -1) {
        saved = errno;
        snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(saved));
        goto fail;
    }
    snprintf(lu->path, sizeof(lu->path), "%s", path);
    lu->dev = st.st_dev;
    lu->ino = st.st_ino;
    return fd;

fail:
    unlink(path);
    close(fd);
    errno = saved;
    return -1;
}

void listener_unix_unlink(const struct listener_unix *lu)
{
    struct stat st;

    if (lu->path[0] == '\0')
        return;
    /* a newer forwarder may have replaced a socket it found stale: leave
     * its file alone */
    if (lstat(lu->path, &st) == 0 && st.st_dev == lu->dev && st.st_ino == lu->ino)
        unlink(lu->path);
}
