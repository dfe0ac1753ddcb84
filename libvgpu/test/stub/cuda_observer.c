/*
 * cuda_observer.c - the stub driver's independent record of device bytes
 * live across processes (see struct stub_observer in stub.h).
 *
 * The stress tests judge libvgpu by this record only: libvgpu's own counters
 * are what is under test. Locking: `mu` (robust, process-shared) guards the
 * totals and the entries; an entry's `alive` mutex is held by its owner's
 * keeper thread for the owner's lifetime.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stub_int.h"

static struct stub_observer *obs;
static struct stub_obs_proc *me;        /* this process's entry, NULL until its first charge */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static sem_t keeper_ready;

struct stub_observer *vgpuStubObserver(void) { return obs; }

static void robust_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

static void reap_entry_locked(struct stub_obs_proc *e)
{
	uint64_t held = 0;
	for (int d = 0; d < STUB_MAX_DEV; d++) {
		obs->live[d] -= e->bytes[d];
		held += e->bytes[d];
		e->bytes[d] = 0;
	}
	e->pid = 0;
	obs->reaped++;
	obs->reaped_bytes += held;
}

static void obs_lock(void)
{
	if (pthread_mutex_lock(&obs->mu.m) == EOWNERDEAD) {
		/* A process died mid-update: the entries are the truth. */
		for (int d = 0; d < STUB_MAX_DEV; d++) {
			uint64_t sum = 0;
			for (int i = 0; i < STUB_OBS_PROCS; i++)
				sum += obs->proc[i].bytes[d];
			obs->live[d] = sum;
		}
		pthread_mutex_consistent(&obs->mu.m);
	}
}

static void obs_unlock(void) { pthread_mutex_unlock(&obs->mu.m); }

/* Drops the bytes of every dead process. Caller holds mu. */
static int reap_locked(void)
{
	int n = 0;
	for (int i = 0; i < STUB_OBS_PROCS; i++) {
		struct stub_obs_proc *e = &obs->proc[i];
		if (e == me || e->pid == 0)
			continue;
		int rc = pthread_mutex_trylock(&e->alive.m);
		if (rc == EBUSY)
			continue;
		if (rc == EOWNERDEAD) {
			reap_entry_locked(e);
			pthread_mutex_consistent(&e->alive.m);
			n++;
		}
		if (rc == 0 || rc == EOWNERDEAD)
			pthread_mutex_unlock(&e->alive.m);
	}
	return n;
}

int vgpuStubObserverReap(void)
{
	if (obs == NULL)
		return 0;
	obs_lock();
	int n = reap_locked();
	obs_unlock();
	return n;
}

/* Holds this process's entry until the process dies. */
static void *keeper_main(void *arg)
{
	(void)arg;
	obs_lock();
	for (int i = 0; i < STUB_OBS_PROCS && me == NULL; i++) {
		struct stub_obs_proc *e = &obs->proc[i];
		int rc = pthread_mutex_trylock(&e->alive.m);
		if (rc == EOWNERDEAD) {
			reap_entry_locked(e);
			pthread_mutex_consistent(&e->alive.m);
		} else if (rc != 0) {
			continue;
		}
		e->pid = (int32_t)getpid();
		obs->procs++;
		__atomic_store_n(&me, e, __ATOMIC_RELEASE);
	}
	obs_unlock();
	sem_post(&keeper_ready);
	for (;;)
		pause();
	return NULL;
}

/* The first charge of a process starts its keeper thread and waits for its entry. */
static struct stub_obs_proc *entry(void)
{
	struct stub_obs_proc *e = __atomic_load_n(&me, __ATOMIC_ACQUIRE);
	if (e != NULL || obs == NULL)
		return e;
	pthread_mutex_lock(&reg_mu);
	if (__atomic_load_n(&me, __ATOMIC_ACQUIRE) == NULL) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 64 * 1024);
		sem_init(&keeper_ready, 0, 0);
		if (pthread_create(&t, &a, keeper_main, NULL) == 0)
			while (sem_wait(&keeper_ready) != 0)
				;
		pthread_attr_destroy(&a);
	}
	pthread_mutex_unlock(&reg_mu);
	e = __atomic_load_n(&me, __ATOMIC_ACQUIRE);
	if (e == NULL)
		abort();    /* more than STUB_OBS_PROCS live processes: the test is wrong */
	return e;
}

void stub_obs_charge(int phys, uint64_t bytes)
{
	if (obs == NULL || bytes == 0)
		return;
	struct stub_obs_proc *e = entry();
	obs_lock();
	e->bytes[phys] += bytes;
	obs->live[phys] += bytes;
	uint64_t bar = obs->hwm[phys];
	if (obs->limit != 0 && obs->limit < bar)
		bar = obs->limit;
	if (obs->live[phys] > bar) {
		/* Only the living hold memory: reap before recording anything. */
		reap_locked();
		if (obs->live[phys] > obs->hwm[phys])
			obs->hwm[phys] = obs->live[phys];
		if (obs->limit != 0 && obs->live[phys] > obs->limit)
			obs->violations++;
	}
	obs_unlock();
}

void stub_obs_release(int phys, uint64_t bytes)
{
	struct stub_obs_proc *e = __atomic_load_n(&me, __ATOMIC_ACQUIRE);
	if (obs == NULL || bytes == 0 || e == NULL)
		return;
	obs_lock();
	e->bytes[phys] -= bytes;
	obs->live[phys] -= bytes;
	obs_unlock();
}

/* Bytes of process pid released by another one (the last importer of shared memory). */
void stub_obs_release_pid(int32_t pid, int phys, uint64_t bytes)
{
	if (obs == NULL || bytes == 0)
		return;
	obs_lock();
	for (int i = 0; i < STUB_OBS_PROCS; i++)
		if (obs->proc[i].pid == pid && obs->proc[i].bytes[phys] >= bytes) {
			obs->proc[i].bytes[phys] -= bytes;
			obs->live[phys] -= bytes;
			break;
		}
	obs_unlock();
}

/* A forked child is a new process: it registers on its own first charge. */
static void obs_after_fork(void)
{
	pthread_mutex_init(&reg_mu, NULL);
	me = NULL;
}

void stub_obs_attach(void)
{
	const char *path = getenv("VGPU_STUB_OBSERVER");
	if (path == NULL || path[0] == '\0')
		return;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		abort();
	void *m = MAP_FAILED;
	if (flock(fd, LOCK_EX) == 0 && ftruncate(fd, sizeof(*obs)) == 0)
		m = mmap(NULL, sizeof(*obs), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		abort();    /* a test asked for an observer it cannot have */
	struct stub_observer *o = m;
	if (o->magic != STUB_OBS_MAGIC) {
		memset(o, 0, sizeof(*o));
		robust_init(&o->mu.m);
		const char *lim = getenv("VGPU_STUB_OBSERVER_LIMIT");
		o->limit = lim != NULL ? strtoull(lim, NULL, 0) : 0;
		for (int i = 0; i < STUB_OBS_PROCS; i++)
			robust_init(&o->proc[i].alive.m);
		__atomic_store_n(&o->magic, STUB_OBS_MAGIC, __ATOMIC_RELEASE);
	}
	flock(fd, LOCK_UN);
	close(fd);
	obs = o;
	pthread_atfork(NULL, NULL, obs_after_fork);
}
