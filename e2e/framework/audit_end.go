//go:build e2e

package framework

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/vgpushare/vshare/protocol/nodelock"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// endProblems returns, by pod, why each campaign pod is not yet in an
// accepted final state: Running with its allocation admitted by the agent
// (bind-phase success and an Allocate answer for every container), or
// Pending and unbound with a reason users can read (the pod's PodScheduled
// condition or its PodGroup's Unschedulable condition).
func (a *Auditor) endProblems(ctx context.Context) (map[string]string, error) {
	pgs, err := a.c.Volcano.SchedulingV1beta1().PodGroups(a.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list podgroups: %w", err)
	}
	pgReason := map[string]string{}
	for _, pg := range pgs.Items {
		for _, c := range pg.Status.Conditions {
			if c.Type == schedulingv1beta1.PodGroupUnschedulableType && c.Status == v1.ConditionTrue {
				pgReason[pg.Name] = c.Message
			}
		}
	}
	out := map[string]string{}
	for _, obj := range a.pods.List() {
		pod := obj.(*v1.Pod)
		if pod.Namespace != a.namespace {
			continue
		}
		if why := a.endProblem(pod, pgReason); why != "" {
			out[pod.Name] = why
		}
	}
	return out, nil
}

func (a *Auditor) endProblem(pod *v1.Pod, pgReason map[string]string) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "being deleted"
	case pod.Status.Phase == v1.PodRunning:
		return a.admissionProblem(pod)
	case pod.Status.Phase == v1.PodPending && pod.Spec.NodeName != "":
		return "bound to " + pod.Spec.NodeName + " but not started"
	case pod.Status.Phase == v1.PodPending:
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Message != "" {
				return ""
			}
		}
		if pgReason[pod.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey]] != "" {
			return ""
		}
		return "Pending without a PodScheduled or PodGroup Unschedulable reason"
	default:
		return fmt.Sprintf("phase %s (%s: %s)", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
	}
}

// admissionProblem says why a Running pod is not admitted, or "".
func (a *Auditor) admissionProblem(pod *v1.Pod) string {
	if phase := pod.Annotations[vgpuproto.AnnotationBindPhase]; phase != vgpuproto.BindPhaseSuccess {
		return fmt.Sprintf("Running with %s=%q", vgpuproto.AnnotationBindPhase, phase)
	}
	node := a.c.Node(pod.Spec.NodeName)
	if node == nil || node.Kubelet == nil {
		return "Running on " + pod.Spec.NodeName + ", which has no fake kubelet"
	}
	rec, ok := node.Kubelet.Allocation(pod.UID)
	if !ok {
		return "Running with bind-phase success, but the kubelet never called Allocate for it"
	}
	for _, ca := range rec.Containers {
		if ca.Envs == nil {
			return fmt.Sprintf("Running, container %s has no Allocate answer (errors: %s)", ca.Container, strings.Join(ca.Errors, "; "))
		}
	}
	return ""
}

// Settle polls the end state until every campaign pod is in an accepted
// state in three polls in a row, or timeout passes; then it flags each pod
// still not accepted. tick runs before each poll.
func (a *Auditor) Settle(ctx context.Context, timeout time.Duration, tick func(context.Context)) (time.Duration, error) {
	start := time.Now()
	var last map[string]string
	streak := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		tick(ctx)
		a.Sample()
		problems, err := a.endProblems(ctx)
		if err != nil {
			return false, nil // the API server may be busy; poll again
		}
		last = problems
		if len(problems) > 0 {
			streak = 0
			return false, nil
		}
		streak++
		return streak >= 3, nil
	})
	if err != nil && ctx.Err() != nil {
		return time.Since(start), ctx.Err()
	}
	names := make([]string, 0, len(last))
	for n := range last {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a.flag(ViolationEndState, a.namespace+"/"+n, last[n])
	}
	return time.Since(start), nil
}

// lockLife is one node lock value, from first sighting to removal.
type lockLife struct {
	value string
	since time.Time // parsed from the value
}

// LockCounts follows the node lock annotation of every node and counts what
// became of each lock.
type LockCounts struct {
	values map[string]*lockLife // by node
	// Taken counts lock values seen; Released those removed or replaced
	// before their expiry; Expired those that outlived it; TakenOver the
	// expired ones replaced by a newer lock.
	Taken, Released, Expired, TakenOver int
}

func (s *LockCounts) observe(node, value string, now time.Time, ttl time.Duration) {
	cur := s.values[node]
	if cur != nil && cur.value == value {
		return
	}
	if cur != nil {
		if now.Sub(cur.since) >= ttl {
			s.Expired++
			if value != "" {
				s.TakenOver++
			}
		} else {
			s.Released++
		}
		delete(s.values, node)
	}
	if value == "" {
		return
	}
	s.Taken++
	l := &lockLife{value: value}
	if parsed, err := nodelock.Parse(value); err == nil {
		l.since = parsed.Since
	}
	s.values[node] = l
}

// LockStats returns the node lock counts so far; locks still present and
// older than their expiry count as expired.
func (a *Auditor) LockStats() LockCounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.locks
	s.values = nil
	for _, l := range a.locks.values {
		if time.Since(l.since) >= a.lockTTL {
			s.Expired++
		}
	}
	return s
}

// ExpiredLocks returns the nodes whose lock annotation is older than its
// expiry.
func (a *Auditor) ExpiredLocks() []string {
	var out []string
	for _, obj := range a.nodes.List() {
		node := obj.(*v1.Node)
		value, ok := node.Annotations[a.lockKey]
		if !ok {
			continue
		}
		if l, err := nodelock.Parse(value); err != nil || time.Since(l.Since) >= a.lockTTL {
			out = append(out, node.Name)
		}
	}
	sort.Strings(out)
	return out
}

// klogHeldLine matches the binder's refusal of a bind because of a held
// lock, with klog's header time and the lock value.
var klogHeldLine = regexp.MustCompile(`^[IWE](\d{4} \d{2}:\d{2}:\d{2}\.\d+) .*node lock is held \(([^)]*)\)`)

// CheckLockLogs reads the schedulers' logs and flags every bind refused
// because of a lock that was already older than its expiry when the
// scheduler refused (the lock's time has whole seconds, hence one second of
// tolerance). It returns how many refusals it read.
func (a *Auditor) CheckLockLogs(logs []string) (int, error) {
	n := 0
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return n, fmt.Errorf("read scheduler log: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			m := klogHeldLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			n++
			at, err := time.ParseInLocation("0102 15:04:05.000000", m[1], time.Local)
			if err != nil {
				continue
			}
			at = at.AddDate(time.Now().Year(), 0, 0)
			l, err := nodelock.Parse(m[2])
			if err != nil {
				continue
			}
			if age := at.Sub(l.Since); age > a.lockTTL+time.Second {
				a.flag(ViolationLock, m[2], fmt.Sprintf("%s: bind refused at %s for a lock %s old (expiry %s)",
					path, at.Format("15:04:05.000"), age.Round(time.Millisecond), a.lockTTL))
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return n, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return n, nil
}
