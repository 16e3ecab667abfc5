/* log.c — leveled one-line logging to stderr.
 *
 * Each line is formatted into one buffer and written with a single write(2)
 * so lines from the HTTP threads and the workers never interleave. Under
 * systemd (JOURNAL_STREAM set) the line starts with "<N>" so journald keeps
 * the priority; on a terminal it starts with a UTC timestamp instead.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/log.h"

static _Atomic int current_level = LOG_LEVEL_INFO;
static _Atomic int journal_prefix = 0;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* syslog priorities: err, warning, info, debug */
static const int level_prio[] = {3, 4, 6, 7};

int log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, level_names[i]) == 0)
            return i;
    if (name && strcmp(name, "warning") == 0)
        return LOG_LEVEL_WARN;
    return -1;
}

const char *log_level_name(log_level level)
{
    return (level >= 0 && level <= LOG_LEVEL_DEBUG) ? level_names[level] : "?";
}

void log_set_level(log_level level) { atomic_store(&current_level, (int)level); }
log_level log_get_level(void) { return (log_level)atomic_load(&current_level); }

void log_init(void)
{
    atomic_store(&journal_prefix, getenv("JOURNAL_STREAM") != NULL);
}

void log_msg(log_level level, const char *fmt, ...)
{
    if ((int)level > atomic_load(&current_level))
        return;
    char line[2048];
    size_t n;
    if (atomic_load(&journal_prefix)) {
        n = (size_t)snprintf(line, sizeof line, "<%d>", level_prio[level]);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %-5s ",
                              ts.tv_nsec / 1000000, level_names[level]);
    }
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    n += (size_t)m;
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w; /* nowhere left to report a failed log write */
}
