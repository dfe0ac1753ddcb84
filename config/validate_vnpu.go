package config

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// vnpuTemplateName matches template names such as vir02 or vir05_1c_16g;
// they appear in annotations as <chip>-<template>.
var vnpuTemplateName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

func (v *VNPUs) validate(p *field.Path, names resourceNames) field.ErrorList {
	var errs field.ErrorList
	switch v.Mode() {
	case VNPUModeTemplate, VNPUModeHAMiCore, VNPUModeENPU: // enpu is refused in unsupported.go, with why
	default:
		errs = append(errs, field.NotSupported(p.Child("hamiVnpuMode"), v.HAMiVNPUMode,
			[]string{VNPUModeTemplate, VNPUModeHAMiCore, "hamiCore"}))
	}
	errs = append(errs, atLeast(p.Child("vnpuDeviceSplitCount"), int64(v.VNPUDeviceSplitCount), 0, "(0 means the device plugin's default)")...)
	errs = append(errs, validateRuntimeClass(p.Child("runtimeClassName"), v.RuntimeClassName)...)

	configs := p.Child("configs")
	if v.ListForm {
		configs = p
	}
	chips := map[string]*field.Path{}
	words := map[string]*field.Path{}
	for i := range v.Configs {
		ep := configs.Index(i)
		e := &v.Configs[i]
		errs = append(errs, uniqueName(ep.Child("chipName"), e.ChipName, chips, "name the chip as the node agent reports it, like 910B3")...)
		errs = append(errs, uniqueName(ep.Child("commonWord"), e.CommonWord, words, "name the device type, like Ascend910B3")...)
		if e.CommonWord != "" {
			// The commonWord is appended to annotation keys, which it must keep valid.
			for _, msg := range validation.IsQualifiedName(ascendproto.KeysFor(e.CommonWord).Register) {
				errs = append(errs, field.Invalid(ep.Child("commonWord"), e.CommonWord,
					fmt.Sprintf("must fit the annotation key %s<commonWord>: %s", ascendproto.RegisterPrefix, msg)))
			}
		}
		errs = append(errs, names.add(ep.Child("resourceName"), e.ResourceName)...)
		errs = append(errs, names.add(ep.Child("resourceMemoryName"), e.ResourceMemoryName)...)
		errs = append(errs, names.add(ep.Child("resourceCoreName"), e.ResourceCoreName)...)
		errs = append(errs, e.validateResources(ep)...)
	}
	errs = append(errs, validateUnsupportedVNPUs(p, configs, v)...)
	return errs
}

// validateResources checks the chip's sizes and that every template fits it.
func (e *VNPUConfig) validateResources(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, atLeast(p.Child("memoryCapacity"), e.MemoryCapacity, 1, "(MiB)")...)
	if e.MemoryCapacity > 0 {
		errs = append(errs, between(p.Child("memoryAllocatable"), e.MemoryAllocatable, 1, e.MemoryCapacity, "(MiB, at most memoryCapacity)")...)
	}
	errs = append(errs, atLeast(p.Child("memoryFactor"), int64(e.MemoryFactor), 1, "")...)
	errs = append(errs, atLeast(p.Child("aiCore"), int64(e.AICore), 1, "")...)
	errs = append(errs, atLeast(p.Child("aiCPU"), int64(e.AICPU), 0, "")...)
	errs = append(errs, validateRuntimeClass(p.Child("runtimeClassName"), e.RuntimeClassName)...)

	seen := map[string]bool{}
	for j, t := range e.Templates {
		tp := p.Child("templates").Index(j)
		switch {
		case t.Name == "":
			errs = append(errs, field.Required(tp.Child("name"), "name the template, like vir02"))
		case len(t.Name) > validation.LabelValueMaxLength || !vnpuTemplateName.MatchString(t.Name):
			errs = append(errs, field.Invalid(tp.Child("name"), t.Name,
				fmt.Sprintf("must be at most %d letters, digits, '-', '_' or '.', starting and ending with a letter or digit", validation.LabelValueMaxLength)))
		case seen[t.Name]:
			errs = append(errs, duplicate(tp.Child("name"), t.Name, "template names must be unique within a chip"))
		}
		seen[t.Name] = true
		if e.MemoryAllocatable > 0 {
			errs = append(errs, fits(tp.Child("memory"), t.Memory, 1, e.MemoryAllocatable, "memoryAllocatable")...)
		}
		if e.AICore > 0 {
			errs = append(errs, fits(tp.Child("aiCore"), int64(t.AICore), 1, int64(e.AICore), "aiCore")...)
		}
		errs = append(errs, fits(tp.Child("aiCPU"), int64(t.AICPU), 0, int64(e.AICPU), "aiCPU")...)
	}
	return errs
}

// fits reports a template value outside [lo, the chip's field].
func fits(p *field.Path, v, lo, chip int64, chipField string) field.ErrorList {
	if v >= lo && v <= chip {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be between %d and the chip's %s (%d)", lo, chipField, chip))}
}

// uniqueName checks that a required name is set and not used before.
func uniqueName(p *field.Path, name string, seen map[string]*field.Path, required string) field.ErrorList {
	if strings.TrimSpace(name) == "" {
		return field.ErrorList{field.Required(p, required)}
	}
	if first, ok := seen[name]; ok {
		return field.ErrorList{duplicate(p, name, fmt.Sprintf("already used by %s", first))}
	}
	seen[name] = p
	return nil
}

func validateNodeConfigs(nodes []NodeConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]*field.Path{}
	for i := range nodes {
		o := &nodes[i]
		np := p.Index(i)
		errs = append(errs, uniqueName(np.Child("name"), o.Name, seen, "name the node the override applies to")...)
		if o.Name != "" {
			for _, msg := range validation.IsDNS1123Subdomain(o.Name) {
				errs = append(errs, field.Invalid(np.Child("name"), o.Name, msg))
			}
		}
		switch o.OperatingMode {
		case "", OperatingModeHAMiCore, OperatingModeMIG, OperatingModeMPS:
		default:
			errs = append(errs, field.NotSupported(np.Child("operatingmode"), o.OperatingMode,
				[]string{OperatingModeHAMiCore, OperatingModeMIG, OperatingModeMPS}))
		}
		errs = append(errs, validateUnsupportedNode(np, o)...)
		if o.DeviceSplitCount != nil {
			errs = append(errs, between(np.Child("devicesplitcount"), int64(*o.DeviceSplitCount), 1, MaxDeviceSplitCount, "(0 means no override)")...)
		}
		if o.DeviceMemoryScaling != nil {
			errs = append(errs, positive(np.Child("devicememoryscaling"), *o.DeviceMemoryScaling)...)
		}
		if o.DeviceCoreScaling != nil {
			errs = append(errs, positive(np.Child("devicecorescaling"), *o.DeviceCoreScaling)...)
		}
		if o.PreConfiguredDeviceMemory != nil {
			errs = append(errs, atLeast(np.Child("preconfigureddevicememory"), *o.PreConfiguredDeviceMemory, 0, "(MiB)")...)
		}
		if o.LibCudaLogLevel != nil {
			errs = append(errs, validateLogLevel(np.Child("libcudaloglevel"), *o.LibCudaLogLevel)...)
		}
		errs = append(errs, o.FilterDevices.validate(np.Child("filterdevices"))...)
	}
	return errs
}

func (f *FilterDevices) validate(p *field.Path) field.ErrorList {
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	for i, uuid := range f.UUID {
		if strings.TrimSpace(uuid) == "" {
			errs = append(errs, field.Required(p.Child("uuid").Index(i), "must be a card UUID"))
		}
	}
	for i, index := range f.Index {
		errs = append(errs, atLeast(p.Child("index").Index(i), int64(index), 0, "")...)
	}
	return errs
}
