/*
 * t_prio.c - task priority (CUDA_TASK_PRIORITY): a low-priority process
 * yields the card while a high-priority one on it is launching.
 *
 * The stub runs with VGPU_STUB_TIMESLICE=1 and a shared state: kernels of all
 * processes on device 0 queue on one timeline, as on a GPU without MPS, so a
 * neighbour that keeps launching really takes device time. Each worker
 * process launches 8 ms kernels in a loop and counts completed launches in a
 * shared file. A launch blocks only once 64 ms of work are queued
 * (VGPU_STUB_MAX_QUEUE_NS), so a worker stays device-bound, not CPU-bound,
 * on a loaded 2-core machine and under valgrind and ThreadSanitizer: the
 * rates measure the device time each one gets. Throughput is launches per
 * second measured by the parent, and every verdict is a ratio of two such
 * rates measured in this run:
 *
 *   1. L (priority 1) alone                      -> l_alone
 *   2. H (priority 0) joins                      -> h_with_l, l_with_h
 *   3. H is killed (SIGKILL: a stale high task)  -> l_after
 *   4. L stops; H2 (priority 0) alone            -> h_alone
 *   5. C (priority 0) joins H2                   -> h_with_c   (control)
 *
 * H keeps its rate next to L (h_with_l / h_alone within 10 %), L is held
 * while H runs (l_with_h / l_alone < 0.25) and gets its rate back once H is
 * gone (l_after / l_alone >= 0.9). The control shows the device is really
 * contended, so the first verdict cannot pass by itself: two equal-priority
 * processes share it (h_with_c / h_alone < 0.7) and neither starves.
 *
 * prio_yield runs H and L in one container (one region). prio_yield_peer
 * gives each its own region, as two containers have, and the parent plays
 * the node agent: every 20 ms it copies H's region's high-priority stamp into
 * L's peer_high_ns (vgpu-device-plugin/monitor/priority.go does this on a
 * node).
 *
 * On a loaded machine a worker may not run for longer than its queue lasts;
 * then the rates measure the machine, not priority. The stub records how
 * long each process had nothing queued (vgpuStubDryNs); a window in which a
 * worker that should be busy ran dry for over 5 % of it is void, and the
 * scenario is measured again, up to 3 times. The held worker is never
 * required to be busy, so a gate that holds too long still fails.
 *
 * The rate verdicts above are judged in run.sh's normal mode only, with the
 * machine to itself; the stub's device time makes them exact there (every
 * rate 125/s or 62.5/s, every ratio 0, 0.5 or 1). Under ASan+UBSan, TSan
 * and valgrind (VGPU_TEST_TIMING=0, t_timing) the same five phases run with
 * short windows and no rate verdict, next to other cases: what they look
 * for there is memory errors, races and leaks in the gate, the stamps and
 * the relay, across the workers' starts and the SIGKILL. What is still
 * judged needs no quiet machine: every worker that should launch does
 * (L alone, H next to L, L once the killed H's stamp is stale, H2 and C
 * side by side), so a gate that holds for good still fails there.
 */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 4

/* Shared with the workers and the relay: stop flags and a launch count per worker. */
struct board {
	uint64_t stop[WORKERS];
	uint64_t launches[WORKERS];
	uint64_t relay_stop;
};

static struct board *map_board(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/prio.board", t_dir());
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct board)) != 0)
		return NULL;
	void *m = mmap(NULL, sizeof(struct board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Worker: PRIO_WORKER=<i>; launches until board->stop[i]. */
static int child_prio_worker(void)
{
	struct board *b = map_board();
	const char *w = getenv("PRIO_WORKER");
	int i = w ? atoi(w) : -1;
	if (b == NULL || i < 0 || i >= WORKERS)
		return 3;
	t_ctx(0);
	int sm = 0;
	CU(cuDeviceGetAttribute)(&sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
	unsigned grid = 32u * (unsigned)sm;     /* 32 waves of 250 us: 8 ms */
	__typeof__(&cuLaunchKernel) lk = CU(cuLaunchKernel);
	t_ready();      /* before the first launch, which may be held */
	while (!__atomic_load_n(&b->stop[i], __ATOMIC_ACQUIRE)) {
		CUresult r = lk((CUfunction)1, grid, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL);
		if (r != CUDA_SUCCESS) {
			CHECK_EQ(r, CUDA_SUCCESS);
			return 1;
		}
		__atomic_fetch_add(&b->launches[i], 1, __ATOMIC_RELEASE);
	}
	return 0;
}

struct run {
	struct board *b;
	bool peer;                  /* one region per worker, the parent relays */
	unsigned settle_ms, measure_ms;
	int pid[WORKERS];
	/* The relay (peer mode): a process of its own, as the agent is. */
	pid_t relay;
};

static int spawn_worker(struct run *r, int i, int prio)
{
	static char env[WORKERS][3][600];
	snprintf(env[i][0], sizeof(env[i][0]), "PRIO_WORKER=%d", i);
	snprintf(env[i][1], sizeof(env[i][1]), "CUDA_TASK_PRIORITY=%d", prio);
	/* Peer mode: worker i is a container of its own (region w<i>.cache). */
	snprintf(env[i][2], sizeof(env[i][2]), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/w%d.cache",
		 t_dir(), i);
	const char *const list[] = {env[i][0], env[i][1], r->peer ? env[i][2] : NULL, NULL};
	__atomic_store_n(&r->b->stop[i], 0, __ATOMIC_RELEASE);
	r->pid[i] = t_spawn_ready("child_prio_worker", list);
	CHECK(r->pid[i] > 0, "worker %d did not start", i);
	return r->pid[i];
}

static int stop_worker(struct run *r, int i)
{
	__atomic_store_n(&r->b->stop[i], 1, __ATOMIC_RELEASE);
	int rc = t_wait(r->pid[i]);
	r->pid[i] = 0;
	return rc;
}

/* The stub's dry time of worker i (its queue was empty before a launch). */
static uint64_t dry(const struct run *r, int i)
{
	return r->pid[i] > 0 ? STUB(vgpuStubDryNs)(0, r->pid[i]) : 0;
}

/*
 * Launch rates (per second) of workers a and b (b < 0: none) over one
 * measuring window. The window is valid only if every worker in `busy` kept
 * work queued throughout (dry for at most 5 % of it): a worker the loaded
 * machine did not run for longer than its 64 ms queue measures the machine,
 * not priority. Says why and returns false otherwise.
 */
static bool measure(struct run *r, int a, int b, double *ra, double *rb, unsigned busy)
{
	sleep_ms(r->settle_ms);
	uint64_t d0[WORKERS];
	for (int i = 0; i < WORKERS; i++)
		d0[i] = dry(r, i);
	uint64_t a0 = __atomic_load_n(&r->b->launches[a], __ATOMIC_ACQUIRE);
	uint64_t b0 = b >= 0 ? __atomic_load_n(&r->b->launches[b], __ATOMIC_ACQUIRE) : 0;
	uint64_t t0 = mono_ns();
	sleep_ms(r->measure_ms);
	uint64_t a1 = __atomic_load_n(&r->b->launches[a], __ATOMIC_ACQUIRE);
	uint64_t b1 = b >= 0 ? __atomic_load_n(&r->b->launches[b], __ATOMIC_ACQUIRE) : 0;
	uint64_t span = mono_ns() - t0;
	double secs = (double)span / 1e9;
	*ra = (double)(a1 - a0) / secs;
	if (rb != NULL)
		*rb = (double)(b1 - b0) / secs;
	bool valid = true;
	/* Without a rate verdict (t_timing), a dry worker voids nothing. */
	for (int i = 0; i < WORKERS && t_timing(); i++) {
		uint64_t d = dry(r, i) - d0[i];
		if ((busy & (1u << i)) && d > span / 20) {
			printf("prio: worker %d had nothing queued for %.0f ms of the %.0f ms window "
			       "(the machine did not run it): the window is void\n",
			       i, (double)d / 1e6, (double)span / 1e6);
			valid = false;
		}
	}
	return valid;
}

/*
 * The worker's region once the library has sized it: a file still being
 * created is shorter, and touching a mapping past its end raises SIGBUS.
 */
static struct vgpu_region *map_region(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)VGPU_REGION_SIZE) {
		close(fd);
		return NULL;
	}
	void *m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/*
 * The node agent's part, played by a child process: the newest high-priority
 * stamp of the other workers' regions goes into each region's peer_high_ns.
 * A process rather than a thread of the parent: the parent forks the
 * workers, and a fork while another thread holds a lock (the sanitizers'
 * allocator lock, taken by the relay's own calls) leaves the child that lock
 * held forever.
 */
static void relay_main(struct run *r)
{
	struct vgpu_region *reg[WORKERS] = {0};
	while (!__atomic_load_n(&r->b->relay_stop, __ATOMIC_ACQUIRE)) {
		for (int i = 0; i < WORKERS; i++) {
			if (reg[i] == NULL) {
				char path[512];
				snprintf(path, sizeof(path), "%s/w%d.cache", t_dir(), i);
				reg[i] = map_region(path);
			}
		}
		for (int i = 0; i < WORKERS; i++) {
			if (reg[i] == NULL)
				continue;
			uint64_t newest = 0;
			for (int j = 0; j < WORKERS; j++) {
				if (j == i || reg[j] == NULL)
					continue;
				uint64_t s = __atomic_load_n(&reg[j]->hdr.prio_launch_ns[VGPU_PRIO_HIGH][0],
							     __ATOMIC_RELAXED);
				newest = s > newest ? s : newest;
			}
			if (newest > __atomic_load_n(&reg[i]->hdr.peer_high_ns[0], __ATOMIC_RELAXED))
				__atomic_store_n(&reg[i]->hdr.peer_high_ns[0], newest, __ATOMIC_RELAXED);
		}
		sleep_ms(20);
	}
	for (int i = 0; i < WORKERS; i++)
		if (reg[i] != NULL)
			munmap(reg[i], VGPU_REGION_SIZE);
}

enum { L = 0, H = 1, H2 = 2, C = 3 };
#define BIT(i) (1u << (i))

struct rates {
	double l_alone, h_with_l, l_with_h, l_after, h_alone, h_with_c, c_with_h;
};

static void stop_all(struct run *r)
{
	for (int i = 0; i < WORKERS; i++)
		if (r->pid[i] > 0) {
			kill(r->pid[i], SIGKILL);
			t_wait(r->pid[i]);
			r->pid[i] = 0;
		}
}

/* One run of the five phases; false if a window was void. */
static bool scenario(struct run *r, struct rates *x)
{
	bool ok = true;
	spawn_worker(r, L, 1);
	ok = ok && measure(r, L, -1, &x->l_alone, NULL, BIT(L));
	spawn_worker(r, H, 0);
	ok = ok && measure(r, H, L, &x->h_with_l, &x->l_with_h, BIT(H));
	kill(r->pid[H], SIGKILL);
	CHECK_EQ(t_wait(r->pid[H]), 128 + SIGKILL);
	r->pid[H] = 0;
	ok = ok && measure(r, L, -1, &x->l_after, NULL, BIT(L));
	CHECK_EQ(stop_worker(r, L), 0);
	spawn_worker(r, H2, 0);
	ok = ok && measure(r, H2, -1, &x->h_alone, NULL, BIT(H2));
	spawn_worker(r, C, 0);
	ok = ok && measure(r, H2, C, &x->h_with_c, &x->c_with_h, BIT(H2) | BIT(C));
	if (ok) {
		CHECK_EQ(stop_worker(r, C), 0);
		CHECK_EQ(stop_worker(r, H2), 0);
	}
	stop_all(r);
	return ok;
}

/* Attempts at a scenario whose windows are all valid (see measure). */
#define ATTEMPTS 3

static int prio_run(bool peer)
{
	t_watchdog(230);
	struct run r = {.b = map_board(), .peer = peer};
	if (r.b == NULL) {
		CHECK(r.b != NULL, "cannot map the board");
		return 1;
	}
	/*
	 * Settling covers the 200 ms priority window and 64 ms of queued work.
	 * Without timing verdicts a window needs only launches in it.
	 */
	r.settle_ms = t_timing() ? 500 : 400;
	r.measure_ms = t_timing() ? 2000 : 600;
	if (peer) {
		__atomic_store_n(&r.b->relay_stop, 0, __ATOMIC_RELEASE);
		fflush(NULL);
		r.relay = fork();
		if (r.relay == 0) {
			relay_main(&r);
			_exit(0);
		}
		CHECK(r.relay > 0, "cannot start the relay: %s", strerror(errno));
	}
	struct rates x = {0};
	bool valid = false;
	for (int attempt = 1; attempt <= ATTEMPTS && !valid; attempt++) {
		valid = scenario(&r, &x);
		if (!valid)
			printf("prio: attempt %d void, measuring again\n", attempt);
	}
	if (peer && r.relay > 0) {
		__atomic_store_n(&r.b->relay_stop, 1, __ATOMIC_RELEASE);
		CHECK_EQ(t_wait(r.relay), 0);
	}
	munmap(r.b, sizeof(*r.b));
	CHECK(valid, "in %d attempts a worker that should have been busy ran dry (lines above): "
	      "the machine did not run it, or priority held it when nothing should", ATTEMPTS);
	if (!valid)
		return 0;

	printf("prio: launches/s: L alone %.1f; H %.1f with L %.1f; L after H died %.1f; "
	       "H alone %.1f; H %.1f with C %.1f\n",
	       x.l_alone, x.h_with_l, x.l_with_h, x.l_after, x.h_alone, x.h_with_c, x.c_with_h);
	printf("prio: ratios: H with L / H alone %.3f; L with H / L alone %.3f; "
	       "L after / L alone %.3f; H with C / H alone %.3f\n",
	       x.h_with_l / x.h_alone, x.l_with_h / x.l_alone, x.l_after / x.l_alone,
	       x.h_with_c / x.h_alone);
	CHECK(x.l_alone > 0 && x.h_alone > 0, "no launches: L %.1f/s, H %.1f/s", x.l_alone, x.h_alone);
	CHECK(x.h_with_l > 0, "high priority next to low: no launches");
	CHECK(x.l_after > 0, "low priority after the high one died: no launches (held by a stale stamp)");
	CHECK(x.h_with_c > 0 && x.c_with_h > 0, "two equal priorities: %.1f/s and %.1f/s",
	      x.h_with_c, x.c_with_h);
	if (!t_timing())
		return 0;
	CHECK(x.h_with_l >= 0.9 * x.h_alone && x.h_with_l <= 1.1 * x.h_alone,
	      "high priority next to low: %.1f/s, alone %.1f/s (want within 10 %%)", x.h_with_l,
	      x.h_alone);
	CHECK(x.l_with_h < 0.25 * x.l_alone, "low priority next to high: %.1f/s, alone %.1f/s",
	      x.l_with_h, x.l_alone);
	CHECK(x.l_after >= 0.9 * x.l_alone,
	      "low priority after the high one died: %.1f/s, alone %.1f/s", x.l_after, x.l_alone);
	CHECK(x.h_with_c < 0.7 * x.h_alone,
	      "control: two equal priorities did not share the device: %.1f/s, alone %.1f/s",
	      x.h_with_c, x.h_alone);
	CHECK(x.c_with_h > 0.3 * x.h_alone, "control: an equal priority starved: %.1f/s, alone %.1f/s",
	      x.c_with_h, x.h_alone);
	return 0;
}

static int prio_yield(void) { return prio_run(false); }
static int prio_yield_peer(void) { return prio_run(true); }

/* A bad CUDA_TASK_PRIORITY is said once and runs as low priority (fail closed). */
static int child_prio_bad(void)
{
	t_ctx(0);
	struct vgpu_region *r = t_region();
	CHECK(r != NULL, "no region");
	if (r != NULL) {
		struct vgpu_proc_slot *s = t_slot_of(r, getpid());
		CHECK(s != NULL, "no slot");
		if (s != NULL)
			CHECK_EQ(s->priority, VGPU_PRIO_LOW);
	}
	return 0;
}

static int prio_invalid(void)
{
	static const char *const values[] = {"2", "-1", "high", "0x0", "00", " 0"};
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char kv[64];
		snprintf(kv, sizeof(kv), "CUDA_TASK_PRIORITY=%s", values[i]);
		const char *const env[] = {kv, NULL};
		int rc;
		const char *err = t_child_stderr("child_prio_bad", env, &rc);
		CHECK_EQ(rc, 0);
		char want[128];
		snprintf(want, sizeof(want), "CUDA_TASK_PRIORITY=\"%s\" invalid: want 0 (high) or 1 (low)",
			 values[i]);
		CHECK(t_count(err, want) == 1, "%s: stderr:\n%s", want, err);
		CHECK(t_count(err, "running as 1 (low)") == 1, "%s: stderr:\n%s", values[i], err);
	}
	return 0;
}

const struct t_case t_prio_cases[] = {
	{"prio_yield", prio_yield},
	{"prio_yield_peer", prio_yield_peer},
	{"child_prio_worker", child_prio_worker},
	{"prio_invalid", prio_invalid},
	{"child_prio_bad", child_prio_bad},
	{NULL, NULL},
};
