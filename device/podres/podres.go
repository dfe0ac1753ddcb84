// Package podres reads the device quantities a pod's containers ask for,
// the same way for every backend: a container's limit when it sets one (the
// rule for extended resources), else its request.
package podres

import (
	"fmt"
	"math/big"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantity returns the container's quantity of res: its limit, else its
// request; ok is false when it names neither.
func Quantity(c *v1.Container, res v1.ResourceName) (resource.Quantity, bool) {
	if q, ok := c.Resources.Limits[res]; ok {
		return q, true
	}
	q, ok := c.Resources.Requests[res]
	return q, ok
}

// Whole reads the container's quantity of res as a whole number in
// [0, maxValue]; present is false when the container does not name res. A
// fractional, negative or larger value is an error naming the container,
// the resource, the value and the allowed range.
func Whole(c *v1.Container, res v1.ResourceName, maxValue int64) (v int64, present bool, err error) {
	q, ok := Quantity(c, res)
	if !ok {
		return 0, false, nil
	}
	if v, ok := wholeInt64(q); ok && v >= 0 && v <= maxValue {
		return v, true, nil
	}
	return 0, true, fmt.Errorf("container %q: %s=%s: want a whole number in [0, %d]", c.Name, res, q.String(), maxValue)
}

// wholeInt64 returns q as an int64 when it is a whole number that fits.
// AsInt64 alone refuses every quantity held in big-decimal form, and
// ParseQuantity keeps some plain whole numbers in that form:
// "1.000000000000000000000" (1) and "0e-30" (0). The exact check works on
// the decimal's digits and refuses scales beyond +-18 outright: a nonzero
// value there is outside int64 or (from ParseQuantity, which rounds to
// nano) fractional, and the bound keeps "1e99999" from costing big powers.
func wholeInt64(q resource.Quantity) (int64, bool) {
	if v, ok := q.AsInt64(); ok {
		return v, true
	}
	d := q.AsDec()
	if d.Sign() == 0 {
		return 0, true
	}
	scale := int64(d.Scale())
	if scale < -18 || scale > 18 {
		return 0, false
	}
	n := new(big.Int).Set(d.UnscaledBig())
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(max(scale, -scale)), nil)
	if scale < 0 {
		n.Mul(n, pow)
	} else if _, rem := n.QuoRem(n, pow, new(big.Int)); rem.Sign() != 0 {
		return 0, false
	}
	if !n.IsInt64() {
		return 0, false
	}
	return n.Int64(), true
}
