/*
 * t_prio.c - task priority (CUDA_TASK_PRIORITY): a low-priority process
 * yields the card while a high-priority one on it is launching.
 *
 * The stub runs with VGPU_STUB_TIMESLICE=1 and a shared state: kernels of all
 * processes on device 0 queue on one timeline, as on a GPU without MPS, so a
 * neighbour that keeps launching really takes device time. Each worker
 * process launches 1 ms kernels in a loop (8 ms under valgrind and
 * ThreadSanitizer, whose slowdown must stay small next to the kernel) and
 * counts completed launches in a shared file. Throughput is launches per
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
 */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 4

/* Shared with the workers: a stop flag and a launch count per worker. */
struct board {
	uint64_t stop[WORKERS];
	uint64_t launches[WORKERS];
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

static bool slow_mode(void)
{
	const char *slow = getenv("VGPU_TEST_SLOW"), *timing = getenv("VGPU_TEST_TIMING");
	return (slow != NULL && atoi(slow) > 1) || (timing != NULL && strcmp(timing, "0") == 0);
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
	unsigned grid = (slow_mode() ? 32u : 4u) * (unsigned)sm;   /* waves of 250 us */
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
	/* The relay (peer mode). */
	pthread_t relay;
	int relay_stop;
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

/* Launch rates (per second) of workers a and b over one measuring window. */
static void measure(struct run *r, int a, int b, double *ra, double *rb)
{
	sleep_ms(r->settle_ms);
	uint64_t a0 = __atomic_load_n(&r->b->launches[a], __ATOMIC_ACQUIRE);
	uint64_t b0 = b >= 0 ? __atomic_load_n(&r->b->launches[b], __ATOMIC_ACQUIRE) : 0;
	uint64_t t0 = mono_ns();
	sleep_ms(r->measure_ms);
	uint64_t a1 = __atomic_load_n(&r->b->launches[a], __ATOMIC_ACQUIRE);
	uint64_t b1 = b >= 0 ? __atomic_load_n(&r->b->launches[b], __ATOMIC_ACQUIRE) : 0;
	double secs = (double)(mono_ns() - t0) / 1e9;
	*ra = (double)(a1 - a0) / secs;
	if (rb != NULL)
		*rb = (double)(b1 - b0) / secs;
}

static struct vgpu_region *map_region(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	void *m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/*
 * The node agent's part, played by the parent: the newest high-priority
 * stamp of the other workers' regions goes into each region's peer_high_ns.
 */
static void *relay_main(void *arg)
{
	struct run *r = arg;
	struct vgpu_region *reg[WORKERS] = {0};
	while (!__atomic_load_n(&r->relay_stop, __ATOMIC_ACQUIRE)) {
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
	return NULL;
}

enum { L = 0, H = 1, H2 = 2, C = 3 };

static int prio_run(bool peer)
{
	t_watchdog(220);
	struct run r = {.b = map_board(), .peer = peer};
	if (r.b == NULL) {
		CHECK(r.b != NULL, "cannot map the board");
		return 1;
	}
	bool slow = slow_mode();
	r.settle_ms = slow ? 1500 : 400;    /* > the 200 ms priority window */
	r.measure_ms = slow ? 3000 : 1000;
	if (peer)
		pthread_create(&r.relay, NULL, relay_main, &r);

	double l_alone, h_with_l, l_with_h, l_after, h_alone, h_with_c, c_with_h;
	spawn_worker(&r, L, 1);
	measure(&r, L, -1, &l_alone, NULL);
	spawn_worker(&r, H, 0);
	measure(&r, H, L, &h_with_l, &l_with_h);
	kill(r.pid[H], SIGKILL);
	CHECK_EQ(t_wait(r.pid[H]), 128 + SIGKILL);
	measure(&r, L, -1, &l_after, NULL);
	CHECK_EQ(stop_worker(&r, L), 0);
	spawn_worker(&r, H2, 0);
	measure(&r, H2, -1, &h_alone, NULL);
	spawn_worker(&r, C, 0);
	measure(&r, H2, C, &h_with_c, &c_with_h);
	CHECK_EQ(stop_worker(&r, C), 0);
	CHECK_EQ(stop_worker(&r, H2), 0);
	if (peer) {
		__atomic_store_n(&r.relay_stop, 1, __ATOMIC_RELEASE);
		pthread_join(r.relay, NULL);
	}

	printf("prio: launches/s: L alone %.1f; H %.1f with L %.1f; L after H died %.1f; "
	       "H alone %.1f; H %.1f with C %.1f\n",
	       l_alone, h_with_l, l_with_h, l_after, h_alone, h_with_c, c_with_h);
	printf("prio: ratios: H with L / H alone %.3f; L with H / L alone %.3f; "
	       "L after / L alone %.3f; H with C / H alone %.3f\n",
	       h_with_l / h_alone, l_with_h / l_alone, l_after / l_alone, h_with_c / h_alone);
	CHECK(l_alone > 0 && h_alone > 0, "no launches: L %.1f/s, H %.1f/s", l_alone, h_alone);
	CHECK(h_with_l >= 0.9 * h_alone && h_with_l <= 1.1 * h_alone,
	      "high priority next to low: %.1f/s, alone %.1f/s (want within 10 %%)", h_with_l,
	      h_alone);
	CHECK(l_with_h < 0.25 * l_alone, "low priority next to high: %.1f/s, alone %.1f/s", l_with_h,
	      l_alone);
	CHECK(l_after >= 0.9 * l_alone, "low priority after the high one died: %.1f/s, alone %.1f/s",
	      l_after, l_alone);
	CHECK(h_with_c < 0.7 * h_alone, "control: two equal priorities did not share the device: "
	      "%.1f/s, alone %.1f/s", h_with_c, h_alone);
	CHECK(c_with_h > 0.3 * h_alone, "control: an equal priority starved: %.1f/s, alone %.1f/s",
	      c_with_h, h_alone);
	munmap(r.b, sizeof(*r.b));
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
