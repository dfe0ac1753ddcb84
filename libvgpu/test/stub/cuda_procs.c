/*
 * cuda_procs.c - the processes the stub driver knows, by host pid.
 *
 * The kernel driver identifies a process by its pid in the initial pid
 * namespace, whatever namespace the process runs in, and NVML reports those
 * pids: in a container, nvmlDeviceGetComputeRunningProcesses and
 * nvmlDeviceGetProcessUtilization list pids the container cannot see (the
 * NVML API reference does not translate them, and NVIDIA's container
 * documentation shows nvidia-smi inside a container listing host pids). The
 * stub knows its host pid the way the kernel does, from a procfs of the host
 * namespace: the test harness opens the host's /proc before it enters a new
 * pid namespace and passes the descriptor as VGPU_STUB_HOST_PROC_FD;
 * readlinkat(fd, "self") then names the caller's pid in that namespace.
 * Without it the process is in the host namespace and getpid() is the pid.
 *
 * A process is listed on a device while it has a context there (as NVML's
 * compute process list does) and is alive; its usedGpuMemory is the device
 * memory it holds, context included.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stub_int.h"

static int host_proc_fd(void)
{
	const char *v = getenv("VGPU_STUB_HOST_PROC_FD");
	return v != NULL && *v ? atoi(v) : -1;
}

int32_t vgpuStubHostPid(void)
{
	static int32_t cached;
	static int32_t cached_for;
	if (stub_remote())
		return stub_remote_self();    /* the daemon's SO_PEERCRED view */
	int32_t me = (int32_t)getpid();
	if (__atomic_load_n(&cached_for, __ATOMIC_ACQUIRE) == me)
		return __atomic_load_n(&cached, __ATOMIC_RELAXED);
	int32_t hp = me;
	int fd = host_proc_fd();
	char buf[32];
	ssize_t n = fd >= 0 ? readlinkat(fd, "self", buf, sizeof(buf) - 1) : -1;
	if (n > 0) {
		buf[n] = '\0';
		hp = (int32_t)atoi(buf);
	}
	__atomic_store_n(&cached, hp, __ATOMIC_RELAXED);
	__atomic_store_n(&cached_for, me, __ATOMIC_RELEASE);
	return hp;
}

/* Whether host pid `pid` is alive, asked of the host's procfs when we are not in it. */
int stub_host_pid_alive(int32_t pid)
{
	int fd = host_proc_fd();
	if (fd >= 0) {
		char name[16];
		struct stat st;
		snprintf(name, sizeof(name), "%d", pid);
		return fstatat(fd, name, &st, 0) == 0;
	}
	return kill(pid, 0) == 0 || errno == EPERM;
}

struct stub_proc *stub_proc_rec(int phys, int32_t pid, int create)
{
	struct stub_dev *d = &vgpuStubShared()->dev[phys];
	for (int i = 0; i < STUB_MAX_PROC; i++)
		if (__atomic_load_n(&d->procs[i].pid, __ATOMIC_ACQUIRE) == pid)
			return &d->procs[i];
	if (!create)
		return NULL;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < STUB_MAX_PROC; i++) {
			struct stub_proc *p = &d->procs[i];
			int32_t cur = __atomic_load_n(&p->pid, __ATOMIC_ACQUIRE);
			/* Second pass: entries of dead processes are free too (the driver tore them down). */
			if (cur != 0 && (pass == 0 || stub_host_pid_alive(cur)))
				continue;
			if (!__atomic_compare_exchange_n(&p->pid, &cur, pid, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_RELAXED))
				continue;
			p->first_ns = vgpuStubNowNs();
			p->enq_ns = 0;
			p->busy_until_ns = 0;
			__atomic_store_n(&p->mem, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&p->ctxs, 0, __ATOMIC_RELAXED);
			return p;
		}
	return NULL;
}

/* This process's entry per device, remembered: charges are on the benchmark's path. */
static struct stub_proc *mine(int phys)
{
	static struct stub_proc *cache[STUB_MAX_DEV];
	static int32_t cache_pid;
	int32_t pid = vgpuStubHostPid();
	if (__atomic_load_n(&cache_pid, __ATOMIC_ACQUIRE) != pid) {
		for (int d = 0; d < STUB_MAX_DEV; d++)
			__atomic_store_n(&cache[d], NULL, __ATOMIC_RELAXED);
		__atomic_store_n(&cache_pid, pid, __ATOMIC_RELEASE);
	}
	struct stub_proc *p = __atomic_load_n(&cache[phys], __ATOMIC_ACQUIRE);
	if (p == NULL || __atomic_load_n(&p->pid, __ATOMIC_RELAXED) != pid) {
		p = stub_proc_rec(phys, pid, 1);
		__atomic_store_n(&cache[phys], p, __ATOMIC_RELEASE);
	}
	return p;
}

void stub_proc_mem(int phys, int64_t delta)
{
	struct stub_proc *p = mine(phys);
	if (p != NULL)
		__atomic_fetch_add(&p->mem, (uint64_t)delta, __ATOMIC_RELAXED);
}

void stub_proc_ctx(int phys, int delta)
{
	if (stub_remote()) {
		stub_remote_ctx(phys, delta);
		return;
	}
	struct stub_proc *p = mine(phys);
	if (p != NULL)
		__atomic_fetch_add(&p->ctxs, delta, __ATOMIC_RELAXED);
}
