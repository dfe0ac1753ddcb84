// Package podres reads the device quantities a pod's containers ask for,
// the same way for every backend: a container's limit when it sets one (the
// rule for extended resources), else its request.
package podres

import (
	"fmt"

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
	if v, ok := q.AsInt64(); ok && v >= 0 && v <= maxValue {
		return v, true, nil
	}
	return 0, true, fmt.Errorf("container %q: %s=%s: want a whole number in [0, %d]", c.Name, res, q.String(), maxValue)
}
