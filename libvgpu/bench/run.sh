#!/bin/sh
# bench/run.sh BUILD_DIR OUT [wholecard] - libvgpu's benchmarks against the stub driver,
# with and without libvgpu in the same run, and the SM share measured inside
# a new PID namespace. Writes the raw output, with the command, commit, date
# and machine, to OUT (bench/results/libvgpu.txt) and to stdout.
# With "wholecard", only the whole-card set (issue 34 item 3): libvgpu out of
# the way (no preload) against libvgpu counting a container given a whole card.
set -u
B=$(cd "$1" && pwd)
OUT=$2
SET=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
share() { # limit -> achieved utilisation, one run
	d=$(mktemp -d)
	(cd "$d" && env -i PATH="$PATH" LD_LIBRARY_PATH="$B/stub" LD_PRELOAD="$ROOT/libvgpu.so" \
		VGPU_TEST_DIR="$d" CUDA_DEVICE_SM_LIMIT="$1" "$B/vgpu_test" pidns sm_share 2>&1) |
		sed -n 's/^achieved SM utilisation \([0-9.]*\)%.*/\1/p'
	rm -rf "$d"
}
{
	echo "command: make -C libvgpu bench${SET:+-$SET}"
	echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . || echo '+uncommitted')"
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "driver: libvgpu's stub (test/stub), kernels of 0 ns (VGPU_STUB_WAVE_NS=0) for the call costs"
	echo
	if [ -n "$SET" ]; then
		# Three rounds: the machine is shared, one round is one sample of its load.
		for round in 1 2 3; do
			echo "round $round"
			BENCH_SET=$SET "$B/bench" "$ROOT/libvgpu.so" "$B/stub" 2>&1
		done
		exit 0
	fi
	"$B/bench" "$ROOT/libvgpu.so" "$B/stub" 2>&1
	echo
	echo "SM share in a new PID namespace (stub NVML reports host pids; 16 SMs; 3 s window after 1.5 s):"
	printf '%-8s %-28s %s\n' "limit" "achieved (3 runs)" "worst error"
	for limit in 10 30 50 90; do
		runs="" worst=0
		for r in 1 2 3; do
			u=$(share "$limit")
			runs="$runs ${u:-fail}"
			worst=$(awk -v u="${u:-1000}" -v l="$limit" -v w="$worst" \
				'BEGIN { e = u - l; if (e < 0) e = -e; print (e > w ? e : w) }')
		done
		printf '%-8s %-28s %s points\n' "$limit %" "$runs" "$worst"
	done
} | tee "$OUT"
