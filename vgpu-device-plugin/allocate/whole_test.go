package allocate_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// TestWholeCardsGetNoLibvgpu: a container with every card of its entry to
// itself (all of the card's memory and SMs, no over-commit) gets its cards
// and nothing of libvgpu: no preload, no library, no region, no limits
// (libvgpu/README.md, "Whole cards"). Anything less than a whole card, on
// any of its cards, keeps all of libvgpu.
func TestWholeCardsGetNoLibvgpu(t *testing.T) {
	scale := func(f func(*config.Config)) envOption {
		return func(c *config.Config, _ *allocate.Options) { f(c) }
	}
	for _, tc := range []struct {
		name  string
		entry func(u []string) string
		opt   envOption
		whole bool
	}{
		{name: "one card, all memory and 100 % cores", whole: true,
			entry: func(u []string) string { return entry(u[0], 40960, 100) }},
		{name: "two whole cards", whole: true,
			entry: func(u []string) string { return entry(u[0], 40960, 100) + entry(u[1], 40960, 100) }},
		{name: "a whole card beside a shared one",
			entry: func(u []string) string { return entry(u[0], 40960, 100) + entry(u[1], 20000, 100) }},
		{name: "all memory, no SM share asked (cores 0: volcano.sh/vgpu-number alone)", whole: true,
			entry: func(u []string) string { return entry(u[0], 40960, 0) }},
		{name: "all memory, an SM limit of 99 %",
			entry: func(u []string) string { return entry(u[0], 40960, 99) }},
		{name: "all memory, an SM limit of 50 %",
			entry: func(u []string) string { return entry(u[0], 40960, 50) }},
		{name: "1 MiB short of the card",
			entry: func(u []string) string { return entry(u[0], 40959, 100) }},
		{name: "memory over-committed: the card is promised 1.5x",
			entry: func(u []string) string { return entry(u[0], 61440, 100) },
			opt:   scale(func(c *config.Config) { c.NVIDIA.DeviceMemoryScaling = 1.5 })},
		{name: "cores scaled to 200: all memory is still the whole card", whole: true,
			entry: func(u []string) string { return entry(u[0], 40960, 100) },
			opt:   scale(func(c *config.Config) { c.NVIDIA.DeviceCoreScaling = 2 })},
		{name: "preconfigured memory below the physical",
			entry: func(u []string) string { return entry(u[0], 30000, 100) },
			opt:   scale(func(c *config.Config) { c.NVIDIA.PreConfiguredDeviceMemory = 30000 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []envOption
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			e := newEnv(t, opts...)
			ids := tc.entry(e.uuids)
			n := int64(len(ids) - len(trimCards(ids)))
			mem, cores := requested(ids)
			e.add(t, newPod("job").container("main", n, map[string]int64{
				"volcano.sh/vgpu-memory": mem, "volcano.sh/vgpu-cores": cores}).allocated(ids, 100).build())
			resp, err := e.alloc.Allocate(context.Background(), request(int(n)))
			if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			got := resp.ContainerResponses[0]
			if got.Envs["NVIDIA_VISIBLE_DEVICES"] == "" {
				t.Errorf("no NVIDIA_VISIBLE_DEVICES: %v", got.Envs)
			}
			_, limited := got.Envs["CUDA_DEVICE_MEMORY_LIMIT_0"]
			preload := mounted(got, "/etc/ld.so.preload")
			lib := mounted(got, "/usr/local/vgpu/libvgpu.so")
			region := mounted(got, "/tmp/vgpu")
			if tc.whole && (limited || preload || lib || region) {
				t.Errorf("whole cards got libvgpu: limit %v, preload %v, library %v, region %v; env %v", limited, preload, lib, region, got.Envs)
			}
			if !tc.whole && !(limited && preload && lib && region) {
				t.Errorf("a share kept only part of libvgpu: limit %v, preload %v, library %v, region %v; env %v", limited, preload, lib, region, got.Envs)
			}
		})
	}
}

// requested is the memory and cores of the entry's first card, which the
// pod's resources must ask for (per card) for the agent to trust the entry.
func requested(ids string) (mem, cores int64) {
	f := strings.Split(strings.Split(ids, ":")[0], ",")
	mem, _ = strconv.ParseInt(f[2], 10, 64)
	cores, _ = strconv.ParseInt(f[3], 10, 64)
	return mem, cores
}

func mounted(r *pluginapi.ContainerAllocateResponse, path string) bool {
	for _, m := range r.Mounts {
		if m.ContainerPath == path {
			return true
		}
	}
	return false
}

// trimCards drops one byte per card (its ":" separator) so that the caller
// can count an entry's cards by the difference in length.
func trimCards(ids string) string {
	out := make([]byte, 0, len(ids))
	for i := 0; i < len(ids); i++ {
		if ids[i] != ':' {
			out = append(out, ids[i])
		}
	}
	return string(out)
}
