/*
 * cuda_remote_dev.c - remote mode's device list and what the daemon owns:
 * memory, contexts, work, utilisation, and the facts NVML reads of a device
 * (e2e/fakedriver/PROTOCOL.md). Connections and framing are cuda_remote.c's.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remote_int.h"
#include "stub_int.h"

/* The device list, filled once under the process connection's lock. */
static int loaded;
static int daemon_dev[STUB_MAX_DEV];    /* the daemon's number of each device this process sees */
static int minors[STUB_MAX_DEV];
static char bus_ids[STUB_MAX_DEV][32];  /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
static char names[STUB_MAX_DEV][96];    /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
/* What OPEN said of each device (0: not asked yet, 1: granted, 2: refused) and its facts. */
static int opened[STUB_MAX_DEV];
static int facts_loaded[STUB_MAX_DEV];
static struct stub_facts facts[STUB_MAX_DEV];

int remote_daemon_dev(int phys) { return daemon_dev[phys]; }

int remote_phys_of(uint64_t dd)
{
	for (int p = 0; p < vgpuStubShared()->ndev; p++)
		if ((uint64_t)daemon_dev[p] == dd)
			return p;
	return -1;
}

/*
 * Whether the daemon's device number d, with that UUID, is in the
 * container, when a harness set VGPU_STUB_DRIVER_SOCKET: the NVIDIA
 * container toolkit gives a container the device nodes of the GPUs in
 * NVIDIA_VISIBLE_DEVICES only (UUIDs or indices, comma-separated, or
 * "all"), so the driver shows it those and no others, in PCI order: index
 * 0 inside is the first of them. Unset: all (a process on the host).
 */
static int visible_in_container(int d, const char *uuid)
{
	const char *v = getenv("NVIDIA_VISIBLE_DEVICES");
	char buf[1024];
	if (v == NULL || strcmp(v, "all") == 0)
		return 1;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long idx = strtol(tok, &end, 10);
		if ((*end == '\0' && idx == d) || strcmp(tok, uuid) == 0)
			return 1;
	}
	return 0;
}

/* Found as /dev/nvidiactl: the container has the GPUs whose /dev/nvidia<minor> it has. */
static int has_node(uint64_t minor)
{
	char path[32];
	struct stat st;
	snprintf(path, sizeof(path), "/dev/nvidia%llu", (unsigned long long)minor);
	return stat(path, &st) == 0;
}

/* DEV's answer: "<uuid> <total> <sms> <minor> <bus_id> <name>", the name the rest of the line. */
static int parse_dev(char *a, struct stub_dev *dv, uint64_t *total, uint64_t *sm, uint64_t *minor,
		     char *bus, char *name)
{
	if (remote_word(&a, dv->uuid, sizeof(dv->uuid)) != 0 || remote_num(&a, total, ' ') != 0 ||
	    remote_num(&a, sm, ' ') != 0 || remote_num(&a, minor, ' ') != 0 || remote_word(&a, bus, 32) != 0 ||
	    *a == '\0' || strlen(a) >= 96 || *sm == 0 || *sm > INT32_MAX)
		return -1;
	strcpy(name, a);
	return 0;
}

static int load_locked(void)
{
	struct stub_shared *g = vgpuStubShared();
	char *a = NULL, bus[32], name[96];
	uint64_t ndev, wave;
	int n = 0;
	if (remote_request_locked(&a, "HELLO") != ANS_OK || remote_num(&a, &ndev, ' ') != 0 ||
	    remote_num(&a, &wave, ' ') != 0 || *a != '\0')
		return -1;
	for (int d = 0; d < (int)ndev && n < STUB_MAX_DEV; d++) {
		uint64_t total, sm, minor;
		struct stub_dev *dv = &g->dev[n];
		if (remote_request_locked(&a, "DEV %d", d) != ANS_OK ||
		    parse_dev(a, dv, &total, &sm, &minor, bus, name) != 0)
			return -1;
		if (remote_nodes ? !has_node(minor) : !visible_in_container(d, dv->uuid))
			continue;
		dv->total = total;
		dv->sm = (int32_t)sm;
		dv->used = 0;   /* the daemon's to know (MEM) */
		minors[n] = (int)minor;
		memcpy(bus_ids[n], bus, sizeof(bus));
		memcpy(names[n], name, sizeof(name));
		daemon_dev[n++] = d;
	}
	g->wave_ns = wave;
	g->ndev = n;
	loaded = 1;
	return 0;
}

int stub_remote_load(void)
{
	remote_lock();
	int rc = remote_ensure_locked();
	if (rc == 0 && !loaded && (rc = load_locked()) != 0)
		remote_warn_locked("no device list (HELLO, DEV)", 0);
	remote_unlock();
	return rc;
}

const char *stub_remote_name(int phys) { return names[phys]; }

int stub_remote_bus_id(int phys, char *out, size_t len)
{
	if (strlen(bus_ids[phys]) >= len)
		return -1;
	strcpy(out, bus_ids[phys]);
	return 0;
}

/*
 * OPEN: whether the daemon lets this process use the device, as opening its
 * /dev/nvidia<minor> succeeds or fails; asked once per device and process.
 */
int stub_remote_open(int phys)
{
	if (!stub_remote())
		return 0;
	int v = __atomic_load_n(&opened[phys], __ATOMIC_ACQUIRE);
	if (v == 0) {
		int rc = remote_numbers(NULL, 0, "OPEN %d", daemon_dev[phys]);
		if (rc == ANS_DOWN)
			return -2;
		v = rc == ANS_OK ? 1 : 2;
		__atomic_store_n(&opened[phys], v, __ATOMIC_RELEASE);
	}
	return v == 1 ? 0 : -1;
}

/* ---- NVML's facts of a device (INFO, TOPO, SYS) ---- */

/* A comma-separated list of numbers, or "-" for none, ending at a space or the end. */
static int num_list(char **p, void (*add)(struct stub_facts *, uint64_t), struct stub_facts *f)
{
	if (**p == '-') {
		*p += (*p)[1] == ' ' ? 2 : 1;
		return 0;
	}
	for (;;) {
		uint64_t v;
		size_t n = strcspn(*p, ", ");
		char sep = (*p)[n];
		if (remote_num(p, &v, sep == ',' ? ',' : ' ') != 0)
			return -1;
		add(f, v);
		if (sep != ',')
			return 0;
	}
}

static void add_cpu(struct stub_facts *f, uint64_t cpu)
{
	if (cpu < STUB_MAX_CPUS) {
		f->cpus[cpu / 64] |= UINT64_C(1) << (cpu % 64);
		f->ncpus++;
	}
}

/* NVLinks: "gpu/<bus_id>" or "switch/<bus_id>", comma-separated, or "-". */
static int links(char **p, struct stub_facts *f)
{
	char item[64];
	if (**p == '-') {
		*p += (*p)[1] == ' ' ? 2 : 1;
		return 0;
	}
	for (;;) {
		size_t n = strcspn(*p, ", ");
		char sep = (*p)[n];
		if (n == 0 || n >= sizeof(item) || f->nlinks == STUB_MAX_LINKS)
			return -1;
		memcpy(item, *p, n);
		item[n] = '\0';
		*p += sep == '\0' ? n : n + 1;
		char *slash = strchr(item, '/');
		if (slash == NULL || strlen(slash + 1) >= sizeof(f->links[0].bus_id))
			return -1;
		*slash = '\0';
		if (strcmp(item, "gpu") != 0 && strcmp(item, "switch") != 0)
			return -1;
		f->links[f->nlinks].to_switch = strcmp(item, "switch") == 0;
		strcpy(f->links[f->nlinks++].bus_id, slash + 1);
		if (sep != ',')
			return 0;
	}
}

/* INFO's answer: "<cc_major> <cc_minor> <mig> <pci_device> <pci_subsystem> <numa> <cpus> <links> <events>". */
static int parse_info(char *a, struct stub_facts *f)
{
	uint64_t v[5], numa = 0, events;
	for (int i = 0; i < 5; i++)
		if (remote_num(&a, &v[i], ' ') != 0)
			return -1;
	f->cc_major = (int)v[0];
	f->cc_minor = (int)v[1];
	f->mig_capable = v[2] != 0;
	f->pci_device_id = (uint32_t)v[3];
	f->pci_subsystem_id = (uint32_t)v[4];
	f->numa = -1;
	if (*a == '-')
		a += a[1] == ' ' ? 2 : 1;
	else if (remote_num(&a, &numa, ' ') != 0)
		return -1;
	else
		f->numa = (int)numa;
	if (num_list(&a, add_cpu, f) != 0 || links(&a, f) != 0 || remote_num(&a, &events, ' ') != 0 || *a != '\0')
		return -1;
	f->event_types = events;
	return 0;
}

/* Local mode: a PCIe card of a one-socket server, bus number from its index; MIG as VGPU_STUB_MIG says. */
static void local_facts(int phys, struct stub_facts *f)
{
	memset(f, 0, sizeof(*f));
	f->minor = phys;
	snprintf(f->bus_id, sizeof(f->bus_id), "%08X:%02X:00.0", 0u, (unsigned)phys + 1);
	f->cc_major = 8;
	f->mig_capable = phys == stub_mig_phys();
	f->event_types = STUB_EVENT_XID;
	/* VGPU_STUB_NVLINK=1: every card has one NVLink to every other (peers, cuda_share.c). */
	const char *nv = getenv("VGPU_STUB_NVLINK");
	if (nv != NULL && strcmp(nv, "1") == 0)
		for (int o = 0; o < vgpuStubShared()->ndev && f->nlinks < STUB_MAX_LINKS; o++)
			if (o != phys)
				snprintf(f->links[f->nlinks++].bus_id, sizeof(f->links[0].bus_id), "%08X:%02X:00.0",
					 0u, (unsigned)o + 1);
}

int stub_facts(int phys, struct stub_facts *out)
{
	if (!stub_remote()) {
		local_facts(phys, out);
		return 0;
	}
	int rc = 0;
	remote_lock();
	if (!facts_loaded[phys]) {
		char *a = NULL;
		struct stub_facts *f = &facts[phys];
		memset(f, 0, sizeof(*f));
		f->minor = minors[phys];
		memcpy(f->bus_id, bus_ids[phys], sizeof(f->bus_id));
		rc = remote_request_locked(&a, "INFO %d", daemon_dev[phys]) == ANS_OK ? parse_info(a, f) : -1;
		facts_loaded[phys] = rc == 0;
	}
	if (rc == 0)
		*out = facts[phys];
	remote_unlock();
	return rc;
}

int stub_remote_topo(int a, int b)
{
	uint64_t level;
	if (remote_numbers(&level, 1, "TOPO %d %d", daemon_dev[a], daemon_dev[b]) != ANS_OK)
		return -1;
	return (int)level;
}

int stub_remote_driver_version(char *out, size_t len)
{
	char *a = NULL;
	remote_lock();
	int rc = remote_request_locked(&a, "SYS") == ANS_OK && *a != '\0' && strlen(a) < len ? 0 : -1;
	if (rc == 0)
		strcpy(out, a);
	remote_unlock();
	return rc;
}

/* ---- what the driver owns ---- */

CUresult stub_remote_alloc(int phys, uint64_t bytes)
{
	int rc = remote_numbers(NULL, 0, "ALLOC %d %llu", daemon_dev[phys], (unsigned long long)bytes);
	return rc == ANS_OK    ? CUDA_SUCCESS
	       : rc == ANS_OOM ? CUDA_ERROR_OUT_OF_MEMORY
			       : STUB_CUDA_ERROR_UNKNOWN;
}

/* An ERR (more than we hold: the daemon lost us) changes nothing a free can fix. */
void stub_remote_free(int phys, uint64_t bytes)
{
	remote_numbers(NULL, 0, "FREE %d %llu", daemon_dev[phys], (unsigned long long)bytes);
}

void stub_remote_ctx(int phys, int delta)
{
	remote_numbers(NULL, 0, "CTX %d %d", daemon_dev[phys], delta);
}

CUresult stub_remote_launch(int phys, uint64_t work_ns)
{
	return remote_numbers(NULL, 0, "LAUNCH %d %llu", daemon_dev[phys], (unsigned long long)work_ns) == ANS_OK
		       ? CUDA_SUCCESS
		       : STUB_CUDA_ERROR_UNKNOWN;
}

CUresult stub_remote_sync(int phys)
{
	return remote_numbers(NULL, 0, "SYNC %d", daemon_dev[phys]) == ANS_OK ? CUDA_SUCCESS
									       : STUB_CUDA_ERROR_UNKNOWN;
}

/* SELF, asked once per process: -1 when the daemon cannot say. */
int32_t stub_remote_self(void)
{
	static int32_t cached, cached_for;
	int32_t me = (int32_t)getpid();
	uint64_t pid = 0;
	if (__atomic_load_n(&cached_for, __ATOMIC_ACQUIRE) == me)
		return __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (remote_numbers(&pid, 1, "SELF") != ANS_OK || pid == 0 || pid > INT32_MAX)
		return -1;
	__atomic_store_n(&cached, (int32_t)pid, __ATOMIC_RELAXED);
	__atomic_store_n(&cached_for, me, __ATOMIC_RELEASE);
	return (int32_t)pid;
}

uint64_t stub_remote_busy(int phys, int32_t pid)
{
	uint64_t ns = 0;
	return remote_numbers(&ns, 1, "BUSY %d %d", daemon_dev[phys], (int)pid) == ANS_OK ? ns : 0;
}

int stub_remote_mem(int phys, uint64_t *total, uint64_t *used)
{
	uint64_t v[2];
	if (remote_numbers(v, 2, "MEM %d", daemon_dev[phys]) != ANS_OK)
		return -1;
	*total = v[0];
	*used = v[1] < v[0] ? v[1] : v[0];
	return 0;
}

int stub_remote_dutil(int phys)
{
	uint64_t pct;
	if (remote_numbers(&pct, 1, "DUTIL %d", daemon_dev[phys]) != ANS_OK)
		return -1;
	return pct > 100 ? 100 : (int)pct;
}

/*
 * PROCS: processes with a context on the device. Fills out[0..cap) and
 * returns how many the daemon listed (-1: no answer).
 */
int stub_remote_procs(int phys, struct stub_remote_proc *out, int cap)
{
	char *a = NULL;
	uint64_t n, pid, bytes, ctxs;
	int k = 0;
	remote_lock();
	int rc = remote_request_locked(&a, "PROCS %d", daemon_dev[phys]);
	if (rc == ANS_OK && remote_num(&a, &n, ' ') != 0)
		rc = ANS_ERR;
	for (; rc == ANS_OK && *a != '\0'; k++) {
		if (remote_num(&a, &pid, ':') != 0 || remote_num(&a, &bytes, ':') != 0 ||
		    remote_num(&a, &ctxs, ' ') != 0 || pid == 0 || pid > INT32_MAX) {
			rc = ANS_ERR;
			break;
		}
		if (k < cap)
			out[k] = (struct stub_remote_proc){(int32_t)pid, (int32_t)ctxs, bytes};
	}
	remote_unlock();
	return rc == ANS_OK && n == (uint64_t)k ? k : -1;
}

/*
 * PUTIL: the utilisation samples newer than last_seen_us, one per process
 * (nvmlDeviceGetProcessUtilization returns "one utilization sample structure
 * ... per process running", NVML API reference): a process's newest sample,
 * which carries the newest timestamp for the caller's next last_seen. Fills
 * out[0..cap) and returns how many processes it found (-1: no answer).
 */
int stub_remote_putil(int phys, uint64_t last_seen_us, struct stub_remote_sample *out, int cap)
{
	char *a = NULL;
	uint64_t n, pid, ts, pct, seen = 0;
	int k = 0;
	remote_lock();
	int rc = remote_request_locked(&a, "PUTIL %d %llu", daemon_dev[phys], (unsigned long long)last_seen_us);
	if (rc == ANS_OK && remote_num(&a, &n, ' ') != 0)
		rc = ANS_ERR;
	for (; rc == ANS_OK && *a != '\0'; seen++) {
		if (remote_num(&a, &pid, ':') != 0 || remote_num(&a, &ts, ':') != 0 ||
		    remote_num(&a, &pct, ' ') != 0 || pid == 0 || pid > INT32_MAX) {
			rc = ANS_ERR;
			break;
		}
		int i = 0;
		while (i < k && out[i].pid != (int32_t)pid)
			i++;
		if (i == k && k == cap)
			continue;       /* more processes than the caller can hold */
		if (i == k)
			out[k++] = (struct stub_remote_sample){(int32_t)pid, 0, 0};
		if (ts >= out[i].ts_us) {
			out[i].ts_us = ts;
			out[i].sm_pct = pct > 100 ? 100 : (uint32_t)pct;
		}
	}
	remote_unlock();
	return rc == ANS_OK && n == seen ? k : -1;
}
