/*
 * gpu_check.c - checks, on a node with a real NVIDIA GPU, that libvgpu
 * enforces what it promises with the driver installed there. Run it when a
 * node adopts a new driver:
 *
 *   cd libvgpu/gpucheck && gcc -std=gnu11 -O2 -Wall -Wextra -Werror -Wshadow \
 *       -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes -o gpu_check *.c -ldl -lpthread
 *   ./gpu_check /path/to/libvgpu.so
 *
 * No CUDA toolkit is needed. Without a GPU it prints "no NVIDIA GPU: skipped"
 * and exits 0. Otherwise it prints one line per check, "PASS <name>: ...",
 * "FAIL <name>: ..." or "SKIP <name>: ...", and exits 1 if any check failed.
 * A header line on stderr names the device and the limit used.
 *
 * Each check runs in a fresh process (this program re-executed with a hidden
 * sub-command) with the environment the node agent gives a container:
 * libvgpu in LD_PRELOAD, a memory limit L = min(1 GiB, device memory / 4), an
 * SM limit where the check needs one, a fresh shared region file, and only
 * the device under test visible (CUDA_VISIBLE_DEVICES=<its UUID>). The check
 * process reports one line through file descriptor 3; it arms alarm(120) on
 * itself, so a check that hangs in the driver or in libvgpu is ended and
 * reported as FAIL.
 *
 * With two or more GPUs, the checks of check_peer.c run on the first two (in
 * PCI order), each check process given both, a limit on each; with fewer,
 * each of them is reported "SKIP <name>: not run: needs two GPUs", never as
 * passed.
 *
 * CI runs it against libvgpu's stub driver: with GPU_CHECK_ALLOW_STUB=1 a
 * device whose driver name contains "stub" counts as a GPU; without it such
 * a device is no GPU, so a machine with only the stub installed skips.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_check.h"

#ifndef GC_WATCHDOG_S
#define GC_WATCHDOG_S 120           /* -DGC_WATCHDOG_S=5 to test the watchdog itself */
#endif
#define GC_EXIT_HUNG 124            /* what timeout(1) uses */
/* The parent's own deadline, for a check process that SIGALRM cannot end. */
#define GC_BACKSTOP_MS ((GC_WATCHDOG_S + 15) * 1000)
#define GC_SM_LIMIT 30
#define GC_SM_TOLERANCE 5.0

extern char **environ;

/* What every check process of one run shares. */
struct gc_run {
	char exe[PATH_MAX];         /* this program, re-executed for each check */
	char libvgpu[PATH_MAX];
	struct gc_target target;
	int gpus;                   /* CUDA devices on the node */
	struct gc_target peer;      /* the second card, when gpus >= 2 */
	char peer_expect[3];        /* cuDeviceCanAccessPeer 0->1, 1->0 without libvgpu: "11", "10"... */
	char **base_env;            /* the caller's environment minus libvgpu's variables */
	int failed;
};

struct gc_result {
	enum gc_kind kind;
	char text[1024];
};

static const char *const kind_names[] = {"PASS", "FAIL", "SKIP", "RATE"};

/* Reads exactly n bytes from fd (a socket between the check's processes). */
int gc_read_full(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

int gc_verdict(enum gc_kind kind, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	for (char *c = line; *c != '\0'; c++)
		if (*c == '\n')
			*c = ' ';
	dprintf(GC_VERDICT_FD, "%s %s\n", kind_names[kind], line);
	return 0;
}

/* libvgpu's own variables are set per check; the caller's must not leak in. */
static bool ours(const char *var)
{
	static const char *const prefixes[] = {
		"LD_PRELOAD=", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT",
		"CUDA_DEVICE_MEMORY_SHARED_CACHE=", "CUDA_VISIBLE_DEVICES=",
		"GPU_CORE_UTILIZATION_POLICY=",
	};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(var, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

static char **filtered_environ(void)
{
	size_t n = 0, k = 0;
	while (environ[n] != NULL)
		n++;
	char **env = calloc(n + 1, sizeof(*env));
	if (env == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!ours(environ[i]))
			env[k++] = environ[i];
	return env;
}

static void free_env(const struct gc_run *run, char **env)
{
	size_t n = 0;
	while (run->base_env[n] != NULL)
		n++;
	for (char **e = env + n; *e != NULL; e++)
		free(*e);
	free(env);
}

/* Appends one variable after env[*n]; the array ends at the first NULL. */
static bool add_var(char **env, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool add_var(char **env, size_t *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&env[*n], fmt, ap);
	va_end(ap);
	if (r < 0) {
		env[*n] = NULL;
		return false;
	}
	(*n)++;
	return true;
}

/*
 * The container environment of one check process; free with free_env. With
 * `two` the container has both cards, each with its limit.
 */
static char **check_env(const struct gc_run *run, unsigned int sm_limit, const char *cache, bool two)
{
	size_t n = 0;
	while (run->base_env[n] != NULL)
		n++;
	char **env = calloc(n + 7, sizeof(*env));
	if (env == NULL)
		return NULL;
	memcpy(env, run->base_env, n * sizeof(*env));
	int i = run->target.index;
	if (!add_var(env, &n, "LD_PRELOAD=%s", run->libvgpu) ||
	    !add_var(env, &n, "CUDA_DEVICE_MEMORY_LIMIT_%d=%llum", i,
		     (unsigned long long)(run->target.limit / GC_MIB)) ||
	    !add_var(env, &n, "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", cache) ||
	    !add_var(env, &n, "CUDA_VISIBLE_DEVICES=%s%s%s", run->target.uuid, two ? "," : "",
		     two ? run->peer.uuid : "") ||
	    (two && !add_var(env, &n, "CUDA_DEVICE_MEMORY_LIMIT_%d=%llum", run->peer.index,
			     (unsigned long long)(run->peer.limit / GC_MIB))) ||
	    (sm_limit != 0 && !add_var(env, &n, "CUDA_DEVICE_SM_LIMIT_%d=%u", i, sm_limit))) {
		free_env(run, env);
		return NULL;
	}
	return env;
}

/* Reads the check's verdict until EOF or the backstop deadline; returns -1 on timeout. */
static int read_verdict(int fd, char *buf, size_t len)
{
	struct timespec t0;
	size_t used = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long waited = (now.tv_sec - t0.tv_sec) * 1000 +
			      (now.tv_nsec - t0.tv_nsec) / 1000000;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (waited >= GC_BACKSTOP_MS)
			return -1;
		int r = poll(&p, 1, (int)(GC_BACKSTOP_MS - waited));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		char scratch[256];
		char *dst = used + 1 < len ? buf + used : scratch;
		size_t room = used + 1 < len ? len - used - 1 : sizeof(scratch);
		ssize_t n = read(fd, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (dst == buf + used)
			used += (size_t)n;
	}
	buf[used] = '\0';
	return 0;
}

/* Takes the verdict from the first line the check process wrote; false if none. */
static bool parse_line(char *line, struct gc_result *res)
{
	line[strcspn(line, "\n")] = '\0';
	for (int k = GC_PASS; k <= GC_RATE; k++) {
		size_t n = strlen(kind_names[k]);
		if (strncmp(line, kind_names[k], n) == 0 && line[n] == ' ') {
			res->kind = (enum gc_kind)k;
			snprintf(res->text, sizeof(res->text), "%.1000s", line + n + 1);
			return true;
		}
	}
	return false;
}

/* The verdict stands only if the check process also ended normally. */
static void judge(struct gc_result *res, char *line, bool timed_out, int status)
{
	char how[96] = "", said[sizeof(res->text)];
	bool spoke = parse_line(line, res);
	if (timed_out)
		snprintf(how, sizeof(how), "did not end within %d s and was killed",
			 GC_BACKSTOP_MS / 1000);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == GC_EXIT_HUNG)
		snprintf(how, sizeof(how), "hung: the watchdog ended it after %d s", GC_WATCHDOG_S);
	else if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "died of %s", strsignal(WTERMSIG(status)));
	else if (!spoke)
		snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(status));
	if (how[0] == '\0')
		return;
	snprintf(said, sizeof(said), "%s %.900s", kind_names[res->kind], res->text);
	res->kind = GC_FAIL;
	if (spoke)
		snprintf(res->text, sizeof(res->text),
			 "the check process %s after reporting: %.800s", how, said);
	else
		snprintf(res->text, sizeof(res->text), "the check process %s without a verdict",
			 how);
}

/* In the forked child: only async-signal-safe calls until execve. */
static void exec_check(const struct gc_run *run, int wfd, char *const argv[], char *const env[])
{
	setpgid(0, 0);
	if (wfd == GC_VERDICT_FD)
		fcntl(wfd, F_SETFD, 0);
	else if (dup2(wfd, GC_VERDICT_FD) < 0)
		_exit(126);
	dup2(STDERR_FILENO, STDOUT_FILENO);     /* stdout carries only the parent's lines */
	execve(run->exe, argv, env);
	_exit(127);
}

/*
 * Runs one check process: `mode` is "--run", "--pidns" (the measurement in
 * a new PID namespace) or "--run2" (a check of both cards), `sm_limit` 0 for none.
 */
static void run_check(struct gc_run *run, const char *mode, const char *check,
		      unsigned int sm_limit, struct gc_result *res)
{
	const char *tmp = getenv("TMPDIR");
	bool two = strcmp(mode, "--run2") == 0;
	char cache[PATH_MAX], limit[32], index[16], limit1[32], index1[16], line[2048];
	int fds[2], status = 0;
	res->kind = GC_FAIL;
	/* A fresh, empty region file per process: libvgpu formats it (REGION.md). */
	snprintf(cache, sizeof(cache), "%s/gpu_check-region.XXXXXX",
		 tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	int cfd = mkstemp(cache);
	if (cfd < 0 || pipe2(fds, O_CLOEXEC) != 0) {
		snprintf(res->text, sizeof(res->text), "cannot set up the check process: %s",
			 strerror(errno));
		if (cfd >= 0)
			unlink(cache);
		return;
	}
	close(cfd);
	snprintf(limit, sizeof(limit), "%llu", (unsigned long long)run->target.limit);
	snprintf(index, sizeof(index), "%d", run->target.index);
	snprintf(limit1, sizeof(limit1), "%llu", (unsigned long long)run->peer.limit);
	snprintf(index1, sizeof(index1), "%d", run->peer.index);
	char *argv[] = {run->exe, (char *)mode, (char *)check, limit, run->target.uuid, index,
			two ? limit1 : NULL, run->peer.uuid, index1, run->peer_expect, NULL};
	char **env = check_env(run, sm_limit, cache, two);
	pid_t pid = env != NULL ? fork() : -1;
	if (pid == 0)
		exec_check(run, fds[1], argv, env);
	close(fds[1]);
	if (pid < 0) {
		snprintf(res->text, sizeof(res->text), "cannot start the check process: %s",
			 strerror(errno));
	} else {
		siginfo_t si;
		setpgid(pid, pid);
		bool timed_out = read_verdict(fds[0], line, sizeof(line)) != 0;
		if (timed_out)
			kill(-pid, SIGKILL);
		/* Unreaped, the leader keeps its group id: end what it left (a hung tool). */
		while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
			;
		kill(-pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		judge(res, line, timed_out, status);
	}
	close(fds[0]);
	if (env != NULL)
		free_env(run, env);
	unlink(cache);
}

static void report(struct gc_run *run, const char *name, const struct gc_result *res)
{
	enum gc_kind kind = res->kind == GC_RATE ? GC_FAIL : res->kind;
	if (kind == GC_FAIL)
		run->failed = 1;
	printf("%s %s: %s\n", kind_names[kind], name, res->text);
	fflush(stdout);
}

/* The limited rate over the unlimited one, from two RATE lines. */
static void report_share(struct gc_run *run, const char *name, double base,
			 const struct gc_result *limited)
{
	struct gc_result out = *limited;
	if (limited->kind == GC_RATE) {
		char *rest;
		double rate = strtod(limited->text, &rest);
		double share = 100.0 * rate / base;
		bool ok = share >= GC_SM_LIMIT - GC_SM_TOLERANCE &&
			  share <= GC_SM_LIMIT + GC_SM_TOLERANCE;
		out.kind = ok ? GC_PASS : GC_FAIL;
		snprintf(out.text, sizeof(out.text), "unlimited %.1f kernels/s, limited to %d %% "
			 "%.1f kernels/s%s: share %.1f %% (want %d +/- %.0f)", base, GC_SM_LIMIT,
			 rate, rest, share, GC_SM_LIMIT, GC_SM_TOLERANCE);
	}
	report(run, name, &out);
}

/*
 * sm_share: kernel completions per second under CUDA_DEVICE_SM_LIMIT=30 over
 * the same without a limit, from separate processes; sm_share_pidns: the
 * limited run as pid 1 of a new PID namespace, where the pids NVML reports
 * (the node's) are not the ones the process sees.
 */
static void run_sm_checks(struct gc_run *run)
{
	struct gc_result base, limited;
	run_check(run, "--run", "sm_rate", 0, &base);
	if (base.kind != GC_RATE) {
		char why[sizeof(base.text)];
		snprintf(why, sizeof(why), "%s", base.text);
		snprintf(base.text, sizeof(base.text), "unlimited run: %.1000s", why);
		report(run, "sm_share", &base);
		report(run, "sm_share_pidns", &base);
		return;
	}
	double rate = strtod(base.text, NULL);
	if (!(rate > 0)) {
		base.kind = GC_FAIL;
		report(run, "sm_share", &base);
		report(run, "sm_share_pidns", &base);
		return;
	}
	run_check(run, "--run", "sm_rate", GC_SM_LIMIT, &limited);
	report_share(run, "sm_share", rate, &limited);
	run_check(run, "--pidns", "sm_rate", GC_SM_LIMIT, &limited);
	report_share(run, "sm_share_pidns", rate, &limited);
}

typedef int (*gc_check_fn)(const struct gc_api *, const struct gc_target *);
typedef int (*gc_check2_fn)(const struct gc_api *, const struct gc_target *,
			    const struct gc_target *, const char *);

/* The checks of two cards (check_peer.c), in the order they run. */
static const struct {
	const char *name;
	gc_check2_fn fn;
} checks2[] = {
	{"peer_access", gc_check_peer_access},
	{"ipc_two_gpus", gc_check_ipc_two_gpus},
};

/* In the order they run; sm_rate is one measurement of sm_share (run_sm_checks). */
static const struct {
	const char *name;
	gc_check_fn fn;
	bool standalone;
} checks[] = {
	{"memory_limit", gc_check_memory_limit, true},
	{"nvml_memory", gc_check_nvml_memory, true},
	{"nvidia_smi", gc_check_nvidia_smi, true},
	{"vmm_lifetime", gc_check_vmm_lifetime, true},
	{"procaddr", gc_check_procaddr, true},
	{"ipc_share", gc_check_ipc_share, true},
	{"sm_rate", gc_check_sm_rate, false},
};

/*
 * The watchdog of a check process. It exits rather than relying on SIGALRM's
 * default action, which does not end pid 1 of a PID namespace.
 */
static void on_watchdog(int sig)
{
	(void)sig;
	_exit(GC_EXIT_HUNG);
}

static void arm_watchdog(void)
{
	struct sigaction sa = {.sa_handler = on_watchdog};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	alarm(GC_WATCHDOG_S);
}

/* A check process: `gpu_check --run <check> <limit> <uuid> <index>`. */
static int check_main(int argc, char **argv)
{
	struct gc_target t = {0};
	struct gc_api api;
	char err[512];
	arm_watchdog();
	fcntl(GC_VERDICT_FD, F_SETFD, FD_CLOEXEC);   /* not for the tools it runs */
	if (argc != 6)
		return gc_verdict(GC_FAIL, "internal: bad check arguments");
	t.limit = strtoull(argv[3], NULL, 10);
	snprintf(t.uuid, sizeof(t.uuid), "%s", argv[4]);
	t.index = atoi(argv[5]);
	if (gc_api_open(&api, true) != 0)
		return gc_verdict(GC_FAIL, "libcuda.so.1 cannot be opened in the check process");
	if (!gc_preload_ok(&api, err, sizeof(err)))
		return gc_verdict(GC_FAIL, "libvgpu is not in front of the driver: %s", err);
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		if (strcmp(checks[i].name, argv[2]) == 0)
			return checks[i].fn(&api, &t);
	return gc_verdict(GC_FAIL, "internal: unknown check %s", argv[2]);
}

static void parse_target(struct gc_target *t, char **argv)
{
	t->limit = strtoull(argv[0], NULL, 10);
	snprintf(t->uuid, sizeof(t->uuid), "%s", argv[1]);
	t->index = atoi(argv[2]);
}

/* A check of two cards: `gpu_check --run2 <check> <limit> <uuid> <index> x 2 <expect>`. */
static int check2_main(int argc, char **argv)
{
	struct gc_target t = {0}, peer = {0};
	struct gc_api api;
	char err[512];
	arm_watchdog();
	fcntl(GC_VERDICT_FD, F_SETFD, FD_CLOEXEC);
	if (argc != 10)
		return gc_verdict(GC_FAIL, "internal: bad check arguments");
	parse_target(&t, argv + 3);
	parse_target(&peer, argv + 6);
	if (gc_api_open(&api, true) != 0)
		return gc_verdict(GC_FAIL, "libcuda.so.1 cannot be opened in the check process");
	if (!gc_preload_ok(&api, err, sizeof(err)))
		return gc_verdict(GC_FAIL, "libvgpu is not in front of the driver: %s", err);
	for (size_t i = 0; i < sizeof(checks2) / sizeof(checks2[0]); i++)
		if (strcmp(checks2[i].name, argv[2]) == 0)
			return checks2[i].fn(&api, &t, &peer, argv[9]);
	return gc_verdict(GC_FAIL, "internal: unknown check %s", argv[2]);
}

/*
 * The checks of two cards, for the first machine with two GPUs. With fewer,
 * each is reported SKIP, naming why: never a PASS for what did not run.
 */
static void run_two_gpu_checks(struct gc_run *run)
{
	struct gc_result res;
	for (size_t i = 0; i < sizeof(checks2) / sizeof(checks2[0]); i++) {
		if (run->gpus < 2) {
			res.kind = GC_SKIP;
			snprintf(res.text, sizeof(res.text), "not run: needs two GPUs, this node has %d",
				 run->gpus);
		} else {
			run_check(run, "--run2", checks2[i].name, 0, &res);
		}
		report(run, checks2[i].name, &res);
	}
}

/* The second card (CUDA ordinal 1 in PCI order) and what the driver says of peer access. */
static void find_peer(struct gc_run *run, struct gc_api *api, CUdevice dev0)
{
	CUdevice dev1;
	size_t total = 0;
	int a = 0, b = 0;
	if (api->cuDeviceGetCount(&run->gpus) != CUDA_SUCCESS || run->gpus < 2)
		return;
	if (api->cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || gc_describe_target(api, 1, dev1, &run->peer, &total) != 0) {
		fprintf(stderr, "gpu_check: %d GPUs, but the second cannot be described\n", run->gpus);
		run->gpus = 1;
		return;
	}
	snprintf(run->peer_expect, sizeof(run->peer_expect), "??");
	if (api->cuDeviceCanAccessPeer != NULL && api->cuDeviceCanAccessPeer(&a, dev0, dev1) == CUDA_SUCCESS &&
	    api->cuDeviceCanAccessPeer(&b, dev1, dev0) == CUDA_SUCCESS)
		snprintf(run->peer_expect, sizeof(run->peer_expect), "%d%d", a != 0, b != 0);
	fprintf(stderr, "gpu_check: second card %s (NVML index %d, %zu MiB), limit %llu MiB, peer "
		"access 0->1 and 1->0: %s\n", run->peer.uuid, run->peer.index, total / GC_MIB,
		(unsigned long long)(run->peer.limit / GC_MIB), run->peer_expect);
}

static int usage(void)
{
	fprintf(stderr, "usage: gpu_check <path to libvgpu.so>\n"
			"  checks that libvgpu enforces its memory limit and SM share on this\n"
			"  node's GPU 0; prints PASS/FAIL/SKIP per check, exits 1 if any failed\n");
	return 2;
}

static int setup(struct gc_run *run, struct gc_api *api, CUdevice dev, const char *name)
{
	ssize_t n = readlink("/proc/self/exe", run->exe, sizeof(run->exe) - 1);
	size_t total = 0;
	if (n <= 0) {
		fprintf(stderr, "gpu_check: cannot find its own executable: %s\n", strerror(errno));
		return -1;
	}
	run->exe[n] = '\0';
	if (gc_describe_target(api, 0, dev, &run->target, &total) != 0)
		return -1;
	run->base_env = filtered_environ();
	if (run->base_env == NULL)
		return -1;
	fprintf(stderr, "gpu_check: %s on device 0 \"%s\" %s (NVML index %d, %zu MiB), "
		"limit %llu MiB\n", run->libvgpu, name, run->target.uuid, run->target.index,
		total / GC_MIB, (unsigned long long)(run->target.limit / GC_MIB));
	run->gpus = 1;
	find_peer(run, api, dev);
	return 0;
}

int main(int argc, char **argv)
{
	struct gc_run run = {0};
	struct gc_api api;
	struct gc_result res;
	CUdevice dev = 0;
	char name[256];
	if (argc >= 2 && strcmp(argv[1], "--run") == 0)
		return check_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--pidns") == 0)
		return gc_pidns_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--run2") == 0)
		return check2_main(argc, argv);
	if (argc == 2 && strcmp(argv[1], "--ipc-import") == 0)
		return gc_ipc_import_main();
	if (argc == 2 && strcmp(argv[1], "--ipc2-import") == 0)
		return gc_ipc2_import_main();
	if (argc != 2 || argv[1][0] == '-')
		return usage();
	if (realpath(argv[1], run.libvgpu) == NULL) {
		fprintf(stderr, "gpu_check: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	/* Before cuInit: makes CUDA ordinal 0 the device NVML calls index 0. */
	setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
	if (!gc_find_gpu(&api, &dev, name, sizeof(name))) {
		printf("no NVIDIA GPU: skipped\n");
		return 0;
	}
	if (setup(&run, &api, dev, name) != 0)
		return 2;
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		if (!checks[i].standalone)
			continue;
		run_check(&run, "--run", checks[i].name, 0, &res);
		report(&run, checks[i].name, &res);
	}
	run_sm_checks(&run);
	run_two_gpu_checks(&run);
	free(run.base_env);
	return run.failed ? 1 : 0;
}
