package mindclusterproto

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// NPUCore is a decoded huawei.com/npu-core: whole chips, or one vNPU of a
// template on one chip.
type NPUCore struct {
	// Chips are the chip IDs, in the order written.
	Chips []int
	// Template is the vNPU template; "" for whole chips.
	Template string
}

// DecodeNPUCore reads huawei.com/npu-core: whole chips as "0,1", a vNPU as
// "<chip>-<template>" like "0-vir02" (upstream
// BuildNPUTopologyAnnotations). Chip IDs are distinct, non-negative and
// written without sign or leading zeros, so EncodeNPUCore writes an
// accepted value back byte for byte. Whether the template and the chips
// exist on the node is the caller's business. Errors do not repeat the
// annotation, which the caller names.
func DecodeNPUCore(value string) (NPUCore, error) {
	var a NPUCore
	list := value
	if chip, tmpl, ok := strings.Cut(value, "-"); ok {
		if tmpl == "" {
			return NPUCore{}, fmt.Errorf("template is empty: want <chip id>-<template>")
		}
		a.Template, list = tmpl, chip
	}
	for _, e := range strings.Split(list, ",") {
		id, ok := wireint.Parse(e, 0, math.MaxInt)
		if !ok {
			return NPUCore{}, fmt.Errorf("chip %q: want <chip id>[,<chip id>...] or <chip id>-<template>", e)
		}
		if slices.Contains(a.Chips, int(id)) {
			return NPUCore{}, fmt.Errorf("chip %d named twice", id)
		}
		a.Chips = append(a.Chips, int(id))
	}
	if a.Template != "" && len(a.Chips) != 1 {
		return NPUCore{}, fmt.Errorf("a vNPU lives on one chip")
	}
	return a, nil
}

// EncodeNPUCore renders an allocation as huawei.com/npu-core.
func EncodeNPUCore(a NPUCore) string {
	ids := make([]string, len(a.Chips))
	for i, id := range a.Chips {
		ids[i] = strconv.Itoa(id)
	}
	if a.Template != "" && len(ids) == 1 {
		return ids[0] + "-" + a.Template
	}
	return strings.Join(ids, ",")
}

// VNPUGroup reads the vNPU group from huawei.com/AscendReal, the last
// "_"-separated field of values like "Ascend310P-2c.1cpu-105-0_3"; ok is
// false when there is none (an unconfirmed vNPU) or it is not a
// non-negative number written as strconv.Itoa writes it (upstream
// getVGroups skips what strconv.Atoi refuses, so it also reads "03" and
// "+3").
func VNPUGroup(ascendReal string) (group int, ok bool) {
	i := strings.LastIndexByte(ascendReal, '_')
	if i < 0 {
		return 0, false
	}
	g, ok := wireint.Parse(ascendReal[i+1:], 0, math.MaxInt)
	return int(g), ok
}
