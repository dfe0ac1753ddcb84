package pluginargs

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v2"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/device"
)

// FuzzParseArgs decodes a fuzzed `arguments:` block the way Volcano loads
// volcano-scheduler.conf (gopkg.in/yaml.v2 into a map) and checks ParseArgs:
// every reported problem starts with the argument key it is about, accepted
// arguments satisfy every documented constraint and equal what the input
// said, and accepted arguments written back parse to the same Args.
func FuzzParseArgs(f *testing.F) {
	for _, doc := range []string{
		"{}",
		"deviceshare.GPUSharingEnable: true\ndeviceshare.NodeLockEnable: true\ndeviceshare.SchedulePolicy: spread\ndeviceshare.ScheduleWeight: 10\ndeviceshare.KnownGeometriesCMName: my-config\ndeviceshare.KnownGeometriesCMNamespace: volcano-system\n",
		"deviceshare.VGPUEnable: \"true\"\ndeviceshare.AscendHAMiVNPUEnable: \"True\"\ndeviceshare.AscendMindClusterVNPUEnable: \"1\"\ndeviceshare.SchedulePolicy: \" Binpack \"\ndeviceshare.ScheduleWeight: \"7\"\n",
		"deviceshare.ScheduleWeight: 3.0",
		"deviceshare.SchedulePolicy: \"\"",
		"deviceshare.GPUNumberEnable: yes please",
		"deviceshare.SchedulePolicy: random",
		"deviceshare.SchedulePolicy: Fragment",
		"deviceshare.ScheduleWeight: 101",
		"deviceshare.ScheduleWeight: -1",
		"deviceshare.ScheduleWeight: 1.5",
		"deviceshare.ScheduleWeight: 18446744073709551615",
		"deviceshare.ScheduleWeight: .nan",
		"deviceshare.KnownGeometriesCMName: 3",
		"deviceshare.KnownGeometriesCMName: Bad_Name",
		"deviceshare.KnownGeometriesCMNamespace: a.b",
		"deviceshare.GPUSharingEnable: true\ndeviceshare.GPUNumberEnable: true",
		"deviceshare.GPUSharingEnable: \"true\"\ndeviceshare.VGPUEnable: true",
		"deviceshare.SchedulePolicy: x\ndeviceshare.ScheduleWeight: heavy",
		"deviceshare.SchedulePolicy: [a]\ndeviceshare.NodeLockEnable: {a: b}\ndeviceshare.Typo: 1",
		"deviceshare.NodeLockEnable: ~",
	} {
		f.Add([]byte(doc))
	}
	keys := append([]string{ArgSchedulePolicy, ArgScheduleWeight, ArgKnownGeometriesCMName, ArgKnownGeometriesCMNamespace, ArgGPUExclusiveRules}, boolArgs...)
	f.Fuzz(func(t *testing.T, doc []byte) {
		var in framework.Arguments
		if err := yaml.Unmarshal(doc, &in); err != nil {
			return
		}
		a, err := Parse(in)
		if again, err2 := Parse(in); !sameError(err, err2) || (err == nil && !reflect.DeepEqual(again, a)) {
			t.Fatalf("ParseArgs is not deterministic: %+v, %v then %+v, %v", a, err, again, err2)
		}
		checkUnknownKeys(t, in)
		if err != nil {
			checkArgErrors(t, err, keys)
			return
		}
		checkArgs(t, in, a)
		back := framework.Arguments{
			ArgGPUSharingEnable: a.GPUSharingEnable, ArgGPUNumberEnable: a.GPUNumberEnable,
			ArgNodeLockEnable: a.NodeLockEnable, ArgVGPUEnable: a.VGPUEnable,
			ArgAscendMindClusterVNPUEnable: a.AscendMindClusterVNPUEnable, ArgAscendHAMiVNPUEnable: a.AscendHAMiVNPUEnable,
			ArgSchedulePolicy: a.SchedulePolicy, ArgScheduleWeight: a.ScheduleWeight,
			ArgKnownGeometriesCMName: a.ConfigMapName, ArgKnownGeometriesCMNamespace: a.ConfigMapNamespace,
		}
		again, err := Parse(back)
		if err != nil {
			t.Fatalf("ParseArgs(written back %v): %v", back, err)
		}
		if diff := cmp.Diff(a, again); diff != "" {
			t.Errorf("round trip (-parsed +reparsed):\n%s", diff)
		}
	})
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// checkArgErrors checks that each aggregated problem names a known key first.
func checkArgErrors(t *testing.T, err error, keys []string) {
	t.Helper()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) || len(agg.Errors()) == 0 {
		t.Fatalf("ParseArgs error %q is not a non-empty field error list", err)
	}
	for _, e := range agg.Errors() {
		named := false
		for _, k := range keys {
			named = named || strings.HasPrefix(e.Error(), k+":")
		}
		if !named {
			t.Errorf("ParseArgs problem %q does not start with the argument key", e)
		}
	}
}

// checkArgs checks accepted arguments against the constraints and the input.
func checkArgs(t *testing.T, in framework.Arguments, a Args) {
	t.Helper()
	switch a.SchedulePolicy {
	case device.PolicyBinpack, device.PolicySpread, device.PolicyFragment:
	default:
		t.Errorf("accepted SchedulePolicy %q", a.SchedulePolicy)
	}
	if a.ScheduleWeight < 0 || a.ScheduleWeight > MaxScheduleWeight {
		t.Errorf("accepted ScheduleWeight %d outside [0, %d]", a.ScheduleWeight, MaxScheduleWeight)
	}
	if a.GPUSharingEnable && a.GPUNumberEnable || (a.GPUSharingEnable || a.GPUNumberEnable) && a.VGPUEnable {
		t.Errorf("accepted conflicting device modes %+v", a)
	}
	if msgs := validation.IsDNS1123Subdomain(a.ConfigMapName); len(msgs) > 0 {
		t.Errorf("accepted ConfigMap name %q: %v", a.ConfigMapName, msgs)
	}
	if msgs := validation.IsDNS1123Label(a.ConfigMapNamespace); len(msgs) > 0 {
		t.Errorf("accepted ConfigMap namespace %q: %v", a.ConfigMapNamespace, msgs)
	}
	got := map[string]bool{
		ArgGPUSharingEnable: a.GPUSharingEnable, ArgGPUNumberEnable: a.GPUNumberEnable,
		ArgNodeLockEnable: a.NodeLockEnable, ArgVGPUEnable: a.VGPUEnable,
		ArgAscendMindClusterVNPUEnable: a.AscendMindClusterVNPUEnable, ArgAscendHAMiVNPUEnable: a.AscendHAMiVNPUEnable,
	}
	for _, k := range boolArgs {
		raw, ok := in[k]
		if !ok {
			if got[k] {
				t.Errorf("%s is true but absent from the input", k)
			}
			continue
		}
		if want, err := parseBool(raw); err != nil || want != got[k] {
			t.Errorf("%s = %v from input %#v", k, got[k], raw)
		}
	}
	if raw, ok := in[ArgScheduleWeight]; ok {
		if want, err := parseInt(raw); err != nil || want != a.ScheduleWeight {
			t.Errorf("ScheduleWeight = %d from input %#v", a.ScheduleWeight, raw)
		}
	}
}

// checkUnknownKeys checks that UnknownKeys lists exactly the unknown
// "deviceshare." keys, sorted.
func checkUnknownKeys(t *testing.T, in framework.Arguments) {
	t.Helper()
	unknown := UnknownKeys(in)
	if !sort.StringsAreSorted(unknown) {
		t.Errorf("UnknownKeys not sorted: %q", unknown)
	}
	known := map[string]bool{ArgSchedulePolicy: true, ArgScheduleWeight: true,
		ArgKnownGeometriesCMName: true, ArgKnownGeometriesCMNamespace: true}
	for _, k := range boolArgs {
		known[k] = true
	}
	want := 0
	for k := range in {
		if strings.HasPrefix(k, "deviceshare.") && !known[k] {
			want++
		}
	}
	if len(unknown) != want {
		t.Errorf("UnknownKeys = %q, want %d keys", unknown, want)
	}
	for _, k := range unknown {
		if _, ok := in[k]; !ok || known[k] || !strings.HasPrefix(k, "deviceshare.") {
			t.Errorf("UnknownKeys lists %q", k)
		}
	}
}
