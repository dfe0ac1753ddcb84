/*
 * hostpid.c - this process's pid as the GPU driver and NVML know it.
 *
 * NVML reports processes by their pid in the host's pid namespace; inside a
 * container a process knows only its namespaced pid (its own /proc shows the
 * container's namespace, so the first NSpid entry is the container pid), and
 * nothing maps one to the other. Without the host pid the SM limiter cannot
 * find the container's utilisation in NVML's samples, measures 0 and opens
 * the throttle: the share is lost.
 *
 * The driver itself tells us. NVML lists the processes with a context on a
 * device (nvmlDeviceGetComputeRunningProcesses_v3/_v2/v1), so the list taken
 * before and after this process creates its first context differs by this
 * process. Other processes creating contexts in the same instant can add
 * candidates: those already registered by this container's other processes
 * are struck off, and if more than one remains, a marker allocation of a
 * size no other candidate is likely to allocate at that instant shows in
 * exactly one process's usedGpuMemory. When NVML cannot list processes, the
 * outermost NSpid entry (right for host-pid containers) is used and marked
 * unverified; the limiter then checks the attribution (limiter.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hooks.h"

#define MARK_BYTES (UINT64_C(6) << 20)

static int32_t known_pid;       /* atomic: 0 until learned */
static uint32_t known_source;   /* atomic: VGPU_HOSTPID_* */

uint32_t vgpu_hostpid_source(void) { return __atomic_load_n(&known_source, __ATOMIC_ACQUIRE); }

int32_t vgpu_hostpid(void) { return __atomic_load_n(&known_pid, __ATOMIC_ACQUIRE); }

static void learn(int32_t pid, uint32_t source)
{
	__atomic_store_n(&known_pid, pid, __ATOMIC_RELEASE);
	__atomic_store_n(&known_source, source, __ATOMIC_RELEASE);
	vgpu_region_set_hostpid(pid, source);
	VGPU_LOG(VGPU_LOG_DEBUG, "host pid %d (%s)", pid,
		 source == VGPU_HOSTPID_NVML ? "NVML process list" :
		 source == VGPU_HOSTPID_MARKER ? "NVML process list and a marker allocation" :
		 "NSpid, unverified");
}

/* The outermost pid visible in NSpid: the host pid only if /proc is the host's. */
static int32_t nspid(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int32_t pid = (int32_t)getpid();
	if (f == NULL)
		return pid;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "NSpid:", 6) == 0) {
			long v = strtol(line + 6, NULL, 10);
			if (v > 0)
				pid = (int32_t)v;
			break;
		}
	fclose(f);
	return pid;
}

void vgpu_hostpid_fallback(void)
{
	if (vgpu_hostpid() == 0)
		learn(nspid(), VGPU_HOSTPID_NSPID);
}

void vgpu_hostpid_after_fork(void)
{
	__atomic_store_n(&known_pid, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&known_source, VGPU_HOSTPID_UNKNOWN, __ATOMIC_RELAXED);
}

bool vgpu_hostpid_wanted(void)
{
	uint32_t s = vgpu_hostpid_source();
	return s == VGPU_HOSTPID_UNKNOWN || s == VGPU_HOSTPID_NSPID;
}

/* NVML's compute processes on device idx; -1 when NVML cannot list them. */
int vgpu_proc_list(int idx, struct vgpu_plist *out)
{
	nvmlDevice_t dev = vgpu_nvml_device(idx);
	unsigned int n = VGPU_PLIST_MAX;
	nvmlProcessInfo_t buf[VGPU_PLIST_MAX];
	nvmlProcessInfo_v1_t buf1[VGPU_PLIST_MAX];
	nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
	out->n = 0;
	if (dev == NULL)
		return -1;
	if (REAL(nvmlDeviceGetComputeRunningProcesses_v3) != NULL)
		rc = REAL(nvmlDeviceGetComputeRunningProcesses_v3)(dev, &n, buf);
	else if (REAL(nvmlDeviceGetComputeRunningProcesses_v2) != NULL)
		rc = REAL(nvmlDeviceGetComputeRunningProcesses_v2)(dev, &n, buf);
	else if (REAL(nvmlDeviceGetComputeRunningProcesses) != NULL) {
		rc = REAL(nvmlDeviceGetComputeRunningProcesses)(dev, &n, buf1);
		for (unsigned int i = 0; rc == NVML_SUCCESS && i < n && i < VGPU_PLIST_MAX; i++)
			buf[i] = (nvmlProcessInfo_t){buf1[i].pid, buf1[i].usedGpuMemory, 0, 0};
	}
	if (rc != NVML_SUCCESS)
		return -1;  /* more than VGPU_PLIST_MAX processes on one card is not a share */
	for (unsigned int i = 0; i < n && i < VGPU_PLIST_MAX; i++) {
		out->pid[i] = buf[i].pid;
		out->mem[i] = buf[i].usedGpuMemory;
	}
	out->n = n < VGPU_PLIST_MAX ? n : VGPU_PLIST_MAX;
	return 0;
}

int vgpu_plist_find(const struct vgpu_plist *l, unsigned int pid)
{
	for (unsigned int i = 0; i < l->n; i++)
		if (l->pid[i] == pid)
			return (int)i;
	return -1;
}

unsigned int vgpu_plist_new(const struct vgpu_plist *before, const struct vgpu_plist *after,
			    unsigned int *idx)
{
	unsigned int n = 0;
	for (unsigned int i = 0; i < after->n; i++)
		if (vgpu_plist_find(before, after->pid[i]) < 0)
			idx[n++] = i;
	return n;
}

/*
 * Strikes off candidates that are host pids this container's other
 * processes have learned from NVML already (never an unverified one, and
 * never this process's own slot, whose pid is ours).
 */
static unsigned int strike_siblings(unsigned int *cand, unsigned int n)
{
	struct vgpu_rproc procs[64];
	int np = vgpu_region_procs(-1, procs, 64);
	unsigned int k = 0;
	for (unsigned int i = 0; i < n; i++) {
		bool sibling = false;
		for (int j = 0; j < np; j++)
			sibling |= procs[j].pid != (int32_t)getpid() && procs[j].hostpid > 0 &&
				   (unsigned int)procs[j].hostpid == cand[i] &&
				   (procs[j].source == VGPU_HOSTPID_NVML ||
				    procs[j].source == VGPU_HOSTPID_MARKER ||
				    procs[j].source == VGPU_HOSTPID_AGENT);
		if (!sibling)
			cand[k++] = cand[i];
	}
	return k;
}

/*
 * Allocates a marker in context ctx on device idx and returns the candidate
 * whose usedGpuMemory grew by it, 0 if not exactly one did. The marker is
 * charged like any allocation and freed at once.
 */
static unsigned int by_marker(int idx, CUcontext ctx, const unsigned int *cand, unsigned int n)
{
	struct vgpu_plist a, b;
	CUdeviceptr p = 0;
	unsigned int found = 0;
	if (REAL(cuCtxPushCurrent_v2) == NULL || REAL(cuCtxPopCurrent_v2) == NULL ||
	    REAL(cuMemAlloc_v2) == NULL || vgpu_charge(idx, MARK_BYTES) != CUDA_SUCCESS)
		return 0;
	CUcontext popped;
	if (REAL(cuCtxPushCurrent_v2)(ctx) == CUDA_SUCCESS) {
		if (vgpu_proc_list(idx, &a) == 0 && REAL(cuMemAlloc_v2)(&p, MARK_BYTES) == CUDA_SUCCESS) {
			int hits = 0;
			if (vgpu_proc_list(idx, &b) == 0)
				for (unsigned int i = 0; i < n; i++) {
					int x = vgpu_plist_find(&a, cand[i]), y = vgpu_plist_find(&b, cand[i]);
					if (x >= 0 && y >= 0 && b.mem[y] >= a.mem[x] + MARK_BYTES &&
					    b.mem[y] != NVML_VALUE_NOT_AVAILABLE) {
						hits++;
						found = cand[i];
					}
				}
			if (hits != 1)
				found = 0;
			REAL(cuMemFree_v2)(p);
		}
		REAL(cuCtxPopCurrent_v2)(&popped);
	}
	vgpu_uncharge(idx, MARK_BYTES);
	return found;
}

/*
 * Called once this process's context ctx on device idx exists, with NVML's
 * lists from before and after its creation. Learns the host pid when they
 * single it out.
 */
void vgpu_hostpid_discover(int idx, const struct vgpu_plist *before,
			   const struct vgpu_plist *after, CUcontext ctx)
{
	unsigned int cand[VGPU_PLIST_MAX], n;
	if (!vgpu_hostpid_wanted())
		return;
	n = vgpu_plist_new(before, after, cand);
	for (unsigned int i = 0; i < n; i++)
		cand[i] = after->pid[cand[i]];
	if (n > 1)
		n = strike_siblings(cand, n);
	if (n == 1) {
		learn((int32_t)cand[0], VGPU_HOSTPID_NVML);
		return;
	}
	for (int attempt = 0; n > 1 && attempt < 5; attempt++) {
		unsigned int pid = by_marker(idx, ctx, cand, n);
		if (pid != 0) {
			learn((int32_t)pid, VGPU_HOSTPID_MARKER);
			return;
		}
		/* Others were marking too: try again at a moment of our own. */
		struct timespec pause = {0, (long)(1 + (unsigned)getpid() % 13) * 1000000L};
		nanosleep(&pause, NULL);
	}
	VGPU_LOG(VGPU_LOG_INFO, "host pid not found in NVML's process list (%u candidates)", n);
}
