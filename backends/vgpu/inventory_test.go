package vgpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func nodeWith(annotations ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		n.Annotations[annotations[i]] = annotations[i+1]
	}
	return n
}

func TestNewDevicesDecodes(t *testing.T) {
	tests := []struct {
		name string
		node *v1.Node
		want string // GetStatus; "" means no devices
	}{
		{name: "volcano register with mode, handshake present",
			node: nodeWith(vgpuproto.AnnotationRegister, "GPU-a,10,16384,NVIDIA-T4,true,hami-core:GPU-b,4,81920,NVIDIA-A100,false,hami-core:",
				vgpuproto.AnnotationHandshake, "Requesting_2026.01.01 00:00:00"),
			want: "0 GPU-a NVIDIA-T4 hami-core numa 0: 0/16384 MiB, cores 0/100, pods 0/10; " +
				"1 GPU-b NVIDIA-A100 hami-core numa 0: 0/81920 MiB, cores 0/100, pods 0/4, unhealthy"},
		{name: "v1.10-era register without mode, no handshake",
			node: nodeWith(vgpuproto.AnnotationRegister, "GPU-a,10,16384,NVIDIA-T4,true:"),
			want: "0 GPU-a NVIDIA-T4 hami-core numa 0: 0/16384 MiB, cores 0/100, pods 0/10"},
		{name: "HAMi JSON register",
			node: nodeWith(vgpuproto.AnnotationHAMiRegister, `[{"id":"GPU-h","index":0,"count":8,"devmem":24576,"devcore":100,`+
				`"type":"NVIDIA-L4","numa":1,"mode":"hami-core","health":true}]`),
			want: "0 GPU-h NVIDIA-L4 hami-core numa 1: 0/24576 MiB, cores 0/100, pods 0/8"},
		{name: "HAMi legacy register",
			node: nodeWith(vgpuproto.AnnotationHAMiRegister, "GPU-h,8,24576,200,NVIDIA-L4,1,true,0,hami-core:"),
			want: "0 GPU-h NVIDIA-L4 hami-core numa 1: 0/24576 MiB, cores 0/200, pods 0/8"},
		{name: "volcano register wins over HAMi's",
			node: nodeWith(vgpuproto.AnnotationRegister, "GPU-a,10,16384,NVIDIA-T4,true,hami-core:", vgpuproto.AnnotationHAMiRegister, "[]"),
			want: "0 GPU-a NVIDIA-T4 hami-core numa 0: 0/16384 MiB, cores 0/100, pods 0/10"},
		{name: "mig card of a known model",
			node: nodeWith(vgpuproto.AnnotationRegister, "GPU-m,7,40960,NVIDIA-A100-SXM4-40GB,true,mig:"),
			want: "0 GPU-m NVIDIA-A100-SXM4-40GB mig numa 0: 0/40960 MiB, cores 0/100, pods 0/7"},
		{name: "mig card of an unknown model falls back to hami-core",
			node: nodeWith(vgpuproto.AnnotationRegister, "GPU-m,7,16384,NVIDIA-T4,true,mig:"),
			want: "0 GPU-m NVIDIA-T4 hami-core numa 0: 0/16384 MiB, cores 0/100, pods 0/7"},
		{name: "no registration", node: nodeWith()},
		{name: "empty registration", node: nodeWith(vgpuproto.AnnotationRegister, "")},
		{name: "agent marked deleted", node: nodeWith(vgpuproto.AnnotationRegister, "GPU-a,10,16384,NVIDIA-T4,true,hami-core:",
			vgpuproto.AnnotationHandshake, "Deleted_2026.01.01 00:00:00")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := newBackend(t).NewDevices(tc.node)
			if err != nil {
				t.Fatalf("NewDevices: %v", err)
			}
			got := ""
			if d != nil {
				got = d.GetStatus()
			}
			if got != tc.want {
				t.Errorf("GetStatus:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestNewDevicesRejectsMalformed(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		value string
		want  string
	}{
		{name: "too few fields", key: vgpuproto.AnnotationRegister, value: "GPU-a,10,16384:", want: "want UUID,count,devmemMiB"},
		{name: "count not a number", key: vgpuproto.AnnotationRegister, value: "GPU-a,x,16384,T4,true,hami-core:", want: `count="x"`},
		{name: "memory zero", key: vgpuproto.AnnotationRegister, value: "GPU-a,10,0,T4,true,hami-core:", want: `devmem="0"`},
		{name: "health not a bool", key: vgpuproto.AnnotationRegister, value: "GPU-a,10,1,T4,yes please,hami-core:", want: `health="yes please"`},
		{name: "unknown mode", key: vgpuproto.AnnotationRegister, value: "GPU-a,10,1,T4,true,vgpu:", want: `mode="vgpu"`},
		{name: "duplicate UUID", key: vgpuproto.AnnotationRegister, value: "GPU-a,10,1,T4,true,:GPU-a,10,1,T4,true,:", want: "registered twice"},
		{name: "empty UUID", key: vgpuproto.AnnotationRegister, value: ",10,1,T4,true,:", want: `UUID ""`},
		{name: "HAMi JSON broken", key: vgpuproto.AnnotationHAMiRegister, value: `[{"id":`, want: "JSON list"},
		{name: "HAMi JSON missing devmem", key: vgpuproto.AnnotationHAMiRegister, value: `[{"id":"GPU-a","count":1,"health":true}]`,
			want: "count and devmem are required"},
		{name: "HAMi legacy wrong arity", key: vgpuproto.AnnotationHAMiRegister, value: "GPU-a,1,2:", want: "want id,count,devmem"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := newBackend(t).NewDevices(nodeWith(tc.key, tc.value))
			if err == nil {
				t.Fatalf("NewDevices accepted %q: %v", tc.value, d.GetStatus())
			}
			for _, s := range []string{tc.key, tc.want, "node-a"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestInventoryKey(t *testing.T) {
	b := newBackend(t)
	reg := "GPU-a,10,16384,NVIDIA-T4,true,hami-core:"
	base := b.InventoryKey(nodeWith(vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationHandshake, "Reported 1"))
	if got := b.InventoryKey(nodeWith(vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationHandshake, "Reported 2")); got != base {
		t.Errorf("a handshake refresh changed the key: %q vs %q", got, base)
	}
	for _, n := range []*v1.Node{
		nodeWith(vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationHandshake, "Deleted_1"),
		nodeWith(vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationHAMiScore, "[]"),
		nodeWith(vgpuproto.AnnotationRegister, reg+"GPU-b,10,16384,NVIDIA-T4,true,hami-core:"),
		nodeWith(vgpuproto.AnnotationHAMiRegister, reg),
	} {
		if b.InventoryKey(n) == base {
			t.Errorf("key unchanged for %v", n.Annotations)
		}
	}
}

func TestLinkScores(t *testing.T) {
	reg := "GPU-0,10,100,T,true,:GPU-1,10,100,T,true,:GPU-2,10,100,T,true,:"
	score := `[{"uuid":"GPU-0","score":{"GPU-1":200,"GPU-2":10,"GPU-X":5}},{"uuid":"GPU-1","score":{"GPU-0":200}}]`
	d := devicesOf(t, newBackend(t), nodeWith(vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationHAMiScore, score))
	if diff := cmp.Diff([]int32{0, 200, 10, 200, 0, 0, 0, 0, 0}, d.links); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	bad := devicesOf(t, newBackend(t), nodeWith(vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationHAMiScore, "{"))
	if bad.links != nil {
		t.Errorf("unreadable scores must turn topology off, got %v", bad.links)
	}
}
