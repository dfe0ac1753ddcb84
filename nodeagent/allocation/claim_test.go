package allocation_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

func TestClaimBeforeQueuesByStampThenName(t *testing.T) {
	claim := func(ns, name string, queue int64) *allocation.Claim[string, int64] {
		p := pod(name, "n1", "", "")
		p.Namespace = ns
		return &allocation.Claim[string, int64]{Pod: p, Queue: queue}
	}
	tests := []struct {
		name string
		a, b *allocation.Claim[string, int64]
		want bool
	}{
		{name: "older first", a: claim("ns", "b", 1), b: claim("ns", "a", 2), want: true},
		{name: "newer later", a: claim("ns", "a", 2), b: claim("ns", "b", 1)},
		{name: "same stamp: namespace", a: claim("a", "z", 1), b: claim("b", "a", 1), want: true},
		{name: "same stamp and namespace: name", a: claim("ns", "a", 1), b: claim("ns", "b", 1), want: true},
		{name: "itself", a: claim("ns", "a", 1), b: claim("ns", "a", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Before(tc.b); got != tc.want {
				t.Errorf("Before = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClaimCheck(t *testing.T) {
	now := time.Unix(10_000, 0)
	check := allocation.ClaimCheck{Node: "n1", NodeKey: protocol.Node, BindTimeKey: "x/bind-time", StaleAfter: 5 * time.Minute}
	tests := []struct {
		name     string
		node     string
		bindTime string
		trust    allocation.Trust
		wantErr  error
		wantMsg  string
	}{
		{name: "fresh, for this node", node: "n1", bindTime: strconv.FormatInt(now.Unix()-60, 10)},
		{name: "another node", node: "n2", bindTime: strconv.FormatInt(now.Unix()-60, 10), wantErr: allocation.ErrForged,
			wantMsg: `pod ns/p: x/node="n2" was not written for node n1: allocation annotations refused`},
		{name: "another scheduler", node: "n1", bindTime: strconv.FormatInt(now.Unix()-60, 10),
			trust: allocation.Trust{SchedulerNames: []string{"volcano"}}, wantErr: allocation.ErrForged},
		{name: "stale", node: "n1", bindTime: strconv.FormatInt(now.Unix()-301, 10), wantErr: allocation.ErrStale},
		{name: "no bind-time", node: "n1", wantErr: allocation.ErrForged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", tc.node, "", "")
			p.Annotations["x/bind-time"] = tc.bindTime
			k := check
			k.Trust = tc.trust
			got, err := k.Check(p, "ns/p", now)
			if !errors.Is(err, tc.wantErr) || (err == nil && strconv.FormatInt(got, 10) != tc.bindTime) {
				t.Errorf("Check = %d, %v; want bind-time %s, error %v", got, err, tc.bindTime, tc.wantErr)
			}
			if tc.wantMsg != "" && (err == nil || err.Error() != tc.wantMsg) {
				t.Errorf("Check = %v, want %q", err, tc.wantMsg)
			}
		})
	}
}

func TestEntryContainers(t *testing.T) {
	p := pod("p", "n1", "", "")
	p.Spec.InitContainers = []v1.Container{{Name: "i0"}}
	p.Spec.Containers = []v1.Container{{Name: "c0"}, {Name: "c1"}}
	tests := []struct {
		n      int
		want   []string
		wantOK bool
	}{
		{n: 2, want: []string{"c0", "c1"}, wantOK: true},
		{n: 3, want: []string{"i0", "c0", "c1"}, wantOK: true},
		{n: 1},
		{n: 4},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			ctrs, ok := allocation.EntryContainers(p, tc.n)
			var got []string
			for _, c := range ctrs {
				got = append(got, c.Name)
			}
			if ok != tc.wantOK {
				t.Errorf("EntryContainers(%d) ok = %v, want %v", tc.n, ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("EntryContainers(%d) (-want +got):\n%s", tc.n, diff)
			}
		})
	}
	if ctrs, _ := allocation.EntryContainers(p, 3); ctrs[0] != &p.Spec.InitContainers[0] || ctrs[2] != &p.Spec.Containers[1] {
		t.Error("EntryContainers does not point into the pod's spec")
	}
}

func TestLimitReadsTheLimitThenTheRequest(t *testing.T) {
	const name = v1.ResourceName("x/cards")
	tests := []struct {
		name   string
		res    v1.ResourceRequirements
		want   string
		wantOK bool
	}{
		{name: "limit", res: v1.ResourceRequirements{Limits: v1.ResourceList{name: resource.MustParse("2")},
			Requests: v1.ResourceList{name: resource.MustParse("1")}}, want: "2", wantOK: true},
		{name: "request", res: v1.ResourceRequirements{Requests: v1.ResourceList{name: resource.MustParse("1")}}, want: "1", wantOK: true},
		{name: "neither", want: "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := allocation.Limit(&v1.Container{Resources: tc.res}, name)
			if ok != tc.wantOK || q.String() != tc.want {
				t.Errorf("Limit = %s, %v; want %s, %v", q.String(), ok, tc.want, tc.wantOK)
			}
		})
	}
}
