/* log.h — the daemon's log: one line per event to stderr, filtered by level.
 *
 * journald picks stderr up under systemd, so lines carry no timestamp of
 * their own there; a level prefix in sd-daemon form ("<3>") lets journald
 * map priorities. The level is the one piece of process-wide state here:
 * SIGHUP may change it while threads log, hence an atomic.
 */
#ifndef SPMVD_LOG_H
#define SPMVD_LOG_H

typedef enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN = 1,
    LOG_LEVEL_INFO = 2,
    LOG_LEVEL_DEBUG = 3,
} log_level;

/* "error", "warn", "info", "debug" -> level; -1 if unknown. */
int log_level_parse(const char *name);
const char *log_level_name(log_level level);

void log_set_level(log_level level);
log_level log_get_level(void);
/* Prefixes journald priorities when stderr is the journal (JOURNAL_STREAM). */
void log_init(void);

void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
