package deviceshare

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/internal/allocsig"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

const signKey = "a-scheduler-allocation-key-of-32-bytes-or-more"

// With an allocation key file every vGPU allocation travels with a
// signature the node agent can verify against the pod's UID and node; a
// signature does not verify for another pod.
func TestVGPUAllocationsAreSigned(t *testing.T) {
	for _, withKey := range []bool{true, false} {
		t.Run("key="+strconv.FormatBool(withKey), func(t *testing.T) {
			c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 8000}, vcard{"GPU-1", "", 8000})}, nil)
			if withKey {
				path := filepath.Join(t.TempDir(), "key")
				if err := os.WriteFile(path, []byte(signKey+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := c.st.SetAllocationKeyFile(path); err != nil {
					t.Fatal(err)
				}
			}
			pods := []*v1.Pod{vgpuPod("a", "pg1", 1, 4000, 25), vgpuPod("b", "pg1", 2, 2000, 10)}
			c.addJob(podGroup("pg1", 2), pods...)
			c.session(nil)
			binds := c.waitBinds(2)
			ring, err := allocsig.Parse([]byte(signKey))
			if err != nil {
				t.Fatal(err)
			}
			required := (&vgpu.Backend{}).SignedAnnotations()
			for i, p := range pods {
				b := binds[p.Namespace+"/"+p.Name]
				sig, ok := b.Annotations[allocsig.Annotation]
				if !withKey {
					if ok {
						t.Errorf("%s: signed without a key file: %q", p.Name, sig)
					}
					continue
				}
				if err := ring.Verify(string(p.UID), b.Node, b.Annotations, required); err != nil {
					t.Errorf("%s: the scheduler's signature does not verify: %v", p.Name, err)
				}
				// No node locks without NodeLockEnable: the agent may trust
				// that and skip reading the node.
				if v, ok := b.Annotations[nodelock.AnnotationTaken]; !ok || v != "" || !allocsig.Covers(b.Annotations, nodelock.AnnotationTaken) {
					t.Errorf("%s: %s = %q (present %v), covered %v; want empty, present and signed", p.Name,
						nodelock.AnnotationTaken, v, ok, allocsig.Covers(b.Annotations, nodelock.AnnotationTaken))
				}
				other := pods[1-i]
				if err := ring.Verify(string(other.UID), b.Node, b.Annotations, required); err == nil {
					t.Errorf("%s's signature verifies for pod %s too", p.Name, other.Name)
				}
			}
		})
	}
}
