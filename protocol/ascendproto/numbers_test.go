package ascendproto

import (
	"strings"
	"testing"
)

// TestNumbersHaveOneSpelling names the rule every number here is read by
// (protocol/internal/wireint): only as strconv.FormatInt writes it, as
// HAMi's device plugin and scheduler write them. 00, +0, -0, leading
// zeros, fractions and exponents are refused, in the comma form and in
// JSON, custominfo.NetworkID included.
func TestNumbersHaveOneSpelling(t *testing.T) {
	register := func(fields string) string { return `[{"id":"a","devmem":1` + fields + `}]` }
	for _, tc := range []struct {
		name, value, wantErr string
		decode               func(string) error
	}{
		{name: "assignment zero cores", value: "a,Ascend910B3,1,0:;"},
		{name: "assignment cores 00", value: "a,Ascend910B3,1,00:;", wantErr: `cores "00"`},
		{name: "assignment cores +0", value: "a,Ascend910B3,1,+0:;", wantErr: `cores "+0"`},
		{name: "assignment cores -0", value: "a,Ascend910B3,1,-0:;", wantErr: `cores "-0"`},
		{name: "assignment memory with a leading zero", value: "a,Ascend910B3,016384,0:;", wantErr: `memory "016384"`},
		{name: "register zero count", value: register(`,"count":0`), decode: decodeRegister},
		{name: "register count -0", value: register(`,"count":-0`), decode: decodeRegister,
			wantErr: "cannot unmarshal number -0 into Go struct field deviceInfo.count of type int64"},
		{name: "register index 1.0", value: register(`,"index":1.0`), decode: decodeRegister, wantErr: "cannot unmarshal number 1.0"},
		{name: "register NetworkID 3", value: register(`,"custominfo":{"NetworkID":3}`), decode: decodeRegister},
		{name: "register NetworkID 3.0", value: register(`,"custominfo":{"NetworkID":3.0}`), decode: decodeRegister,
			wantErr: "custominfo.NetworkID=3.0: want a whole number"},
		{name: "register NetworkID 3e0", value: register(`,"custominfo":{"NetworkID":3e0}`), decode: decodeRegister,
			wantErr: "custominfo.NetworkID=3e0"},
		{name: "register NetworkID -0", value: register(`,"custominfo":{"NetworkID":-0}`), decode: decodeRegister,
			wantErr: "custominfo.NetworkID=-0"},
		{name: "runtime memory and core", value: `[{"UUID":"a","memory":4096,"core":30}]`, decode: decodeRuntime},
		{name: "runtime memory -0", value: `[{"UUID":"a","memory":-0}]`, decode: decodeRuntime, wantErr: "cannot unmarshal number -0"},
		{name: "runtime core beyond 32 bits", value: `[{"UUID":"a","core":2147483648}]`, decode: decodeRuntime,
			wantErr: "entry 0: core=2147483648: want a 32-bit integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decode := tc.decode
			if decode == nil {
				decode = decodeAssignments
			}
			err := decode(tc.value)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("decode(%s): %v", tc.value, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("decode(%s) error = %v, want one containing %q", tc.value, err, tc.wantErr)
			}
		})
	}
}

func decodeAssignments(v string) error { _, err := DecodeAssignments(v); return err }
func decodeRegister(v string) error    { _, err := DecodeRegister(v); return err }
func decodeRuntime(v string) error     { _, err := DecodeRuntimeInfo(v); return err }
