/*
 * helper.h - where nanobox-fcgi finds the helper programs it starts:
 * nanobox-fwd (one per open port) and nanobox-init (bind-mounted into
 * every sandbox as its PID 1), and the data files it reads (the seccomp
 * profile of sandboxes).
 */
#ifndef NB_HELPER_H
#define NB_HELPER_H

#include <stddef.h>

/*
 * Path of a helper program: the configured one, else the one next to this
 * executable (a build tree), else fallback (the installed location).
 */
void nb_helper_path(const char *configured, const char *name, const char *fallback, char *out,
                    size_t outlen);

/* The same for a data file (readable, not executable): the build tree's or the installed one. */
void nb_helper_data_path(const char *configured, const char *name, const char *fallback, char *out,
                         size_t outlen);

#endif
