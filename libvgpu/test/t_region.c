/* t_region.c - the shared region across processes: sharing, death, scale (damage: t_corrupt.c). */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Child: allocate 64 MiB chunks until refused, report the count, hold until told. */
static int child_mp(void)
{
	t_ctx(0);
	CUdeviceptr p;
	int n = 0;
	while (CU(cuMemAlloc_v2)(&p, 64 * MiB) == CUDA_SUCCESS)
		n++;
	char c = (char)n;
	if (write(20, &c, 1) != 1 || read(21, &c, 1) < 0)
		return 1;
	return 0;
}

/* Four processes share one 1 GiB limit (contexts cost nothing here). */
static int multiproc(void)
{
	int up[2], down[2];
	int pids[4], total = 0;
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return 1;
	dup2(up[1], 20);     /* the children's report channel */
	dup2(down[0], 21);   /* closed by the parent to release them */
	close(up[1]);
	close(down[0]);
	for (int i = 0; i < 4; i++)
		pids[i] = t_spawn("child_mp", NULL, -1);
	for (int i = 0; i < 4; i++) {
		char c;
		CHECK(read(up[0], &c, 1) == 1, "child report");
		total += c;
	}
	struct vgpu_region *r = t_region();
	CHECK_EQ(total, 16);    /* 16 x 64 MiB = 1 GiB, never more */
	CHECK_EQ(r->hdr.mem_used[0], 1 * GiB);
	CHECK_EQ(r->hdr.live_procs, 4);
	close(down[1]);
	close(21);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(t_wait(pids[i]), 0);
	/* Normal exit gives the slots back at once. */
	CHECK_EQ(r->hdr.mem_used[0], 0);
	CHECK_EQ(r->hdr.live_procs, 0);
	return 0;
}

/* Child: hold 700 MiB and report, then wait to be killed. */
static int child_hold(void)
{
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 700 * MiB), CUDA_SUCCESS);
	char c = 1;
	if (write(20, &c, 1) != 1)
		return 1;
	pause();
	return 0;
}

/* A SIGKILLed process's usage is reclaimed when the survivors need it. */
static int reclaim_sigkill(void)
{
	int up[2];
	if (pipe2(up, O_CLOEXEC))
		return 1;
	dup2(up[1], 20);
	close(up[1]);
	int pid = t_spawn("child_hold", NULL, -1);
	char c;
	CHECK(read(up[0], &c, 1) == 1, "child ready");
	struct vgpu_region *r = t_region();
	CHECK(t_slot_of(r, pid) != NULL, "child slot");
	kill(pid, SIGKILL);
	CHECK_EQ(t_wait(pid), 128 + SIGKILL);
	CHECK(r->hdr.mem_used[0] >= 700 * MiB, "dead usage still counted until needed");
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 700 * MiB), CUDA_SUCCESS);
	CHECK(t_slot_of(r, pid) == NULL, "dead slot reclaimed");
	CHECK_EQ(r->hdr.mem_used[0], 700 * MiB + 64 * MiB);
	CHECK_EQ(r->hdr.live_procs, 1);
	return 0;
}

/* Child: its first charge SIGKILLs it inside the region lock, update half done. */
static int child_die_locked(void)
{
	t_ctx(0);
	CUdeviceptr p;
	CU(cuMemAlloc_v2)(&p, 100 * MiB);
	return 1;   /* not reached: LIBVGPU_TEST_DIE_IN_LOCK=1 */
}

/*
 * A process dies inside the region lock, its slot updated and the header
 * total not: the next process takes the lock over within the deadline and
 * the totals come out right (the dead process's charge is gone).
 */
static int lock_owner_death(void)
{
	static const char *die[] = {"LIBVGPU_TEST_DIE_IN_LOCK=1", NULL};
	t_watchdog(120);
	/* Before this process registers, nobody alive can take the lock over. */
	CHECK_EQ(t_wait(t_spawn("child_die_locked", die, -1)), 128 + SIGKILL);
	struct vgpu_region *r = t_region();
	CHECK(r != NULL && (r->hdr.lock.word & 0x7ffu) != 0, "the child did not die holding the lock");
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 100 * MiB), CUDA_SUCCESS);
	CHECK_EQ(r->hdr.mem_used[0], 64 * MiB + 100 * MiB);
	/* Again with a registered survivor, whose watcher may get there first. */
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(t_wait(t_spawn("child_die_locked", die, -1)), 128 + SIGKILL);
		CHECK_EQ(CU(cuMemAlloc_v2)(&p, 100 * MiB), CUDA_SUCCESS);
		CHECK_EQ(r->hdr.mem_used[0], 64 * MiB + (uint64_t)(i + 2) * 100 * MiB);
		CHECK_EQ(r->hdr.live_procs, 1);
	}
	return 0;
}

/* What the exporter reads: header fields, limits and this process's slot. */
static int layout(void)
{
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 10 * MiB), CUDA_SUCCESS);
	struct vgpu_region *r = t_region();
	CHECK_EQ(r->hdr.magic, VGPU_REGION_MAGIC);
	CHECK_EQ(r->hdr.version, VGPU_REGION_VERSION);
	CHECK_EQ(r->hdr.total_size, VGPU_REGION_SIZE);
	CHECK_EQ(r->hdr.mem_limit[0], 1 * GiB);
	CHECK_EQ(r->hdr.mem_limit[1], 512 * MiB);
	CHECK_EQ(r->hdr.sm_limit[0], 0);
	CHECK_EQ(r->hdr.device_count, 2);
	CHECK_EQ(r->hdr.priority, 1);
	CHECK_EQ(r->hdr.live_procs, 1);
	CHECK(strcmp(r->hdr.uuid[0], "GPU-5ab0e000-0000-4000-8000-000000000000") == 0,
	      "uuid[0] = \"%s\", want the stub's first card", r->hdr.uuid[0]);
	CHECK(strcmp(r->hdr.uuid[1], "GPU-5ab0e000-0000-4000-8000-000000000001") == 0,
	      "uuid[1] = \"%s\", want the stub's second card", r->hdr.uuid[1]);
	struct vgpu_proc_slot *s = t_slot_of(r, getpid());
	CHECK(s != NULL, "no slot");
	if (s != NULL) {
		CHECK_EQ(s->hostpid, getpid());
		CHECK_EQ(s->priority, 1);
		CHECK_EQ(s->mem_used[0], 74 * MiB);
	}
	int fd = open(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_RDONLY);
	CHECK_EQ(lseek(fd, 0, SEEK_END), VGPU_REGION_SIZE);
	close(fd);
	return 0;
}

static int child_init(void)
{
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	return t_failed;
}

/* 256 processes initialise at once against one region. */
static int init_256(void)
{
	static int pids[256];
	const char *env_n = getenv("VGPU_TEST_PROCS");
	int N = env_n ? atoi(env_n) : 256;
	if (N < 1 || N > 256)
		N = 256;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < N; i++)
		pids[i] = t_spawn("child_init", NULL, -1);
	int bad = 0;
	for (int i = 0; i < N; i++)
		bad += t_wait(pids[i]) != 0;
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK_EQ(bad, 0);
	struct vgpu_region *r = t_region();
	CHECK(r != NULL, "no region");
	if (r != NULL) {
		CHECK_EQ(r->hdr.live_procs, 0);
		CHECK_EQ(r->hdr.mem_used[0], 0);
		CHECK(r->hdr.slot_hwm <= (uint32_t)N, "slot_hwm %u", r->hdr.slot_hwm);
	}
	double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	fprintf(stderr, "init_256: %d processes in %.0f ms\n", N, ms);
	/*
	 * HAMi #1662: 256 processes took about a minute to initialise against
	 * one shared region. Here they take well under a second (README,
	 * "Measured": p99 of the first allocation 14-53 ms); 20 s leaves a
	 * 20-fold margin for a machine loaded by other jobs and the sanitizer
	 * builds, and still fails a regression to HAMi's order of magnitude.
	 * Judged in the normal mode (256 processes, the machine to itself);
	 * under the sanitizers (t_timing false: 64 or 32 processes next to
	 * other cases) the time is the sanitizer's, and what is judged is
	 * that every process started and left the region clean.
	 */
	CHECK(!t_timing() || ms < 20000.0, "%d processes took %.0f ms to initialise (bound 20000 ms)", N, ms);
	return 0;
}

/* A forked child gets its own slot and none of its parent's usage. */
static int fork_child(void)
{
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 100 * MiB), CUDA_SUCCESS);
	struct vgpu_region *r = t_region();
	int pid = fork();
	if (pid == 0) {
		CUdeviceptr q;
		int ok = CU(cuMemAlloc_v2)(&q, 50 * MiB) == CUDA_SUCCESS &&
			 t_slot_of(r, getpid()) != NULL && t_mine(0) == 50 * MiB &&
			 r->hdr.live_procs == 2;
		_exit(ok ? 0 : 1);
	}
	CHECK_EQ(t_wait(pid), 0);
	CHECK_EQ(t_mine(0), 164 * MiB);
	return 0;
}

/* Child: 64 MiB, then a second charge inside which it stops (LIBVGPU_TEST_STOP_IN_LOCK=2). */
static int child_stopper(void)
{
	t_ctx(0);
	CUdeviceptr p, q;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 64 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&q, 32 * MiB), CUDA_SUCCESS);  /* stops inside, resumes on SIGCONT */
	char c = 1;
	if (write(20, &c, 1) != 1 || read(21, &c, 1) < 0)
		return 1;
	return 0;
}

/*
 * A process stopped while it holds the region lock (SIGSTOP, as a debugger
 * or a frozen cgroup would) blocks nobody for good: after
 * LIBVGPU_LOCK_TIMEOUT_MS (300 here) an allocation is refused with
 * CUDA_ERROR_OUT_OF_MEMORY and a message naming the holder, a free goes
 * through and is settled once the holder runs again; then everything is
 * exact. Limit 1g, contexts free.
 */
static int lock_stopped_holder(void)
{
	int up[2], down[2], st;
	t_watchdog(60);
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return 1;
	dup2(up[1], 20);
	dup2(down[0], 21);
	t_ctx(0);
	CUdeviceptr p, q;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 100 * MiB), CUDA_SUCCESS);
	static const char *const env[] = {"LIBVGPU_TEST_STOP_IN_LOCK=2", NULL};
	int pid = t_spawn("child_stopper", env, -1);
	CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st), "the holder did not stop");
	/* Waiting on the stopped holder: refused, and said on stderr. */
	char path[512];
	snprintf(path, sizeof(path), "%s/stderr.txt", t_dir());
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644), saved = dup(2);
	dup2(fd, 2);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CUresult r = CU(cuMemAlloc_v2)(&q, 10 * MiB);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CUresult f = CU(cuMemFree_v2)(p);
	dup2(saved, 2);
	close(fd);
	CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(f, CUDA_SUCCESS);
	fprintf(stderr, "refused after %.2f s\n",
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	const char *err = t_read_file(path);
	char want[64];
	snprintf(want, sizeof(want), "pid %d has held the region lock", pid);
	CHECK(strstr(err, want) != NULL, "the message must name the holder (%s); stderr:\n%s", want, err);
	/* The holder runs again: it finishes its charge, and all is exact. */
	kill(pid, SIGCONT);
	char c;
	CHECK(read(up[0], &c, 1) == 1, "holder report");
	CHECK_EQ(CU(cuMemAlloc_v2)(&q, 10 * MiB), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 10 * MiB);
	CHECK_EQ(t_region()->hdr.mem_used[0], 10 * MiB + 96 * MiB);
	close(down[1]);
	close(21);
	CHECK_EQ(t_wait(pid), 0);
	CHECK_EQ(t_region()->hdr.mem_used[0], 10 * MiB);
	return 0;
}

const struct t_case t_region_cases[] = {
	{"lock_stopped_holder", lock_stopped_holder},
	{"child_stopper", child_stopper},
	{"multiproc", multiproc},
	{"child_mp", child_mp},
	{"reclaim_sigkill", reclaim_sigkill},
	{"child_hold", child_hold},
	{"lock_owner_death", lock_owner_death},
	{"child_die_locked", child_die_locked},
	{"layout", layout},
	{"init_256", init_256},
	{"child_init", child_init},
	{"fork_child", fork_child},
	{NULL, NULL},
};
