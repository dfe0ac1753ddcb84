/*
 * cuda_remote_events.c - NVML event sets in remote mode: each set is a
 * connection of its own to the daemon (EVREG, EVWAIT in
 * e2e/fakedriver/PROTOCOL.md), as a real event set is its own open of the
 * control device, so that a thread waiting for events holds up none of
 * the process's other requests. In local mode no event ever comes: a wait
 * sleeps its timeout out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "remote_int.h"

struct stub_evset {
	pthread_mutex_t mu;     /* one request at a time on ch */
	struct remote_chan ch;  /* fd -1: local mode, or the connection broke */
	int broken;
};

struct stub_evset *stub_evset_new(void)
{
	struct stub_evset *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	s->ch.fd = -1;
	if (stub_remote() && remote_chan_open(&s->ch) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* A request on the set's connection; a broken connection stays broken. */
static __attribute__((format(printf, 3, 4))) int request(struct stub_evset *s, char **args, const char *fmt, ...)
{
	char req[96];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(req, sizeof(req), fmt, ap);
	va_end(ap);
	if (s->broken || n < 0 || (size_t)n >= sizeof(req))
		return ANS_DOWN;
	int rc = remote_chan_request(&s->ch, args, "%s", req);
	if (rc == ANS_DOWN) {
		s->broken = 1;
		remote_chan_close(&s->ch);
	}
	return rc;
}

int stub_evset_register(struct stub_evset *s, int phys, uint64_t types)
{
	if (!stub_remote())
		return 0;
	char *a = NULL;
	pthread_mutex_lock(&s->mu);
	int rc = request(s, &a, "EVREG %d %llu", remote_daemon_dev(phys), (unsigned long long)types);
	pthread_mutex_unlock(&s->mu);
	return rc == ANS_OK ? 0 : rc == ANS_DOWN ? -2 : -1;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int stub_evset_wait(struct stub_evset *s, unsigned timeout_ms, int *phys, uint64_t *type, uint64_t *data)
{
	if (!stub_remote()) {
		sleep_ms(timeout_ms);
		return 0;
	}
	char *a = NULL;
	uint64_t n, dd;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int rc = request(s, &a, "EVWAIT %u", timeout_ms) == ANS_OK && remote_num(&a, &n, ' ') == 0 ? 0 : -1;
		if (rc == 0 && n == 1 && (remote_num(&a, &dd, ' ') != 0 || remote_num(&a, type, ' ') != 0 ||
					  remote_num(&a, data, ' ') != 0 || *a != '\0'))
			rc = -1;
		pthread_mutex_unlock(&s->mu);
		if (rc != 0)
			return -1;
		if (n == 0)
			return 0;
		/* Registered devices are all ours; skip anything else rather than misreport it. */
		if ((*phys = remote_phys_of(dd)) >= 0)
			return 1;
	}
}

void stub_evset_free(struct stub_evset *s)
{
	if (s == NULL)
		return;
	remote_chan_close(&s->ch);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
