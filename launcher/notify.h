/* notify: systemd's readiness protocol (sd_notify(3), the one-datagram
 * form): "READY=1" when the service listens, "STATUS=..." lines with what
 * the start-up is doing (download progress, stalls), "STOPPING=1" when it
 * is being stopped, each one datagram to the socket NOTIFY_SOCKET names (a
 * path, or "@name" for the abstract namespace). NOTIFY_SOCKET is taken out
 * of the environment, so the service does not inherit it and talk to
 * systemd on tts-launch's behalf. */
#ifndef TTS_NOTIFY_H
#define TTS_NOTIFY_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>

struct notify {
	int fd; /* -1: not under a notify-aware manager */
	struct sockaddr_un addr;
	socklen_t addr_len;
	char last_status[256]; /* not sent twice in a row */
};

#define NOTIFY_INIT                                                                                \
	{                                                                                          \
		.fd = -1                                                                           \
	}

/* Reads and unsets NOTIFY_SOCKET. 0 (off, or ready to send), -1 with err
 * when it names something unusable (then off). */
int notify_open(struct notify *n, char *err, size_t errlen);
/* One datagram: the assignments in text ("READY=1\nSTATUS=..."). Errors
 * are ignored: the manager's absence never stops the service. */
void notify_send(struct notify *n, const char *text);
/* "STATUS=line" (the line as tts-launch says it, its "tts-launch: " prefix
 * and trailing newline left out); the same status twice is sent once. */
void notify_status(struct notify *n, const char *line);
bool notify_on(const struct notify *n);
void notify_close(struct notify *n);

#endif
