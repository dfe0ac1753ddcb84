package gpushare

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// bigExponent matches a decimal exponent of five digits or more:
// ParseQuantity's cost grows with the exponent, which is not ours to bound.
var bigExponent = regexp.MustCompile(`[eE][+-]?0*[1-9][0-9]{4}`)

// apiQuantity parses s as the API server would hand it to us: parsed, then
// written in canonical form and read back. ok is false for strings the API
// server refuses (or that are too costly to parse here).
func apiQuantity(s string) (resource.Quantity, bool) {
	if bigExponent.MatchString(s) {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, false
	}
	q, err = resource.ParseQuantity(q.String())
	return q, err == nil
}

// FuzzNewDevices decodes a node whose gpu-number and gpu-memory capacities
// and volcano.sh/gpu-unhealthy-ids are fuzzed, in either mode. A refusal
// names the capacity or the annotation; an accepted node has as many cards
// as gpu-number says (at most MaxCards), memory split evenly (share mode),
// exactly the listed cards unhealthy and nothing in use.
func FuzzNewDevices(f *testing.F) {
	for _, s := range []struct {
		number, memory, unhealthy string
		share                     bool
	}{
		{"4", "65536", "", true},
		{"4", "65536", "1, 3", true},
		{"4", "65536", "1,,1", false},
		{"4", "65536", "4", true},
		{"4", "65536", "-1", true},
		{"4", "65536", "+1", true},
		{"4", "65536", "x", false},
		{"4", "", "", true},
		{"4", "", "", false},
		{"", "65536", "", true},
		{"0", "65536", "", true},
		{"4", "3", "", true},
		{"1025", "65536", "", false},
		{"4.5", "65536", "", false},
		{"4", "1Ti", "", true},
		{"4", "2Ti", "", true},
		{"-1", "65536", "", false},
	} {
		f.Add(s.number, s.memory, s.unhealthy, s.share)
	}
	f.Fuzz(func(t *testing.T, number, memory, unhealthy string, share bool) {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
		node.Status.Capacity = v1.ResourceList{}
		for res, s := range map[v1.ResourceName]string{gpushareproto.ResourceGPUNumber: number, gpushareproto.ResourceGPUMemory: memory} {
			if s == "" {
				continue
			}
			q, ok := apiQuantity(s)
			if !ok {
				return
			}
			node.Status.Capacity[res] = q
		}
		if unhealthy != "" {
			node.Annotations = map[string]string{gpushareproto.AnnotationUnhealthyIDs: unhealthy}
		}
		mode := ModeNumber
		if share {
			mode = ModeShare
		}
		d, err := newBackend(t, mode).NewDevices(node)
		if err != nil {
			if d != nil {
				t.Errorf("NewDevices returned devices with the error %v", err)
			}
			named := false
			for _, key := range []string{string(gpushareproto.ResourceGPUNumber), string(gpushareproto.ResourceGPUMemory), gpushareproto.AnnotationUnhealthyIDs} {
				named = named || strings.Contains(err.Error(), key)
			}
			if !named {
				t.Errorf("NewDevices error %q names neither capacity nor %s", err, gpushareproto.AnnotationUnhealthyIDs)
			}
			return
		}
		if d == nil {
			return
		}
		checkInventory(t, node, d.(*Devices), share, unhealthy)
	})
}

func checkInventory(t *testing.T, node *v1.Node, d *Devices, share bool, unhealthy string) {
	t.Helper()
	numQ := node.Status.Capacity[gpushareproto.ResourceGPUNumber]
	cards, ok := numQ.AsInt64()
	if !ok || cards < 1 || cards > gpushareproto.MaxCards {
		t.Fatalf("accepted gpu-number %s", numQ.String())
	}
	usage, pods := d.CardUsage()
	if int64(len(usage)) != cards || pods != 0 {
		t.Fatalf("%d cards and %d pods from gpu-number %d", len(usage), pods, cards)
	}
	var memPerCard int64
	if memQ, found := node.Status.Capacity[gpushareproto.ResourceGPUMemory]; found {
		mem, _ := memQ.AsInt64()
		memPerCard = mem / cards
	}
	if share && memPerCard < 1 {
		t.Errorf("share mode accepted %d MiB per card", memPerCard)
	}
	sick := map[int]bool{}
	for _, e := range strings.Split(unhealthy, ",") {
		if e = strings.TrimSpace(e); e != "" {
			i, err := strconv.Atoi(e)
			if err != nil || i < 0 || int64(i) >= cards {
				t.Fatalf("accepted unhealthy entry %q for %d cards", e, cards)
			}
			sick[i] = true
		}
	}
	for i, c := range usage {
		if c.MemoryTotalMiB != memPerCard || c.MemoryUsedMiB != 0 || c.Pods != 0 || c.Healthy == sick[i] {
			t.Errorf("card %d: %+v; want %d MiB, unused, healthy %v", i, c, memPerCard, !sick[i])
		}
	}
}

// FuzzAddResource accounts a pod whose volcano.sh/gpu-index and request
// are fuzzed on a four-card node, in either mode. A refusal names the
// annotation or the request's resource and leaves the state alone; an
// accepted pod holds exactly as many distinct cards as it asked for (one in
// share mode), the same pod again is a no-op, and SubResource restores the
// state before AddResource.
func FuzzAddResource(f *testing.F) {
	for _, s := range []struct {
		index, request string
		share          bool
	}{
		{"0", "1024", true},
		{"3", "16384", true},
		{"0,1", "1024", true},
		{"0,2", "2", false},
		{"0,0", "2", false},
		{"4", "1", false},
		{"", "1", false},
		{"01", "1", false},
		{"00", "1", true},
		{"+1", "1", false},
		{" 1", "1", false},
		{"0,1,2,3,4", "5", false},
		{"0", "0", true},
		{"0", "-1", true},
		{"0", "1.5", false},
		{"0", "2Ti", true},
	} {
		f.Add(s.index, s.request, s.share, uint8(1))
	}
	node := fourCards(gpushareproto.AnnotationUnhealthyIDs, "2")
	f.Fuzz(func(t *testing.T, index, request string, share bool, containers uint8) {
		q, ok := apiQuantity(request)
		if !ok {
			return
		}
		res, mode := gpushareproto.ResourceGPUNumber, ModeNumber
		if share {
			res, mode = gpushareproto.ResourceGPUMemory, ModeShare
		}
		pod := placed(podWith("p", res), index)
		for i := 0; i < 1+int(containers)%3; i++ {
			c := v1.Container{Name: "c" + strconv.Itoa(i), Resources: v1.ResourceRequirements{Limits: v1.ResourceList{res: q}}}
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		d := devicesOf(t, newBackend(t, mode), node)
		acc := testkit.Account(t, d, pod, gpushareproto.AnnotationGPUIndex, string(res))
		if acc == nil {
			return
		}
		if h, held := d.pods.Get(pod); held {
			checkHolding(t, h, index, share, len(d.cards))
		}
		acc.CheckRoundTrip(t)
	})
}

func checkHolding(t *testing.T, h holding, index string, share bool, cards int) {
	t.Helper()
	if share && (len(h.cards) != 1 || h.memory <= 0 || h.whole) || !share && (!h.whole || h.memory != 0) {
		t.Errorf("gpu-index %q held as %+v", index, h)
	}
	if gpushareproto.EncodeIndex(h.cards) != index {
		t.Errorf("gpu-index %q held as cards %v", index, h.cards)
	}
	seen := map[int]bool{}
	for _, c := range h.cards {
		if c < 0 || c >= cards || seen[c] {
			t.Errorf("gpu-index %q: card %d out of range or repeated", index, c)
		}
		seen[c] = true
	}
}
