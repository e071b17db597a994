/*
 * log.c - see log.h. Lines are formatted into one buffer and written with
 * a single write(2) so lines from concurrent processes never interleave.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "nanobox";
static const char *log_role = "";
static enum nb_log_level log_min = NB_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void nb_log_init(const char *prog, enum nb_log_level min_level)
{
    log_prog = prog;
    log_min = min_level;
}

void nb_log_set_role(const char *role)
{
    log_role = role;
}

int nb_log_level_parse(const char *name, enum nb_log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *out = (enum nb_log_level)i;
            return 0;
        }
    }
    return -1;
}

void nb_log(enum nb_log_level level, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n, m;

    if (level < log_min)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line),
                 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s[%ld]%s%s: ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                 level_names[level], log_prog, (long)getpid(), *log_role ? " " : "", log_role);
    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    n += m;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, (size_t)n);
}
