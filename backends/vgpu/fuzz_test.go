package vgpu

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
)

// FuzzNewDevices feeds NewDevices a node carrying a fuzzed
// volcano.sh/node-vgpu-register (hami false) or hami.io/node-nvidia-register
// (hami true, JSON or the older comma form) and a fuzzed
// hami.io/node-nvidia-score. A refusal names the registration annotation;
// an accepted inventory has at most MaxCards unique, unused cards within
// the limits, link scores form an n x n matrix of values in [0, 2^20] with a
// zero diagonal, and the cards written back in the same format decode the
// same.
func FuzzNewDevices(f *testing.F) {
	score := `[{"uuid":"GPU-0","score":{"GPU-1":100}},{"uuid":"GPU-1","score":{"GPU-0":100,"GPU-9":5}}]`
	for _, s := range []struct {
		value string
		hami  bool
		score string
	}{
		{register(gpu("GPU-0", 16384), gpu("GPU-1", 16384)), false, score},
		{register(gpu("GPU-m", 40960).withType("NVIDIA-A100-SXM4-40GB").withCount(7).inMode(ModeMIG)), false, ""},
		{"GPU-0,10,16384,NVIDIA-Tesla V100-PCIE-32GB,true:", false, ""},
		{"GPU-0,10,16384,NVIDIA,false,mps:GPU-0,10,16384,NVIDIA,true:", false, ""},
		{"GPU-0,10,0,NVIDIA,true:", false, ""},
		{"GPU-0,-1,16384,NVIDIA,true:", false, ""},
		{"GPU-0,10,16384,NVIDIA,maybe:", false, ""},
		{"GPU 0,10,16384,NVIDIA,true:", false, ""},
		{"GPU-0,10,16384,NVIDIA,true,x:", false, ""},
		{"::", false, ""},
		{"", false, ""},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"health":true,"mode":"hami-core"}]`, true, score},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"type":"NVIDIA","health":true},{"id":"GPU-1","count":10,"devmem":16384,"type":"NVIDIA","health":true}]`, true, score},
		{`[{"id":"GPU-0","count":10,"devmem":16384}]`, true, ""},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"health":true,"numa":2000}]`, true, ""},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"health":true,"devcore":-1}]`, true, ""},
		{"GPU-0,10,16384,100,NVIDIA-Tesla T4,0,true:GPU-1,10,16384,100,NVIDIA-Tesla T4,0,true,1,hami-core:", true, score},
		{"GPU-0,10,16384,100,NVIDIA,0:", true, ""},
		{register(gpu("GPU-0", 16384), gpu("GPU-1", 16384)), false, `[{"uuid":"GPU-0","score":{"GPU-1":-1}}]`},
		{register(gpu("GPU-0", 16384), gpu("GPU-1", 16384)), false, `{`},
	} {
		f.Add(s.value, s.hami, s.score)
	}
	f.Fuzz(func(t *testing.T, value string, hami bool, score string) {
		// Annotations travel as JSON strings: the API server cannot hand
		// us invalid UTF-8 (and JSON could not carry it back).
		if !utf8.ValidString(value) || !utf8.ValidString(score) {
			return
		}
		b := newBackend(t)
		key := AnnotationRegister
		if hami {
			key = AnnotationHAMiRegister
		}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{key: value}}}
		if score != "" {
			node.Annotations[AnnotationHAMiScore] = score
		}
		d, err := b.NewDevices(node)
		if err != nil {
			if d != nil {
				t.Errorf("NewDevices returned devices with the error %v", err)
			}
			if !strings.Contains(err.Error(), key) {
				t.Errorf("NewDevices error %q does not name %s", err, key)
			}
			return
		}
		if d == nil {
			return
		}
		checkFreshCards(t, d.(*Devices))
		inv, err := b.decodeInventory(node)
		if err != nil || inv == nil {
			t.Fatalf("decodeInventory after NewDevices accepted the node: %v, %v", inv, err)
		}
		checkLinks(t, inv)
		again, err := reencode(inv, hami)
		if err != nil {
			t.Fatalf("decode the registration written back: %v", err)
		}
		if diff := cmp.Diff(inv.cards, again.cards, cmp.AllowUnexported(cardSpec{})); diff != "" {
			t.Errorf("round trip of %q (-decoded +re-decoded):\n%s", value, diff)
		}
	})
}

func checkFreshCards(t *testing.T, d *Devices) {
	t.Helper()
	usage, pods := d.CardUsage()
	if len(usage) == 0 || len(usage) > MaxCards || pods != 0 {
		t.Fatalf("NewDevices: %d cards, %d pods; want 1 to %d cards and no pods", len(usage), pods, MaxCards)
	}
	ids := map[string]bool{}
	for _, c := range usage {
		if ids[c.ID] || c.ID == "" || strings.ContainsAny(c.ID, ",:;[] ") {
			t.Errorf("card %q: duplicate or malformed UUID accepted", c.ID)
		}
		ids[c.ID] = true
		if c.MemoryTotalMiB <= 0 || c.MemoryTotalMiB > MaxMemoryMiB || c.MaxPods < 0 || c.MaxPods > MaxShareCount ||
			c.CoresTotal < 0 || c.CoresTotal > 100*fullCores {
			t.Errorf("card %+v outside the limits", c)
		}
		if c.MemoryUsedMiB != 0 || c.CoresUsed != 0 || c.Pods != 0 {
			t.Errorf("fresh card %+v is in use", c)
		}
	}
}

func checkLinks(t *testing.T, inv *inventory) {
	t.Helper()
	if inv.links == nil {
		return
	}
	n := len(inv.cards)
	if len(inv.links) != n*n {
		t.Fatalf("%d link scores for %d cards", len(inv.links), n)
	}
	for i, s := range inv.links {
		if s < 0 || s > 1<<20 || (i/n == i%n && s != 0) {
			t.Errorf("link score %d->%d = %d", i/n, i%n, s)
		}
	}
}

// reencode writes the cards back in the format they came in and decodes
// them again.
func reencode(inv *inventory, hami bool) (*inventory, error) {
	if !hami {
		var b strings.Builder
		for _, c := range inv.cards {
			b.WriteString(c.uuid + "," + strconv.Itoa(int(c.count)) + "," + strconv.FormatInt(c.memMiB, 10) + "," + c.typ + "," +
				strconv.FormatBool(c.healthy) + "," + c.mode + ":")
		}
		return decodeVolcanoRegister(b.String())
	}
	devs := make([]hamiDevice, 0, len(inv.cards))
	for _, c := range inv.cards {
		count, mem, healthy := int64(c.count), c.memMiB, c.healthy
		devs = append(devs, hamiDevice{ID: c.uuid, Count: &count, Devmem: &mem, Devcore: int64(c.coresTotal),
			Type: c.typ, Numa: int64(c.numa), Mode: c.mode, Health: &healthy})
	}
	raw, err := json.Marshal(devs)
	if err != nil {
		return nil, err
	}
	return decodeHAMiRegister(string(raw))
}

// FuzzAddResource accounts a pod whose volcano.sh/vgpu-ids-new is fuzzed on
// a node with two shared cards and one MIG card. A refusal names the
// annotation and leaves the state alone; an accepted record is idempotent,
// leaves no usage negative, and SubResource restores exactly the state
// before AddResource.
func FuzzAddResource(f *testing.F) {
	for _, s := range []string{
		"GPU-0,NVIDIA,4000,10:",
		"GPU-0,NVIDIA,4000,10:GPU-1,NVIDIA,4000,0:",
		";GPU-1,NVIDIA,16384,100:",
		"GPU-m[group1-0],NVIDIA,4000,0:",
		"GPU-m[group1-0],NVIDIA,4000,0:;GPU-m[group1-1],NVIDIA,4000,0:",
		"GPU-m[group1-0],NVIDIA,4000,0:GPU-m[group1-0],NVIDIA,4000,0:",
		"GPU-m[nogroup-0],NVIDIA,4000,0:",
		"GPU-0[group1-0],NVIDIA,4000,0:",
		"GPU-0,NVIDIA,4000,10:GPU-0,NVIDIA,4000,10:",
		"GPU-9,NVIDIA,4000,10:",
		"GPU-0,NVIDIA,-1,10:",
		"GPU-0,NVIDIA,4000,101:",
		"GPU-0,NVIDIA,4000:",
		"GPU-0,NVIDIA,4000,10::",
		";;;",
		"",
	} {
		f.Add(s, uint8(2))
	}
	node := vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384),
		gpu("GPU-m", 40960).withType("NVIDIA-A100-SXM4-40GB").withCount(7).inMode(ModeMIG)})
	f.Fuzz(func(t *testing.T, value string, containers uint8) {
		d := devicesOf(t, newBackend(t), node)
		n := 1 + int(containers)%4
		pod := vpod("p", make([]ctr, n), AnnotationIDs, value)
		acc := testkit.Account(t, d, pod, AnnotationIDs)
		if acc == nil {
			return
		}
		for _, c := range testkit.Usage(d) {
			if c.MemoryUsedMiB < 0 || c.CoresUsed < 0 || c.Pods < 0 || c.Pods > n {
				t.Errorf("card %+v after accounting %q", c, value)
			}
		}
		acc.CheckRoundTrip(t)
	})
}
