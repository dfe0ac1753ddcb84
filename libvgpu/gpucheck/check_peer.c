/*
 * check_peer.c - the checks that need two GPUs: what a tensor-parallel job
 * does between its cards under libvgpu (libvgpu/README.md, "Memory paths").
 * Each check process sees both cards (CUDA_VISIBLE_DEVICES=<uuid0>,<uuid1>,
 * a limit L on each), CUDA ordinal 0 the first, 1 the second.
 *
 * peer_access: one process. cuDeviceCanAccessPeer must answer, both ways,
 * what the driver answered the parent without libvgpu (passed in as
 * `expect`); where access is possible, cuCtxEnablePeerAccess succeeds both
 * ways; cuMemcpyPeer copies 64 MiB each way (and, where the driver has
 * cuMemcpyHtoD_v2 / cuMemcpyDtoH_v2, the bytes arrive); the limit still
 * holds on the second card (L + 64 MiB refused).
 *
 * ipc_two_gpus: two processes in two containers (two region files), as two
 * ranks of a job on two cards. The exporter (the check process, card 0)
 * allocates S and makes an IPC handle; the importer (`--ipc2-import`, its
 * own region, a context on card 1) opens it with
 * CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, reads it from card 1, and reports what
 * cuMemGetInfo_v2 showed free on both cards before and after: the open must
 * charge it nothing on either (within 2 MiB). The exporter frees S while the
 * importer has it open: its free must not rise (the exporter-charge rule).
 * The handle and the answers travel over a socketpair on fd 4.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_check.h"

#define CHAN 4
#define SLACK (2 * GC_MIB)
#define COPY (64 * GC_MIB)
#define PROBE (1 * GC_MIB)

extern char **environ;

static uint64_t diff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

/* The primary contexts of CUDA ordinals 0 and 1; card 0's current. */
static CUresult two_contexts(const struct gc_api *api, CUdevice dev[2], CUcontext ctx[2])
{
	CUresult r = api->cuInit(0);
	for (int i = 0; i < 2 && r == CUDA_SUCCESS; i++) {
		r = api->cuDeviceGet(&dev[i], i);
		if (r == CUDA_SUCCESS)
			r = api->cuDevicePrimaryCtxRetain(&ctx[i], dev[i]);
	}
	return r == CUDA_SUCCESS ? api->cuCtxSetCurrent(ctx[0]) : r;
}

static uint64_t free_on(const struct gc_api *api, CUcontext ctx)
{
	size_t f = 0, t = 0;
	if (api->cuCtxSetCurrent(ctx) != CUDA_SUCCESS || api->cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS)
		return UINT64_MAX;
	return f;
}

/* Fills `bytes` at p with a pattern when the driver can copy from the host; false if it cannot. */
static bool fill(const struct gc_api *api, CUdeviceptr p, size_t bytes, unsigned char seed)
{
	if (api->cuMemcpyHtoD_v2 == NULL || api->cuMemcpyDtoH_v2 == NULL)
		return false;
	unsigned char *buf = malloc(bytes);
	if (buf == NULL)
		return false;
	for (size_t i = 0; i < bytes; i++)
		buf[i] = (unsigned char)(i * 31u + seed);
	bool ok = api->cuMemcpyHtoD_v2(p, buf, bytes) == CUDA_SUCCESS;
	free(buf);
	return ok;
}

/* Whether `bytes` at p hold fill's pattern. */
static bool holds(const struct gc_api *api, CUdeviceptr p, size_t bytes, unsigned char seed)
{
	unsigned char *buf = malloc(bytes);
	bool ok = buf != NULL && api->cuMemcpyDtoH_v2(buf, p, bytes) == CUDA_SUCCESS;
	for (size_t i = 0; ok && i < bytes; i++)
		ok = buf[i] == (unsigned char)(i * 31u + seed);
	free(buf);
	return ok;
}

static const char *const peer_need[] = {"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
					"cuCtxSetCurrent", "cuMemGetInfo_v2", "cuMemAlloc_v2",
					"cuMemFree_v2", "cuDeviceCanAccessPeer",
					"cuCtxEnablePeerAccess", "cuMemcpyPeer", NULL};

/* Copies COPY bytes card 0 -> card 1 -> card 0; the contents compared where the driver allows. */
static int peer_copies(const struct gc_api *api, CUcontext ctx[2], char *how, size_t len)
{
	CUdeviceptr a = 0, b = 0;
	CUresult ra, rb, there = CUDA_ERROR_NOT_INITIALIZED, back = CUDA_ERROR_NOT_INITIALIZED;
	bool filled = false, arrived = false;
	api->cuCtxSetCurrent(ctx[0]);
	ra = api->cuMemAlloc_v2(&a, COPY);
	if (ra == CUDA_SUCCESS)
		filled = fill(api, a, COPY, 7);
	api->cuCtxSetCurrent(ctx[1]);
	rb = api->cuMemAlloc_v2(&b, COPY);
	if (ra == CUDA_SUCCESS && rb == CUDA_SUCCESS) {
		there = api->cuMemcpyPeer(b, ctx[1], a, ctx[0], COPY);
		arrived = filled && there == CUDA_SUCCESS && holds(api, b, COPY, 7);
		back = api->cuMemcpyPeer(a, ctx[0], b, ctx[1], COPY);
	}
	if (rb == CUDA_SUCCESS)
		api->cuMemFree_v2(b);
	api->cuCtxSetCurrent(ctx[0]);
	if (ra == CUDA_SUCCESS)
		api->cuMemFree_v2(a);
	if (ra != CUDA_SUCCESS || rb != CUDA_SUCCESS)
		snprintf(how, len, "cuMemAlloc_v2(64 MiB) on card 0 %s, on card 1 %s", gc_cuerr(api, ra),
			 gc_cuerr(api, rb));
	else if (there != CUDA_SUCCESS || back != CUDA_SUCCESS)
		snprintf(how, len, "cuMemcpyPeer 0->1 %s, 1->0 %s", gc_cuerr(api, there), gc_cuerr(api, back));
	else if (filled && !arrived)
		snprintf(how, len, "cuMemcpyPeer 0->1 succeeded but the bytes differ");
	else {
		snprintf(how, len, filled ? "64 MiB copied each way, contents compared"
					  : "64 MiB copied each way (contents not compared: no "
					    "cuMemcpyHtoD_v2/DtoH_v2)");
		return 0;
	}
	return -1;
}

int gc_check_peer_access(const struct gc_api *api, const struct gc_target *t, const struct gc_target *peer,
			 const char *expect)
{
	CUdevice dev[2];
	CUcontext ctx[2];
	char why[256], how[160];
	int can01 = -1, can10 = -1;
	(void)peer;
	if (gc_missing(api, peer_need, why, sizeof(why)))
		return gc_verdict(GC_SKIP, "driver lacks %s", why);
	CUresult r = two_contexts(api, dev, ctx);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "contexts on both cards: %s", gc_cuerr(api, r));
	if (api->cuDeviceCanAccessPeer(&can01, dev[0], dev[1]) != CUDA_SUCCESS ||
	    api->cuDeviceCanAccessPeer(&can10, dev[1], dev[0]) != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuDeviceCanAccessPeer failed under libvgpu");
	char seen[3] = {(char)('0' + (can01 != 0)), (char)('0' + (can10 != 0)), '\0'};
	if (strcmp(seen, expect) != 0)
		return gc_verdict(GC_FAIL, "cuDeviceCanAccessPeer 0->1, 1->0 answer %s under libvgpu, "
				  "%s without it", seen, expect);
	for (int i = 0; i < 2; i++) {
		if (!(i == 0 ? can01 : can10))
			continue;
		api->cuCtxSetCurrent(ctx[i]);
		if ((r = api->cuCtxEnablePeerAccess(ctx[1 - i], 0)) != CUDA_SUCCESS)
			return gc_verdict(GC_FAIL, "cuCtxEnablePeerAccess %d->%d returned %s", i, 1 - i,
					  gc_cuerr(api, r));
	}
	if (peer_copies(api, ctx, how, sizeof(how)) != 0)
		return gc_verdict(GC_FAIL, "%s", how);
	CUdeviceptr p;
	api->cuCtxSetCurrent(ctx[1]);
	r = api->cuMemAlloc_v2(&p, t->limit + COPY);
	if (r == CUDA_SUCCESS)
		api->cuMemFree_v2(p);
	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		return gc_verdict(GC_FAIL, "cuMemAlloc_v2(L + 64 MiB) on card 1 returned %s, want "
				  "CUDA_ERROR_OUT_OF_MEMORY", gc_cuerr(api, r));
	return gc_verdict(GC_PASS, "peer access %s both ways as without libvgpu%s; %s; card 1 still "
			  "limited", can01 && can10 ? "possible" : "answered", can01 && can10 ?
			  ", enabled" : "", how);
}

/* What the importer reports. */
struct ipc2_report {
	CUresult open, close, read;
	bool differs;               /* read, but not the bytes the exporter wrote */
	uint64_t free0_before, free0_after, free1_before, free1_after;
};

/* `gpu_check --ipc2-import`: the second rank, on card 1. Its verdict is the exporter's. */
int gc_ipc2_import_main(void)
{
	struct gc_api api;
	struct ipc2_report rep = {.open = CUDA_ERROR_NOT_INITIALIZED, .close = CUDA_ERROR_NOT_INITIALIZED,
				  .read = CUDA_ERROR_NOT_INITIALIZED};
	CUdevice dev[2];
	CUcontext ctx[2];
	CUipcMemHandle h;
	CUdeviceptr p = 0, own = 0;
	char go;
	if (gc_api_open(&api, false) != 0 || two_contexts(&api, dev, ctx) != CUDA_SUCCESS ||
	    gc_read_full(CHAN, &h, sizeof(h)) != 0)
		return 1;
	rep.free0_before = free_on(&api, ctx[0]);
	rep.free1_before = free_on(&api, ctx[1]);
	rep.open = api.cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	rep.free1_after = free_on(&api, ctx[1]);
	rep.free0_after = free_on(&api, ctx[0]);
	api.cuCtxSetCurrent(ctx[1]);
	if (rep.open == CUDA_SUCCESS && api.cuMemAlloc_v2(&own, PROBE) == CUDA_SUCCESS) {
		rep.read = api.cuMemcpyPeer(own, ctx[1], p, ctx[1], PROBE);
		rep.differs = rep.read == CUDA_SUCCESS && api.cuMemcpyHtoD_v2 != NULL &&
			      api.cuMemcpyDtoH_v2 != NULL && !holds(&api, own, PROBE, 3);
		api.cuMemFree_v2(own);
	}
	if (write(CHAN, &rep, sizeof(rep)) != (ssize_t)sizeof(rep) || gc_read_full(CHAN, &go, 1) != 0)
		return 1;
	rep.close = rep.open == CUDA_SUCCESS ? api.cuIpcCloseMemHandle(p) : CUDA_SUCCESS;
	return write(CHAN, &rep, sizeof(rep)) == (ssize_t)sizeof(rep) ? 0 : 1;
}

/* The environment of a second container: ours with a region file of its own. */
static char **other_container(const char *cache)
{
	size_t n = 0, k = 0;
	while (environ[n] != NULL)
		n++;
	char **env = calloc(n + 2, sizeof(*env));
	if (env == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "CUDA_DEVICE_MEMORY_SHARED_CACHE=", 32) != 0)
			env[k++] = environ[i];
	if (asprintf(&env[k], "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", cache) < 0) {
		free(env);
		return NULL;
	}
	return env;
}

static pid_t spawn_rank(int chan, const char *cache)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char **env = other_container(cache);
	if (n <= 0 || env == NULL)
		return -1;
	exe[n] = '\0';
	pid_t pid = fork();
	if (pid == 0) {
		dup2(chan, CHAN);
		close(GC_VERDICT_FD);
		char *argv[] = {exe, (char *)"--ipc2-import", NULL};
		execve(exe, argv, env);
		_exit(127);
	}
	for (char **e = env; *e != NULL; e++)
		if (strncmp(*e, "CUDA_DEVICE_MEMORY_SHARED_CACHE=", 32) == 0)
			free(*e);
	free(env);
	return pid;
}

/* Starts the second rank; returns its pid and our end of the channel in *chan, or -1. */
static pid_t start_rank(int *chan, char *cache, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	int sv[2];
	snprintf(cache, len, "%s/gpu_check-region2.XXXXXX", tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	int cfd = mkstemp(cache);
	if (cfd < 0)
		return -1;
	close(cfd);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	pid_t pid = spawn_rank(sv[1], cache);
	close(sv[1]);
	*chan = sv[0];
	return pid;
}

static int ipc2_verdict(const struct gc_api *api, const struct ipc2_report *rep, size_t size,
			uint64_t free_before_free, uint64_t free_after_free)
{
	if (rep->open != CUDA_SUCCESS || rep->close != CUDA_SUCCESS || rep->read != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "second rank on card 1: cuIpcOpenMemHandle_v2 %s, reading "
				  "it %s, cuIpcCloseMemHandle %s", gc_cuerr(api, rep->open),
				  gc_cuerr(api, rep->read), gc_cuerr(api, rep->close));
	if (rep->differs)
		return gc_verdict(GC_FAIL, "the second rank read the exported memory from card 1, but "
				  "not the bytes the exporter wrote");
	if (diff(rep->free0_before, rep->free0_after) > SLACK ||
	    diff(rep->free1_before, rep->free1_after) > SLACK)
		return gc_verdict(GC_FAIL, "opening %.1f MiB charged the second rank: free on card 0 "
				  "%.1f -> %.1f MiB, on card 1 %.1f -> %.1f MiB", gc_mib(size),
				  gc_mib(rep->free0_before), gc_mib(rep->free0_after),
				  gc_mib(rep->free1_before), gc_mib(rep->free1_after));
	if (diff(free_before_free, free_after_free) > SLACK)
		return gc_verdict(GC_FAIL, "the exporter freed %.1f MiB the second rank still had open "
				  "and its free rose from %.1f to %.1f MiB: no longer counted",
				  gc_mib(size), gc_mib(free_before_free), gc_mib(free_after_free));
	return gc_verdict(GC_PASS, "%.1f MiB on card 0 opened and read by a rank of another "
			  "container on card 1: charged nothing there on either card; freed by the "
			  "exporter while open, still counted on it", gc_mib(size));
}

int gc_check_ipc_two_gpus(const struct gc_api *api, const struct gc_target *t,
			  const struct gc_target *peer, const char *expect)
{
	static const char *const need[] = {"cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2",
					   "cuIpcCloseMemHandle", NULL};
	CUdevice dev[2];
	CUcontext ctx[2];
	CUdeviceptr p;
	CUipcMemHandle h;
	char why[256], cache[512];
	struct ipc2_report rep = {0};
	int chan = -1, st = 0;
	(void)peer;
	if (gc_missing(api, peer_need, why, sizeof(why)) || gc_missing(api, need, why, sizeof(why)))
		return gc_verdict(GC_SKIP, "driver lacks %s", why);
	if (strcmp(expect, "11") != 0)
		return gc_verdict(GC_SKIP, "the cards have no peer access to each other (the driver "
				  "says %s): IPC across them is not possible", expect);
	CUresult r = two_contexts(api, dev, ctx);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "contexts on both cards: %s", gc_cuerr(api, r));
	size_t size = t->limit / 4 / (2 * GC_MIB) * (2 * GC_MIB);
	if ((r = api->cuMemAlloc_v2(&p, size)) != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemAlloc_v2(%.1f MiB) on card 0 returned %s", gc_mib(size),
				  gc_cuerr(api, r));
	fill(api, p, PROBE, 3);
	if ((r = api->cuIpcGetMemHandle(&h, p)) != CUDA_SUCCESS) {
		api->cuMemFree_v2(p);
		return gc_verdict(r == CUDA_ERROR_NOT_SUPPORTED ? GC_SKIP : GC_FAIL,
				  "cuIpcGetMemHandle returned %s", gc_cuerr(api, r));
	}
	pid_t pid = start_rank(&chan, cache, sizeof(cache));
	if (pid < 0 || write(chan, &h, sizeof(h)) != (ssize_t)sizeof(h) ||
	    gc_read_full(chan, &rep, sizeof(rep)) != 0) {
		if (chan >= 0)
			close(chan);
		unlink(cache);
		return gc_verdict(GC_FAIL, "the second rank did not report (start or open failed)");
	}
	uint64_t before = free_on(api, ctx[0]);
	CUresult freed = api->cuMemFree_v2(p);
	uint64_t after = free_on(api, ctx[0]);
	char go = 'c';
	int ok = write(chan, &go, 1) == 1 && gc_read_full(chan, &rep, sizeof(rep)) == 0;
	close(chan);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	unlink(cache);
	if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return gc_verdict(GC_FAIL, "the second rank failed (status %d)", st);
	if (freed != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemFree_v2 of the exported memory returned %s",
				  gc_cuerr(api, freed));
	return ipc2_verdict(api, &rep, size, before, after);
}
