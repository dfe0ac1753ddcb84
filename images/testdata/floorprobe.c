/*
 * floorprobe.c - TestLibvgpuLoadsOnTheGLIBCFloor runs it with glibc 2.31's
 * loader and libvgpu.so in LD_PRELOAD. It prints the glibc it runs on,
 * which object its cuInit binds to (libvgpu.so: no driver is loaded) and
 * what the hook answers without a driver. cuInit is a weak reference, so
 * the probe links without a libcuda and the loader binds it to the
 * preloaded library (a dlsym would go through libvgpu's own dlsym hook,
 * which hands out driver symbols only when a driver is there).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <stdio.h>

extern int cuInit(unsigned int flags) __attribute__((weak));

int main(void)
{
	Dl_info info = {0};

	printf("glibc=%s\n", gnu_get_libc_version());
	if (cuInit == NULL) {
		printf("cuInit=unresolved\n");
		return 1;
	}
	if (dladdr((void *)cuInit, &info) != 0 && info.dli_fname != NULL)
		printf("cuInit.object=%s\n", info.dli_fname);
	printf("cuInit=%d\n", cuInit(0));
	return 0;
}
