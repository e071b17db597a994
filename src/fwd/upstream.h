/*
 * upstream.h - reaching the app inside the sandbox.
 *
 * Each upstream socket is created inside the sandbox's network namespace
 * (setns into /proc/<pid>/ns/net, socket(), setns back), then connected to
 * 127.0.0.1:<port> from the host side. A socket belongs to the namespace it
 * was created in, so this reaches apps bound to localhost and sandboxes
 * with no network at all, without entering the sandbox in any other way.
 */
#ifndef FWD_UPSTREAM_H
#define FWD_UPSTREAM_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/types.h>

struct upstream {
    pid_t pid;                /* the sandbox's process */
    int target_ns;            /* /proc/<pid>/ns/net */
    int self_ns;              /* our own namespace, to return to */
    int pidfd;                /* readable once pid is gone; -1: poll /proc */
    unsigned long long start; /* pid's start time (/proc/<pid>/stat field 22) */
    struct sockaddr_in addr;  /* 127.0.0.1:<sandbox port> */
};

/* Open the namespaces and the pidfd of pid. Returns 0, or -1 with errno
 * set and a message for the user in err. */
int upstream_open(struct upstream *up, pid_t pid, int port, char *err, size_t errlen);

/* A new non-blocking TCP socket in the sandbox's namespace, or -1 with
 * errno set. *fatal is set when we could not return to our own namespace:
 * the process must stop, every later socket would be wrong. */
int upstream_socket(struct upstream *up, int *fatal);

/* Start connecting fd to the app: 0 connected, 1 in progress (wait for
 * EPOLLOUT, then upstream_connect_result), -1 failed with errno set. */
int upstream_connect(const struct upstream *up, int fd);

/* The outcome of an in-progress connect: 0 or an errno value. */
int upstream_connect_result(int fd);

/* Is the sandbox's process still there? For when there is no pidfd (kernel
 * before 5.3, valgrind): a zombie, or another process that got the pid
 * since, counts as gone. */
int upstream_target_alive(const struct upstream *up);

void upstream_close(struct upstream *up);

#endif
