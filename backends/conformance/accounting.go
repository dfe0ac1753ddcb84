package conformance

import (
	"maps"
	"strings"
	"testing"

	"github.com/vgpushare/vshare/device"
)

// checkAddResourceMatchesAllocate checks that accounting a pod from its
// reservation annotations gives the state Allocate made, that a pod is
// never counted twice, and that Release and SubResource undo either.
func checkAddResourceMatchesAllocate(tb testing.TB, s Suite, policy string, salt uint64) {
	e := newEnv(tb, s, salt)
	base, _ := e.partlyFilled(tb, policy)
	want := e.snapshot(base)
	for i := 0; i < 3; i++ {
		pod := e.fitting(tb, base, policy)
		allocated := base.DeepCopy()
		p := allocate(tb, allocated, pod, policy)
		annotated := p.annotated()
		added := base.DeepCopy()
		if err := added.AddResource(annotated); err != nil {
			tb.Fatalf("AddResource(%s carrying %v): %v", pod.Name, p.r.Annotations, err)
		}
		held := e.snapshot(allocated)
		same(tb, "state after Allocate vs after AddResource of the annotated pod", held, e.snapshot(added))
		same(tb, "AddQueueResource after Allocate vs after AddResource",
			allocated.AddQueueResource(annotated), added.AddQueueResource(annotated))

		_ = allocated.AddResource(annotated) // an error or a no-op, never a second count
		same(tb, "state after AddResource of a pod Allocate already accounted", held, e.snapshot(allocated))
		_ = added.AddResource(annotated)
		same(tb, "state after AddResource of a pod already accounted", held, e.snapshot(added))

		if err := added.Release(pod, p.r); err != nil {
			tb.Errorf("Release(%s) after AddResource: %v", pod.Name, err)
		}
		same(tb, "state after AddResource+Release vs before", want, e.snapshot(added))
		if err := allocated.SubResource(annotated); err != nil {
			tb.Errorf("SubResource(%s) after Allocate: %v", pod.Name, err)
		}
		same(tb, "state after Allocate+SubResource vs before", want, e.snapshot(allocated))
	}
}

// checkNoRequestIgnored checks that a pod without a device request is not
// recognised, fits, and changes nothing.
func checkNoRequestIgnored(tb testing.TB, s Suite, salt uint64) {
	e := newEnv(tb, s, salt)
	plain := plainPod()
	if s.Backend.HasDeviceRequest(plain) {
		tb.Errorf("Backend.HasDeviceRequest of a pod without a device request is true")
	}
	if err := s.Backend.ValidateRequest(plain); err != nil {
		tb.Errorf("Backend.ValidateRequest of a pod without a device request: %v", err)
	}
	for _, policy := range s.Policies {
		d, _ := e.partlyFilled(tb, policy)
		before := e.snapshot(d)
		if d.HasDeviceRequest(plain) {
			tb.Errorf("Devices.HasDeviceRequest of a pod without a device request is true")
		}
		if st := d.FilterNode(plain, policy); !st.IsSuccess() {
			tb.Errorf("FilterNode(%s) of a pod without a device request: code %d, %s", policy, st.Code, st.Message())
		}
		if err := d.AddResource(plain); err != nil {
			tb.Errorf("AddResource of a pod without a device request: %v", err)
		}
		if q := d.AddQueueResource(plain); len(q) != 0 {
			tb.Errorf("AddQueueResource of a pod without a device request = %v, want empty", q)
		}
		if r, err := d.Allocate(plain, policy); err == nil && r != nil && len(r.Annotations) != 0 {
			tb.Errorf("Allocate(%s) of a pod without a device request reserved %v", policy, r.Annotations)
		}
		if err := d.SubResource(plain); err != nil {
			tb.Errorf("SubResource of a pod without a device request: %v", err)
		}
		same(tb, "state after handling a pod without a device request", before, e.snapshot(d))
	}
}

// checkMalformedRejected corrupts a valid reservation in each of the
// suite's ways and checks that AddResource refuses it, naming the
// annotation, and that neither AddResource nor Release with it changes the
// state.
func checkMalformedRejected(tb testing.TB, s Suite, policy string, salt uint64) {
	e := newEnv(tb, s, salt)
	base, _ := e.partlyFilled(tb, policy)
	want := e.snapshot(base)
	pod := e.fitting(tb, base, policy)
	for _, m := range s.Malformed {
		holding := base.DeepCopy()
		p := allocate(tb, holding, pod, policy)
		bad := &device.Reservation{Annotations: maps.Clone(p.r.Annotations)}
		maps.Copy(bad.Annotations, m.Annotations)

		d := base.DeepCopy()
		err := d.AddResource(device.ApplyReservation(pod, bad))
		switch {
		case err == nil:
			tb.Errorf("%s: AddResource accepted %v", m.Name, bad.Annotations)
		case !strings.Contains(err.Error(), m.Key):
			tb.Errorf("%s: AddResource error %q does not name the annotation %s", m.Name, err, m.Key)
		}
		same(tb, m.Name+": state after AddResource refused a malformed pod", want, e.snapshot(d))

		held := e.snapshot(holding)
		if err := holding.Release(pod, bad); err != nil {
			same(tb, m.Name+": state after Release refused a malformed reservation", held, e.snapshot(holding))
		} else {
			same(tb, m.Name+": state after Release accepted a malformed reservation", want, e.snapshot(holding))
		}
	}
}

// checkDeepCopyIndependent checks that changes to a copy do not show in
// the original and the other way round.
func checkDeepCopyIndependent(tb testing.TB, s Suite, policy string, salt uint64) {
	e := newEnv(tb, s, salt)
	orig, placed := e.partlyFilled(tb, policy)
	origSnap := e.snapshot(orig)
	cp := orig.DeepCopy()
	same(tb, "DeepCopy vs original", origSnap, e.snapshot(cp))

	allocate(tb, cp, e.fitting(tb, cp, policy), policy)
	if len(placed) > 0 {
		if err := cp.Release(placed[0].pod, placed[0].r); err != nil {
			tb.Errorf("Release(%s) on the copy: %v", placed[0].pod.Name, err)
		}
	}
	same(tb, "original after changing its copy", origSnap, e.snapshot(orig))

	cpSnap := e.snapshot(cp)
	allocate(tb, orig, e.fitting(tb, orig, policy), policy)
	same(tb, "copy after changing the original", cpSnap, e.snapshot(cp))
	same(tb, "copy of a copy", cpSnap, e.snapshot(cp.DeepCopy()))
}
