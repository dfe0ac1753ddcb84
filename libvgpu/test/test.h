/*
 * test.h - helpers for libvgpu's test programs. Tests reach the driver the
 * way CUDA runtimes do: dlopen("libcuda.so.1") and dlsym (or cuGetProcAddress),
 * with libvgpu in LD_PRELOAD and the stub driver on LD_LIBRARY_PATH.
 */
#ifndef VGPU_TEST_H
#define VGPU_TEST_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_api.h"
#include "nvml_api.h"
#include "stub.h"
#include "stub_int.h"
#include "vgpu_region.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

extern int t_failed;
extern const char *t_self;      /* absolute path of this test binary */

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			t_failed = 1;                                                      \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
		}                                                                          \
	} while (0)

/* Each operand is evaluated once: the message shows the value that failed. */
#define CHECK_EQ(got, want)                                                                \
	do {                                                                               \
		uint64_t t_got_ = (uint64_t)(got), t_want_ = (uint64_t)(want);             \
		if (t_got_ != t_want_) {                                                   \
			t_failed = 1;                                                      \
			fprintf(stderr, "FAIL %s:%d: %s == %s: got %llu want %llu\n",        \
				__FILE__, __LINE__, #got, #want,                           \
				(unsigned long long)t_got_, (unsigned long long)t_want_);  \
		}                                                                          \
	} while (0)

/* Resolve an entry point through dlopen + dlsym, typed by its declaration. */
void *t_sym(const char *lib, const char *name);
#define CU(name) ((__typeof__(&name))t_sym("libcuda.so.1", #name))
#define NV(name) ((__typeof__(&name))t_sym("libnvidia-ml.so.1", #name))
#define STUB(name) ((__typeof__(&name))t_sym("libcuda.so.1", #name))

/* cuInit + primary context of CUDA device `dev` made current. */
CUcontext t_ctx(int dev);
/* Region named by CUDA_DEVICE_MEMORY_SHARED_CACHE, mapped read-write (NULL if none). */
struct vgpu_region *t_region(void);
/* Bytes counted for this process on device idx (from its region slot). */
uint64_t t_mine(int idx);
struct vgpu_proc_slot *t_slot_of(struct vgpu_region *r, int pid);
/* Runs this binary's sub-command `cmd` in a child with extra "K=V" settings. */
int t_spawn(const char *cmd, const char *const *env, int stderr_fd);
int t_wait(int pid);            /* exit status, or 128+signal */
char *t_read_file(const char *path);
/* Runs sub-command `cmd` with `env` to the end; its stderr, and its exit status in *rc. */
const char *t_child_stderr(const char *cmd, const char *const *env, int *rc);
/*
 * Spawns `cmd` and returns its pid once it called t_ready() (a byte on fd
 * 20), or -1 if it never did.
 */
int t_spawn_ready(const char *cmd, const char *const *env);
void t_ready(void);
/* How often `needle` occurs in `text`. */
int t_count(const char *text, const char *needle);
const char *t_dir(void);        /* per-test scratch directory (VGPU_TEST_DIR) */
/*
 * Whether the case judges rates and times measured on the machine
 * (VGPU_TEST_TIMING unset or not 0). run.sh sets 0 under the sanitizers and
 * valgrind: their slowdown is what such a verdict would measure there, so
 * the cases run shorter, for the sanitizer's findings and their other
 * checks, and the rate verdicts run in the normal mode only.
 */
bool t_timing(void);
/* The device's used memory as the driver knows it (the daemon's in remote mode). */
uint64_t t_device_used(int phys);
/* Fails the case if the stub's observer saw a device over its limit. */
void t_no_violation(void);
/* Fails the case (exit 124) instead of hanging if it is still running after `seconds`. */
void t_watchdog(unsigned seconds);

typedef int (*t_fn)(void);
struct t_case { const char *name; t_fn fn; };
extern const struct t_case t_memory_cases[], t_api_cases[], t_region_cases[], t_sm_cases[],
	t_stress_cases[], t_corrupt_cases[], t_limit_cases[], t_device_cases[], t_view_cases[],
	t_prio_cases[], t_oversub_cases[], t_share_cases[], t_graph_cases[];

#endif
