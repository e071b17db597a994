/*
 * helper.c - see helper.h.
 *
 * Looking next to /proc/self/exe first is what lets a build tree (and the
 * test suite) run its own nanobox-fwd and nanobox-init without installing
 * them or writing their paths into a config.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"

static void helper_find(const char *configured, const char *name, const char *fallback, int mode,
                        char *out, size_t outlen)
{
    char self[PATH_MAX];
    ssize_t n;
    char *slash;
    if (configured[0]) {
        snprintf(out, outlen, "%s", configured);
        return;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash != NULL && (size_t)(slash - self) + 1 + strlen(name) < outlen) {
            snprintf(out, outlen, "%.*s/%s", (int)(slash - self), self, name);
            if (access(out, mode) == 0)
                return;
        }
    }
    snprintf(out, outlen, "%s", fallback);
}

void nb_helper_path(const char *configured, const char *name, const char *fallback, char *out,
                    size_t outlen)
{
    helper_find(configured, name, fallback, X_OK, out, outlen);
}

void nb_helper_data_path(const char *configured, const char *name, const char *fallback, char *out,
                         size_t outlen)
{
    helper_find(configured, name, fallback, R_OK, out, outlen);
}
