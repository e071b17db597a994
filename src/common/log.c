/*
 * log.c - see log.h. Lines are formatted into one buffer and written with
 * a single write(2) so lines from concurrent processes never interleave.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "nanobox";
static const char *log_role = "";
static enum nb_log_level log_min = NB_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/*
 * The log file (nb_log_open_file), and the generation counter that tells
 * every process of a pool to reopen it: one shared page, mapped before the
 * first fork. A process compares it with the generation it last opened
 * before each line it writes, so nothing is signalled and nothing in
 * flight is interrupted; an idle worker reopens at its next line.
 */
static char log_path[4096];
static unsigned *log_gen_shared; /* NULL: no log file, or not mapped */
static unsigned log_gen_seen;

static int log_open_path(char *err, size_t errlen)
{
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (fd < 0) {
        if (err)
            snprintf(err, errlen, "cannot open the log file %s: %s", log_path, strerror(errno));
        return -1;
    }
    /* stdout too: whatever a library prints lands in the same file */
    if (dup2(fd, STDERR_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0) {
        if (err)
            snprintf(err, errlen, "dup2 of the log file %s: %s", log_path, strerror(errno));
        close(fd);
        return -1;
    }
    if (fd != STDERR_FILENO && fd != STDOUT_FILENO)
        close(fd);
    return 0;
}

int nb_log_open_file(const char *path, char *err, size_t errlen)
{
    void *page;
    if (strlen(path) >= sizeof(log_path)) {
        snprintf(err, errlen, "log file path too long");
        return -1;
    }
    snprintf(log_path, sizeof(log_path), "%s", path);
    if (log_open_path(err, errlen) != 0)
        return -1;
    page = mmap(NULL, sizeof(unsigned), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        snprintf(err, errlen, "cannot map the log generation: %s", strerror(errno));
        return -1;
    }
    log_gen_shared = page;
    *log_gen_shared = 0;
    log_gen_seen = 0;
    return 0;
}

int nb_log_reopen(void)
{
    char err[512];
    if (log_gen_shared == NULL)
        return 0;
    __atomic_add_fetch(log_gen_shared, 1, __ATOMIC_SEQ_CST);
    log_gen_seen = __atomic_load_n(log_gen_shared, __ATOMIC_SEQ_CST);
    if (log_open_path(err, sizeof(err)) != 0) {
        nb_error("%s: still writing to the old one", err);
        return -1;
    }
    return 1;
}

/* Before a line: reopen if the master moved the generation on. */
static void log_follow(void)
{
    unsigned gen;
    if (log_gen_shared == NULL)
        return;
    gen = __atomic_load_n(log_gen_shared, __ATOMIC_ACQUIRE);
    if (gen == log_gen_seen)
        return;
    log_gen_seen = gen; /* once per generation, even if the open fails */
    (void)log_open_path(NULL, 0);
}

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
    log_follow();
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
