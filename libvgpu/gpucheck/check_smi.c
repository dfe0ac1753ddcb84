/*
 * check_smi.c - nvidia_smi: what a user of the container sees with
 * nvidia-smi, run with the container's environment (libvgpu preloaded)
 * while this process holds 256 MiB:
 *
 *   --query-gpu=memory.total,memory.used   total is L, used at least 256 MiB
 *   --query-compute-apps=pid,used_memory   no process but this check's
 *
 * nvidia-smi is started with posix_spawn rather than fork: nothing of this
 * CUDA process (no atfork handler, libvgpu's included) runs in the child
 * before the exec. The compute-apps pids are compared with getpid(), so this
 * check assumes it runs in the node's PID namespace, as NVML reports pids.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_check.h"

#define MAX_PIDS 64

extern char **environ;

bool gc_find_in_path(const char *prog, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path != '\0') {
		size_t n = strcspn(path, ":");
		snprintf(buf, len, "%.*s/%s", n ? (int)n : 1, n ? path : ".", prog);
		if (access(buf, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

/* Runs nvidia-smi with this process's environment: its wait status, -1 if not started. */
static int run_tool(char *const argv[], char *out, size_t len, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	int fds[2], status = -1;
	size_t used = 0;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	int err = posix_spawn(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	while (err == 0) {
		char scratch[512];      /* past `len`, drain so that nvidia-smi never blocks */
		bool room = used + 1 < len;
		ssize_t n = read(fds[0], room ? out + used : scratch,
				 room ? len - 1 - used : sizeof(scratch));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (room)
			used += (size_t)n;
	}
	while (err == 0 && waitpid(*pid, &status, 0) < 0 && errno == EINTR)
		;
	out[used] = '\0';
	close(fds[0]);
	return status;
}

/* Non-zero exit or death of nvidia-smi: the message for the verdict. */
static bool tool_failed(int status, const char *out, char *why, size_t len)
{
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return false;
	if (status == -1)
		snprintf(why, len, "nvidia-smi could not be started");
	else if (WIFSIGNALED(status))
		snprintf(why, len, "nvidia-smi died of %s", strsignal(WTERMSIG(status)));
	else
		snprintf(why, len, "nvidia-smi exited with status %d: %.*s", WEXITSTATUS(status),
			 (int)strcspn(out, "\n"), out);
	return true;
}

/* memory.total and memory.used of the device, in MiB. */
static bool query_memory(char *smi, const char *uuid, unsigned long long *total,
			 unsigned long long *used, char *why, size_t len)
{
	char out[4096];
	pid_t pid;
	char *argv[] = {smi, "--query-gpu=memory.total,memory.used",
			"--format=csv,noheader,nounits", "-i", (char *)uuid, NULL};
	int status = run_tool(argv, out, sizeof(out), &pid);
	if (tool_failed(status, out, why, len))
		return false;
	if (sscanf(out, " %llu , %llu", total, used) != 2) {
		snprintf(why, len, "cannot read memory.total, memory.used from \"%.*s\"",
			 (int)strcspn(out, "\n"), out);
		return false;
	}
	return true;
}

/* Pids nvidia-smi lists as compute apps that are neither this process nor nvidia-smi. */
static int foreign_pids(char *smi, const char *uuid, int *pids, char *why, size_t len)
{
	char out[16384];
	pid_t pid;
	int n = 0;
	char *argv[] = {smi, "--query-compute-apps=pid,used_memory",
			"--format=csv,noheader,nounits", "-i", (char *)uuid, NULL};
	int status = run_tool(argv, out, sizeof(out), &pid);
	if (tool_failed(status, out, why, len))
		return -1;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		int p;
		if (sscanf(line, " %d ,", &p) == 1 && p != getpid() && p != pid && n < MAX_PIDS)
			pids[n++] = p;
	}
	return n;
}

int gc_check_nvidia_smi(const struct gc_api *api, const struct gc_target *t)
{
	static const char *const need[] = {"cuMemAlloc_v2", NULL};
	char smi[4096], why[512], list[512] = "";
	unsigned long long total = 0, used = 0;
	int pids[MAX_PIDS];
	CUdevice dev;
	CUdeviceptr p;
	if (!gc_find_in_path("nvidia-smi", smi, sizeof(smi)))
		return gc_verdict(GC_SKIP, "nvidia-smi is not on PATH");
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuMemAlloc_v2(&p, GC_HELD);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "holding 256 MiB: cuMemAlloc_v2 returned %s",
				  gc_cuerr(api, r));
	if (!query_memory(smi, t->uuid, &total, &used, why, sizeof(why)))
		return gc_verdict(GC_FAIL, "--query-gpu: %s", why);
	int n = foreign_pids(smi, t->uuid, pids, why, sizeof(why));
	if (n < 0)
		return gc_verdict(GC_FAIL, "--query-compute-apps: %s", why);
	for (int i = 0; i < n; i++) {
		size_t at = strlen(list);
		snprintf(list + at, sizeof(list) - at, "%s%d", i ? ", " : "", pids[i]);
	}
	if (total != t->limit / GC_MIB || used < GC_HELD / GC_MIB || n > 0)
		return gc_verdict(GC_FAIL, "want memory.total %llu MiB, memory.used >= 256 MiB and "
				  "no other compute app; got %llu MiB, %llu MiB, other pids [%s]",
				  (unsigned long long)(t->limit / GC_MIB), total, used, list);
	return gc_verdict(GC_PASS, "memory.total %llu MiB, memory.used %llu MiB while holding "
			  "256 MiB; compute apps: none but this check (pid %d)", total, used,
			  (int)getpid());
}
