package allocate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	vgpubackend "github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/allocsig"
	"github.com/vgpushare/vshare/protocol/nodelock"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

const (
	testKey  = "a-test-allocation-key-of-at-least-32-bytes"
	otherKey = "another-allocation-key-of-at-least-32-bytes"
)

func keyring(t *testing.T, key string) *allocsig.Keyring {
	t.Helper()
	k, err := allocsig.Parse([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// withKeys makes the allocator demand signatures by key.
func withKeys(t *testing.T, key string) envOption {
	k := keyring(t, key)
	return func(_ *config.Config, o *allocate.Options) {
		o.Keys = func() (*allocsig.Keyring, error) { return k, nil }
	}
}

// sign signs the pod's allocation as the scheduler does: the backend's
// signed annotations, the pod's UID and the node.
func sign(t *testing.T, key string, pod *v1.Pod, node string) {
	t.Helper()
	pod.Annotations[allocsig.Annotation] = keyring(t, key).Sign(string(pod.UID), node, pod.Annotations, (&vgpubackend.Backend{}).SignedAnnotations())
}

// The agent requires exactly what the scheduler's vGPU backend signs.
func TestSignedAnnotationsMatchTheScheduler(t *testing.T) {
	if diff := cmp.Diff((&vgpubackend.Backend{}).SignedAnnotations(), allocate.SignedAnnotations); diff != "" {
		t.Errorf("agent's signed annotations differ from backends/vgpu's (-scheduler +agent):\n%s", diff)
	}
}

// Anyone who can create pods can write allocation annotations and
// spec.nodeName. With a key, only the scheduler's allocations get devices:
// not an unsigned one, not a signature made for another pod, node or card,
// not one made with another key, and not a pod of another scheduler.
func TestAllocateRefusesUntrustedAllocations(t *testing.T) {
	tests := []struct {
		name    string
		key     string // the agent's key; "" demands no signature
		names   []string
		edit    func(t *testing.T, e *env, pod *v1.Pod)
		wantMsg string // "" means served
	}{
		{name: "signed by the scheduler", key: testKey,
			edit: func(t *testing.T, _ *env, p *v1.Pod) { sign(t, testKey, p, nodeName) }},
		{name: "unsigned", key: testKey, wantMsg: "allocation-signature is missing",
			edit: func(*testing.T, *env, *v1.Pod) {}},
		{name: "signed with another key", key: testKey, wantMsg: "not in this node's key file",
			edit: func(t *testing.T, _ *env, p *v1.Pod) { sign(t, otherKey, p, nodeName) }},
		{name: "signature copied from another pod", key: testKey, wantMsg: "does not match the pod's UID",
			edit: func(t *testing.T, _ *env, p *v1.Pod) {
				uid := p.UID
				p.UID = "uid-someone-else"
				sign(t, testKey, p, nodeName)
				p.UID = uid
			}},
		{name: "signed for another node", key: testKey, wantMsg: "does not match the pod's UID, node",
			edit: func(t *testing.T, _ *env, p *v1.Pod) { sign(t, testKey, p, "other-node") }},
		{name: "card changed after signing", key: testKey, wantMsg: "does not match",
			edit: func(t *testing.T, e *env, p *v1.Pod) {
				sign(t, testKey, p, nodeName)
				p.Annotations[vgpuproto.AnnotationIDs] = entry(e.uuids[3], 1000, 0)
				p.Annotations[vgpuproto.AnnotationToAllocate] = entry(e.uuids[3], 1000, 0)
			}},
		{name: "signature that covers less", key: testKey, wantMsg: "does not cover volcano.sh/vgpu-ids-new",
			edit: func(t *testing.T, _ *env, p *v1.Pod) {
				p.Annotations[allocsig.Annotation] = keyring(t, testKey).Sign(string(p.UID), nodeName, p.Annotations,
					[]string{vgpuproto.AnnotationNode, vgpuproto.AnnotationBindTime})
			}},
		{name: "another scheduler", names: []string{"volcano"}, wantMsg: `spec.schedulerName "default-scheduler" is not one of`,
			edit: func(_ *testing.T, _ *env, p *v1.Pod) { p.Spec.SchedulerName = "default-scheduler" }},
		{name: "allowed scheduler, no key", names: []string{"volcano"},
			edit: func(_ *testing.T, _ *env, p *v1.Pod) { p.Spec.SchedulerName = "volcano" }},
		{name: "signed, but by another scheduler", key: testKey, names: []string{"volcano"}, wantMsg: "is not one of the schedulers",
			edit: func(t *testing.T, _ *env, p *v1.Pod) {
				p.Spec.SchedulerName = "hami-scheduler"
				sign(t, testKey, p, nodeName)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts []envOption
			if tc.key != "" {
				opts = append(opts, withKeys(t, tc.key))
			}
			events := record.NewFakeRecorder(10)
			opts = append(opts, func(_ *config.Config, o *allocate.Options) { o.SchedulerNames, o.Events = tc.names, events })
			e := newEnv(t, opts...)
			pod := newPod("p").container("c", 1, nil).allocated(entry(e.uuids[0], 1000, 0), 1).build()
			tc.edit(t, e, pod)
			e.add(t, pod)
			resp, err := e.alloc.Allocate(context.Background(), request(1))
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("Allocate refused the scheduler's allocation: %v", err)
				}
				if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != e.uuids[0] {
					t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want %s", got, e.uuids[0])
				}
				return
			}
			wantCode(t, err, codes.PermissionDenied)
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
			if resp != nil {
				t.Errorf("a refused allocation returned a response: %v", resp)
			}
			var failed bool
			for _, c := range e.rec.Calls() {
				failed = failed || c.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseFailed
				if c.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseSuccess {
					t.Errorf("untrusted pod marked success")
				}
			}
			if !failed {
				t.Errorf("untrusted pod not marked bind-phase failed")
			}
			select {
			case ev := <-events.Events:
				if !strings.HasPrefix(ev, "Warning "+allocate.EventAllocationFailed+" ") || !strings.Contains(ev, tc.wantMsg) {
					t.Errorf("event %q: want a Warning %s naming %q", ev, allocate.EventAllocationFailed, tc.wantMsg)
				}
			default:
				t.Errorf("no event recorded for the refused pod")
			}
		})
	}
}

// A pod the scheduler did not place (a user set spec.nodeName) that asks for
// as many cards while another pod's allocation is pending could be the pod
// the kubelet is admitting: the agent refuses rather than hand it the
// pending pod's cards, and serves again once that pod cannot be in
// admission any more.
func TestAllocateRefusesWhileAnUnplacedPodMayBeInAdmission(t *testing.T) {
	tests := []struct {
		name      string
		intruder  func(*podBuilder) *podBuilder
		wantServe bool
	}{
		{name: "asks for the same number of cards, just created",
			intruder: func(b *podBuilder) *podBuilder { return b }},
		{name: "asks for another number of cards", wantServe: true,
			intruder: func(b *podBuilder) *podBuilder {
				b.pod.Spec.Containers[0].Resources.Limits["volcano.sh/vgpu-number"] = qty(2)
				return b
			}},
		{name: "its init container asks for the same number of cards",
			intruder: func(b *podBuilder) *podBuilder {
				b.pod.Spec.Containers[0].Resources.Limits["volcano.sh/vgpu-number"] = qty(2)
				return b.initContainer("warm", false, 1, nil)
			}},
		{name: "created longer ago than an admission can take", wantServe: true,
			intruder: func(b *podBuilder) *podBuilder {
				b.pod.CreationTimestamp.Time = now.Add(-time.Hour)
				return b
			}},
		{name: "served by the agent before (bind-phase success)", wantServe: true,
			intruder: func(b *podBuilder) *podBuilder {
				return b.annotate(vgpuproto.AnnotationBindPhase, vgpuproto.BindPhaseSuccess)
			}},
		{name: "being deleted", wantServe: true,
			intruder: func(b *podBuilder) *podBuilder {
				b.pod.DeletionTimestamp = &metav1.Time{Time: now}
				return b
			}},
		{name: "finished", wantServe: true,
			intruder: func(b *podBuilder) *podBuilder { return b.phase(v1.PodFailed) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events := record.NewFakeRecorder(10)
			e := newEnv(t, func(_ *config.Config, o *allocate.Options) { o.Events = events })
			intruder := newPod("intruder").container("c", 1, nil)
			intruder.pod.CreationTimestamp.Time = now.Add(-5 * time.Second)
			pending := newPod("pending").container("c", 1, nil).allocated(entry(e.uuids[0], 1000, 0), 1).build()
			e.add(t, tc.intruder(intruder).build(), pending)

			resp, err := e.alloc.Allocate(context.Background(), request(1))
			if tc.wantServe {
				if err != nil {
					t.Fatalf("Allocate refused: %v", err)
				}
				if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != e.uuids[0] {
					t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want the pending pod's card %s", got, e.uuids[0])
				}
				return
			}
			wantCode(t, err, codes.FailedPrecondition)
			for _, want := range []string{"ns/intruder", "pod ns/pending's pending allocation"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if calls := e.rec.Calls(); len(calls) != 0 {
				t.Errorf("the pending pod's allocation was touched: %+v", calls)
			}
			// Asked again: still refused, the event is not repeated.
			if _, err := e.alloc.Allocate(context.Background(), request(1)); err == nil {
				t.Fatalf("second Allocate served while the intruder may be in admission")
			}
			if got := len(events.Events); got != 1 {
				t.Errorf("%d events recorded, want one on the intruder", got)
			} else if ev := <-events.Events; !strings.Contains(ev, "has no allocation by the scheduler") {
				t.Errorf("event %q does not say why", ev)
			}
			// Once the kubelet failed its admission, the pending pod is served.
			e.add(t, intruder.phase(v1.PodFailed).build())
			resp, err = e.alloc.Allocate(context.Background(), request(1))
			if err != nil {
				t.Fatalf("Allocate after the intruder failed: %v", err)
			}
			if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != e.uuids[0] {
				t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want %s", got, e.uuids[0])
			}
		})
	}
}

// After serving a pod the agent releases its node lock, reading the node
// (one GET), unless the pod's verified signature covers
// nodelock.AnnotationTaken and that does not name the agent's lock: only
// then is it sure no lock was taken. A failed allocation always releases.
func TestNodeLockReleasedUnlessSignedAsNotTaken(t *testing.T) {
	signWith := func(keys ...string) func(*testing.T, *v1.Pod) {
		return func(t *testing.T, p *v1.Pod) {
			p.Annotations[allocsig.Annotation] = keyring(t, testKey).Sign(string(p.UID), nodeName, p.Annotations,
				append((&vgpubackend.Backend{}).SignedAnnotations(), keys...))
		}
	}
	tests := []struct {
		name        string
		key         bool   // the agent demands signatures
		taken       string // the annotation's value; "-" leaves it out
		sign        func(*testing.T, *v1.Pod)
		wantRelease bool
	}{
		{name: "signed: no lock taken", key: true, taken: "", sign: signWith(nodelock.AnnotationTaken)},
		{name: "signed: another device's lock", key: true, taken: "hamivnpu", sign: signWith(nodelock.AnnotationTaken)},
		{name: "signed: this lock taken", key: true, taken: "hamivnpu,hamivgpu", sign: signWith(nodelock.AnnotationTaken), wantRelease: true},
		{name: "signature does not cover it", key: true, taken: "", sign: signWith(), wantRelease: true},
		{name: "signed, no annotation (older scheduler)", key: true, taken: "-", sign: signWith(), wantRelease: true},
		{name: "unsigned agent: not trusted", key: false, taken: "", sign: func(*testing.T, *v1.Pod) {}, wantRelease: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := []envOption{func(_ *config.Config, o *allocate.Options) { o.NodeLockName = "hamivgpu" }}
			if tc.key {
				opts = append(opts, withKeys(t, testKey))
			}
			e := newEnv(t, opts...)
			pod := newPod("p").container("c", 1, nil).allocated(entry(e.uuids[0], 1000, 0), 1).build()
			if tc.taken != "-" {
				pod.Annotations[nodelock.AnnotationTaken] = tc.taken
			}
			tc.sign(t, pod)
			e.add(t, pod)
			if _, err := e.alloc.Allocate(context.Background(), request(1)); err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			released := false
			for _, c := range e.rec.Calls() {
				released = released || (c.Pod == "p" && c.Annotations == nil)
			}
			if released != tc.wantRelease {
				t.Errorf("node lock released: %v, want %v (calls %v)", released, tc.wantRelease, e.rec.Calls())
			}
		})
	}
}
