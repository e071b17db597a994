/*
 * log.h - one line per event on stderr: "<time> <level> <prog>[pid] message".
 *
 * Every nanobox process logs through here so the operator sees one format,
 * whatever process (master, worker, reaper) wrote the line.
 */
#ifndef NB_LOG_H
#define NB_LOG_H

enum nb_log_level { NB_LOG_DEBUG = 0, NB_LOG_INFO, NB_LOG_WARN, NB_LOG_ERROR };

void nb_log_init(const char *prog, enum nb_log_level min_level);
void nb_log_set_role(const char *role); /* "master", "worker", "reaper" */
int nb_log_level_parse(const char *name, enum nb_log_level *out);
/*
 * Log to the file at path instead of the inherited stderr (stdout and
 * stderr become that file). Call before forking children: they share the
 * generation nb_log_reopen moves on, and reopen the file before their next
 * line. Returns 0, or -1 with err filled.
 */
int nb_log_open_file(const char *path, char *err, size_t errlen);
/*
 * Reopen the log file (after logrotate moved it) in this process now and in
 * every process forked after nb_log_open_file at its next line. Returns 1
 * when reopened, 0 when there is no log file, -1 when the open failed
 * (logged; the old file stays in use).
 */
int nb_log_reopen(void);
void nb_log(enum nb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define nb_debug(...) nb_log(NB_LOG_DEBUG, __VA_ARGS__)
#define nb_info(...) nb_log(NB_LOG_INFO, __VA_ARGS__)
#define nb_warn(...) nb_log(NB_LOG_WARN, __VA_ARGS__)
#define nb_error(...) nb_log(NB_LOG_ERROR, __VA_ARGS__)

#endif
