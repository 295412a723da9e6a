/* notify: sd_notify's datagram protocol (see notify.h); no libsystemd. */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int notify_open(struct notify *n, char *err, size_t errlen)
{
	const char *e = getenv("NOTIFY_SOCKET");
	char name[sizeof(n->addr.sun_path) + 1];
	size_t len;

	n->fd = -1;
	n->last_status[0] = '\0';
	if (!e || !*e) {
		unsetenv("NOTIFY_SOCKET");
		return 0;
	}
	len = strlen(e);
	snprintf(name, sizeof(name), "%s", e);
	unsetenv("NOTIFY_SOCKET"); /* never the service's */
	if ((name[0] != '/' && name[0] != '@') || len >= sizeof(n->addr.sun_path)) {
		snprintf(err, errlen,
			 "NOTIFY_SOCKET=%.200s is not a socket path or @abstract name of at most "
			 "%zu bytes: no readiness notification",
			 name, sizeof(n->addr.sun_path) - 1);
		return -1;
	}
	memset(&n->addr, 0, sizeof(n->addr));
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, name, len);
	if (name[0] == '@')
		n->addr.sun_path[0] = '\0'; /* the abstract namespace */
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n->fd < 0) {
		snprintf(err, errlen, "failed to create the NOTIFY_SOCKET socket: %s",
			 strerror(errno));
		return -1;
	}
	return 0;
}

bool notify_on(const struct notify *n) { return n && n->fd >= 0; }

void notify_send(struct notify *n, const char *text)
{
	if (!notify_on(n) || !text)
		return;
	/* best effort: a full queue or a manager gone loses one status */
	(void)!sendto(n->fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&n->addr,
		      n->addr_len);
}

void notify_status(struct notify *n, const char *line)
{
	char msg[sizeof(n->last_status) + 8];
	size_t len;

	if (!notify_on(n) || !line)
		return;
	if (!strncmp(line, "tts-launch: ", 12))
		line += 12;
	len = strcspn(line, "\r\n");
	if (len >= sizeof(n->last_status))
		len = sizeof(n->last_status) - 1;
	if (!len || (strlen(n->last_status) == len && !strncmp(n->last_status, line, len)))
		return;
	memcpy(n->last_status, line, len);
	n->last_status[len] = '\0';
	snprintf(msg, sizeof(msg), "STATUS=%s", n->last_status);
	notify_send(n, msg);
}

void notify_close(struct notify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}
