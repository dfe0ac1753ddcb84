package allocation_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

func TestStatusTakesTheFirstClass(t *testing.T) {
	noPod := allocation.NewRefusal(codes.NotFound, "no pending pod")
	unknown := allocation.NewRefusal(codes.InvalidArgument, "unknown device")
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{name: "no refusal", err: errors.New("patch failed"), want: codes.Internal},
		{name: "wrapped", err: fmt.Errorf("pod a: %w", allocation.ErrStale), want: codes.FailedPrecondition},
		{name: "no pod, one refused", err: fmt.Errorf("node n: %w", errors.Join(noPod, fmt.Errorf("pod a: %w", allocation.ErrForged))),
			want: codes.PermissionDenied},
		{name: "no pod, one stale", err: errors.Join(noPod, allocation.ErrStale), want: codes.FailedPrecondition},
		{name: "unknown device", err: fmt.Errorf("%w: %w", noPod, unknown), want: codes.InvalidArgument},
		{name: "no pod", err: fmt.Errorf("node n: %w", noPod), want: codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := allocation.Status(tc.err)
			if status.Code(got) != tc.want || status.Convert(got).Message() != tc.err.Error() {
				t.Errorf("Status(%v) = %v, want code %s and the error's message", tc.err, got, tc.want)
			}
		})
	}
}

func TestMissesErr(t *testing.T) {
	noPod := allocation.NewRefusal(codes.NotFound, "no pending pod")
	skip, stale := errors.New("pod a: not for this request"), fmt.Errorf("pod b: %w", allocation.ErrStale)
	inactive := errors.New("pod c: bind-phase success")
	tests := []struct {
		name        string
		add         func(m *allocation.Misses)
		wantRefused bool
		wantMsg     string
		wantIs      []error
	}{
		{name: "nothing pending", add: func(*allocation.Misses) {}, wantMsg: "node n: no pod: no pending pod", wantIs: []error{noPod}},
		{name: "skipped and refused", add: func(m *allocation.Misses) { m.Skipped(skip); m.Refused(stale) }, wantRefused: true,
			wantMsg: "node n: no pod (pod a: not for this request; pod b: stale allocation): no pending pod\npod b: stale allocation",
			wantIs:  []error{noPod, allocation.ErrStale}},
		{name: "inactive", add: func(m *allocation.Misses) { m.Inactive(inactive) },
			wantMsg: "node n: no pod (pod c: bind-phase success): no pending pod\npod c: bind-phase success", wantIs: []error{noPod, inactive}},
		{name: "at most five named", add: func(m *allocation.Misses) {
			for range 7 {
				m.Skipped(skip)
			}
		}, wantMsg: "node n: no pod (" + "pod a: not for this request; pod a: not for this request; pod a: not for this request; " +
			"pod a: not for this request; pod a: not for this request): no pending pod", wantIs: []error{noPod}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m allocation.Misses
			tc.add(&m)
			refused, err := m.Err("node n: no pod", noPod)
			if refused != tc.wantRefused || err.Error() != tc.wantMsg {
				t.Errorf("Err = %v, %q; want %v, %q", refused, err, tc.wantRefused, tc.wantMsg)
			}
			for _, want := range tc.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("Err = %v, not %v", err, want)
				}
			}
		})
	}
}
