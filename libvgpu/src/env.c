/*
 * env.c - parses the container environment set by the node agent.
 *
 * Runs once from vgpu_init(). Every invalid value is reported once on stderr
 * (naming the variable, the value and what is allowed) and then ignored, so a
 * typo in a pod spec degrades to "no limit" instead of crashing the workload.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

extern char **environ;

/* Parses "<digits>[k|m|g|t][i][b]" (binary units, case-insensitive). */
int vgpu_parse_size(const char *text, uint64_t *bytes)
{
	const char *p = text;
	uint64_t value = 0;
	int shift = 0;

	if (p == NULL || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned digit = (unsigned)(*p - '0');
		if (value > (UINT64_MAX - digit) / 10)
			return -1;
		value = value * 10 + digit;
	}
	switch (tolower((unsigned char)*p)) {
	case 'k': shift = 10; p++; break;
	case 'm': shift = 20; p++; break;
	case 'g': shift = 30; p++; break;
	case 't': shift = 40; p++; break;
	default: break;
	}
	if (shift != 0 && tolower((unsigned char)*p) == 'i')
		p++;
	if (tolower((unsigned char)*p) == 'b')
		p++;
	if (*p != '\0')
		return -1;
	if (shift != 0 && value > (UINT64_MAX >> shift))
		return -1;
	*bytes = value << shift;
	return 0;
}

static int parse_percent(const char *text, uint32_t *percent)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (end == text || *end != '\0' || errno != 0 || v < 0)
		return -1;
	/* 0 and >= 100 both mean "no limit". */
	*percent = (v >= 100) ? 0 : (uint32_t)v;
	return 0;
}

static void set_mem(struct vgpu_config *cfg, const char *name, const char *value, int idx)
{
	uint64_t bytes;
	if (vgpu_parse_size(value, &bytes) != 0) {
		VGPU_LOG(VGPU_LOG_WARN,
			 "%s=\"%s\" ignored: want bytes or a number with a k/m/g/t suffix, e.g. 2000m",
			 name, value);
		return;
	}
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		if (idx < 0 || i == idx)
			cfg->mem_limit[i] = bytes;
}

static void set_sm(struct vgpu_config *cfg, const char *name, const char *value, int idx)
{
	uint32_t percent;
	if (parse_percent(value, &percent) != 0) {
		VGPU_LOG(VGPU_LOG_WARN,
			 "%s=\"%s\" ignored: want a percentage (0 or >= 100 means no limit)", name,
			 value);
		return;
	}
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		if (idx < 0 || i == idx)
			cfg->sm_limit[i] = percent;
}

/* Returns the device index of a "<prefix>_<i>" variable name, or -1 if invalid. */
static int suffix_index(const char *name, size_t prefix_len, size_t name_len)
{
	const char *digits = name + prefix_len + 1;
	size_t n = name_len - prefix_len - 1;
	int idx = 0;

	if (n == 0 || n > 3)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)digits[i]))
			return -1;
		idx = idx * 10 + (digits[i] - '0');
	}
	return idx < VGPU_MAX_DEVICES ? idx : -1;
}

/*
 * Per-device variables override the all-device one, whatever their order in
 * the environment, so the global values are applied first.
 */
static void parse_limits(struct vgpu_config *cfg)
{
	static const char mem[] = "CUDA_DEVICE_MEMORY_LIMIT";
	static const char sm[] = "CUDA_DEVICE_SM_LIMIT";
	const char *v;

	if ((v = getenv(mem)) != NULL && v[0] != '\0')
		set_mem(cfg, mem, v, -1);
	if ((v = getenv(sm)) != NULL && v[0] != '\0')
		set_sm(cfg, sm, v, -1);
	for (char **env = environ; env != NULL && *env != NULL; env++) {
		const char *eq = strchr(*env, '=');
		if (eq == NULL)
			continue;
		size_t len = (size_t)(eq - *env);
		char name[128];
		if (len >= sizeof(name))
			continue;
		memcpy(name, *env, len);
		name[len] = '\0';
		bool is_mem = len > sizeof(mem) && strncmp(name, mem, sizeof(mem) - 1) == 0 &&
			      name[sizeof(mem) - 1] == '_';
		bool is_sm = len > sizeof(sm) && strncmp(name, sm, sizeof(sm) - 1) == 0 &&
			     name[sizeof(sm) - 1] == '_';
		if (!is_mem && !is_sm)
			continue;
		int idx = suffix_index(name, is_mem ? sizeof(mem) - 1 : sizeof(sm) - 1, len);
		if (idx < 0) {
			VGPU_LOG(VGPU_LOG_WARN, "%s ignored: the suffix must be a device index 0..%d",
				 name, VGPU_MAX_DEVICES - 1);
			continue;
		}
		if (eq[1] == '\0')
			continue;
		if (is_mem)
			set_mem(cfg, name, eq + 1, idx);
		else
			set_sm(cfg, name, eq + 1, idx);
	}
}

static void parse_policy(struct vgpu_config *cfg)
{
	const char *v = getenv("GPU_CORE_UTILIZATION_POLICY");
	cfg->policy = VGPU_POLICY_DEFAULT;
	if (v == NULL || v[0] == '\0' || strcasecmp(v, "default") == 0)
		return;
	if (strcasecmp(v, "force") == 0)
		cfg->policy = VGPU_POLICY_FORCE;
	else if (strcasecmp(v, "disable") == 0)
		cfg->policy = VGPU_POLICY_DISABLE;
	else
		VGPU_LOG(VGPU_LOG_WARN,
			 "GPU_CORE_UTILIZATION_POLICY=\"%s\" ignored: want default, force or disable",
			 v);
}

/* CUDA_OVERSUBSCRIBE=true: the node agent shares out more than the cards hold (host.c). */
static void parse_oversubscribe(struct vgpu_config *cfg)
{
	const char *v = getenv("CUDA_OVERSUBSCRIBE");
	if (v == NULL || v[0] == '\0' || strcasecmp(v, "false") == 0)
		return;
	if (strcasecmp(v, "true") == 0)
		cfg->oversubscribe = true;
	else
		VGPU_LOG(VGPU_LOG_WARN, "CUDA_OVERSUBSCRIBE=\"%s\" ignored: want true or false", v);
}

/*
 * CUDA_TASK_PRIORITY, HAMi's nvidia.com/priority: 0 high, 1 low. Unset means
 * low, as in HAMi-core (the region's priority starts at 1 there). The agent
 * validates the request, so any other value here is a fault: it fails
 * closed, to low, so a bad value can never win a card from a high-priority
 * neighbour (priority.c).
 */
static void parse_priority(struct vgpu_config *cfg)
{
	cfg->priority = VGPU_PRIO_LOW;
	const char *v = getenv("CUDA_TASK_PRIORITY");
	if (v == NULL || v[0] == '\0')
		return;
	if (strcmp(v, "0") == 0) {
		cfg->priority = VGPU_PRIO_HIGH;
		return;
	}
	if (strcmp(v, "1") != 0)
		VGPU_LOG(VGPU_LOG_WARN,
			 "CUDA_TASK_PRIORITY=\"%s\" invalid: want 0 (high) or 1 (low); running as 1 (low)",
			 v);
}

/* Keeps CUDA_VISIBLE_DEVICES entries as text; device.c resolves them. */
static void parse_visible(struct vgpu_config *cfg)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	cfg->cvd_count = -1;
	if (v == NULL)
		return;
	cfg->cvd_count = 0;
	while (*v != '\0' && cfg->cvd_count < VGPU_MAX_DEVICES) {
		while (*v == ' ' || *v == ',')
			v++;
		size_t n = strcspn(v, ",");
		while (n > 0 && v[n - 1] == ' ')
			n--;
		if (n == 0)
			break;
		if (n >= VGPU_CVD_LEN)
			n = VGPU_CVD_LEN - 1;
		memcpy(cfg->cvd[cfg->cvd_count], v, n);
		cfg->cvd[cfg->cvd_count][n] = '\0';
		cfg->cvd_count++;
		v += strcspn(v, ",");
	}
}

/* A whole number in [lo, hi] from `name`; `dflt` when unset or invalid (said once). */
static uint32_t parse_count(const char *name, uint32_t lo, uint32_t hi, uint32_t dflt)
{
	const char *v = getenv(name);
	if (v == NULL || v[0] == '\0')
		return dflt;
	char *end = NULL;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (end == v || *end != '\0' || errno != 0 || n < lo || n > hi) {
		VGPU_LOG(VGPU_LOG_WARN, "%s=\"%s\" ignored: want a whole number from %u to %u", name,
			 v, lo, hi);
		return dflt;
	}
	return (uint32_t)n;
}

#ifdef VGPU_TEST_HOOKS
/*
 * Test build only (make build/libvgpu-hooks.so, and the ASan and TSan
 * builds; never libvgpu.so, which images/ ships):
 * LIBVGPU_TEST_DIE_IN_LOCK=N makes the process SIGKILL itself inside its N-th
 * successful charge, holding the region lock with the update half done;
 * LIBVGPU_TEST_STOP_IN_LOCK=N makes it SIGSTOP itself there instead, as a
 * debugger or a frozen cgroup would stop it. They exist so that the tests
 * can stop a process exactly there. The release library does not contain
 * them at all (test/run.sh, case no_test_hooks, and images/
 * TestReleaseLibvgpuHasNoTestHooks check it), so no environment can make a
 * shipped library behave as a test needs.
 */
static void parse_test_hooks(struct vgpu_config *cfg)
{
	cfg->test_die_in_lock = parse_count("LIBVGPU_TEST_DIE_IN_LOCK", 1, UINT32_MAX, 0);
	cfg->test_stop_in_lock = parse_count("LIBVGPU_TEST_STOP_IN_LOCK", 1, UINT32_MAX, 0);
}
#endif

void vgpu_env_parse(struct vgpu_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	parse_limits(cfg);
	parse_policy(cfg);
	parse_oversubscribe(cfg);
	parse_priority(cfg);
	parse_visible(cfg);
#ifdef VGPU_TEST_HOOKS
	parse_test_hooks(cfg);
#endif
	cfg->lock_timeout_ms = parse_count("LIBVGPU_LOCK_TIMEOUT_MS", 100, 600000, 5000);

	const char *path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
	if (path != NULL && path[0] != '\0') {
		if (strlen(path) >= sizeof(cfg->region_path))
			VGPU_LOG(VGPU_LOG_WARN, "CUDA_DEVICE_MEMORY_SHARED_CACHE ignored: path too long");
		else
			strcpy(cfg->region_path, path);
	}
	for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
		cfg->any_mem_limit |= cfg->mem_limit[i] != 0;
		cfg->any_sm_limit |= cfg->sm_limit[i] != 0;
	}
	cfg->accounting = cfg->any_mem_limit || cfg->region_path[0] != '\0';
}
