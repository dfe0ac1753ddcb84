package wireint

import (
	"encoding/json"
	"reflect"
	"strconv"
)

// Parse returns the integer s spells if s is written as strconv.FormatInt
// writes it and the integer is in [lo, hi]; ok is false otherwise, and v 0.
// It does not allocate.
func Parse(s string, lo, hi int64) (v int64, ok bool) {
	v, ok = parse(s)
	if !ok || v < lo || v > hi {
		return 0, false
	}
	return v, true
}

// parse reads s by the package's rule, without a range.
func parse(s string) (int64, bool) {
	digits := s
	if len(s) > 0 && s[0] == '-' {
		digits = s[1:]
	}
	switch {
	case digits == "":
		return 0, false
	case digits[0] == '0':
		// "0" alone is zero; "00", "01" and "-0" are other spellings.
		return 0, s == "0"
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// Int is an integer field of a JSON wire format, read by the rule of
// Parse over the int64 range: a JSON number literal such as 12 or -1. A
// quoted number, a fraction, an exponent, -0 or a number beyond int64 is
// refused with encoding/json's own error ("json: cannot unmarshal number
// -0 into Go struct field ... of type int64"), and null leaves the field as
// it was, as encoding/json does for an int64. It marshals as an int64.
type Int int64

var int64Type = reflect.TypeFor[int64]()

// UnmarshalJSON implements json.Unmarshaler.
func (n *Int) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	v, ok := parse(s)
	if !ok {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: int64Type}
	}
	*n = Int(v)
	return nil
}

// jsonKind names a JSON value as encoding/json's type errors do: "number
// 1.5", "string", "bool", "array", "object".
func jsonKind(b []byte) string {
	switch b[0] {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "number " + string(b)
}
