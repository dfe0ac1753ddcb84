#!/bin/sh
# run.sh BUILD_DIR MODE... - runs the libvgpu suite in each mode and prints
# one line per case and a final "N passed, N failed" line (read by CI).
#
# Modes: normal (libvgpu.so, the release library), asan (ASan+UBSan build of library and tests),
# tsan (ThreadSanitizer build; only the cases flagged tsan: the concurrent
# ones), valgrind (memcheck, children traced). Timing-based cases (sm_*) and
# the 256-process case are skipped under valgrind: its 20-50x slowdown makes
# simulated-time control loops and 256 concurrent valgrind processes
# meaningless on a 2-core machine. Under ASan the scale case starts 64
# processes instead of 256 (each ASan process reserves large shadow mappings),
# under TSan 32.
#
# What each mode checks in the cases whose verdict is a rate or a time
# (sm_*, prio_yield*, init_256, gpu_check_stub: timed() below):
# - normal judges the rates and times (SM utilisation within its share,
#   priority's launch rates, 256 processes started within 20 s, gpu_check's
#   sm_share) at full length, in the timed phase, one case at a time;
# - asan, tsan and valgrind (VGPU_TEST_TIMING=0) run the same code paths
#   shorter, in the lanes, and judge what needs no quiet machine: memory
#   errors and undefined behaviour (asan), races (tsan), memcheck errors and
#   the release library's reads of uninitialised memory, which ASan cannot
#   see, and its leaks (valgrind: the priority cases), and each case's
#   functional checks (every worker that should launch does, every process
#   started and left the region clean, the fallback warnings said once).
#   A rate there measures the sanitizer: on a loaded machine ASan's sm_*
#   got 75.7 % of a 90 % share and 71-84 % where 85 % was due.
#
# Stress cases (flag stress) run 8 processes for 3 s (6 under TSan, 4 under
# valgrind). RUN_ONLY=stress runs only them, with STRESS_PROCS processes for
# STRESS_SECS seconds (STRESS_PROCS_VALGRIND under valgrind): `make stress`.
# ONLY=<regex> runs only the cases whose label matches.
#
# LANES=2 runs the modes in two lanes at once (on a machine with two cores
# or more): each lane runs its modes one after the other, and the lanes are
# balanced by each mode's measured run time (longest first, onto the lane
# with less work). A lane's output is printed whole when all have ended.
# Most cases wait (on a simulated device, on a child, on a timer): one mode
# alone leaves a core idle most of the time. The timed cases (timed below:
# the normal mode's rates and times measured on the machine) are left out
# of the lanes and run after them, one at a time, as without lanes.
#
# Test hooks (LIBVGPU_TEST_DIE_IN_LOCK, LIBVGPU_TEST_STOP_IN_LOCK) exist only
# in the test builds (-DVGPU_TEST_HOOKS: build/libvgpu-hooks.so and the ASan
# and TSan builds), never in libvgpu.so. The cases flagged hooks run against
# libvgpu-hooks.so in the normal and valgrind modes; every other case runs
# against libvgpu.so itself. The case no_test_hooks proves the release
# library free of them (and the hooks build not: the check can fail), and
# release_no_hooks sets a hook for libvgpu.so and sees nothing happen.
set -u
B=$(cd "$1" && pwd); shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
pass=0
fail=0

# label|sub-command|environment|flags (pidns: run it in a new PID namespace
# with its own /proc, the stub reporting host pids, see harness.c; region: give it a region file;
# observer: the stub records device bytes across processes (stub.h);
# shared: the stub's devices are one state for all processes, as a real GPU is;
# minstub: use the stub without optional entry points; novg: skip under
# valgrind; tsan: also run under ThreadSanitizer; stress: a stress campaign;
# hooks: needs the test hooks, so the hooks build of the library;
# release: needs the release library, so only the normal and valgrind modes)
CASES='
passthrough|passthrough||
limit_basic|limit_basic|CUDA_DEVICE_MEMORY_LIMIT=1g|
limit_per_device|limit_per_device|CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_LIMIT_1=256m|
clamped_queries|clamped_queries|CUDA_DEVICE_MEMORY_LIMIT_0=2000m|region
families|families|CUDA_DEVICE_MEMORY_LIMIT=8g|region
vmm_lifetime|vmm_lifetime|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer
pools|pools|CUDA_DEVICE_MEMORY_LIMIT=1g|region
pool_plain_free|pool_plain_free|CUDA_DEVICE_MEMORY_LIMIT=1g|region
huge_sizes|huge_sizes||region
pitch_padding|pitch_padding|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_PITCH_ALIGN=4096|region
pool_granules|pool_granules|CUDA_DEVICE_MEMORY_LIMIT=1001m VGPU_STUB_OBSERVER_LIMIT=1049624576|region observer
pool_step|pool_step|CUDA_DEVICE_MEMORY_LIMIT=1000m VGPU_STUB_POOL_STEP=33554432|region
ctx_over_limit|ctx_over_limit|CUDA_DEVICE_MEMORY_LIMIT_0=32m|region
ctx_at_limit|ctx_at_limit|CUDA_DEVICE_MEMORY_LIMIT=100m|region
oversubscribe|oversubscribe|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1|region shared
oversubscribe_off|oversubscribe|CUDA_DEVICE_MEMORY_LIMIT=768m VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_EXPECT=off|region shared
oversub_alloc_v1|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=alloc_v1|region shared
oversub_pitch_v1|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=pitch_v1|region shared
oversub_managed|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=managed|region shared
oversub_async|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=async|region shared
oversub_pool|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=pool|region shared
oversub_vmm|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=vmm|region shared
oversub_array|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=array|region shared
oversub_array3d|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=array3d|region shared
oversub_mipmap|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=mipmap|region shared
oversub_context|oversub_refused|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_FAMILY=context|region shared
oversub_meminfo|oversub_meminfo|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1|region shared
oversub_meminfo_past|oversub_meminfo|CUDA_DEVICE_MEMORY_LIMIT=1536m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_SHARE_MIB=1536|region shared
oversub_meminfo_off|oversub_meminfo|CUDA_DEVICE_MEMORY_LIMIT=1536m VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1 OVERSUB_SHARE_MIB=1536 OVERSUB_EXPECT=off|region shared
oversub_pitch|oversub_pitch|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1|region shared tsan
oversub_ctx_destroy|oversub_ctx_destroy|CUDA_DEVICE_MEMORY_LIMIT=768m CUDA_OVERSUBSCRIBE=true VGPU_STUB_MEM=1073741824 VGPU_STUB_DEVICES=1|region shared tsan
stress|stress|CUDA_DEVICE_MEMORY_LIMIT=256m VGPU_STUB_CTX_MEM=0|region tsan
cvd_index|cvd_index|CUDA_VISIBLE_DEVICES=1 CUDA_DEVICE_MEMORY_LIMIT_1=128m|
cvd_uuid|cvd_uuid|CUDA_VISIBLE_DEVICES=GPU-5ab0e000-0000-4000-8000-000000000002 CUDA_DEVICE_MEMORY_LIMIT_2=96m|
device_order|device_order|CUDA_DEVICE_MEMORY_LIMIT_0=128m CUDA_DEVICE_MEMORY_LIMIT_1=256m CUDA_DEVICE_MEMORY_LIMIT_2=512m VGPU_STUB_CTX_MEM=0 VGPU_STUB_CUDA_ORDER=reverse EXPECT_ORDER=210|region
device_order_pci|device_order|CUDA_DEVICE_MEMORY_LIMIT_0=128m CUDA_DEVICE_MEMORY_LIMIT_1=256m CUDA_DEVICE_MEMORY_LIMIT_2=512m VGPU_STUB_CTX_MEM=0 VGPU_STUB_CUDA_ORDER=reverse CUDA_DEVICE_ORDER=PCI_BUS_ID EXPECT_ORDER=012|region
cvd_order|cvd_order|CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_MEMORY_LIMIT_2=96m VGPU_STUB_CTX_MEM=0 VGPU_STUB_CUDA_ORDER=reverse|region
cvd_mig|cvd_mig|CUDA_VISIBLE_DEVICES=MIG-5ab0e000-0000-4000-9000-000000000011 CUDA_DEVICE_MEMORY_LIMIT_1=200m VGPU_STUB_CTX_MEM=0 VGPU_STUB_MIG=1|region
no_nvml|no_nvml|CUDA_DEVICE_MEMORY_LIMIT=1g LIBVGPU_NVML_PATH=/nonexistent/libnvidia-ml.so.1|
dlsym_paths|dlsym_paths|CUDA_DEVICE_MEMORY_LIMIT=1g|
procaddr|procaddr|CUDA_DEVICE_MEMORY_LIMIT=1g|
procaddr_internal|procaddr_internal|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_GPA_INTERNAL=1|
procaddr_future|procaddr_future|CUDA_DEVICE_MEMORY_LIMIT=1g|
env_invalid|env_invalid||
minimal_driver|minimal_driver|CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_SM_LIMIT=30|minstub
multiproc|multiproc|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0|region tsan
multiproc_one_card|multiproc|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_CTX_DELAY_US=30000|region shared
reclaim_sigkill|reclaim_sigkill|CUDA_DEVICE_MEMORY_LIMIT=1g|region tsan
lock_owner_death|lock_owner_death|CUDA_DEVICE_MEMORY_LIMIT=1g|region tsan hooks
lock_stopped_holder|lock_stopped_holder|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 LIBVGPU_LOCK_TIMEOUT_MS=300|region hooks
release_no_hooks|limit_basic|CUDA_DEVICE_MEMORY_LIMIT=1g LIBVGPU_TEST_DIE_IN_LOCK=1 LIBVGPU_TEST_STOP_IN_LOCK=1|region release
region_corrupt|region_corrupt|CUDA_DEVICE_MEMORY_LIMIT=1g|region
corrupt_live|corrupt_live|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer tsan
region_ro_dir|region_ro_dir|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0|region
stress_mp|stress_mp|CUDA_DEVICE_MEMORY_LIMIT=256m VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=268435456|region observer tsan stress
stress_kill|stress_kill|CUDA_DEVICE_MEMORY_LIMIT=256m VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=268435456|region observer tsan stress hooks
stress_corrupt|stress_corrupt|CUDA_DEVICE_MEMORY_LIMIT=256m VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=268435456|region observer tsan stress hooks
layout|layout|CUDA_DEVICE_MEMORY_LIMIT_0=1g CUDA_DEVICE_MEMORY_LIMIT_1=512m CUDA_TASK_PRIORITY=1|region
fork_child|fork_child|CUDA_DEVICE_MEMORY_LIMIT=1g|region
init_256|init_256|CUDA_DEVICE_MEMORY_LIMIT=1g|region novg tsan
sm_limit_30|sm_limit_30|CUDA_DEVICE_SM_LIMIT=30|novg tsan
sm_limit_30_132sm|sm_limit_30|CUDA_DEVICE_SM_LIMIT=30 VGPU_STUB_SM=132|novg tsan
sm_pidns_10|sm_share|CUDA_DEVICE_SM_LIMIT=10|pidns novg tsan
sm_pidns_30|sm_share|CUDA_DEVICE_SM_LIMIT=30|pidns novg tsan
sm_pidns_50|sm_share|CUDA_DEVICE_SM_LIMIT=50|pidns novg tsan
sm_pidns_90|sm_share|CUDA_DEVICE_SM_LIMIT=90|pidns novg tsan
sm_pidns_132sm|sm_share|CUDA_DEVICE_SM_LIMIT=30 VGPU_STUB_SM=132|pidns novg
sm_mig_device_util|sm_fallback|CUDA_DEVICE_SM_LIMIT=30 VGPU_STUB_NVML_PROC_UTIL=unsupported SM_FALLBACK_EXPECT=not_supported_on_this_device|novg
sm_mig_no_util|sm_fallback|CUDA_DEVICE_SM_LIMIT=30 VGPU_STUB_NVML_PROC_UTIL=unsupported VGPU_STUB_NVML_DEV_UTIL=unsupported SM_FALLBACK_UNLIMITED=1 SM_FALLBACK_EXPECT=NOT_enforced|novg
sm_pidns_unattributed|sm_fallback|CUDA_DEVICE_SM_LIMIT=30 VGPU_STUB_NVML_PROC_LIST=unsupported SM_FALLBACK_EXPECT=attributes_none|pidns novg
sm_no_limit|sm_unlimited||novg
nvml_view|nvml_view|CUDA_DEVICE_MEMORY_LIMIT=1g|region pidns shared
hostpid_concurrent|hostpid_concurrent|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_DELAY_US=30000|pidns shared
ctx_cost_neighbour|ctx_cost_neighbour|CUDA_DEVICE_MEMORY_LIMIT=256m VGPU_STUB_CTX_MEM=4194304 VGPU_STUB_CTX_DELAY_US=1000000|region pidns shared
limit_basic_pidns|limit_basic|CUDA_DEVICE_MEMORY_LIMIT=1g|pidns
clamped_queries_pidns|clamped_queries|CUDA_DEVICE_MEMORY_LIMIT_0=2000m|region pidns
multiproc_pidns|multiproc|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0|region pidns tsan
reclaim_sigkill_pidns|reclaim_sigkill|CUDA_DEVICE_MEMORY_LIMIT=1g|region pidns
stress_kill_pidns|stress_kill|CUDA_DEVICE_MEMORY_LIMIT=256m VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=268435456|region observer pidns stress hooks
sm_policy_disable|sm_unlimited|CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=disable|novg
sm_switch_free|sm_switch_free|CUDA_DEVICE_SM_LIMIT=30|region novg tsan
sm_switch_back|sm_switch_back|CUDA_DEVICE_SM_LIMIT=30|region novg tsan
sm_policy_force|sm_policy_force|CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=force|region novg tsan
prio_yield|prio_yield|VGPU_STUB_TIMESLICE=1 VGPU_STUB_MAX_QUEUE_NS=64000000 VGPU_STUB_CTX_MEM=0|region shared tsan
prio_yield_peer|prio_yield_peer|VGPU_STUB_TIMESLICE=1 VGPU_STUB_MAX_QUEUE_NS=64000000 VGPU_STUB_CTX_MEM=0|region shared tsan
prio_invalid|prio_invalid||region
ipc_exporter|ipc_exporter|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer shared tsan
export_until_exit|export_until_exit|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0|region shared tsan
ipc_unsupported|ipc_unsupported|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_IPC=unsupported|region
vmm_fd_export|vmm_fd_export|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer shared tsan
pool_shared|pool_shared|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer shared tsan
graph_mem_nodes|graph_mem_nodes|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer
graph_capture|graph_capture|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer
graph_instantiate|graph_instantiate_entries|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824|region observer
graph_instantiate_internal|graph_instantiate_entries|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824 VGPU_STUB_GPA_INTERNAL=1|region observer
tp_pair|tp_pair|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824 TP_LIMIT_MIB=1024|region observer shared tsan
tp_pair_eager|tp_pair|CUDA_DEVICE_MEMORY_LIMIT=1g VGPU_STUB_CTX_MEM=0 VGPU_STUB_OBSERVER_LIMIT=1073741824 TP_LIMIT_MIB=1024 TP_EAGER=1|region observer shared tsan
peer_nvlink|peer_passthrough|CUDA_DEVICE_MEMORY_LIMIT=512m VGPU_STUB_CTX_MEM=0 VGPU_STUB_NVLINK=1 PEER_EXPECT=nvlink|region
peer_pcie|peer_passthrough|CUDA_DEVICE_MEMORY_LIMIT=512m VGPU_STUB_CTX_MEM=0|region
'

report() { # mode label rc seconds logfile
	echo "$3" >>"$RESULTS"
	if [ "$3" -eq 0 ]; then
		printf 'PASS  %-8s %-20s %3ss\n' "$1" "$2" "$4"
	else
		printf 'FAIL  %-8s %-20s %3ss (exit %s)\n' "$1" "$2" "$4" "$3"
		sed 's/^/      | /' "$5" | tail -n 30
	fi
}

# The library exports only the hooked entry points and dlsym.
shell_exports() {
	extra=$(nm -D --defined-only "$ROOT/libvgpu.so" | awk '{print $3}' |
		grep -v -E '^(cu[A-Za-z0-9_]+|nvml[A-Za-z0-9_]+|dlsym)$' | grep -v '^$')
	[ -z "$extra" ] || { echo "unexpected exports: $extra"; return 1; }
}

# The release library holds no test hook: neither variable's name is in it
# (the library cannot read what it does not name). The hooks build has both,
# so a check that can find nothing would fail here.
HOOK_VARS="LIBVGPU_TEST_DIE_IN_LOCK LIBVGPU_TEST_STOP_IN_LOCK"
shell_no_test_hooks() {
	for v in $HOOK_VARS; do
		grep -q -a "$v" "$B/libvgpu-hooks.so" ||
			{ echo "$B/libvgpu-hooks.so lacks $v: the check below proves nothing"; return 1; }
		if grep -q -a "$v" "$ROOT/libvgpu.so"; then
			echo "$ROOT/libvgpu.so, the release library, names $v: build it without -DVGPU_TEST_HOOKS"
			return 1
		fi
	done
}

# make gpu-check against the stub driver, so that it cannot rot where no GPU
# is: every check passes (nvidia_smi skips: no nvidia-smi here), and without
# GPU_CHECK_ALLOW_STUB the stub is no GPU.
shell_gpu_check() {
	out=$(env -i PATH="$PATH" LD_LIBRARY_PATH="$B/stub" "$B/gpu_check" "$ROOT/libvgpu.so" 2>&1)
	[ "$out" = "no NVIDIA GPU: skipped" ] || { echo "without a GPU: $out"; return 1; }
	# One stub state for all its processes, as one GPU is: ipc_share's importer opens the exporter's memory.
	# Two cards with NVLink (peer access both ways): the two-GPU checks run and pass.
	state=$(mktemp)
	out=$(env -i PATH="$PATH" LD_LIBRARY_PATH="$B/stub" GPU_CHECK_ALLOW_STUB=1 VGPU_STUB_STATE="$state" \
		VGPU_STUB_NVLINK=1 "$B/gpu_check" "$ROOT/libvgpu.so" 2>&1) || { rm -f "$state"; echo "$out"; return 1; }
	rm -f "$state"
	echo "$out"
	for c in memory_limit nvml_memory vmm_lifetime procaddr ipc_share sm_share sm_share_pidns \
		peer_access ipc_two_gpus; do
		echo "$out" | grep -q "^PASS $c:" || { echo "check $c did not pass"; return 1; }
	done
}

# A driver that cannot say a device's UUID (VGPU_STUB_NO_UUID=1): gpu_check
# tells each card by its CUDA ordinal, here through CUDA_VISIBLE_DEVICES=2,1
# (ordinal 0 is NVML index 2, ordinal 1 index 1), so the second card is
# described as itself, not as the first, and the checks whose processes are
# given the cards' UUIDs still pass (libvgpu falls back to the
# CUDA_VISIBLE_DEVICES entries the same way). The SM-share checks' rates
# are not judged: this runs in the lanes.
shell_gpu_check_no_uuid() {
	state=$(mktemp)
	out=$(env -i PATH="$PATH" LD_LIBRARY_PATH="$B/stub" GPU_CHECK_ALLOW_STUB=1 VGPU_STUB_STATE="$state" \
		VGPU_STUB_NVLINK=1 VGPU_STUB_NO_UUID=1 CUDA_VISIBLE_DEVICES=2,1 "$B/gpu_check" "$ROOT/libvgpu.so" 2>&1)
	rm -f "$state"
	first=$(echo "$out" | sed -n 's/^gpu_check: .* on device 0 "[^"]*" \(GPU-[^ ]*\) (NVML index 2,.*/\1/p')
	second=$(echo "$out" | sed -n 's/^gpu_check: second card \(GPU-[^ ]*\) (NVML index 1,.*/\1/p')
	if [ -z "$first" ] || [ -z "$second" ] || [ "$first" = "$second" ]; then
		echo "no UUID from CUDA, CUDA_VISIBLE_DEVICES=2,1: want device 0 at NVML index 2 and the second card at index 1, got \"$first\" and \"$second\""
		echo "$out"
		return 1
	fi
	for c in memory_limit nvml_memory peer_access ipc_two_gpus; do
		echo "$out" | grep -q "^PASS $c:" || { echo "no UUID from CUDA: check $c did not pass"; echo "$out"; return 1; }
	done
}

# One card: the two-GPU checks say they did not run, and why (the exit
# status is the other checks', judged by gpu_check_stub). Nothing measured
# is judged here, so it runs in the lanes.
shell_gpu_check_one_card() {
	state=$(mktemp)
	out=$(env -i PATH="$PATH" LD_LIBRARY_PATH="$B/stub" GPU_CHECK_ALLOW_STUB=1 VGPU_STUB_STATE="$state" \
		VGPU_STUB_DEVICES=1 "$B/gpu_check" "$ROOT/libvgpu.so" 2>&1)
	rm -f "$state"
	for c in peer_access ipc_two_gpus; do
		echo "$out" | grep -q "^SKIP $c: not run: needs two GPUs, this node has 1$" ||
			{ echo "one card: $c not reported as not run"; echo "$out"; return 1; }
	done
}

# Preloaded into a process that never touches the GPU, the library is silent.
shell_unrelated() { # preload
	out=$(env -i PATH="$PATH" LD_PRELOAD="$1" CUDA_DEVICE_MEMORY_LIMIT=1g \
		CUDA_DEVICE_SM_LIMIT=30 /bin/sh -c 'echo ok' 2>&1)
	[ "$out" = "ok" ] || { echo "output: $out"; return 1; }
}

run_shell() { # mode label function args...
	mode=$1; label=$2; shift 2
	log=$(mktemp)
	start=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	report "$mode" "$label" "$rc" $(( $(date +%s) - start )) "$log"
	rm -f "$log"
}

# timed MODE LABEL: the case's verdict is a rate or a time measured on the
# machine (SM shares and utilisation, priority's launch rates, the
# 256-process start's bound, gpu_check's sm_share), so it wants the
# machine to itself. Only the normal mode judges them (the other modes run
# with VGPU_TEST_TIMING=0, see the header).
timed() {
	[ "$1" = normal ] || return 1
	case $2 in
	prio_yield | prio_yield_peer | init_256 | gpu_check_stub | sm_*) return 0 ;;
	*) return 1 ;;
	esac
}

# in_phase MODE LABEL: whether the case runs in this phase (PHASE=timed:
# the timed ones only; untimed: the others; unset: all).
in_phase() {
	case ${PHASE:-} in
	timed) timed "$1" "$2" ;;
	untimed) ! timed "$1" "$2" ;;
	*) return 0 ;;
	esac
}

run_mode() {
	mode=$1
	sprocs=8; ssecs=3; timing=1; slow=1
	hookpre=""     # what the cases flagged hooks preload instead of $pre
	case $mode in
	normal) pre="$ROOT/libvgpu.so"; hookpre="$B/libvgpu-hooks.so"; bin="$B/vgpu_test"; wrap=""; procs=256 ;;
	asan) pre="$(${CC:-gcc} -print-file-name=libasan.so) $B/libvgpu-asan.so"
	      bin="$B/vgpu_test-asan"; wrap=""; procs=64; timing=0 ;;
	# The TSan runtime must be the first library initialised: preload it
	# ahead of the TSan build of libvgpu (the test binary links it too).
	tsan) pre="$(${CC:-gcc} -print-file-name=libtsan.so) $B/libvgpu-tsan.so"
	      bin="$B/vgpu_test-tsan"; wrap=""; procs=32; sprocs=6; timing=0 ;;
	valgrind) pre="$ROOT/libvgpu.so"; hookpre="$B/libvgpu-hooks.so"; bin="$B/vgpu_test"; procs=256; sprocs=4; slow=10; timing=0
	      wrap="valgrind -q --vgdb=no --error-exitcode=99 --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --trace-children=yes" ;;
	esac
	if [ "${RUN_ONLY:-}" = stress ]; then
		sprocs=${STRESS_PROCS:-32}; ssecs=${STRESS_SECS:-60}
		[ "$mode" = valgrind ] && sprocs=${STRESS_PROCS_VALGRIND:-8}
	else
		[ "$mode" = normal ] && in_phase normal exports && run_shell "$mode" exports shell_exports
		[ "$mode" = normal ] && in_phase normal no_test_hooks && run_shell "$mode" no_test_hooks shell_no_test_hooks
		[ "$mode" = normal ] && [ -z "${ONLY:-}" ] && in_phase normal gpu_check_stub &&
			run_shell "$mode" gpu_check_stub shell_gpu_check
		[ "$mode" = normal ] && [ -z "${ONLY:-}" ] && in_phase normal gpu_check_one_card &&
			run_shell "$mode" gpu_check_one_card shell_gpu_check_one_card
		[ "$mode" = normal ] && [ -z "${ONLY:-}" ] && in_phase normal gpu_check_no_uuid &&
			run_shell "$mode" gpu_check_no_uuid shell_gpu_check_no_uuid
		[ "$mode" != valgrind ] && in_phase "$mode" preload_unrelated && run_shell "$mode" preload_unrelated shell_unrelated "$pre"
	fi
	echo "$CASES" | while IFS='|' read -r label cmd envs flags; do
		[ -n "$label" ] || continue
		in_phase "$mode" "$label" || continue
		# ONLY=<regex> runs the matching cases only (development).
		[ -z "${ONLY:-}" ] || echo "$label" | grep -Eq "$ONLY" || continue
		case " $flags " in *" novg "*) [ "$mode" = valgrind ] && continue ;; esac
		case " $flags " in *" tsan "*) ;; *) [ "$mode" = tsan ] && continue ;; esac
		case " $flags " in *" stress "*) ;; *) [ "${RUN_ONLY:-}" = stress ] && continue ;; esac
		# The sanitizer builds have the hooks: release cases need libvgpu.so.
		case " $flags " in *" release "*) [ -n "$hookpre" ] || continue ;; esac
		lib=$pre
		case " $flags " in *" hooks "*) [ -n "$hookpre" ] && lib=$hookpre ;; esac
		dir=$(mktemp -d)
		stub="$B/stub"
		case " $flags " in *" minstub "*) stub="$B/stub-min" ;; esac
		region=""
		case " $flags " in *" region "*) region="CUDA_DEVICE_MEMORY_SHARED_CACHE=$dir/vgpu.cache" ;; esac
		observer=""
		case " $flags " in *" observer "*) observer="VGPU_STUB_OBSERVER=$dir/observer" ;; esac
		shared=""
		case " $flags " in *" shared "*) shared="VGPU_STUB_STATE=$dir/stub.state" ;; esac
		limit=240
		case " $flags " in *" stress "*) limit=$((ssecs * 3 + 240)) ;; esac
		pidns=""
		case " $flags " in *" pidns "*) pidns=pidns ;; esac
		start=$(date +%s)
		# shellcheck disable=SC2086
		(cd "$dir" && env -i PATH="$PATH" HOME="${HOME:-/}" LD_LIBRARY_PATH="$stub" \
			LD_PRELOAD="$lib" VGPU_TEST_DIR="$dir" VGPU_TEST_PROCS="$procs" \
			VGPU_TEST_STRESS_PROCS="$sprocs" VGPU_TEST_STRESS_SECS="$ssecs" VGPU_TEST_TIMING="$timing" \
			VGPU_TEST_SLOW="$slow" \
			ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" \
			UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
			TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$ROOT/test/tsan.supp" \
			$region $observer $shared $envs timeout $limit $wrap "$bin" $pidns "$cmd") >"$dir/log" 2>&1
		rc=$?
		# 77: the kernel refused a PID namespace; the case says why in one line.
		if [ "$rc" -eq 77 ]; then
			printf 'SKIP  %-8s %-20s %s\n' "$mode" "$label" "$(grep -m1 '^SKIP' "$dir/log")"
			rm -rf "$dir"
			continue
		fi
		report "$mode" "$label" "$rc" $(( $(date +%s) - start )) "$dir/log"
		# Stress cases print one line of figures (README: Stress and fault tests).
		grep -h '^\(stress_[a-z]*\|corrupt_live\|prio\|sm_switch\): ' "$dir/log" | sed "s/^/      $mode /"
		rm -rf "$dir"
	done
}

# Seconds each mode's cases took in the lanes on 2 cores (run.sh at 8f14048,
# 2026-12-07, LANES=2, load 6-20 from other work; bench/results/
# libvgpu-timed-phase.txt): the lanes' balance.
weight() {
	case $1 in normal) echo 45 ;; asan) echo 180 ;; tsan) echo 153 ;; valgrind) echo 374 ;; *) echo 150 ;; esac
}

# run_lane LOG RESULTS MODE...: the modes one after the other.
run_lane() {
	RESULTS=$2
	log=$1
	shift 2
	for mode in "$@"; do
		run_mode "$mode"
	done >"$log" 2>&1
}

lanes=${LANES:-1}
rm -f "$B"/.results*
if [ "$lanes" -le 1 ] || [ $# -le 1 ]; then
	RESULTS="$B/.results"
	for mode in "$@"; do
		run_mode "$mode"
	done
	files="$RESULTS"
else
	# Longest mode first, onto the lane with the least work so far.
	order=$(for m in "$@"; do echo "$(weight "$m") $m"; done | sort -rn | awk '{print $2}')
	i=0
	while [ "$i" -lt "$lanes" ]; do eval "lane_$i=''; work_$i=0"; i=$((i + 1)); done
	for m in $order; do
		best=0; i=1
		while [ "$i" -lt "$lanes" ]; do
			eval "[ \$work_$i -lt \$work_$best ]" && best=$i
			i=$((i + 1))
		done
		eval "lane_$best=\"\$lane_$best $m\"; work_$best=\$((work_$best + $(weight "$m")))"
	done
	pids=""; files=""; start=$(date +%s)
	PHASE=untimed
	i=0
	while [ "$i" -lt "$lanes" ]; do
		eval "modes=\$lane_$i"
		if [ -n "$modes" ]; then
			echo "lane $i:$modes"
			# shellcheck disable=SC2086
			run_lane "$B/.lane$i.log" "$B/.results$i" $modes &
			pids="$pids $!"
			files="$files $B/.results$i"
		fi
		i=$((i + 1))
	done
	for p in $pids; do wait "$p"; done
	i=0
	while [ "$i" -lt "$lanes" ]; do
		[ -f "$B/.lane$i.log" ] && cat "$B/.lane$i.log" && rm -f "$B/.lane$i.log"
		i=$((i + 1))
	done
	echo "lanes: $(( $(date +%s) - start ))s"
	# The timed cases of every mode, one at a time, the machine theirs.
	start=$(date +%s)
	RESULTS="$B/.results-timed"
	PHASE=timed
	for mode in "$@"; do
		run_mode "$mode"
	done
	files="$files $RESULTS"
	echo "timed cases: $(( $(date +%s) - start ))s"
fi
# The case loop runs in a pipeline subshell, and lanes in the background:
# count the results from the files.
for f in $files; do
	[ -f "$f" ] || continue
	pass=$((pass + $(grep -c '^0$' "$f")))
	fail=$((fail + $(grep -c -v '^0$' "$f")))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
