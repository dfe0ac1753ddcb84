/*
 * t_corrupt.c - damaged region files: found by a new process, damaged under
 * live processes, and the node agent's pre-created empty file in a directory
 * the container cannot write.
 *
 * The proof that a repair let nobody exceed the limit is exact: a fresh
 * process (stress_fill) must get precisely what the others leave, and one
 * more byte must be refused; with the observer on, the stub's record of
 * device bytes must never pass the limit.
 */
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Runs stress_fill: it must get exactly `bytes` and be refused one more. */
static int fill_exactly(uint64_t bytes, int stderr_fd)
{
	char fill[64];
	snprintf(fill, sizeof(fill), "VGPU_TEST_FILL=%llu", (unsigned long long)bytes);
	const char *env[] = {fill, NULL};
	return t_wait(t_spawn("stress_fill", env, stderr_fd));
}

static void put_checked(uint64_t *val, uint64_t *chk, uint64_t v)
{
	*val = v;
	*chk = v ^ VGPU_CHECK_KEY;
}

/* A region as libvgpu formats it, written by a process that then exits. */
static int child_touch(void)
{
	t_ctx(0);
	return 0;
}

static void read_all(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	memset(buf, 0, len);
	CHECK(fd >= 0 && read(fd, buf, len) > 0, "read %s", path);
	close(fd);
}

static void write_all(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	CHECK(fd >= 0 && write(fd, buf, len) == (ssize_t)len, "write %s", path);
	close(fd);
}

enum { REFORMAT = 1, QUIET = 2 };

struct variant {
	const char *name;
	int expect;         /* REFORMAT: a "re-initialising" warning; QUIET: no output at all */
	size_t len;         /* bytes of the damaged file, 0 = the region size */
	void (*damage)(struct vgpu_region *r);
};

static void garbage(struct vgpu_region *r) { memset(r, 0xA5, sizeof(*r)); }
static void zeroed(struct vgpu_region *r) { memset(r, 0, sizeof(*r)); }
static void old_version(struct vgpu_region *r) { r->hdr.version = 0; }
static void bad_magic(struct vgpu_region *r) { r->hdr.magic ^= 1; }
static void pre_reboot(struct vgpu_region *r) { strcpy(r->hdr.boot_id, "00000000-0000-0000-0000-000000000000"); }
static void huge_total(struct vgpu_region *r) { r->hdr.mem_used[0] = UINT64_C(1) << 60; }
static void bad_check(struct vgpu_region *r) { r->hdr.mem_used[0] = 3 * GiB; }
static void unchanged(struct vgpu_region *r) { (void)r; }

/* A dead process's slot, consistent and believable: reclaimed, not reformatted. */
static void dead_slot(struct vgpu_region *r)
{
	struct vgpu_proc_slot *s = &r->slots[5];
	s->status = VGPU_SLOT_ACTIVE;
	s->pid = 999999;
	s->epoch = r->hdr.epoch;
	put_checked(&s->mem_used[0], &s->mem_used_check[0], 900 * MiB);
	put_checked(&r->hdr.mem_used[0], &r->hdr.mem_used_check[0], 900 * MiB);
	r->hdr.slot_hwm = 6;
	r->hdr.live_procs = 1;
}

/* Garbage in slots: bytes of a freed slot and a nonsense status. */
static void garbage_slots(struct vgpu_region *r)
{
	memset(&r->slots[3], 0xA5, sizeof(r->slots[3]));
	r->slots[7].status = 7;
	r->hdr.slot_hwm = 8;
}

/* Totals far above the limit, with valid check words and no slot to back them. */
static void total_over_limit(struct vgpu_region *r)
{
	put_checked(&r->hdr.mem_used[0], &r->hdr.mem_used_check[0], 5 * GiB);
}

/*
 * Damaged files found by a new process (nobody else alive): each is repaired
 * and the newcomer gets exactly the limit (1g, minus its 64 MiB context).
 */
static int region_corrupt(void)
{
	static const struct variant vs[] = {
		{"garbage", REFORMAT, 0, garbage},
		{"zeroed", REFORMAT, 0, zeroed},
		{"old version", REFORMAT, 0, old_version},
		{"wrong magic", REFORMAT, 0, bad_magic},
		{"shorter than the header", REFORMAT, 100, unchanged},
		{"shorter than the region", REFORMAT, 8192, unchanged},
		{"empty (pre-created)", QUIET, 1, unchanged},
		{"pre-reboot", REFORMAT, 0, pre_reboot},
		{"impossible total", REFORMAT, 0, huge_total},
		{"total without its check word", REFORMAT, 0, bad_check},
		{"dead process's slot", QUIET, 0, dead_slot},
		{"garbage in free slots", QUIET, 0, garbage_slots},
		{"total over the limit", QUIET, 0, total_over_limit},
		{"longer than the region", QUIET, VGPU_REGION_SIZE + 65536, unchanged},
		{"longer and garbage", REFORMAT, VGPU_REGION_SIZE + 65536, garbage},
	};
	static char buf[VGPU_REGION_SIZE + 65536];
	const char *path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
	char errpath[512];
	snprintf(errpath, sizeof(errpath), "%s/stderr.txt", t_dir());
	for (size_t v = 0; v < sizeof(vs) / sizeof(vs[0]); v++) {
		unlink(path);
		CHECK_EQ(t_wait(t_spawn("child_touch", NULL, -1)), 0);
		read_all(path, buf, VGPU_REGION_SIZE);
		vs[v].damage((struct vgpu_region *)buf);
		size_t len = vs[v].len == 0 ? VGPU_REGION_SIZE : vs[v].len == 1 ? 0 : vs[v].len;
		write_all(path, buf, len);
		int fd = open(errpath, O_CREAT | O_TRUNC | O_WRONLY, 0644);
		CHECK(fill_exactly(1 * GiB - 64 * MiB, fd) == 0, "%s: the newcomer did not get exactly the limit",
		      vs[v].name);
		close(fd);
		const char *err = t_read_file(errpath);
		if (vs[v].expect == REFORMAT)
			CHECK(strstr(err, "re-initialising") != NULL, "%s: not reported: %s", vs[v].name, err);
		else
			CHECK(err[0] == '\0', "%s: unexpected output: %s", vs[v].name, err);
		struct stat st;
		CHECK(stat(path, &st) == 0 && (size_t)st.st_size == (len > VGPU_REGION_SIZE ? len : VGPU_REGION_SIZE),
		      "%s: size %lld", vs[v].name, (long long)st.st_size);
		struct vgpu_region_header now;
		read_all(path, &now, sizeof(now));
		CHECK_EQ(now.magic, VGPU_REGION_MAGIC);
		CHECK_EQ(now.version, VGPU_REGION_VERSION);
		CHECK_EQ(now.mem_used[0], 0);
		CHECK_EQ(now.live_procs, 0);
	}
	return 0;
}

/* Child: hold 200 MiB (four allocations) until fd 21 closes. */
static int child_holder(void)
{
	t_ctx(0);
	CUdeviceptr p[4];
	for (int i = 0; i < 4; i++)
		CHECK_EQ(CU(cuMemAlloc_v2)(&p[i], 50 * MiB), CUDA_SUCCESS);
	char c = 1;
	if (write(20, &c, 1) != 1)
		return 1;
	while (read(21, &c, 1) > 0)
		;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(CU(cuMemFree_v2)(p[i]), CUDA_SUCCESS);
	return t_failed;
}

static struct vgpu_proc_slot *live_slot(struct vgpu_region *r, int pid)
{
	for (int i = 0; i < VGPU_MAX_PROCS; i++)
		if (r->slots[i].pid == pid)
			return &r->slots[i];
	return &r->slots[0];
}

/* Polls until the live holders are counted again and the region is settled. */
static int settled(struct vgpu_region *r, uint64_t want, uint64_t *took_ns)
{
	uint64_t t0 = mono_ns();
	while (mono_ns() - t0 < 30 * UINT64_C(1000000000)) {
		if (__atomic_load_n(&r->hdr.magic, __ATOMIC_ACQUIRE) == VGPU_REGION_MAGIC &&
		    !(r->hdr.flags & VGPU_REGION_RECOVERING) && r->hdr.mem_used[0] == want &&
		    (r->hdr.mem_used[0] ^ r->hdr.mem_used_check[0]) == VGPU_CHECK_KEY && r->hdr.live_procs == 3) {
			*took_ns = mono_ns() - t0;
			return 1;
		}
		nap_ms(2);
	}
	return 0;
}

/*
 * Three processes hold 600 MiB of a 1 GiB limit while the region is damaged
 * under them. Guarantee: every whole-file or header event (zeroed file or
 * header, wrong magic or version, damaged totals) and damage to a live
 * process's slot is repaired without a restart, the live processes' usage is
 * counted again, and meanwhile a newcomer gets exactly the 424 MiB left,
 * never more (charges wait while the live processes re-register).
 */
static int corrupt_live(void)
{
	int up[2], down[2], pids[3];
	t_watchdog(240);
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return 1;
	dup2(up[1], 20);
	dup2(down[0], 21);
	close(up[1]);
	close(down[0]);
	for (int i = 0; i < 3; i++)
		pids[i] = t_spawn("child_holder", NULL, -1);
	close(20);
	for (int i = 0; i < 3; i++) {
		char c;
		CHECK(read(up[0], &c, 1) == 1, "holder %d ready", i);
	}
	struct vgpu_region *r = t_region();
	struct stub_observer *obs = STUB(vgpuStubObserver)();
	CHECK(r != NULL && obs != NULL, "region and observer");
	if (r == NULL || obs == NULL)
		return 1;
	const uint64_t held = 600 * MiB;
	uint64_t worst = 0, took = 0;
	for (int v = 0; v < 8; v++) {
		uint64_t t0 = mono_ns();
		switch (v) {
		case 0: memset(&r->hdr, 0, sizeof(r->hdr)); break;
		case 1: memset(r, 0, sizeof(*r)); break;
		case 2: r->hdr.magic = 0x1234; break;
		case 3: r->hdr.version = 7; break;
		case 4: r->hdr.mem_used[0] = 0; break;
		case 5: r->hdr.mem_used[0] = 5 * GiB; break;
		case 6: memset(live_slot(r, pids[v % 3]), 0xA5, sizeof(struct vgpu_proc_slot)); break;
		default: memset(live_slot(r, pids[v % 3]), 0, sizeof(struct vgpu_proc_slot)); break;
		}
		CHECK(fill_exactly(1 * GiB - held, -1) == 0, "variant %d: the newcomer got the wrong amount", v);
		CHECK(settled(r, held, &took), "variant %d: live usage not re-registered: used %llu flags %u live %u",
		      v, (unsigned long long)r->hdr.mem_used[0], r->hdr.flags, r->hdr.live_procs);
		took = mono_ns() - t0;  /* damage to settled, the newcomer's run included */
		worst = took > worst ? took : worst;
	}
	close(down[1]);
	close(21);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(t_wait(pids[i]), 0);
	CHECK_EQ(r->hdr.mem_used[0], 0);
	STUB(vgpuStubObserverReap)();
	CHECK_EQ(obs->live[0], 0);
	CHECK(obs->hwm[0] <= 1 * GiB, "observed %llu bytes live over a 1 GiB limit",
	      (unsigned long long)obs->hwm[0]);
	fprintf(stderr, "corrupt_live: 8 variants under 3 live processes, slowest repair %.1f ms, "
		"observed max %llu of %llu\n", (double)worst / 1e6, (unsigned long long)obs->hwm[0],
		(unsigned long long)(1 * GiB));
	return 0;
}

/* Forks a child that drops to `nobody` (when root) and runs sub-command cmd. */
static int spawn_unprivileged(const char *cmd)
{
	fflush(NULL);
	int pid = fork();
	if (pid == 0) {
		if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
			_exit(126);
		execl(t_self, t_self, cmd, (char *)NULL);
		/* Say why: a checkout under a directory other users cannot search
		 * (mktemp -d makes 0700 ones) fails here, not in libvgpu. */
		fprintf(stderr, "spawn_unprivileged: exec %s as uid %d: %s (every directory above the "
			"test binary must be searchable by other users)\n", t_self, (int)getuid(), strerror(errno));
		_exit(127);
	}
	return pid;
}

/*
 * The node agent pre-creates the region file empty (mode 0666) in a
 * per-container directory the container's user cannot write. libvgpu must
 * format it in place: no temporary file, no rename, and the file (inode,
 * owner, mode) is the agent's one afterwards. Two unprivileged processes then
 * share the 1 GiB limit exactly.
 */
static int region_ro_dir(void)
{
	char dir[512], path[600];
	t_watchdog(120);
	snprintf(dir, sizeof(dir), "%s/agent", t_dir());
	snprintf(path, sizeof(path), "%s/vgpu.cache", dir);
	/* The scratch directory is private to root; the container user must reach the file. */
	CHECK(chmod(t_dir(), 0755) == 0 && mkdir(dir, 0755) == 0, "setup: %s", strerror(errno));
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0666);
	CHECK(fd >= 0 && fchmod(fd, 0666) == 0, "create %s", path);
	close(fd);
	CHECK(chmod(dir, 0555) == 0, "chmod 0555");
	struct stat before, after;
	stat(path, &before);
	setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", path, 1);

	int up[2], down[2], pids[2], total = 0;
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return 1;
	dup2(up[1], 20);
	dup2(down[0], 21);
	close(up[1]);
	close(down[0]);
	for (int i = 0; i < 2; i++)
		pids[i] = spawn_unprivileged("child_mp");
	close(20);  /* a child that dies before reporting reads as end of file */
	for (int i = 0; i < 2; i++) {
		char c = 0;
		CHECK(read(up[0], &c, 1) == 1, "child %d report", i);
		total += c;
	}
	CHECK_EQ(total, 16);        /* 16 x 64 MiB = 1 GiB between the two, never more */
	close(down[1]);
	close(21);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(t_wait(pids[i]), 0);

	CHECK(stat(path, &after) == 0, "stat");
	CHECK_EQ(after.st_ino, before.st_ino);
	CHECK_EQ(after.st_uid, before.st_uid);
	CHECK_EQ(after.st_mode & 07777, 0666);
	CHECK_EQ(after.st_size, VGPU_REGION_SIZE);
	DIR *d = opendir(dir);
	int entries = 0;
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			entries++;
			CHECK(strcmp(e->d_name, "vgpu.cache") == 0, "unexpected file %s", e->d_name);
		}
	if (d != NULL)
		closedir(d);
	CHECK_EQ(entries, 1);
	struct vgpu_region *r = t_region();
	CHECK(r != NULL && r->hdr.magic == VGPU_REGION_MAGIC && r->hdr.mem_used[0] == 0, "region state");
	chmod(dir, 0755);   /* let run.sh clean up */
	return 0;
}

const struct t_case t_corrupt_cases[] = {
	{"region_corrupt", region_corrupt},
	{"child_touch", child_touch},
	{"corrupt_live", corrupt_live},
	{"child_holder", child_holder},
	{"region_ro_dir", region_ro_dir},
	{NULL, NULL},
};
