//go:build e2e

package agentnvml

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The agent's production packages: the node agent, its library parts and
// command. go-nvml's mock servers (nvmlmock) are not the production path.
var (
	agentPackages = []string{"./vgpu-device-plugin/...", "./nodeagent/...", "./cmd/vgpu-device-plugin"}
	notProduction = []string{"/nvmlmock"}
)

// surfaceMethods are NVML calls a node's tools make beyond the agent's
// current code, which the fake node answers too (TestNVMLSurface).
var surfaceMethods = []Method{
	"Device.GetCpuAffinity", "Device.GetTopologyNearestGpus", "Device.GetCudaComputeCapability",
	"Device.GetComputeRunningProcesses", "Device.IsMigDeviceHandle",
	"Interface.DeviceGetHandleByPciBusId", "Interface.SystemGetDriverVersion",
}

// exports are the functions a shared object defines in its dynamic symbol
// table: what dlsym finds and lazy binding resolves.
func exports(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC &&
			(elf.ST_BIND(s.Info) == elf.STB_GLOBAL || elf.ST_BIND(s.Info) == elf.STB_WEAK) {
			out[s.Name] = true
		}
	}
	return out
}

// goNVMLSource is go-nvml's pkg/nvml directory in the module cache.
func goNVMLSource(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml")
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("find go-nvml's source: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "pkg", "nvml")
}

// Every C symbol go-nvml binds for the NVML methods the agent's production
// code calls (and for Return.Error, which any logged or %w-wrapped NVML
// error calls) is exported by the stub libnvidia-ml: a missing one kills
// the agent with "symbol lookup error" the first time it is called.
func TestStubExportsWhatTheAgentCalls(t *testing.T) {
	methods, err := AgentMethods(moduleRoot, agentPackages, notProduction)
	if err != nil {
		t.Fatal(err)
	}
	// The analysis must see the calls we know of, or it proves nothing.
	for _, known := range []Method{"Interface.Init", "Interface.DeviceGetHandleByIndex", "Device.GetPciInfo",
		"Device.RegisterEvents", "EventSet.Wait", "Device.GetNvLinkRemotePciInfo", "GpuInstance.GetInfo"} {
		if !contains(methods, known) {
			t.Errorf("the agent's calls %v lack %s", methods, known)
		}
	}
	binder, err := NewBinder(goNVMLSource(t))
	if err != nil {
		t.Fatal(err)
	}
	stub := exports(t, filepath.Join(stubDir, "libnvidia-ml.so.1"))
	all := append(append(methods, "Return.Error"), surfaceMethods...)
	for _, m := range all {
		syms, err := binder.Symbols(m, stub)
		if err != nil {
			t.Errorf("%s: %v", m, err)
			continue
		}
		if len(syms) == 0 {
			t.Errorf("%s: go-nvml calls no C symbol for it: the analysis is broken", m)
		}
		for _, s := range syms {
			if !stub[s] {
				t.Errorf("%s: go-nvml binds %s, which the stub does not export", m, s)
			}
		}
		t.Logf("%-45s %s", m, strings.Join(syms, " "))
	}
	// The versioned entry points go-nvml prefers are the ones bound.
	for m, want := range map[Method]string{"Interface.Init": "nvmlInit_v2", "Device.GetPciInfo": "nvmlDeviceGetPciInfo_v3",
		"EventSet.Wait": "nvmlEventSetWait_v2", "Return.Error": "nvmlErrorString"} {
		if got, _ := binder.Symbols(m, stub); strings.Join(got, " ") != want {
			t.Errorf("%s binds %v, want %s", m, got, want)
		}
	}
}

func contains(ms []Method, m Method) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}
