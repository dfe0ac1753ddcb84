/*
 * cuda_remote.c - the stub driver's remote mode: the client of the fake GPU
 * driver daemon (e2e/fakedriver/PROTOCOL.md).
 *
 * With VGPU_STUB_DRIVER_SOCKET naming a Unix stream socket, what a real
 * driver keeps in the kernel lives in the daemon behind it: the device list,
 * device memory, each process's contexts, the devices' work queues and their
 * utilisation. What a real libcuda keeps in the process stays in the stub as
 * in local mode (visible devices, contexts, pointers, pools, VMM records, the
 * observer); the existing files branch here with `if (stub_remote())`.
 *
 * Like a process's handle on /dev/nvidia*: one connection per process, opened
 * on first use, a new one in a forked child (the daemon knows the child by
 * its own pid, and the parent's connection must end with the parent, which
 * releases what it held). Threads take turns on it: one request, one answer
 * (`conn.mu`, held across the round trip, so a LAUNCH the daemon holds back
 * for the push buffer or a SYNC holds back the process's other requests,
 * NVML queries included, as the protocol's framing requires).
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "stub_int.h"

#define MAX_REPLY (16u << 20)   /* a longer answer is a broken daemon, not a big list */

static const char *sock_path;   /* NULL: local mode */

/* The process's connection. `mu` guards every field and the device list below. */
static struct {
	pthread_mutex_t mu;
	pid_t pid;      /* process the fields describe; another pid means we were forked */
	int fd;         /* -1: not connected */
	int lost;       /* an established connection broke */
	int warned;     /* said once on stderr that the daemon is unreachable */
	char *buf;      /* last answer, NUL-terminated, without its "\n" */
	size_t cap, len;
} conn = {PTHREAD_MUTEX_INITIALIZER, 0, -1, 0, 0, NULL, 0, 0};

static int loaded;              /* the device list below and in vgpuStubShared() is filled */
static int daemon_dev[STUB_MAX_DEV];    /* the daemon's number of each device this process sees */
static char names[STUB_MAX_DEV][96];    /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */

enum { ANS_OK, ANS_OOM, ANS_ERR, ANS_DOWN };

int stub_remote(void) { return sock_path != NULL; }

static void warn_locked(const char *what, int err)
{
	if (conn.warned)
		return;
	conn.warned = 1;
	fprintf(stderr, "libcuda stub: fake driver %s: %s%s%s\n", sock_path, what,
		err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
}

/* The connection ended under us: the daemon has released everything we held. */
static void lose_locked(const char *what, int err)
{
	int fd = conn.fd;
	conn.fd = -1;       /* before close: a fork in between must not see a reused number */
	conn.lost = 1;
	if (fd >= 0)
		close(fd);
	warn_locked(what, err);
}

/* Connected for this process, or -1. */
static int ensure_locked(void)
{
	pid_t me = getpid();
	if (conn.pid != me) {
		/* Forked: the inherited descriptor is the parent's connection, not ours. */
		if (conn.fd >= 0)
			close(conn.fd);
		conn.fd = -1;
		conn.lost = 0;
		conn.warned = 0;
		conn.pid = me;
	}
	if (conn.lost)
		return -1;
	if (conn.fd >= 0)
		return 0;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(sock_path) >= sizeof(a.sun_path)) {
		warn_locked("socket path too long", 0);
		return -1;
	}
	memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		warn_locked("socket", errno);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int err = errno;
		close(fd);
		warn_locked("unreachable", err);    /* not lost: the next call tries again */
		return -1;
	}
	conn.fd = fd;
	conn.warned = 0;
	return 0;
}

static int send_all_locked(const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = send(conn.fd, s, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads one answer line into conn.buf. Nothing may follow it: we asked one question. */
static int read_line_locked(void)
{
	conn.len = 0;
	for (;;) {
		if (conn.cap - conn.len < 512) {
			size_t ncap = conn.cap ? conn.cap * 2 : 4096;
			char *nb = ncap <= MAX_REPLY ? realloc(conn.buf, ncap) : NULL;
			if (nb == NULL) {
				errno = EMSGSIZE;
				return -1;
			}
			conn.buf = nb;
			conn.cap = ncap;
		}
		ssize_t r = recv(conn.fd, conn.buf + conn.len, conn.cap - conn.len - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			errno = r == 0 ? ECONNRESET : errno;    /* the daemon closed its end */
			return -1;
		}
		conn.len += (size_t)r;
		char *nl = memchr(conn.buf + conn.len - (size_t)r, '\n', (size_t)r);
		if (nl != NULL) {
			if (nl != conn.buf + conn.len - 1) {
				errno = EPROTO;     /* more than one answer to one question */
				return -1;
			}
			*nl = '\0';
			return 0;
		}
	}
}

/*
 * One round trip: sends the request formatted from fmt, reads the answer.
 * ANS_OK leaves *args at the text after "OK" (its fields, "" when none).
 */
static int vrequest_locked(char **args, const char *fmt, va_list ap)
{
	char req[128];
	int n = vsnprintf(req, sizeof(req) - 1, fmt, ap);
	if (n < 0 || (size_t)n >= sizeof(req) - 1 || ensure_locked() != 0)
		return ANS_DOWN;
	req[n++] = '\n';
	if (send_all_locked(req, (size_t)n) != 0 || read_line_locked() != 0) {
		lose_locked("connection lost", errno);
		return ANS_DOWN;
	}
	char *b = conn.buf;
	if (strcmp(b, "OOM") == 0)
		return ANS_OOM;
	if (strcmp(b, "ERR") == 0 || strncmp(b, "ERR ", 4) == 0)
		return ANS_ERR;
	if (strcmp(b, "OK") == 0 || strncmp(b, "OK ", 3) == 0) {
		*args = b[2] == ' ' ? b + 3 : b + 2;
		return ANS_OK;
	}
	lose_locked("answer is not OK, OOM or ERR", 0);   /* out of step: nothing after it can be trusted */
	return ANS_DOWN;
}

static __attribute__((format(printf, 2, 3))) int request_locked(char **args, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vrequest_locked(args, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- parsing: decimal fields separated by one space, items by ':' ---- */

/* A decimal number at *p ending at `sep` (' ' also ends at the end of the answer). */
static int num(char **p, uint64_t *v, char sep)
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

/* A word (no spaces) at *p, copied into out[len]. */
static int word(char **p, char *out, size_t len)
{
	size_t n = strcspn(*p, " ");
	if (n == 0 || n >= len)
		return -1;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p += (*p)[n] == ' ' ? n + 1 : n;
	return 0;
}

/* One request whose answer is "OK" followed by exactly n numbers, stored in out[]. */
static __attribute__((format(printf, 3, 4))) int numbers(uint64_t *out, int n, const char *fmt, ...)
{
	char *a = NULL;
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&conn.mu);
	int rc = vrequest_locked(&a, fmt, ap);
	for (int i = 0; rc == ANS_OK && i < n; i++)
		if (num(&a, &out[i], ' ') != 0)
			rc = ANS_ERR;
	if (rc == ANS_OK && *a != '\0')
		rc = ANS_ERR;
	pthread_mutex_unlock(&conn.mu);
	va_end(ap);
	return rc;
}

/* ---- the device list ---- */

/*
 * Whether the daemon's device number d, with that UUID, is in the
 * container. The NVIDIA container toolkit gives a container the device
 * nodes of the GPUs in NVIDIA_VISIBLE_DEVICES only (UUIDs or indices,
 * comma-separated, or "all"), so the driver shows it those and no others, in
 * PCI order: index 0 inside is the first of them. Unset: all (a process on
 * the host).
 */
static int visible_in_container(int d, const char *uuid)
{
	const char *v = getenv("NVIDIA_VISIBLE_DEVICES");
	char buf[1024];
	if (v == NULL || strcmp(v, "all") == 0)
		return 1;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long idx = strtol(tok, &end, 10);
		if ((*end == '\0' && idx == d) || strcmp(tok, uuid) == 0)
			return 1;
	}
	return 0;
}

static int load_locked(void)
{
	struct stub_shared *g = vgpuStubShared();
	char *a = NULL;
	uint64_t ndev, wave;
	int n = 0;
	if (request_locked(&a, "HELLO") != ANS_OK || num(&a, &ndev, ' ') != 0 ||
	    num(&a, &wave, ' ') != 0 || *a != '\0')
		return -1;
	for (int d = 0; d < (int)ndev && n < STUB_MAX_DEV; d++) {
		uint64_t total, sm;
		struct stub_dev *dv = &g->dev[n];
		if (request_locked(&a, "DEV %d", d) != ANS_OK || word(&a, dv->uuid, sizeof(dv->uuid)) != 0 ||
		    num(&a, &total, ' ') != 0 || num(&a, &sm, ' ') != 0 ||
		    word(&a, names[n], sizeof(names[n])) != 0 || *a != '\0' || sm == 0 || sm > INT32_MAX)
			return -1;
		if (!visible_in_container(d, dv->uuid))
			continue;
		dv->total = total;
		dv->sm = (int32_t)sm;
		dv->used = 0;   /* the daemon's to know (MEM) */
		daemon_dev[n++] = d;
	}
	g->wave_ns = wave;
	g->ndev = n;
	loaded = 1;
	return 0;
}

int stub_remote_load(void)
{
	pthread_mutex_lock(&conn.mu);
	int rc = ensure_locked();
	if (rc == 0 && !loaded && (rc = load_locked()) != 0)
		warn_locked("no device list (HELLO, DEV)", 0);
	pthread_mutex_unlock(&conn.mu);
	return rc;
}

const char *stub_remote_name(int phys) { return names[phys]; }

/* ---- what the driver owns ---- */

CUresult stub_remote_alloc(int phys, uint64_t bytes)
{
	int rc = numbers(NULL, 0, "ALLOC %d %llu", daemon_dev[phys], (unsigned long long)bytes);
	return rc == ANS_OK    ? CUDA_SUCCESS
	       : rc == ANS_OOM ? CUDA_ERROR_OUT_OF_MEMORY
			       : STUB_CUDA_ERROR_UNKNOWN;
}

/* An ERR (more than we hold: the daemon lost us) changes nothing a free can fix. */
void stub_remote_free(int phys, uint64_t bytes)
{
	numbers(NULL, 0, "FREE %d %llu", daemon_dev[phys], (unsigned long long)bytes);
}

void stub_remote_ctx(int phys, int delta)
{
	numbers(NULL, 0, "CTX %d %d", daemon_dev[phys], delta);
}

CUresult stub_remote_launch(int phys, uint64_t work_ns)
{
	return numbers(NULL, 0, "LAUNCH %d %llu", daemon_dev[phys], (unsigned long long)work_ns) == ANS_OK
		       ? CUDA_SUCCESS
		       : STUB_CUDA_ERROR_UNKNOWN;
}

CUresult stub_remote_sync(int phys)
{
	return numbers(NULL, 0, "SYNC %d", daemon_dev[phys]) == ANS_OK ? CUDA_SUCCESS : STUB_CUDA_ERROR_UNKNOWN;
}

/* SELF, asked once per process: -1 when the daemon cannot say. */
int32_t stub_remote_self(void)
{
	static int32_t cached, cached_for;
	int32_t me = (int32_t)getpid();
	uint64_t pid = 0;
	if (__atomic_load_n(&cached_for, __ATOMIC_ACQUIRE) == me)
		return __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (numbers(&pid, 1, "SELF") != ANS_OK || pid == 0 || pid > INT32_MAX)
		return -1;
	__atomic_store_n(&cached, (int32_t)pid, __ATOMIC_RELAXED);
	__atomic_store_n(&cached_for, me, __ATOMIC_RELEASE);
	return (int32_t)pid;
}

uint64_t stub_remote_busy(int phys, int32_t pid)
{
	uint64_t ns = 0;
	return numbers(&ns, 1, "BUSY %d %d", daemon_dev[phys], (int)pid) == ANS_OK ? ns : 0;
}

int stub_remote_mem(int phys, uint64_t *total, uint64_t *used)
{
	uint64_t v[2];
	if (numbers(v, 2, "MEM %d", daemon_dev[phys]) != ANS_OK)
		return -1;
	*total = v[0];
	*used = v[1] < v[0] ? v[1] : v[0];
	return 0;
}

int stub_remote_dutil(int phys)
{
	uint64_t pct;
	if (numbers(&pct, 1, "DUTIL %d", daemon_dev[phys]) != ANS_OK)
		return -1;
	return pct > 100 ? 100 : (int)pct;
}

/*
 * PROCS: processes with a context on the device. Fills out[0..cap) and
 * returns how many the daemon listed (-1: no answer).
 */
int stub_remote_procs(int phys, struct stub_remote_proc *out, int cap)
{
	char *a = NULL;
	uint64_t n, pid, bytes, ctxs;
	int k = 0;
	pthread_mutex_lock(&conn.mu);
	int rc = request_locked(&a, "PROCS %d", daemon_dev[phys]);
	if (rc == ANS_OK && num(&a, &n, ' ') != 0)
		rc = ANS_ERR;
	for (; rc == ANS_OK && *a != '\0'; k++) {
		if (num(&a, &pid, ':') != 0 || num(&a, &bytes, ':') != 0 || num(&a, &ctxs, ' ') != 0 ||
		    pid == 0 || pid > INT32_MAX) {
			rc = ANS_ERR;
			break;
		}
		if (k < cap)
			out[k] = (struct stub_remote_proc){(int32_t)pid, (int32_t)ctxs, bytes};
	}
	pthread_mutex_unlock(&conn.mu);
	return rc == ANS_OK && n == (uint64_t)k ? k : -1;
}

/*
 * PUTIL: the utilisation samples newer than last_seen_us, one per process
 * (nvmlDeviceGetProcessUtilization returns "one utilization sample structure
 * ... per process running", NVML API reference): a process's newest sample,
 * which carries the newest timestamp for the caller's next last_seen. Fills
 * out[0..cap) and returns how many processes it found (-1: no answer).
 */
int stub_remote_putil(int phys, uint64_t last_seen_us, struct stub_remote_sample *out, int cap)
{
	char *a = NULL;
	uint64_t n, pid, ts, pct, seen = 0;
	int k = 0;
	pthread_mutex_lock(&conn.mu);
	int rc = request_locked(&a, "PUTIL %d %llu", daemon_dev[phys], (unsigned long long)last_seen_us);
	if (rc == ANS_OK && num(&a, &n, ' ') != 0)
		rc = ANS_ERR;
	for (; rc == ANS_OK && *a != '\0'; seen++) {
		if (num(&a, &pid, ':') != 0 || num(&a, &ts, ':') != 0 || num(&a, &pct, ' ') != 0 ||
		    pid == 0 || pid > INT32_MAX) {
			rc = ANS_ERR;
			break;
		}
		int i = 0;
		while (i < k && out[i].pid != (int32_t)pid)
			i++;
		if (i == k && k == cap)
			continue;       /* more processes than the caller can hold */
		if (i == k)
			out[k++] = (struct stub_remote_sample){(int32_t)pid, 0, 0};
		if (ts >= out[i].ts_us) {
			out[i].ts_us = ts;
			out[i].sm_pct = pct > 100 ? 100 : (uint32_t)pct;
		}
	}
	pthread_mutex_unlock(&conn.mu);
	return rc == ANS_OK && n == seen ? k : -1;
}

/* ---- setup ---- */

/*
 * The child's copy of the connection is its parent's; ensure_locked() sees
 * the new pid and opens the child's own. If another thread of the parent was
 * mid-request when we were forked, its lock is held by nobody here and the
 * reply buffer may be half-replaced: start both afresh (the old buffer leaks).
 */
static void after_fork(void)
{
	if (pthread_mutex_trylock(&conn.mu) == 0) {
		pthread_mutex_unlock(&conn.mu);
		return;
	}
	pthread_mutex_init(&conn.mu, NULL);
	conn.buf = NULL;
	conn.cap = conn.len = 0;
}

void stub_remote_attach(void)
{
	const char *v = getenv("VGPU_STUB_DRIVER_SOCKET");
	if (v == NULL || *v == '\0')
		return;
	sock_path = v;
	pthread_atfork(NULL, NULL, after_fork);
}
