/*
 * init.c - one-time initialisation, process registration and fork handling.
 *
 * Nothing happens when the library is merely loaded: it is preloaded into
 * every process of the container (shells, tools), so all work waits for the
 * first hooked call. vgpu_init() parses the environment and maps the region;
 * vgpu_register() claims this process's slot and starts the watcher thread,
 * and runs only when the process actually uses CUDA.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"
#include "symbols.h"

struct vgpu_config vgpu_cfg;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

uint64_t vgpu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t vgpu_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static int reg_done;            /* registration attempted in this process image */

/*
 * The watcher keeps the shared region honest (re-registers after a rebuild,
 * reclaims dead processes' slots, every VGPU_WATCH_NS) and drives the SM
 * limiter (every 10 ms when it is on).
 */
static void *watcher_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "vgpu-watch");
	__atomic_store_n(&vgpu_watcher_running, 1, __ATOMIC_RELEASE);
	uint64_t next_watch = 0;
	for (;;) {
		uint64_t now = vgpu_now_ns();
		if (now >= next_watch) {
			vgpu_region_watch();
			next_watch = now + VGPU_WATCH_NS;
		}
		bool limiter = __atomic_load_n(&vgpu_limiter_enabled, __ATOMIC_RELAXED);
		if (limiter)
			vgpu_limiter_tick();
		struct timespec pause = {.tv_sec = 0, .tv_nsec = limiter ? 10 * 1000 * 1000 : VGPU_WATCH_NS};
		nanosleep(&pause, NULL);
	}
	return NULL;
}

static int start_watcher(void)
{
	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	/* The application's signals must never be delivered to our thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&tid, &attr, watcher_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		VGPU_LOG(VGPU_LOG_ERROR, "cannot start the watcher thread: %s", strerror(rc));
	return rc;
}

/*
 * Claims the slot in the calling thread: the slot's liveness is a file lock
 * of the process, not of a thread, and charging must not start before it.
 */
static void do_register(void)
{
	if (vgpu_region() == NULL)
		return;
	int claimed = vgpu_region_claim_slot() == 0;
	if ((claimed && vgpu_region_shared()) || __atomic_load_n(&vgpu_limiter_enabled, __ATOMIC_RELAXED))
		start_watcher();
}

void vgpu_register(void)
{
	if (VGPU_LIKELY(__atomic_load_n(&reg_done, __ATOMIC_ACQUIRE)))
		return;
	vgpu_init();
	pthread_mutex_lock(&reg_mu);
	if (!reg_done) {
		do_register();
		__atomic_store_n(&reg_done, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&reg_mu);
}

static void fork_child(void)
{
	/* Only the forking thread survives: rebuild process-local state. */
	pthread_mutex_init(&reg_mu, NULL);
	reg_done = 0;
	vgpu_region_after_fork();
	vgpu_ledger_reset();
	vgpu_pool_reset();
	vgpu_context_reset();
	vgpu_limiter_after_fork();
	vgpu_hostpid_after_fork();
}

static void do_init(void)
{
	vgpu_log_level();
	vgpu_env_parse(&vgpu_cfg);
	if (vgpu_cfg.accounting || vgpu_cfg.any_sm_limit)
		vgpu_region_attach();
	vgpu_limiter_setup();
	vgpu_prio_setup();
	pthread_atfork(NULL, NULL, fork_child);
	VGPU_LOG(VGPU_LOG_DEBUG, "initialised: accounting=%d sm_limit=%d region=%s",
		 vgpu_cfg.accounting, vgpu_cfg.any_sm_limit,
		 vgpu_cfg.region_path[0] ? vgpu_cfg.region_path : "(private)");
}

void vgpu_init(void) { pthread_once(&init_once, do_init); }

__attribute__((destructor)) static void vgpu_fini(void) { vgpu_region_release_slot(); }

/* cuInit is where a CUDA process registers in the region (slot + watcher). */
VGPU_EXPORT CUresult cuInit(unsigned int flags)
{
	vgpu_init();
	vgpu_symbols_cuda();
	if (REAL(cuInit) == NULL)
		return vgpu_cuda_loaded() ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
	CUresult res = REAL(cuInit)(flags);
	if (res == CUDA_SUCCESS)
		vgpu_register();
	return res;
}
