//go:build e2e

package agentnvml

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef int (*handle_by_index_fn)(unsigned int, void **);
typedef int (*string_fn)(void *, char *, unsigned int);
typedef int (*sys_string_fn)(char *, unsigned int);
typedef int (*uint_fn)(void *, unsigned int *);
typedef int (*by_bus_fn)(const char *, void **);
typedef int (*affinity_fn)(void *, unsigned int, unsigned long *, unsigned int);
typedef int (*cpu_affinity_fn)(void *, unsigned int, unsigned long *);
typedef int (*nearest_fn)(void *, int, unsigned int *, void **);
typedef int (*state_fn)(void *, unsigned int, int *);
typedef int (*set_create_fn)(void **);
typedef int (*register_fn)(void *, unsigned long long, void *);
typedef int (*wait_fn)(void *, void *, unsigned int);
typedef int (*set_free_fn)(void *);
typedef const char *(*error_string_fn)(int);

// call runs one call of the stub's NVML, named by what, against card 0 and
// returns its nvmlReturn_t; -1000 when a symbol is missing.
static int call(void *lib, const char *what)
{
	char buf[128];
	void *h = NULL, *set = NULL;
	unsigned int u = 0;
	unsigned long mask[2];
	int state;
#define SYM(type, name) type name = (type)dlsym(lib, #name); if (name == NULL) return -1000
	SYM(handle_by_index_fn, nvmlDeviceGetHandleByIndex_v2);
	if (nvmlDeviceGetHandleByIndex_v2(0, &h) != 0)
		return -1001;
	if (!strcmp(what, "uuid-short")) { SYM(string_fn, nvmlDeviceGetUUID); return nvmlDeviceGetUUID(h, buf, 10); }
	if (!strcmp(what, "uuid-null")) { SYM(string_fn, nvmlDeviceGetUUID); return nvmlDeviceGetUUID(h, NULL, 96); }
	if (!strcmp(what, "name-short")) { SYM(string_fn, nvmlDeviceGetName); return nvmlDeviceGetName(h, buf, 5); }
	if (!strcmp(what, "version-short")) { SYM(sys_string_fn, nvmlSystemGetDriverVersion); return nvmlSystemGetDriverVersion(buf, 3); }
	if (!strcmp(what, "minor-bad-handle")) { SYM(uint_fn, nvmlDeviceGetMinorNumber); return nvmlDeviceGetMinorNumber(buf, &u); }
	if (!strcmp(what, "index-beyond")) return nvmlDeviceGetHandleByIndex_v2(99, &h);
	if (!strcmp(what, "bus-malformed")) { SYM(by_bus_fn, nvmlDeviceGetHandleByPciBusId_v2); return nvmlDeviceGetHandleByPciBusId_v2("zz", &h); }
	if (!strcmp(what, "bus-unknown")) { SYM(by_bus_fn, nvmlDeviceGetHandleByPciBusId_v2); return nvmlDeviceGetHandleByPciBusId_v2("0000:ff:00.0", &h); }
	if (!strcmp(what, "affinity-size-0")) { SYM(affinity_fn, nvmlDeviceGetMemoryAffinity); return nvmlDeviceGetMemoryAffinity(h, 0, mask, 0); }
	if (!strcmp(what, "affinity-bad-scope")) { SYM(affinity_fn, nvmlDeviceGetMemoryAffinity); return nvmlDeviceGetMemoryAffinity(h, 2, mask, 7); }
	if (!strcmp(what, "cpus-null")) { SYM(cpu_affinity_fn, nvmlDeviceGetCpuAffinity); return nvmlDeviceGetCpuAffinity(h, 2, NULL); }
	if (!strcmp(what, "nearest-bad-level")) { SYM(nearest_fn, nvmlDeviceGetTopologyNearestGpus); return nvmlDeviceGetTopologyNearestGpus(h, 15, &u, NULL); }
	if (!strcmp(what, "nearest-null-array")) { SYM(nearest_fn, nvmlDeviceGetTopologyNearestGpus); u = 2; return nvmlDeviceGetTopologyNearestGpus(h, 10, &u, NULL); }
	if (!strcmp(what, "nvlink-36")) { SYM(state_fn, nvmlDeviceGetNvLinkState); return nvmlDeviceGetNvLinkState(h, 36, &state); }
	SYM(set_create_fn, nvmlEventSetCreate);
	SYM(set_free_fn, nvmlEventSetFree);
	if (nvmlEventSetCreate(&set) != 0)
		return -1002;
	int rc = -1003;
	if (!strcmp(what, "register-unknown-type")) { SYM(register_fn, nvmlDeviceRegisterEvents); rc = nvmlDeviceRegisterEvents(h, 1ull << 40, set); }
	if (!strcmp(what, "wait-null-data")) { SYM(wait_fn, nvmlEventSetWait_v2); rc = nvmlEventSetWait_v2(set, NULL, 0); }
	nvmlEventSetFree(set);
	return rc;
}

static int call_stub(const char *path, const char *what)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (lib == NULL)
		return -2000;
	int rc = call(lib, what);
	dlclose(lib);
	return rc;
}

static const char *error_string(const char *path, int rc)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (lib == NULL)
		return "";
	error_string_fn f = (error_string_fn)dlsym(lib, "nvmlErrorString");
	const char *s = f != NULL ? f(rc) : "";
	dlclose(lib);
	return s;
}
*/
import "C"

import "unsafe"

// CallStub makes one of the calls of call (above) through the loaded stub
// libnvidia-ml at path, with arguments go-nvml never passes (short
// buffers, NULL pointers, invalid handles, levels and scopes), and returns
// the nvmlReturn_t. The library must already be loaded (go-nvml's Init).
func CallStub(path, what string) int {
	cp, cw := C.CString(path), C.CString(what)
	defer C.free(unsafe.Pointer(cp))
	defer C.free(unsafe.Pointer(cw))
	return int(C.call_stub(cp, cw))
}

// StubErrorString is the stub's nvmlErrorString(rc).
func StubErrorString(path string, rc int) string {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return C.GoString(C.error_string(cp, C.int(rc)))
}
