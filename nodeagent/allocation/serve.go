package allocation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Poll is how often Wait looks again while it waits for the informer.
const Poll = 25 * time.Millisecond

// maxReported bounds the pods named in a "no pending pod" error.
const maxReported = 5

// Serve answers the kubelet's request one container request at a time with
// serve, stopping at the first refusal, which it logs (naming kind, like
// "vGPU", and the node) and returns as a gRPC status (see Status).
func Serve(ctx context.Context, req *pluginapi.AllocateRequest, kind, node string,
	serve func(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error)) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		r, err := serve(ctx, cr.GetDevicesIDs())
		if err != nil {
			klog.ErrorS(err, "Refused "+kind+" allocation", "node", node, "devices", cr.GetDevicesIDs())
			return nil, Status(err)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

// Wait calls find until it finds, or says to stop (a pod was refused, or
// nothing can come), or wait has passed, looking again every Poll: the
// kubelet learns of a bound pod at about the same time as the agent's
// informer, and may ask first. The wait is in real time (the kubelet's
// deadline is), whatever clock dates allocations. It returns find's last
// answer.
func Wait[T any](ctx context.Context, wait time.Duration, find func() (found T, stop bool, err error)) (T, error) {
	start := time.Now()
	for {
		found, stop, err := find()
		if err == nil || stop || time.Since(start) >= wait {
			return found, err
		}
		t := time.NewTimer(Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			var zero T
			return zero, err
		case <-t.C:
		}
	}
}

// BindTime reads the pod's bind-time annotation key (Unix seconds),
// refusing a value that is not one (ErrForged) or older than staleAfter
// (ErrStale).
func BindTime(pod *v1.Pod, key string, now time.Time, staleAfter time.Duration) (int64, error) {
	ref := klog.KObj(pod).String()
	bindTime, err := strconv.ParseInt(pod.Annotations[key], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("pod %s: %s=%q: want Unix seconds: %w", ref, key, pod.Annotations[key], ErrForged)
	}
	if age := now.Sub(time.Unix(bindTime, 0)); age > staleAfter {
		return 0, fmt.Errorf("pod %s: %s=%d is %s old, more than %s: %w", ref, key, bindTime,
			age.Truncate(time.Second), staleAfter, ErrStale)
	}
	return bindTime, nil
}

// Misses collects why the node's pending pods did not match a request, for
// the error that says no pod did.
type Misses struct {
	reported          []string
	refusal, inactive error
}

// Skipped records a pod that is not for this request.
func (m *Misses) Skipped(err error) { m.report(err) }

// Refused records a pod whose allocation was refused.
func (m *Misses) Refused(err error) {
	m.refusal = cmp.Or(m.refusal, err)
	m.report(err)
}

// Inactive records a pod that is no longer allocating.
func (m *Misses) Inactive(err error) {
	m.inactive = cmp.Or(m.inactive, err)
	m.report(err)
}

func (m *Misses) report(err error) {
	if len(m.reported) < maxReported {
		m.reported = append(m.reported, err.Error())
	}
}

// Err returns the error for a request no pod matched: msg, the first pods'
// reasons, and noPending joined with the first refusal (most likely the pod
// the kubelet admits: its refusal gives the error its class), else with the
// first inactive pod's reason. refused reports whether a pod was refused.
func (m *Misses) Err(msg string, noPending error) (refused bool, err error) {
	if len(m.reported) > 0 {
		msg += " (" + strings.Join(m.reported, "; ") + ")"
	}
	switch {
	case m.refusal != nil:
		return true, fmt.Errorf("%s: %w", msg, errors.Join(noPending, m.refusal))
	case m.inactive != nil:
		return false, fmt.Errorf("%s: %w", msg, errors.Join(noPending, m.inactive))
	}
	return false, fmt.Errorf("%s: %w", msg, noPending)
}
