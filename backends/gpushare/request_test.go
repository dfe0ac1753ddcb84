package gpushare

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

func sidecar(c v1.Container) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestPodRequest(t *testing.T) {
	mem := gpushareproto.ResourceGPUMemory
	tests := []struct {
		name       string
		containers []v1.Container
		inits      []v1.Container
		want       int64
		wantErr    []string // substrings of the error; nil means no error
	}{
		{name: "no request", containers: []v1.Container{container("a", mem, "")}, want: 0},
		{name: "one container", containers: []v1.Container{container("a", mem, "1024")}, want: 1024},
		{
			name:       "containers add up",
			containers: []v1.Container{container("a", mem, "1024"), container("b", mem, "2048"), container("c", mem, "")},
			want:       3072,
		},
		{
			name:       "largest init container wins over the sum",
			containers: []v1.Container{container("a", mem, "1024"), container("b", mem, "1024")},
			inits:      []v1.Container{container("i1", mem, "4096"), container("i2", mem, "3000")},
			want:       4096,
		},
		{
			name:       "sum wins over smaller init containers",
			containers: []v1.Container{container("a", mem, "3000"), container("b", mem, "3000")},
			inits:      []v1.Container{container("i1", mem, "4096")},
			want:       6000,
		},
		{
			name:       "sidecars run beside containers and later init containers",
			containers: []v1.Container{container("a", mem, "1000")},
			inits: []v1.Container{
				sidecar(container("s", mem, "500")),
				container("i", mem, "2000"),
			},
			want: 2500,
		},
		{
			name:       "sidecar adds to the containers",
			containers: []v1.Container{container("a", mem, "3000")},
			inits:      []v1.Container{sidecar(container("s", mem, "500")), container("i", mem, "1000")},
			want:       3500,
		},
		{
			name: "requests used when limits are absent",
			containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{mem: resource.MustParse("512")},
			}}},
			want: 512,
		},
		{
			name: "limits win over requests",
			containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{mem: resource.MustParse("1024")},
				Requests: v1.ResourceList{mem: resource.MustParse("512")},
			}}},
			want: 1024,
		},
		{name: "suffixed integer", containers: []v1.Container{container("a", mem, "1Ki")}, want: 1024},
		{
			name:       "negative",
			containers: []v1.Container{container("gpu", mem, "-1")},
			wantErr:    []string{`container "gpu"`, "volcano.sh/gpu-memory=-1", "want a whole number"},
		},
		{
			name:       "milli fraction",
			containers: []v1.Container{container("gpu", mem, "500m")},
			wantErr:    []string{`container "gpu"`, "volcano.sh/gpu-memory=500m"},
		},
		{
			name:    "decimal fraction in an init container",
			inits:   []v1.Container{container("setup", mem, "1.5")},
			wantErr: []string{`init container "setup"`, "volcano.sh/gpu-memory=1500m"},
		},
		{
			name:       "too large",
			containers: []v1.Container{container("gpu", mem, "2Ti")},
			wantErr:    []string{`container "gpu"`, "volcano.sh/gpu-memory=2Ti"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: tc.containers, InitContainers: tc.inits}}
			pod.Name, pod.Namespace = "p", "ns"
			got, err := podRequest(pod, mem)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("podRequest = %d, want an error", got)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("podRequest = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestHasDeviceRequestAndValidate(t *testing.T) {
	mixed := sharePod("mixed", 1024)
	mixed.Spec.Containers = append(mixed.Spec.Containers, container("n", gpushareproto.ResourceGPUNumber, "1"))
	negative := sharePod("neg")
	negative.Spec.Containers = []v1.Container{container("bad", gpushareproto.ResourceGPUMemory, "-5")}
	initOnly := numberPod("init-only")
	initOnly.Spec.InitContainers = []v1.Container{container("i", gpushareproto.ResourceGPUNumber, "2")}
	tests := []struct {
		name    string
		mode    Mode
		pod     *v1.Pod
		wantHas bool
		wantErr string
	}{
		{name: "share pod in share mode", mode: ModeShare, pod: sharePod("p", 1024), wantHas: true},
		{name: "share pod in number mode", mode: ModeNumber, pod: sharePod("p", 1024)},
		{name: "number pod in number mode", mode: ModeNumber, pod: numberPod("p", 2), wantHas: true},
		{name: "number pod in share mode", mode: ModeShare, pod: numberPod("p", 2)},
		{name: "zero request", mode: ModeShare, pod: sharePod("p", 0)},
		{name: "init container only", mode: ModeNumber, pod: initOnly, wantHas: true},
		{name: "negative is a request, refused", mode: ModeShare, pod: negative, wantHas: true,
			wantErr: `container "bad": volcano.sh/gpu-memory=-5`},
		{name: "both modes refused in share mode", mode: ModeShare, pod: mixed, wantHas: true,
			wantErr: "asks for both volcano.sh/gpu-memory and volcano.sh/gpu-number"},
		{name: "both modes refused in number mode", mode: ModeNumber, pod: mixed, wantHas: true,
			wantErr: "asks for both volcano.sh/gpu-memory and volcano.sh/gpu-number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, tc.mode)
			if got := b.HasDeviceRequest(tc.pod); got != tc.wantHas {
				t.Errorf("HasDeviceRequest = %v, want %v", got, tc.wantHas)
			}
			err := b.ValidateRequest(tc.pod)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("ValidateRequest: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("ValidateRequest: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantName string
		wantLock string
		wantErr  string
	}{
		{name: "share", opts: Options{Mode: ModeShare}, wantName: "gpushare", wantLock: "gpu"},
		{name: "number", opts: Options{Mode: ModeNumber}, wantName: "gpunumber"},
		{name: "empty mode", opts: Options{}, wantErr: `Mode="": want "share" or "number"`},
		{name: "unknown mode", opts: Options{Mode: "vgpu"}, wantErr: `Mode="vgpu"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if b.Name() != tc.wantName || b.LockName() != tc.wantLock || b.Mode() != tc.opts.Mode {
				t.Errorf("Name, LockName, Mode = %q, %q, %q; want %q, %q, %q",
					b.Name(), b.LockName(), b.Mode(), tc.wantName, tc.wantLock, tc.opts.Mode)
			}
		})
	}
}
