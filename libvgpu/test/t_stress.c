/*
 * t_stress.c - many processes on one region and one memory limit.
 *
 * Workers loop random cuMemAlloc_v2 / cuMemFree_v2 sizes (every fourth one
 * with four threads) while the parent optionally SIGKILLs random workers and
 * respawns them, or corrupts the region file under them. The verdict comes
 * from the stub driver's observer (stub.h), which records the device bytes
 * really live across all processes: libvgpu's own counters are what is under
 * test. A watchdog fails the case when any call takes longer than the
 * deadline instead of letting the suite hang.
 *
 * Parameters (environment; run.sh passes short values, `make stress` long ones):
 *   VGPU_TEST_STRESS_PROCS   worker processes (default 8, at most 64)
 *   VGPU_TEST_STRESS_SECS    duration of the random phase (default 3)
 *   VGPU_TEST_DEADLINE_S     longest acceptable call or wait (default 60)
 *   VGPU_TEST_SLOW           kills and corruptions this many times rarer (valgrind:
 *                            a respawned worker needs a second to start)
 */
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ST_WORKERS 64
#define ST_THREADS 4
#define ST_HELD 24

enum { PH_RUN = 1, PH_HOLD = 2, PH_STOP = 3 };

/* One worker thread's counters; cumulative across respawns of the worker. */
struct st_thread {
	uint64_t busy_since_ns;     /* start of the call in progress, 0 when idle */
	uint64_t max_call_ns;
	uint64_t attempted, ok, oom, frees, errors;
	uint64_t held;              /* bytes this incarnation holds now */
	uint32_t acked;             /* holding still in PH_HOLD */
	int32_t first_error;
};

struct st_worker {
	int32_t pid;
	int32_t threads;
	struct st_thread th[ST_THREADS];
};

/* The control file shared by the parent and its workers. */
struct st_ctl {
	uint32_t phase;
	uint32_t pad;
	struct st_worker w[ST_WORKERS];
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static long env_long(const char *name, long dflt, long lo, long hi)
{
	const char *v = getenv(name);
	long n = v != NULL && *v != '\0' ? strtol(v, NULL, 10) : dflt;
	return n < lo ? lo : (n > hi ? hi : n);
}

/* CUDA_DEVICE_MEMORY_LIMIT as bytes ("256m" style, binary units). */
static uint64_t limit_bytes(void)
{
	const char *v = getenv("CUDA_DEVICE_MEMORY_LIMIT");
	char *end = NULL;
	uint64_t n = v ? strtoull(v, &end, 10) : 0;
	switch (end && *end ? *end | 0x20 : 0) {
	case 'k': return n << 10;
	case 'm': return n << 20;
	case 'g': return n << 30;
	default: return n;
	}
}

static struct st_ctl *ctl_map(int create)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/stress.ctl", t_dir());
	int fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0) | O_CLOEXEC, 0600);
	if (fd < 0 || (create && ftruncate(fd, sizeof(struct st_ctl)) != 0))
		return NULL;
	void *m = mmap(NULL, sizeof(struct st_ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/* ---- worker ---- */

struct st_worker_ctx {
	struct st_ctl *ctl;
	struct st_thread *th;
	CUcontext ctx;
	unsigned seed;
	uint64_t limit;
};

/* Mostly small sizes, some large; never page-aligned on purpose. */
static uint64_t pick_size(unsigned *seed)
{
	unsigned r = (unsigned)rand_r(seed) % 100;
	uint64_t lo = 4096, span = 256 * 1024;
	if (r >= 90)
		lo = 8 * MiB, span = 40 * MiB;
	else if (r >= 60)
		lo = 256 * 1024, span = 8 * MiB;
	return lo + ((uint64_t)rand_r(seed) << 16 ^ (uint64_t)rand_r(seed)) % span;
}

static void timed_begin(struct st_thread *th) { __atomic_store_n(&th->busy_since_ns, now_ns(), __ATOMIC_RELAXED); }

static void timed_end(struct st_thread *th)
{
	uint64_t d = now_ns() - __atomic_load_n(&th->busy_since_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&th->busy_since_ns, 0, __ATOMIC_RELAXED);
	if (d > th->max_call_ns)
		__atomic_store_n(&th->max_call_ns, d, __ATOMIC_RELAXED);
}

static void record_error(struct st_thread *th, CUresult r)
{
	if (__atomic_fetch_add(&th->errors, 1, __ATOMIC_RELAXED) == 0)
		th->first_error = (int32_t)r;
}

static void *st_thread_main(void *arg)
{
	struct st_worker_ctx *w = arg;
	struct st_thread *th = w->th;
	__typeof__(&cuMemAlloc_v2) alloc = CU(cuMemAlloc_v2);
	__typeof__(&cuMemFree_v2) release = CU(cuMemFree_v2);
	__typeof__(&cuMemGetInfo_v2) info = CU(cuMemGetInfo_v2);
	CUdeviceptr ptr[ST_HELD] = {0};
	uint64_t size[ST_HELD] = {0};

	CU(cuCtxSetCurrent)(w->ctx);
	for (;;) {
		uint32_t phase = __atomic_load_n(&w->ctl->phase, __ATOMIC_ACQUIRE);
		if (phase == PH_STOP)
			break;
		if (phase == PH_HOLD) {
			__atomic_store_n(&th->acked, 1, __ATOMIC_RELEASE);
			sleep_ms(1);
			continue;
		}
		int k = (int)((unsigned)rand_r(&w->seed) % ST_HELD);
		CUresult r;
		/* Frees a third as often as it allocates: about 3/4 of the slots stay
		 * full, so even a few slow (valgrind) workers want more than the limit. */
		if (ptr[k] != 0 && (unsigned)rand_r(&w->seed) % 3 != 0)
			continue;
		if (ptr[k] != 0) {
			timed_begin(th);
			r = release(ptr[k]);
			timed_end(th);
			if (r != CUDA_SUCCESS)
				record_error(th, r);
			__atomic_fetch_add(&th->frees, 1, __ATOMIC_RELAXED);
			__atomic_fetch_sub(&th->held, size[k], __ATOMIC_RELAXED);
			ptr[k] = 0;
			continue;
		}
		if ((unsigned)rand_r(&w->seed) % 64 == 0) {
			size_t f = 0, t = 0;
			timed_begin(th);
			r = info(&f, &t);
			timed_end(th);
			if (r != CUDA_SUCCESS || t != w->limit || f > t)
				record_error(th, r == CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : r);
		}
		size[k] = pick_size(&w->seed);
		__atomic_fetch_add(&th->attempted, 1, __ATOMIC_RELAXED);
		timed_begin(th);
		r = alloc(&ptr[k], size[k]);
		timed_end(th);
		if (r == CUDA_SUCCESS) {
			__atomic_fetch_add(&th->ok, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&th->held, size[k], __ATOMIC_RELAXED);
		} else {
			ptr[k] = 0;
			if (r == CUDA_ERROR_OUT_OF_MEMORY)
				__atomic_fetch_add(&th->oom, 1, __ATOMIC_RELAXED);
			else
				record_error(th, r);
		}
	}
	for (int k = 0; k < ST_HELD; k++)
		if (ptr[k] != 0 && release(ptr[k]) != CUDA_SUCCESS)
			record_error(th, CUDA_ERROR_INVALID_VALUE);
	return NULL;
}

/* One worker process: VGPU_TEST_WORKER names its entry in the control file. */
static int stress_worker(void)
{
	static struct st_worker_ctx ctx[ST_THREADS];
	pthread_t tid[ST_THREADS];
	struct st_ctl *c = ctl_map(0);
	int w = (int)env_long("VGPU_TEST_WORKER", -1, -1, ST_WORKERS - 1);
	if (c == NULL || w < 0)
		return 2;
	struct st_worker *me = &c->w[w];
	/* Registration counts as a call for the watchdog. */
	timed_begin(&me->th[0]);
	CUcontext cx = t_ctx(0);
	timed_end(&me->th[0]);
	int n = me->threads < 1 || me->threads > ST_THREADS ? 1 : me->threads;
	for (int i = 0; i < n; i++) {
		ctx[i] = (struct st_worker_ctx){c, &me->th[i], cx,
						(unsigned)getpid() * 2654435761u + (unsigned)i,
						limit_bytes()};
		if (i > 0)
			pthread_create(&tid[i], NULL, st_thread_main, &ctx[i]);
	}
	st_thread_main(&ctx[0]);
	for (int i = 1; i < n; i++)
		pthread_join(tid[i], NULL);
	return t_failed;
}

/*
 * Allocates exactly VGPU_TEST_FILL bytes (in chunks), then checks that one
 * more byte is refused: what the dead left behind has been given back.
 */
static int stress_fill(void)
{
	static CUdeviceptr p[4096];
	uint64_t want = strtoull(getenv("VGPU_TEST_FILL") ? getenv("VGPU_TEST_FILL") : "0", NULL, 10);
	int n = 0;
	t_ctx(0);
	for (uint64_t left = want; left > 0 && n < 4096; n++) {
		uint64_t chunk = left > 64 * MiB ? 64 * MiB : left;
		CUresult r = CU(cuMemAlloc_v2)(&p[n], chunk);
		CHECK(r == CUDA_SUCCESS, "fill: %llu of %llu bytes left, cuMemAlloc(%llu) = %d",
		      (unsigned long long)left, (unsigned long long)want, (unsigned long long)chunk, r);
		if (r != CUDA_SUCCESS)
			break;
		left -= chunk;
	}
	CUdeviceptr q;
	CHECK_EQ(CU(cuMemAlloc_v2)(&q, 1), CUDA_ERROR_OUT_OF_MEMORY);
	for (int i = 0; i < n; i++)
		CU(cuMemFree_v2)(p[i]);
	return t_failed;
}

/* ---- parent ---- */

struct st_run {
	struct st_ctl *ctl;
	struct stub_observer *obs;
	int procs;
	uint64_t limit, deadline_ns;
	unsigned seed;
	unsigned slow;
	uint64_t kills, respawns, died_in_lock, corruptions, repaired, max_repair_ns;
	int failed;
};

static int spawn_worker(struct st_run *s, int i, int die_after)
{
	static char wenv[ST_WORKERS][32], denv[ST_WORKERS][48];
	struct st_worker *w = &s->ctl->w[i];
	for (int t = 0; t < ST_THREADS; t++) {
		__atomic_store_n(&w->th[t].held, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->th[t].busy_since_ns, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&w->th[t].acked, 0, __ATOMIC_RELAXED);
	}
	snprintf(wenv[i], sizeof(wenv[i]), "VGPU_TEST_WORKER=%d", i);
	snprintf(denv[i], sizeof(denv[i]), "LIBVGPU_TEST_DIE_IN_LOCK=%d", die_after);
	const char *env[] = {wenv[i], die_after > 0 ? denv[i] : NULL, NULL};
	w->pid = t_spawn("stress_worker", env, -1);
	return w->pid;
}

static void kill_all(struct st_run *s)
{
	for (int i = 0; i < s->procs; i++)
		if (s->ctl->w[i].pid > 0) {
			kill(s->ctl->w[i].pid, SIGKILL);
			t_wait(s->ctl->w[i].pid);
			s->ctl->w[i].pid = 0;
		}
}

/* Prints one /proc file of a task on one line, prefixed by what it is. */
static void dump_file(const char *what, const char *path)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	for (char *c = buf; *c; c++)
		if (*c == '\n')
			*c = ' ';
	fprintf(stderr, "      %s: %s\n", what, buf);
}

/*
 * What a stuck worker is doing, for the failure report: each thread's
 * state, kernel wait channel, system call and kernel stack (where the
 * kernel shows it), and the region lock word (owner slot + 1, bit 31
 * waiters).
 */
static void dump_stuck(int pid)
{
	struct vgpu_region *r = t_region();
	if (r != NULL)
		fprintf(stderr, "    region lock word %#x\n", __atomic_load_n(&r->hdr.lock.word, __ATOMIC_RELAXED));
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
	DIR *d = opendir(dir);
	if (d == NULL) {
		fprintf(stderr, "    %s: %s\n", dir, strerror(errno));
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[512];
		fprintf(stderr, "    task %s\n", e->d_name);
		static const char *const files[] = {"stat", "wchan", "syscall", "stack"};
		for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
			snprintf(path, sizeof(path), "%s/%s/%s", dir, e->d_name, files[f]);
			dump_file(files[f], path);
		}
	}
	closedir(d);
}

/* Fails the run when a call has been in progress for longer than the deadline. */
static int watchdog(struct st_run *s)
{
	uint64_t now = now_ns();
	for (int i = 0; i < s->procs; i++)
		for (int t = 0; t < ST_THREADS; t++) {
			uint64_t b = __atomic_load_n(&s->ctl->w[i].th[t].busy_since_ns, __ATOMIC_RELAXED);
			if (b != 0 && now > b && now - b > s->deadline_ns) {
				fprintf(stderr, "FAIL watchdog: worker %d (pid %d) thread %d stuck in a call for %.1f s\n",
					i, s->ctl->w[i].pid, t, (double)(now - b) / 1e9);
				dump_stuck(s->ctl->w[i].pid);
				return -1;
			}
		}
	return 0;
}

/*
 * Records worker i (pid), collected with status st: 1 for a fault-injected
 * death (SIGKILL inside the region lock), -1 for any other exit, which
 * fails the run.
 */
static int collected(struct st_run *s, int i, int pid, int st)
{
	s->ctl->w[i].pid = 0;
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
		s->died_in_lock++;
		/* Its calls ended with it: nothing for the watchdog to wait for. */
		for (int t = 0; t < ST_THREADS; t++)
			__atomic_store_n(&s->ctl->w[i].th[t].busy_since_ns, 0, __ATOMIC_RELAXED);
		return 1;
	}
	fprintf(stderr, "FAIL worker %d (pid %d) exited early: status 0x%x\n", i, pid, st);
	return -1;
}

/* Collects workers that exited on their own (only fault-injected deaths may). */
static int reap_exited(struct st_run *s, int respawn)
{
	int st, pid;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		int i = 0;
		while (i < s->procs && s->ctl->w[i].pid != pid)
			i++;
		if (i == s->procs)
			continue;   /* a helper of ours, waited for elsewhere */
		if (collected(s, i, pid, st) < 0)
			return -1;
		if (respawn)
			spawn_worker(s, i, 0), s->respawns++;
	}
	return 0;
}

static void kill_one(struct st_run *s)
{
	int i = (int)((unsigned)rand_r(&s->seed) % (unsigned)s->procs);
	int pid = s->ctl->w[i].pid;
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	t_wait(pid);
	s->ctl->w[i].pid = 0;
	s->kills++;
	/* A quarter of the replacements die inside the region lock by themselves. */
	int die = (unsigned)rand_r(&s->seed) % 4 == 0 ? 1 + (int)((unsigned)rand_r(&s->seed) % 40) : 0;
	spawn_worker(s, i, die);
	s->respawns++;
}

/*
 * Damages the region under the live workers: whole-file and header events
 * (zeroed, wrong magic or version, garbage totals) and garbage in one slot.
 * Truncation is not among them: shrinking a file that processes have mapped
 * makes the kernel raise SIGBUS in them, whatever the library does (README).
 */
static void corrupt(struct st_run *s)
{
	struct vgpu_region *r = t_region();
	unsigned v = (unsigned)rand_r(&s->seed) % 7;
	switch (v) {
	case 0: memset(&r->hdr, 0, sizeof(r->hdr)); break;
	case 1: memset(r, 0, sizeof(*r)); break;
	case 2: __atomic_store_n(&r->hdr.magic, UINT64_C(0x1234), __ATOMIC_RELAXED); break;
	case 3: __atomic_store_n(&r->hdr.version, 7u, __ATOMIC_RELAXED); break;
	case 4: __atomic_store_n(&r->hdr.mem_used[0], (uint64_t)rand_r(&s->seed) << 8, __ATOMIC_RELAXED); break;
	case 5: __atomic_store_n(&r->hdr.mem_used[0], 0, __ATOMIC_RELAXED); break;
	default: {
		uint32_t hwm = r->hdr.slot_hwm > 0 && r->hdr.slot_hwm <= VGPU_MAX_PROCS ? r->hdr.slot_hwm : 1;
		memset(&r->slots[(unsigned)rand_r(&s->seed) % hwm], 0xA5, sizeof(r->slots[0]));
	}
	}
	s->corruptions++;
}

/* Waits until the header is valid again; records how long the repair took. */
static int await_repair(struct st_run *s, uint64_t since)
{
	struct vgpu_region *r = t_region();
	while (__atomic_load_n(&r->hdr.magic, __ATOMIC_ACQUIRE) != VGPU_REGION_MAGIC ||
	       __atomic_load_n(&r->hdr.version, __ATOMIC_RELAXED) != VGPU_REGION_VERSION) {
		if (now_ns() - since > s->deadline_ns) {
			fprintf(stderr, "FAIL the region was not repaired within the deadline\n");
			return -1;
		}
		if (watchdog(s) != 0)
			return -1;
		sleep_ms(2);
	}
	uint64_t d = now_ns() - since;
	s->repaired++;
	if (d > s->max_repair_ns)
		s->max_repair_ns = d;
	return 0;
}

/*
 * 1 if worker i is gone by a fault-injected death (SIGKILL inside the
 * region lock; it is collected), 0 if it still runs, -1 (the run failed) if
 * it exited any other way.
 */
static int worker_died(struct st_run *s, int i)
{
	int st, pid = s->ctl->w[i].pid;
	if (pid <= 0 || waitpid(pid, &st, WNOHANG) != pid)
		return 0;
	if (collected(s, i, pid, st) < 0) {
		s->failed = 1;
		return -1;
	}
	fprintf(stderr, "worker %d (pid %d) died inside the region lock before holding still\n", i, pid);
	return 1;
}

/*
 * Everyone holds still; the books must match what the live workers hold. A
 * replacement set to die inside the region lock may do so in the call it
 * finishes before holding still: it holds nothing then, and libvgpu must
 * give its memory back to the fresh process (before, the parent waited for
 * the dead worker's acknowledgement until the watchdog failed the case).
 */
static void check_hold(struct st_run *s)
{
	__atomic_store_n(&s->ctl->phase, PH_HOLD, __ATOMIC_RELEASE);
	uint64_t start = now_ns(), held = 0;
	for (int i = 0; i < s->procs; i++) {
		struct st_worker *w = &s->ctl->w[i];
		int died = 0;
		for (int t = 0; t < w->threads && !died; t++)
			while (!__atomic_load_n(&w->th[t].acked, __ATOMIC_ACQUIRE)) {
				if ((died = worker_died(s, i)) != 0)
					break;
				if (now_ns() - start > s->deadline_ns || watchdog(s) != 0) {
					fprintf(stderr, "FAIL worker %d thread %d never held still\n", i, t);
					s->failed = 1;
					return;
				}
				sleep_ms(2);
			}
		if (died < 0)
			return;
		if (died)
			continue;
		for (int t = 0; t < w->threads; t++)
			held += __atomic_load_n(&w->th[t].held, __ATOMIC_RELAXED);
	}
	/* A fresh process gets exactly what the live ones leave. */
	char fill[64];
	snprintf(fill, sizeof(fill), "VGPU_TEST_FILL=%llu", (unsigned long long)(s->limit - held));
	const char *env[] = {fill, NULL};
	CHECK_EQ(t_wait(t_spawn("stress_fill", env, -1)), 0);
	STUB(vgpuStubObserverReap)();
	CHECK_EQ(s->obs->live[0], held);
	CHECK_EQ(t_region()->hdr.mem_used[0], held);
}

static void summary(struct st_run *s, const char *name, int secs)
{
	uint64_t att = 0, ok = 0, oom = 0, frees = 0, err = 0, max_call = 0;
	int threads = 0;
	for (int i = 0; i < s->procs; i++)
		for (int t = 0; t < s->ctl->w[i].threads; t++) {
			struct st_thread *th = &s->ctl->w[i].th[t];
			att += th->attempted, ok += th->ok, oom += th->oom, frees += th->frees;
			err += th->errors;
			max_call = th->max_call_ns > max_call ? th->max_call_ns : max_call;
			threads++;
			if (th->errors != 0)
				fprintf(stderr, "FAIL worker %d thread %d: %llu unexpected results, first %d\n",
					i, t, (unsigned long long)th->errors, th->first_error);
		}
	CHECK_EQ(err, 0);
	CHECK(oom > 0, "the workload never reached the limit: the case proves nothing");
	CHECK(ok > 0, "no allocation succeeded");
	CHECK(s->obs->hwm[0] <= s->limit, "observed %llu bytes live, limit %llu",
	      (unsigned long long)s->obs->hwm[0], (unsigned long long)s->limit);
	fprintf(stderr,
		"%s: procs=%d threads=%d secs=%d attempted=%llu ok=%llu oom=%llu frees=%llu "
		"kills=%llu died_in_lock=%llu respawns=%llu corruptions=%llu repaired=%llu "
		"max_repair_ms=%.1f max_call_ms=%.1f limit=%llu observed_max=%llu violations=%llu "
		"reaped_dead=%llu\n",
		name, s->procs, threads, secs, (unsigned long long)att, (unsigned long long)ok,
		(unsigned long long)oom, (unsigned long long)frees, (unsigned long long)s->kills,
		(unsigned long long)s->died_in_lock, (unsigned long long)s->respawns,
		(unsigned long long)s->corruptions, (unsigned long long)s->repaired,
		(double)s->max_repair_ns / 1e6, (double)max_call / 1e6,
		(unsigned long long)s->limit, (unsigned long long)s->obs->hwm[0],
		(unsigned long long)s->obs->violations, (unsigned long long)s->obs->reaped);
}

/* Whether any worker thread has been refused for the limit yet. */
static int oom_seen(struct st_run *s)
{
	for (int i = 0; i < s->procs; i++)
		for (int t = 0; t < s->ctl->w[i].threads; t++)
			if (__atomic_load_n(&s->ctl->w[i].th[t].oom, __ATOMIC_RELAXED) > 0)
				return 1;
	return 0;
}

static int stress_run(const char *name, int kills, int corruption)
{
	struct st_run s = {0};
	int secs = (int)env_long("VGPU_TEST_STRESS_SECS", 3, 1, 3600);
	s.procs = (int)env_long("VGPU_TEST_STRESS_PROCS", 8, 1, ST_WORKERS);
	s.deadline_ns = (uint64_t)env_long("VGPU_TEST_DEADLINE_S", 60, 1, 3600) * 1000000000u;
	s.limit = limit_bytes();
	s.slow = (unsigned)env_long("VGPU_TEST_SLOW", 1, 1, 100);
	s.seed = (unsigned)getpid();
	s.ctl = ctl_map(1);
	s.obs = STUB(vgpuStubObserver)();
	if (s.ctl == NULL || s.obs == NULL || s.limit == 0 ||
	    getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE") == NULL) {
		fprintf(stderr, "FAIL stress needs a control file, VGPU_STUB_OBSERVER, a limit and a region\n");
		return 1;
	}
	s.ctl->phase = PH_RUN;
	for (int i = 0; i < s.procs; i++) {
		s.ctl->w[i].threads = i % 4 == 3 ? ST_THREADS : 1;
		spawn_worker(&s, i, 0);
	}
	/* The parent stays out of libvgpu; the workers create the region. */
	for (uint64_t t0 = now_ns(); t_region() == NULL; sleep_ms(2))
		if (now_ns() - t0 > s.deadline_ns || watchdog(&s) != 0) {
			fprintf(stderr, "FAIL the workers never created the region\n");
			kill_all(&s);
			return 1;
		}
	uint64_t end = now_ns() + (uint64_t)secs * 1000000000u;
	uint64_t next_kill = now_ns(), next_corrupt = now_ns() + 200000000u;
	/* The verdict needs the workload to have hit the limit: on a loaded
	 * machine (valgrind beside other work) that can take longer than secs,
	 * so the run goes on until it has, up to the deadline past secs. */
	while (now_ns() < end || (!oom_seen(&s) && now_ns() < end + s.deadline_ns)) {
		sleep_ms(5);
		if (watchdog(&s) != 0 || reap_exited(&s, 1) != 0) {
			s.failed = 1;
			break;
		}
		if (kills && now_ns() >= next_kill) {
			kill_one(&s);
			next_kill = now_ns() + (uint64_t)(20 + (unsigned)rand_r(&s.seed) % 130) * s.slow * 1000000u;
		}
		if (corruption && now_ns() >= next_corrupt) {
			uint64_t at = now_ns();
			corrupt(&s);
			if (await_repair(&s, at) != 0) {
				s.failed = 1;
				break;
			}
			next_corrupt = now_ns() + (uint64_t)(150 + (unsigned)rand_r(&s.seed) % 250) * s.slow * 1000000u;
		}
	}
	if (!s.failed && reap_exited(&s, 1) == 0)
		check_hold(&s);
	__atomic_store_n(&s.ctl->phase, PH_STOP, __ATOMIC_RELEASE);
	uint64_t stop = now_ns();
	for (int i = 0; i < s.procs && !s.failed; i++) {
		int st = 0, pid = s.ctl->w[i].pid;
		while (pid > 0 && waitpid(pid, &st, WNOHANG) == 0) {
			if (now_ns() - stop > s.deadline_ns || watchdog(&s) != 0) {
				fprintf(stderr, "FAIL worker %d (pid %d) did not exit\n", i, pid);
				s.failed = 1;
				break;
			}
			sleep_ms(2);
		}
		if (pid > 0 && !s.failed) {
			s.ctl->w[i].pid = 0;
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d exit status 0x%x", i, st);
		}
	}
	if (s.failed) {
		kill_all(&s);
		t_failed = 1;
	} else {
		/* Dead or alive, every worker is gone: a newcomer gets the whole limit. */
		char fill[64];
		snprintf(fill, sizeof(fill), "VGPU_TEST_FILL=%llu", (unsigned long long)s.limit);
		const char *env[] = {fill, NULL};
		CHECK_EQ(t_wait(t_spawn("stress_fill", env, -1)), 0);
		CHECK_EQ(t_region()->hdr.mem_used[0], 0);
		CHECK_EQ(t_region()->hdr.live_procs, 0);
		STUB(vgpuStubObserverReap)();
		CHECK_EQ(s.obs->live[0], 0);
	}
	summary(&s, name, secs);
	return 0;
}

static int stress_mp(void) { return stress_run("stress_mp", 0, 0); }
static int stress_kill(void) { return stress_run("stress_kill", 1, 0); }
static int stress_corrupt(void) { return stress_run("stress_corrupt", 1, 1); }

const struct t_case t_stress_cases[] = {
	{"stress_mp", stress_mp},
	{"stress_kill", stress_kill},
	{"stress_corrupt", stress_corrupt},
	{"stress_worker", stress_worker},
	{"stress_fill", stress_fill},
	{NULL, NULL},
};
