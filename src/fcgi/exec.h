/*
 * exec.h - run a command in a sandbox and collect its output (exec.c): the
 * one exec path, shared by POST /sandbox/{id}/exec and POST /run.
 */
#ifndef NB_EXEC_H
#define NB_EXEC_H

#include <stdint.h>
#include <yajl/yajl_gen.h>

#include "app.h"
#include "buf.h"

struct nb_exec_result {
    struct nb_buf out, err, all; /* stdout, stderr, both in arrival order */
    size_t kept;                 /* bytes kept across out + err */
    size_t cap;                  /* max_output */
    int truncated;               /* output passed the cap and was dropped */
    int timed_out;               /* killed at the timeout */
    int exit_code;               /* -1 if it could not be read */
    int64_t duration_ms;
};

void nb_exec_result_init(struct nb_exec_result *res, size_t cap);
void nb_exec_result_free(struct nb_exec_result *res);

/*
 * Run argv (NULL-terminated, no shell unless argv says so) in the sandbox
 * of slot as the sandbox user, in cwd (NULL: the workspace), with env added.
 * 0 when the command ran (whatever its exit code); -1 with ae set when it
 * could not be started.
 */
int nb_exec_run(struct nb_app *a, const struct nb_slot *slot, const char *const *argv,
                const char *cwd, char **env, unsigned n_env, double timeout,
                struct nb_exec_result *res, struct nb_apierr *ae);

/* The result's keys into an open JSON map; "output" only if with_output. */
void nb_exec_result_json(yajl_gen g, const struct nb_exec_result *res, int with_output);

/* Milliseconds of a monotonic clock. */
int64_t nb_mono_ms(void);

#endif
