/*
 * probe.c - what a container sees of the GPU driver, printed one fact a
 * line for the toolkit stand-in's test (runtime_e2e_test.go). It loads the
 * driver's libraries by soname, as CUDA applications and NVML tools do, and
 * needs no CUDA or NVML header.
 *
 *   probe [forge=<minor>] [setenv]
 *     forge=<minor>  first makes its own /dev/nvidia<minor> (the container's
 *                    /dev is its own tmpfs, writable by its root)
 *     setenv         first asks for every card through its own environment
 *                    (NVIDIA_VISIBLE_DEVICES=all, and the stub's
 *                    VGPU_STUB_DRIVER_SOCKET=/dev/nvidiactl, where the stub
 *                    would read it)
 *
 * Output: cuda_lib=, nvml_lib= (1: dlopen found it), dev= (the /dev/nvidia*
 * entries), nvml_init= count=, "nvml <i> rc=<rc> uuid=<uuid>", cuda_init=
 * count=, "cuda <i> uuid=<32 hex digits> alloc=<rc>", and done.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*init_fn)(void);
typedef int (*count_fn)(unsigned int *);
typedef int (*handle_fn)(unsigned int, void **);
typedef int (*uuid_fn)(void *, char *, unsigned int);
typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_uuid_fn)(unsigned char *, int);
typedef int (*cu_ctx_fn)(void **, unsigned int, int);
typedef int (*cu_alloc_fn)(unsigned long long *, size_t);

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void list_dev(void)
{
	char *names[64];
	int n = 0;
	DIR *d = opendir("/dev");
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL && n < 64;)
		if (strncmp(e->d_name, "nvidia", 6) == 0)
			names[n++] = strdup(e->d_name);
	if (d != NULL)
		closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), cmp);
	printf("dev=");
	for (int i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", names[i]);
	printf("\n");
}

static void nvml(void *lib)
{
	init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
	count_fn count = (count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
	handle_fn handle = (handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	uuid_fn uuid = (uuid_fn)dlsym(lib, "nvmlDeviceGetUUID");
	unsigned int n = 0;
	int rc = init();
	if (rc == 0)
		count(&n);
	printf("nvml_init=%d count=%u\n", rc, n);
	for (unsigned int i = 0; i < n; i++) {
		void *h = NULL;
		char u[96] = "";
		rc = handle(i, &h);
		if (rc == 0)
			uuid(h, u, sizeof(u));
		printf("nvml %u rc=%d uuid=%s\n", i, rc, u);
	}
}

static void cuda(void *lib)
{
	cu_init_fn init = (cu_init_fn)dlsym(lib, "cuInit");
	cu_count_fn count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
	cu_get_fn get = (cu_get_fn)dlsym(lib, "cuDeviceGet");
	cu_uuid_fn uuid = (cu_uuid_fn)dlsym(lib, "cuDeviceGetUuid");
	cu_ctx_fn ctx = (cu_ctx_fn)dlsym(lib, "cuCtxCreate_v2");
	cu_alloc_fn alloc = (cu_alloc_fn)dlsym(lib, "cuMemAlloc_v2");
	int n = 0, rc = init(0);
	if (rc == 0)
		count(&n);
	printf("cuda_init=%d count=%d\n", rc, n);
	for (int i = 0; i < n; i++) {
		int dev;
		unsigned char u[16] = {0};
		void *c = NULL;
		unsigned long long p = 0;
		get(&dev, i);
		uuid(u, dev);
		/* A context and 1 MiB on each card: the driver records the process there. */
		rc = ctx(&c, 0, dev);
		if (rc == 0)
			rc = alloc(&p, 1u << 20);
		printf("cuda %d uuid=", i);
		for (int k = 0; k < 16; k++)
			printf("%02x", u[k]);
		printf(" alloc=%d\n", rc);
	}
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "forge=", 6) == 0) {
			char path[64];
			snprintf(path, sizeof(path), "/dev/nvidia%s", argv[i] + 6);
			int fd = open(path, O_CREAT | O_WRONLY, 0666);
			if (fd < 0) {
				perror(path);
				return 2;
			}
			close(fd);
		} else if (strcmp(argv[i], "setenv") == 0) {
			setenv("NVIDIA_VISIBLE_DEVICES", "all", 1);
			setenv("VGPU_STUB_DRIVER_SOCKET", "/dev/nvidiactl", 1);
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* libcuda first: the stub NVML brings the stub libcuda in as its own dependency. */
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	printf("cuda_lib=%d\n", cu != NULL);
	void *ml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
	printf("nvml_lib=%d\n", ml != NULL);
	list_dev();
	if (ml != NULL)
		nvml(ml);
	if (cu != NULL)
		cuda(cu);
	printf("done\n");
	return 0;
}
