package ascendproto

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func int64p(v int64) *int64 { return &v }

func TestRegisterRoundTrip(t *testing.T) {
	cards := []RegisteredCard{
		{ID: "npu-0", Index: 0, Count: 4, DevmemMiB: 65536, Devcore: 20, Type: "Ascend910B3", Healthy: true, NetworkID: int64p(0)},
		{ID: "npu-1", Index: 1, Count: 4, DevmemMiB: 65536, Devcore: 20, Type: "Ascend910B3", Healthy: false, NetworkID: int64p(1)},
	}
	value, err := EncodeRegister(cards)
	if err != nil {
		t.Fatalf("EncodeRegister: %v", err)
	}
	got, err := DecodeRegister(value)
	if err != nil {
		t.Fatalf("DecodeRegister(%s): %v", value, err)
	}
	if diff := cmp.Diff(cards, got); diff != "" {
		t.Errorf("round trip via %s (-want +got):\n%s", value, diff)
	}
}

func TestEncodeRegisterRefusesBadCards(t *testing.T) {
	for _, c := range []RegisteredCard{
		{ID: "", DevmemMiB: 1}, {ID: "a,b", DevmemMiB: 1}, {ID: "a:b", DevmemMiB: 1}, {ID: "a;b", DevmemMiB: 1},
		{ID: "a b", DevmemMiB: 1}, {ID: "a", Index: -1, DevmemMiB: 1}, {ID: "a"}, {ID: "a", DevmemMiB: 1, Count: MaxCount + 1},
	} {
		if _, err := EncodeRegister([]RegisteredCard{c}); err == nil || !strings.HasPrefix(err.Error(), "encode registration: device 0: ") {
			t.Errorf("EncodeRegister(%+v) = %v, want an error naming device 0", c, err)
		}
	}
}

func TestDecodeRegisterErrors(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"not JSON", `{`, "want a JSON list"},
		{"duplicate", `[{"id":"a","devmem":1},{"id":"a","devmem":1}]`, "card a registered twice (devices 0 and 1)"},
		{"no memory", `[{"id":"a"}]`, "device 0: card a: devmem=0: want MiB in [1, 1073741824]"},
		{"network not whole", `[{"id":"a","devmem":1,"custominfo":{"NetworkID":0.5}}]`, "custominfo.NetworkID=0.5: want a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeRegister(tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeRegister(%s) = %v, want an error containing %q", tc.value, err, tc.want)
			}
		})
	}
}

func TestDecodeAssignmentsErrors(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"empty", ""},
		{"no colon", "a,Ascend910B3,1,0;"},
		{"three fields", "a,Ascend910B3,1:;"},
		{"bad memory", "a,Ascend910B3,x,0:;"},
		{"no memory", "a,Ascend910B3,0,0:;"},
		{"negative cores", "a,Ascend910B3,1,-1:;"},
		{"cores above 100", "a,Ascend910B3,1,101:;"},
		{"empty uuid", ",Ascend910B3,1,0:;"},
		{"card twice", "a,Ascend910B3,1,0:a,Ascend910B3,1,0:;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := DecodeAssignments(tc.value); err == nil {
				t.Errorf("DecodeAssignments(%q) = %+v, want an error", tc.value, got)
			}
		})
	}
}

func TestConsumeAssignments(t *testing.T) {
	value := "a,Ascend910B3,16384,0:;;b,Ascend910B3,65536,0:c,Ascend910B3,65536,0:;"
	got, err := DecodeAssignments(value)
	if err != nil {
		t.Fatalf("DecodeAssignments: %v", err)
	}
	if enc := EncodeAssignments(got); enc != value {
		t.Errorf("EncodeAssignments = %q, want the original %q", enc, value)
	}
	if i := NextPending(got); i != 0 {
		t.Fatalf("NextPending = %d, want 0", i)
	}
	got[0] = nil
	if i := NextPending(got); i != 2 {
		t.Errorf("NextPending after consuming container 0 = %d, want 2", i)
	}
	if enc := EncodeAssignments(got); enc != ";;b,Ascend910B3,65536,0:c,Ascend910B3,65536,0:;" {
		t.Errorf("consumed value %q, want two empty containers first", enc)
	}
}

func TestRuntimeEntries(t *testing.T) {
	got := EncodeRuntimeInfo([]RuntimeEntry{TemplateEntry("a", "vir05_1c_16g"), TemplateEntry("b", ""), SoftEntry("c", 4096, 30),
		SoftEntry("d", 4096, 0)})
	want := `[{"UUID":"a","temp":"vir05_1c_16g"},{"UUID":"b"},{"UUID":"c","memory":4096,"core":30},{"UUID":"d","memory":4096}]`
	if got != want {
		t.Errorf("EncodeRuntimeInfo = %s, want %s", got, want)
	}
	if got := EncodeRuntimeInfo(nil); got != "[]" {
		t.Errorf("EncodeRuntimeInfo(nil) = %s, want []", got)
	}
}
