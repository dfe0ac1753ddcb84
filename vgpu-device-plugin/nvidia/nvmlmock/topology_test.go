package nvmlmock

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestNVLinkAnswers checks the NVLink calls answer as nvml.h documents:
// SUCCESS for the card's links, INVALID_ARGUMENT beyond them, NOT_SUPPORTED
// for a link that is down's remote end.
func TestNVLinkAnswers(t *testing.T) {
	for _, tc := range []struct {
		machine          string
		link             int
		wantState        nvml.EnableState
		wantRet          nvml.Return
		wantType         nvml.IntNvLinkDeviceType
		wantTypeRet      nvml.Return
		wantRemoteBusRet nvml.Return
	}{
		{"dgxa100", 0, nvml.FEATURE_ENABLED, nvml.SUCCESS, nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS, nvml.SUCCESS},
		{"dgxa100", 11, nvml.FEATURE_ENABLED, nvml.SUCCESS, nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS, nvml.SUCCESS},
		{"dgxa100", 12, nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT, nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_INVALID_ARGUMENT},
		{MachinePCIeH100, 3, nvml.FEATURE_ENABLED, nvml.SUCCESS, nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS, nvml.SUCCESS},
		{MachinePCIeH100, 12, nvml.FEATURE_DISABLED, nvml.SUCCESS, nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED},
		{MachinePCIeH100, 18, nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT, nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_INVALID_ARGUMENT},
		{MachinePCIeA30, 0, nvml.FEATURE_DISABLED, nvml.SUCCESS, nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED},
	} {
		s, err := New(tc.machine)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := s.DeviceGetHandleByIndex(0)
		state, ret := d.GetNvLinkState(tc.link)
		if state != tc.wantState || ret != tc.wantRet {
			t.Errorf("%s link %d: state %v %v, want %v %v", tc.machine, tc.link, state, ret, tc.wantState, tc.wantRet)
		}
		typ, ret := d.GetNvLinkRemoteDeviceType(tc.link)
		if typ != tc.wantType || ret != tc.wantTypeRet {
			t.Errorf("%s link %d: remote type %v %v, want %v %v", tc.machine, tc.link, typ, ret, tc.wantType, tc.wantTypeRet)
		}
		if _, ret := d.GetNvLinkRemotePciInfo(tc.link); ret != tc.wantRemoteBusRet {
			t.Errorf("%s link %d: remote PCI info %v, want %v", tc.machine, tc.link, ret, tc.wantRemoteBusRet)
		}
	}
}

// TestPCIAndAffinity checks distinct bus IDs, the lookup by bus ID and the
// affinity answers of the DGX A100 (GPU0: NUMA 3, CPUs 48-63,176-191).
func TestPCIAndAffinity(t *testing.T) {
	s, err := New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[32]int8]bool{}
	for i := 0; i < 8; i++ {
		d, _ := s.DeviceGetHandleByIndex(i)
		p, ret := d.GetPciInfo()
		if ret != nvml.SUCCESS || seen[p.BusId] {
			t.Errorf("GPU %d bus ID %v (%v) not distinct", i, p.BusId, ret)
		}
		seen[p.BusId] = true
		id := string(func() []byte {
			var b []byte
			for _, c := range p.BusId {
				if c != 0 {
					b = append(b, byte(c))
				}
			}
			return b
		}())
		if got, ret := s.DeviceGetHandleByPciBusId(id); ret != nvml.SUCCESS || got != d {
			t.Errorf("DeviceGetHandleByPciBusId(%s) = %v %v, want GPU %d", id, got, ret, i)
		}
	}
	d, _ := s.DeviceGetHandleByIndex(0)
	if _, ret := d.GetNumaNodeId(); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetNumaNodeId = %v, want NOT_SUPPORTED on x86", ret)
	}
	mem, _ := d.GetMemoryAffinity(1, nvml.AFFINITY_SCOPE_NODE)
	if len(mem) != 1 || mem[0] != 1<<3 {
		t.Errorf("memory affinity = %b, want NUMA 3", mem)
	}
	cpus, _ := d.GetCpuAffinity(4)
	if cpus[0] != 0xffff<<48 || cpus[2] != 0xffff<<48 || cpus[1] != 0 || cpus[3] != 0 {
		t.Errorf("CPU affinity = %x, want 48-63,176-191", cpus)
	}
	near, _ := d.GetTopologyNearestGpus(nvml.TOPOLOGY_MULTIPLE)
	if one, _ := s.DeviceGetHandleByIndex(1); len(near) != 1 || near[0] != one {
		t.Errorf("nearest GPUs at PXB = %v, want GPU 1", near)
	}
}
