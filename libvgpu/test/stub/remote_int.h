/*
 * remote_int.h - internals of the stub driver's remote mode, shared by
 * cuda_remote.c (connections and framing), cuda_remote_dev.c (the device
 * list and what the driver owns) and cuda_remote_events.c (event sets).
 */
#ifndef VGPU_STUB_REMOTE_INT_H
#define VGPU_STUB_REMOTE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "stub.h"

/* Not exported: the remote client's internals, used within the stub libcuda only. */
#pragma GCC visibility push(hidden)

/* An answer: OK (fields after it), OOM, ERR, or no answer at all. */
enum { ANS_OK, ANS_OOM, ANS_ERR, ANS_DOWN };

/* One connection to the daemon and its last answer (NUL-terminated, without its "\n"). */
struct remote_chan {
	int fd;         /* -1: not connected */
	char *buf;
	size_t cap, len;
};

/* The daemon's socket, NULL in local mode; whether it was found as /dev/nvidiactl. */
extern const char *remote_path;
extern int remote_nodes;

/*
 * The process's connection, one request and answer at a time under its
 * lock. remote_request_locked leaves *args at the fields after "OK".
 */
void remote_lock(void);
void remote_unlock(void);
int remote_ensure_locked(void);
void remote_warn_locked(const char *what, int err);
int remote_request_locked(char **args, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One request whose answer is "OK" followed by exactly n numbers, stored in out[]. */
int remote_numbers(uint64_t *out, int n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A connection of its own (an event set): opened, used by one caller at a time, closed. */
int remote_chan_open(struct remote_chan *c);
void remote_chan_close(struct remote_chan *c);
int remote_chan_request(struct remote_chan *c, char **args, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Parsing: a decimal number ending at sep (' ' also at the end), a word up to a space. */
int remote_num(char **p, uint64_t *v, char sep);
int remote_word(char **p, char *out, size_t len);

/* The daemon's number of device phys, and the device of a daemon number (-1: not ours). */
int remote_daemon_dev(int phys);
int remote_phys_of(uint64_t daemon_dev);

#pragma GCC visibility pop

#endif /* VGPU_STUB_REMOTE_INT_H */
