/* notify.c — sd_notify messages and the socket-activation fd.
 *
 * READY=1 is sent once the store is reloaded and the workers are up,
 * STATUS= lines during the reload, EXTEND_TIMEOUT_USEC= while a long reload
 * runs, STOPPING=1 at SIGTERM, RELOADING=1 around SIGHUP, and WATCHDOG=1
 * from the main loop whenever every worker's loop has ticked recently.
 * sd_notify keeps NOTIFY_SOCKET in the environment (unset_environment 0)
 * because later messages need it too.
 */
#include <stdarg.h>
#include <stdio.h>

#include <systemd/sd-daemon.h>

#include "daemon/notify.h"

void notify_ready(void) { sd_notify(0, "READY=1\nSTATUS=serving"); }
void notify_stopping(void) { sd_notify(0, "STOPPING=1\nSTATUS=shutting down"); }
void notify_reloading(void) { sd_notify(0, "RELOADING=1"); }

void notify_status(const char *fmt, ...)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "STATUS=");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    sd_notify(0, msg);
}

void notify_extend_timeout(uint64_t usec)
{
    sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu", (unsigned long long)usec);
}

uint64_t notify_watchdog_usec(void)
{
    uint64_t usec = 0;
    return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

void notify_watchdog(void) { sd_notify(0, "WATCHDOG=1"); }

int notify_listen_fd(void)
{
    int n = sd_listen_fds(1);
    if (n <= 0)
        return -1;
    if (n > 1)
        return -2;
    return SD_LISTEN_FDS_START;
}
