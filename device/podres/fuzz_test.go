package podres

import (
	"math/big"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// bigExponent matches a decimal exponent of five digits or more.
var bigExponent = regexp.MustCompile(`[eE][+-]?0*[1-9][0-9]{4}`)

// FuzzWhole feeds Whole pods whose limit and request are fuzzed quantity
// strings (unparsable strings are skipped: the API server refuses them). It
// checks that the limit wins over the request, that an accepted value is the
// exact whole number in [0, maxValue], and that a refusal names the
// container, the resource and the allowed range.
func FuzzWhole(f *testing.F) {
	for _, s := range []struct {
		limit, request string
		max            int64
	}{
		{"", "", 100},
		{"3", "2", 100},
		{"", "2", 100},
		{"0", "", 100},
		{"100", "", 100},
		{"101", "", 100},
		{"500m", "", 100},
		{"-1", "", 100},
		{"1Ki", "", 1 << 20},
		{"9223372036854775807", "", 1<<63 - 1},
		{"1e18", "", 1<<63 - 1},
		{"1E", "1", 0},
		{"", "0.5", 1},
		{"1.000000000000000000000", "", 100},
		{"0e-30", "", 100},
		{"1e9999", "", 100},
	} {
		f.Add(s.limit, s.request, s.max)
	}
	f.Fuzz(func(t *testing.T, limit, request string, maxValue int64) {
		// ParseQuantity rounds "1e-99999999" to nano by big-number
		// arithmetic proportional to the exponent; the API server has the
		// same cost, and it is not the reader's to bound.
		if bigExponent.MatchString(limit) || bigExponent.MatchString(request) {
			return
		}
		if maxValue < 0 {
			maxValue = -(maxValue + 1)
		}
		c := &v1.Container{Name: "main"}
		var want *resource.Quantity
		if request != "" {
			q, err := resource.ParseQuantity(request)
			if err != nil {
				return
			}
			c.Resources.Requests = v1.ResourceList{res: q}
			want = &q
		}
		if limit != "" {
			q, err := resource.ParseQuantity(limit)
			if err != nil {
				return
			}
			c.Resources.Limits = v1.ResourceList{res: q}
			want = &q
		}
		v, present, err := Whole(c, res, maxValue)
		if want == nil {
			if present || err != nil || v != 0 {
				t.Fatalf("Whole on a container without %s = %d, %v, %v; want 0, false, nil", res, v, present, err)
			}
			return
		}
		if !present {
			t.Fatalf("Whole(%q limit, %q request) reported the resource absent", limit, request)
		}
		exact := want.AsDec().UnscaledBig()
		scale := int(want.AsDec().Scale())
		whole := new(big.Int).Set(exact)
		isWhole := true
		if whole.Sign() == 0 {
			scale = 0
		}
		for ; scale > 0; scale-- {
			var rem big.Int
			whole.QuoRem(whole, big.NewInt(10), &rem)
			if rem.Sign() != 0 {
				isWhole = false
				break
			}
		}
		for ; scale < 0; scale++ {
			whole.Mul(whole, big.NewInt(10))
		}
		inRange := isWhole && whole.Sign() >= 0 && whole.Cmp(big.NewInt(maxValue)) <= 0
		if err != nil {
			if inRange {
				t.Fatalf("Whole refused %s, a whole number in [0, %d]: %v", want.String(), maxValue, err)
			}
			for _, part := range []string{`container "main"`, string(res), "[0, "} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Whole error %q does not name %q", err, part)
				}
			}
			if v != 0 {
				t.Errorf("Whole returned %d with an error", v)
			}
			return
		}
		if !inRange {
			t.Fatalf("Whole accepted %s (= %d), which is not a whole number in [0, %d]", want.String(), v, maxValue)
		}
		if whole.Cmp(big.NewInt(v)) != 0 {
			t.Fatalf("Whole(%s) = %d, want %s", want.String(), v, whole)
		}
	})
}
