/* harness.c - runs one named test case (or child role) per invocation. */
#define _GNU_SOURCE
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int t_failed;
const char *t_self;

void *t_sym(const char *lib, const char *name)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (h == NULL) {
		fprintf(stderr, "FAIL dlopen %s: %s\n", lib, dlerror());
		exit(1);
	}
	void *p = dlsym(h, name);
	if (p == NULL) {
		fprintf(stderr, "FAIL dlsym %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

CUcontext t_ctx(int dev)
{
	CUcontext ctx = NULL;
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuDevicePrimaryCtxRetain)(&ctx, dev), CUDA_SUCCESS);
	CHECK_EQ(CU(cuCtxSetCurrent)(ctx), CUDA_SUCCESS);
	return ctx;
}

struct vgpu_region *t_region(void)
{
	static struct vgpu_region *r;
	const char *path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
	if (r != NULL || path == NULL)
		return r;
	int fd = open(path, O_RDWR);
	struct stat st;
	/* Mapping a file shorter than the region would fault on access. */
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)VGPU_REGION_SIZE) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	void *m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	r = m == MAP_FAILED ? NULL : m;
	return r;
}

struct vgpu_proc_slot *t_slot_of(struct vgpu_region *r, int pid)
{
	for (int i = 0; r != NULL && i < VGPU_MAX_PROCS; i++)
		if (r->slots[i].status == VGPU_SLOT_ACTIVE && r->slots[i].pid == pid)
			return &r->slots[i];
	return NULL;
}

uint64_t t_mine(int idx)
{
	struct vgpu_proc_slot *s = t_slot_of(t_region(), getpid());
	return s ? __atomic_load_n(&s->mem_used[idx], __ATOMIC_RELAXED) : UINT64_MAX;
}

int t_spawn(const char *cmd, const char *const *env, int stderr_fd)
{
	fflush(NULL);
	int pid = fork();
	if (pid == 0) {
		for (; env != NULL && *env != NULL; env++)
			putenv((char *)*env);
		if (stderr_fd >= 0)
			dup2(stderr_fd, 2);
		execl(t_self, t_self, cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

int t_wait(int pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 255;     /* no such child: a failure, never a spin */
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *t_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[65536];
	size_t n = 0;
	buf[0] = '\0';
	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

const char *t_child_stderr(const char *cmd, const char *const *env, int *rc)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/stderr.txt", t_dir());
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	*rc = t_wait(t_spawn(cmd, env, fd));
	close(fd);
	return t_read_file(path);
}

int t_spawn_ready(const char *cmd, const char *const *env)
{
	int fds[2];
	char c;
	if (pipe(fds) != 0)
		return -1;
	dup2(fds[1], 20);
	close(fds[1]);
	int pid = t_spawn(cmd, env, -1);
	close(20);
	int ok = read(fds[0], &c, 1) == 1;
	close(fds[0]);
	return ok ? pid : -1;
}

void t_ready(void)
{
	char c = 1;
	if (write(20, &c, 1) != 1)
		_exit(1);
	close(20);
}

int t_count(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL watchdog: the case did not finish in time (hang?)\n";
	(void)sig;
	ssize_t ignored = write(2, msg, sizeof(msg) - 1);
	(void)ignored;
	_exit(124);
}

void t_watchdog(unsigned seconds)
{
	signal(SIGALRM, on_alarm);
	alarm(seconds);
}

/* The device's used memory as the driver knows it: the daemon's in remote mode. */
uint64_t t_device_used(int phys)
{
	uint64_t total, used;
	if (STUB(stub_remote)())
		return STUB(stub_remote_mem)(phys, &total, &used) == 0 ? used : UINT64_MAX;
	return __atomic_load_n(&STUB(vgpuStubShared)()->dev[phys].used, __ATOMIC_RELAXED);
}

void t_no_violation(void)
{
	struct stub_observer *obs = STUB(vgpuStubObserver)();
	CHECK(obs != NULL, "the case runs with the stub's observer");
	CHECK(obs == NULL || obs->violations == 0, "the device held %llu bytes, over the 1 GiB limit",
	      obs ? (unsigned long long)obs->hwm[0] : 0ull);
}

bool t_timing(void)
{
	const char *v = getenv("VGPU_TEST_TIMING");
	return v == NULL || strcmp(v, "0") != 0;
}

const char *t_dir(void)
{
	const char *d = getenv("VGPU_TEST_DIR");
	return d ? d : "/tmp";
}

/*
 * Runs case `name` in a new PID namespace with its own /proc, as a container
 * runtime starts a container's process: the case then knows only
 * its namespaced pid, while the stub driver, like the kernel driver, knows it
 * by its host pid (VGPU_STUB_HOST_PROC_FD: the host's /proc, opened before
 * the namespace exists, see cuda_procs.c). Exit 77 when the kernel refuses.
 */
static int run_in_pidns(const char *name)
{
	/*
	 * unshare(CLONE_NEWPID) moves the caller's future children, not the
	 * caller: it happens in a child that leaves with _exit, so that this
	 * process (and its sanitizer's exit-time threads) stays where it was.
	 */
	fflush(NULL);
	pid_t outer = fork();
	if (outer != 0)
		return outer < 0 ? 1 : t_wait(outer);
	int fd = open("/proc", O_PATH | O_DIRECTORY);
	char num[16];
	if (fd < 0 || unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
		printf("SKIP: cannot create a PID namespace: %s\n", strerror(errno));
		fflush(NULL);
		_exit(77);
	}
	snprintf(num, sizeof(num), "%d", fd);
	setenv("VGPU_STUB_HOST_PROC_FD", num, 1);
	if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0) {
		printf("SKIP: cannot make mounts private: %s\n", strerror(errno));
		fflush(NULL);
		_exit(77);
	}
	pid_t init = fork();
	if (init == 0) {
		if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
			fprintf(stderr, "FAIL mount /proc in the namespace: %s\n", strerror(errno));
			_exit(1);
		}
		/* pid 1 is a minimal init that waits for the case, as in a container with one. */
		pid_t c = fork();
		if (c == 0) {
			execl(t_self, t_self, name, (char *)NULL);
			_exit(127);
		}
		_exit(c < 0 ? 1 : t_wait(c));
	}
	_exit(init < 0 ? 1 : t_wait(init));
}

int main(int argc, char **argv)
{
	static char self[PATH_MAX];
	const struct t_case *groups[] = {t_memory_cases, t_api_cases, t_region_cases, t_sm_cases,
					 t_stress_cases, t_corrupt_cases, t_limit_cases, t_device_cases,
					 t_view_cases, t_prio_cases, t_oversub_cases, t_share_cases, t_graph_cases};
	if (realpath(argv[0], self) == NULL)
		snprintf(self, sizeof(self), "%s", argv[0]);
	t_self = self;
	if (argc == 3 && strcmp(argv[1], "pidns") == 0)
		return run_in_pidns(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s [pidns] <case>\n", argv[0]);
		return 2;
	}
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
		for (const struct t_case *c = groups[g]; c->name != NULL; c++)
			if (strcmp(c->name, argv[1]) == 0) {
				int rc = c->fn();
				return rc != 0 ? rc : t_failed;
			}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
