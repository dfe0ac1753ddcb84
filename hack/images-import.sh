#!/bin/sh
# Imports the archives of `make images` (bin/images/*.tar, or the files
# given) into a throw-away containerd (Debian's 1.6: its own root, state and
# socket under a temporary directory, the CRI plugin off) under the
# kubelet's namespace k8s.io, lists the names it gave them, and starts each
# image once with runc: the scheduler prints its version, the agent
# installs libvgpu.so into a bind-mounted directory, the workload runs until
# it finds no driver, pause exits 0 on SIGTERM. Then it stops containerd and
# removes everything. Needs root, containerd, ctr and runc.
# docs/install.md ("Images") quotes its output (bench/results/images.txt).
set -eu
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "images-import: needs root (containerd)" >&2; exit 1; }
if [ $# -eq 0 ]; then
	set -- bin/images/*.tar
fi

tmp=$(mktemp -d /tmp/vshare-containerd.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	# containerd's snapshot mounts, deepest first.
	grep " $tmp/" /proc/self/mounts | cut -d' ' -f2 | sort -r | while read -r m; do umount "$m" || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

cat >"$tmp/config.toml" <<EOF
version = 2
root = "$tmp/root"
state = "$tmp/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$tmp/containerd.sock"
EOF
containerd --config "$tmp/config.toml" >"$tmp/containerd.log" 2>&1 &
pid=$!
ctr() { command ctr --address "$tmp/containerd.sock" -n k8s.io "$@"; }
i=0
until ctr version >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$tmp/containerd.log" >&2; echo "images-import: containerd did not start" >&2; exit 1; }
	sleep 0.1
done
echo "containerd $(containerd --version | cut -d' ' -f3-)"

for archive in "$@"; do
	ctr images import "$archive"
done
ctr images ls -q | grep -v '^sha256:'

ref() { ctr images ls -q | grep "/$1:" | head -n1; }
status=0
if r=$(ref vc-scheduler); [ -n "$r" ]; then
	echo "== $r: /vc-scheduler --version"
	ctr run --rm "$r" sched /vc-scheduler --version | head -n2 || status=1
fi
if r=$(ref vgpu-device-plugin); [ -n "$r" ]; then
	echo "== $r: install-libvgpu --to /host/libvgpu.so"
	mkdir "$tmp/host"
	ctr run --rm --mount "type=bind,src=$tmp/host,dst=/host,options=rbind:rw" "$r" agent \
		/usr/local/bin/vgpu-device-plugin install-libvgpu --to /host/libvgpu.so || status=1
	ls -l "$tmp/host" | sed "s#$tmp#<tmp>#"
fi
if r=$(ref cuda-workload); [ -n "$r" ]; then
	echo "== $r: gpuworkload nvml (no driver here)"
	ctr run --rm "$r" workload /usr/local/bin/gpuworkload nvml || true
fi
if r=$(ref pause); [ -n "$r" ]; then
	echo "== $r: SIGTERM"
	ctr run --rm "$r" pause &
	run=$!
	i=0
	until ctr task ls 2>/dev/null | grep -q '^pause .*RUNNING'; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "pause did not start" >&2; status=1; break; }
		sleep 0.1
	done
	# As pid 1, pause cannot be killed by a signal it has no handler for
	# yet: one sent while the runtime is still starting is dropped (pause.c
	# has the same window before its sigaction; the kubelet sends SIGKILL
	# after the grace period). Send SIGTERM until the task stops.
	i=0
	while ctr task ls 2>/dev/null | grep -q '^pause .*RUNNING'; do
		ctr task kill -s SIGTERM pause 2>/dev/null || true
		i=$((i + 1))
		[ $i -lt 50 ] || { echo "pause ignores SIGTERM" >&2; ctr task kill -s SIGKILL pause; status=1; break; }
		sleep 0.2
	done
	if wait "$run"; then echo "pause exited 0"; else echo "pause exited $?"; status=1; fi
fi
exit $status
