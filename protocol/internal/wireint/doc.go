// Package wireint reads the integers of the wire formats in protocol/* by
// one rule, in every protocol and every dialect, text or JSON:
//
//	An integer is accepted only as strconv.FormatInt writes it: decimal
//	digits without leading zeros, preceded by "-" when negative; zero is
//	"0". Then it must lie in the field's range.
//
// So "0" is zero, and "00", "+0", "-0", "010", "+5", " 5", "5.0", "1e3" and
// "0x10" are refused, wherever they appear, with the field's usual error.
//
// Why this rule: every producer of these formats writes integers with Go's
// strconv.Itoa or FormatInt, fmt's %d or encoding/json (HAMi's and
// volcano-vgpu-device-plugin's EncodeNodeDevices and
// EncodeContainerDevices, HAMi's JSON DeviceInfo, MindCluster's device
// plugin, this project's encoders), and all of those write exactly this
// form. strconv.ParseInt, which the upstream readers use, also takes a "+",
// leading zeros and "-0"; accepting those would give one value several
// spellings, so a value written back would not be the value read, and a
// meaning attached to a spelling ("0 cores means a whole card") would
// differ between dialects. With one spelling per value, every encoder here
// writes back byte for byte the numbers it read. JSON's grammar already
// refuses "+" and leading zeros; Int also refuses -0, fractions,
// exponents and quoted numbers, which encoding/json would read into an
// integer field as 0, refuse with a type error or read as a float.
package wireint
