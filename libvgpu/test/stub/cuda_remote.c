/*
 * cuda_remote.c - the stub driver's remote mode: the connections to the
 * fake GPU driver daemon (e2e/fakedriver/PROTOCOL.md) and their framing.
 *
 * Remote mode is on in two cases, read once at load:
 *  - VGPU_STUB_DRIVER_SOCKET names the daemon's Unix stream socket; the
 *    device list is then the one NVIDIA_VISIBLE_DEVICES names, as a test
 *    harness standing in for the container runtime sets it;
 *  - otherwise /dev/nvidiactl is a Unix socket: the daemon's control node,
 *    which the NVIDIA container toolkit (or its stand-in) mounts into a
 *    container with the nodes of the container's GPUs. The device list is
 *    then the GPUs whose /dev/nvidia<minor> exists, as the kernel driver's
 *    nodes decide on a real node; NVIDIA_VISIBLE_DEVICES is not read (the
 *    container runtime reads it when it creates the container, libcuda and
 *    NVML never do). A /dev/nvidiactl that is a character device (a host
 *    with a real GPU) leaves the stub in local mode.
 * What a real driver keeps in the kernel lives in the daemon: the device
 * list, device memory, each process's contexts, the devices' work queues,
 * their utilisation and events. What a real libcuda keeps in the process
 * stays in the stub as in local mode; the existing files branch here with
 * `if (stub_remote())`.
 *
 * Like a process's handle on /dev/nvidia*: one connection per process, opened
 * on first use, a new one in a forked child (the daemon knows the child by
 * its own pid, and the parent's connection must end with the parent, which
 * releases what it held). Threads take turns on it: one request, one answer
 * (the lock is held across the round trip, so a LAUNCH the daemon holds back
 * for the push buffer or a SYNC holds back the process's other requests,
 * NVML queries included, as the protocol's framing requires). An NVML event
 * set has a connection of its own (cuda_remote_events.c), so that a wait for
 * events holds up nothing else.
 *
 * Failures never reach the host process as signals or exits: writes use
 * MSG_NOSIGNAL, the descriptor is close-on-exec, and an unreachable daemon
 * makes calls fail with the driver's codes (CUDA_ERROR_NO_DEVICE from cuInit,
 * CUDA_ERROR_UNKNOWN elsewhere, NVML_ERROR_UNKNOWN). Until a first connection
 * succeeds every call tries again; once an established connection breaks,
 * the daemon has released everything the process held, so the process's
 * driver state is gone and every later call fails, as after a GPU is lost,
 * until the process (or a forked child) starts over.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "remote_int.h"

#define MAX_REPLY (16u << 20)   /* a longer answer is a broken daemon, not a big list */
#define CONTROL_NODE "/dev/nvidiactl"

const char *remote_path;        /* NULL: local mode */
int remote_nodes;               /* remote_path is /dev/nvidiactl */

/* The process's connection. `mu` guards every field and the device list (cuda_remote_dev.c). */
static struct {
	pthread_mutex_t mu;
	pid_t pid;      /* process the fields describe; another pid means we were forked */
	int lost;       /* an established connection broke */
	int warned;     /* said once on stderr that the daemon is unreachable */
	struct remote_chan ch;
} conn = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, {-1, NULL, 0, 0}};

int stub_remote(void) { return remote_path != NULL; }

void remote_lock(void) { pthread_mutex_lock(&conn.mu); }
void remote_unlock(void) { pthread_mutex_unlock(&conn.mu); }

void remote_warn_locked(const char *what, int err)
{
	if (conn.warned)
		return;
	conn.warned = 1;
	fprintf(stderr, "libcuda stub: fake driver %s: %s%s%s\n", remote_path, what,
		err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
}

/* A new connection to the daemon in c, or -1 with errno set. */
int remote_chan_open(struct remote_chan *c)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	c->fd = -1;
	if (strlen(remote_path) >= sizeof(a.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(a.sun_path, remote_path, strlen(remote_path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	c->fd = fd;
	return 0;
}

void remote_chan_close(struct remote_chan *c)
{
	int fd = c->fd;
	c->fd = -1;     /* before close: a fork in between must not see a reused number */
	if (fd >= 0)
		close(fd);
	free(c->buf);
	c->buf = NULL;
	c->cap = c->len = 0;
}

/* The connection ended under us: the daemon has released everything we held. */
static void lose_locked(const char *what, int err)
{
	int fd = conn.ch.fd;
	conn.ch.fd = -1;
	conn.lost = 1;
	if (fd >= 0)
		close(fd);
	remote_warn_locked(what, err);
}

/* Connected for this process, or -1. */
int remote_ensure_locked(void)
{
	pid_t me = getpid();
	if (conn.pid != me) {
		/* Forked: the inherited descriptor is the parent's connection, not ours. */
		if (conn.ch.fd >= 0)
			close(conn.ch.fd);
		conn.ch.fd = -1;
		conn.lost = 0;
		conn.warned = 0;
		conn.pid = me;
	}
	if (conn.lost)
		return -1;
	if (conn.ch.fd >= 0)
		return 0;
	if (remote_chan_open(&conn.ch) != 0) {
		remote_warn_locked("unreachable", errno);   /* not lost: the next call tries again */
		return -1;
	}
	conn.warned = 0;
	return 0;
}

static int send_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads one answer line into c->buf. Nothing may follow it: we asked one question. */
static int read_line(struct remote_chan *c)
{
	c->len = 0;
	for (;;) {
		if (c->cap - c->len < 512) {
			size_t ncap = c->cap ? c->cap * 2 : 4096;
			char *nb = ncap <= MAX_REPLY ? realloc(c->buf, ncap) : NULL;
			if (nb == NULL) {
				errno = EMSGSIZE;
				return -1;
			}
			c->buf = nb;
			c->cap = ncap;
		}
		ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			errno = r == 0 ? ECONNRESET : errno;    /* the daemon closed its end */
			return -1;
		}
		c->len += (size_t)r;
		char *nl = memchr(c->buf + c->len - (size_t)r, '\n', (size_t)r);
		if (nl != NULL) {
			if (nl != c->buf + c->len - 1) {
				errno = EPROTO;     /* more than one answer to one question */
				return -1;
			}
			*nl = '\0';
			return 0;
		}
	}
}

/*
 * One round trip on c: sends the request formatted from fmt, reads the
 * answer. ANS_DOWN when the connection failed or the answer is none of OK,
 * OOM, ERR (out of step: nothing after it can be trusted); the caller then
 * drops the connection.
 */
static int vround_trip(struct remote_chan *c, char **args, const char *fmt, va_list ap)
{
	char req[192];
	int n = vsnprintf(req, sizeof(req) - 1, fmt, ap);
	if (n < 0 || (size_t)n >= sizeof(req) - 1) {
		errno = E2BIG;      /* nothing sent: the connection is still in step */
		return ANS_DOWN;
	}
	req[n++] = '\n';
	if (send_all(c->fd, req, (size_t)n) != 0 || read_line(c) != 0)
		return ANS_DOWN;
	char *b = c->buf;
	if (strcmp(b, "OOM") == 0)
		return ANS_OOM;
	if (strcmp(b, "ERR") == 0 || strncmp(b, "ERR ", 4) == 0)
		return ANS_ERR;
	if (strcmp(b, "OK") == 0 || strncmp(b, "OK ", 3) == 0) {
		*args = b[2] == ' ' ? b + 3 : b + 2;
		return ANS_OK;
	}
	errno = EPROTO;
	return ANS_DOWN;
}

int remote_chan_request(struct remote_chan *c, char **args, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = c->fd >= 0 ? vround_trip(c, args, fmt, ap) : ANS_DOWN;
	va_end(ap);
	return rc;
}

int remote_request_locked(char **args, const char *fmt, ...)
{
	if (remote_ensure_locked() != 0)
		return ANS_DOWN;
	va_list ap;
	va_start(ap, fmt);
	int rc = vround_trip(&conn.ch, args, fmt, ap);
	va_end(ap);
	if (rc == ANS_DOWN && errno != E2BIG)
		lose_locked(errno == EPROTO ? "answer is not OK, OOM or ERR" : "connection lost", errno);
	return rc;
}

int remote_numbers(uint64_t *out, int n, const char *fmt, ...)
{
	char *a = NULL;
	char req[192];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(req, sizeof(req), fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(req))
		return ANS_DOWN;
	remote_lock();
	int rc = remote_request_locked(&a, "%s", req);
	for (int i = 0; rc == ANS_OK && i < n; i++)
		if (remote_num(&a, &out[i], ' ') != 0)
			rc = ANS_ERR;
	if (rc == ANS_OK && *a != '\0')
		rc = ANS_ERR;
	remote_unlock();
	return rc;
}

/* ---- parsing: decimal fields separated by one space, items by a separator ---- */

int remote_num(char **p, uint64_t *v, char sep)
{
	char *end;
	if (**p < '0' || **p > '9')
		return -1;
	errno = 0;
	unsigned long long x = strtoull(*p, &end, 10);
	if (errno != 0 || !(*end == sep || (sep == ' ' && *end == '\0')))
		return -1;
	*p = *end == '\0' ? end : end + 1;
	*v = x;
	return 0;
}

int remote_word(char **p, char *out, size_t len)
{
	size_t n = strcspn(*p, " ");
	if (n == 0 || n >= len)
		return -1;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p += (*p)[n] == ' ' ? n + 1 : n;
	return 0;
}

/* ---- setup ---- */

/*
 * The child's copy of the connection is its parent's; remote_ensure_locked()
 * sees the new pid and opens the child's own. If another thread of the
 * parent was mid-request when we were forked, its lock is held by nobody
 * here and the reply buffer may be half-replaced: start both afresh (the old
 * buffer leaks).
 */
static void after_fork(void)
{
	if (pthread_mutex_trylock(&conn.mu) == 0) {
		pthread_mutex_unlock(&conn.mu);
		return;
	}
	pthread_mutex_init(&conn.mu, NULL);
	conn.ch.buf = NULL;
	conn.ch.cap = conn.ch.len = 0;
}

void stub_remote_attach(void)
{
	const char *v = getenv("VGPU_STUB_DRIVER_SOCKET");
	struct stat st;
	if (v != NULL && *v != '\0') {
		remote_path = v;
	} else if (stat(CONTROL_NODE, &st) == 0 && S_ISSOCK(st.st_mode)) {
		remote_path = CONTROL_NODE;
		remote_nodes = 1;
	} else {
		return;
	}
	pthread_atfork(NULL, NULL, after_fork);
}
