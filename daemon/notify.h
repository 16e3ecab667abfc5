/* notify.h — the daemon's side of systemd: sd_notify and socket activation.
 *
 * Thin wrappers over libsystemd's sd-daemon calls; each is a no-op when
 * the daemon does not run under systemd (no NOTIFY_SOCKET, no LISTEN_FDS),
 * so the same binary runs from a shell.
 */
#ifndef SPMVD_NOTIFY_H
#define SPMVD_NOTIFY_H

#include <stdint.h>

void notify_ready(void);
void notify_stopping(void);
void notify_reloading(void);
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Asks the service manager for usec more start-up time. */
void notify_extend_timeout(uint64_t usec);
/* WATCHDOG_USEC if the watchdog is on for this process, else 0. */
uint64_t notify_watchdog_usec(void);
void notify_watchdog(void);
/* The listening socket passed by socket activation, or -1 (none); -2 when
 * more than one was passed (refused: spmvd serves one address). */
int notify_listen_fd(void);

#endif
