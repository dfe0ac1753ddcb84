package images

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/vgpushare/vshare/vgpu-device-plugin/install"
)

// TestChartInstallsLibvgpuFromTheImage: the plain manifests' init
// container runs the agent image's binary with install-libvgpu, a command
// line the subcommand accepts, copying the file the image holds into the
// directory it mounts.
func TestChartInstallsLibvgpuFromTheImage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy", "manifests", "vshare.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var ds *appsv1.DaemonSet
	for {
		var obj appsv1.DaemonSet
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "DaemonSet" {
			ds = &obj
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in the plain manifests")
	}
	spec := ds.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "install-libvgpu" {
		t.Fatalf("init containers %v, want install-libvgpu", spec.InitContainers)
	}
	c := spec.InitContainers[0]
	if c.Image != spec.Containers[0].Image {
		t.Errorf("init container image %s, the agent's %s", c.Image, spec.Containers[0].Image)
	}
	if len(c.Command) < 2 || c.Command[0] != AgentBinary || c.Command[1] != install.Command {
		t.Fatalf("command %q, want %s %s ...", c.Command, AgentBinary, install.Command)
	}
	args, err := install.ParseArgs(c.Command[2:])
	if err != nil {
		t.Fatal(err)
	}
	if args.From != LibvgpuPath {
		t.Errorf("--from=%s, the image has libvgpu.so at %s", args.From, LibvgpuPath)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.MountPath == filepath.Dir(args.To) && !m.ReadOnly)
	}
	if !mounted {
		t.Errorf("--to=%s is not in a writable mount of the init container (%v)", args.To, c.VolumeMounts)
	}
}
