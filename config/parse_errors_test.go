package config

import (
	"strings"
	"testing"
)

// chip310P is a valid legacy-form vnpus entry that bad cases edit.
const chip310P = `
- chipName: 310P3
  commonWord: Ascend310P
  memoryAllocatable: 21527
  memoryCapacity: 24576
  aiCore: 8
  aiCPU: 7
  templates:
  - {name: vir01, memory: 3072, aiCore: 1, aiCPU: 1}
`

func TestParseRejectsBadDocuments(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		// wantErr are substrings the error must contain: the path, the
		// value as written and what is allowed.
		wantErr []string
	}{
		// Syntax and shape.
		{
			name:    "bad YAML",
			doc:     "nvidia:\n  deviceSplitCount: 4\n foo: [",
			wantErr: []string{"parse device config: invalid YAML"},
		},
		{
			name:    "duplicate key",
			doc:     "nvidia:\n  deviceSplitCount: 4\n  deviceSplitCount: 5\n",
			wantErr: []string{"invalid YAML", `"deviceSplitCount" already set`},
		},
		{
			name:    "document is a list",
			doc:     "- nvidia: {}\n",
			wantErr: []string{"must be a mapping with the sections nvidia, vnpus and nodeconfig, got a list"},
		},
		{
			name:    "unknown top-level key",
			doc:     "nvida:\n  deviceSplitCount: 4\n",
			wantErr: []string{`nvida: Forbidden: unknown field; did you mean "nvidia"?`},
		},
		{
			name:    "unknown nvidia key lists the known ones",
			doc:     "nvidia:\n  splitEverything: true\n",
			wantErr: []string{"nvidia.splitEverything: Forbidden: unknown field; known fields: [", "deviceSplitCount"},
		},
		{
			name:    "key in the wrong case",
			doc:     "nvidia:\n  devicesplitcount: 4\n",
			wantErr: []string{`nvidia.devicesplitcount: Forbidden: unknown field (keys are case-sensitive); did you mean "deviceSplitCount"?`},
		},
		{
			name:    "camelCase key in nodeconfig",
			doc:     "nodeconfig:\n- name: n1\n  deviceSplitCount: 4\n",
			wantErr: []string{`nodeconfig[0].deviceSplitCount: Forbidden: unknown field (keys are case-sensitive); did you mean "devicesplitcount"?`},
		},
		{
			name:    "unknown key deep in vnpus",
			doc:     "vnpus:" + strings.Replace(chip310P, "aiCPU: 1}", "aiCPU: 1, vcpu: 2}", 1),
			wantErr: []string{`vnpus[0].templates[0].vcpu: Forbidden: unknown field`},
		},
		{
			name:    "string where an integer belongs",
			doc:     "nvidia:\n  deviceSplitCount: ten\n",
			wantErr: []string{`nvidia.deviceSplitCount: Invalid value: "ten": must be an integer`},
		},
		{
			name:    "fraction where an integer belongs",
			doc:     "nvidia:\n  defaultMemory: 1.5\n",
			wantErr: []string{`nvidia.defaultMemory: Invalid value: 1.5: must be an integer`},
		},
		{
			name:    "integer out of range",
			doc:     "nvidia:\n  defaultMemory: 99999999999\n",
			wantErr: []string{`nvidia.defaultMemory: Invalid value: 99999999999: must be an integer between -2147483648 and 2147483647`},
		},
		{
			name:    "section of the wrong kind",
			doc:     "nvidia: [1]\n",
			wantErr: []string{`nvidia: Invalid value: [...]: must be an object`},
		},
		{
			name:    "vnpus neither list nor object",
			doc:     "vnpus: Ascend310P\n",
			wantErr: []string{`vnpus: Invalid value: "Ascend310P": must be a list of chip entries or an object with hamiVnpuCore and configs`},
		},
		{
			name:    "YAML boolean where a string belongs",
			doc:     "vnpus:" + strings.Replace(chip310P, "commonWord: Ascend310P", "commonWord: y", 1),
			wantErr: []string{`vnpus[0].commonWord: Invalid value: true: must be a string; quote it`},
		},
		{
			name: "every shape error is reported at once",
			doc:  "nvidia:\n  deviceSplitCount: ten\n  bogus: 1\nnodeconfig:\n- name: n1\n  devicesplitcount: x\n",
			wantErr: []string{
				`nvidia.deviceSplitCount: Invalid value: "ten"`,
				`nvidia.bogus: Forbidden: unknown field`,
				`nodeconfig[0].devicesplitcount: Invalid value: "x"`,
			},
		},

		// nvidia ranges and names.
		{
			name:    "deviceSplitCount zero",
			doc:     "nvidia:\n  deviceSplitCount: 0\n",
			wantErr: []string{"validate device config: nvidia.deviceSplitCount: Invalid value: 0: must be between 1 and 1000"},
		},
		{
			name:    "deviceSplitCount too large",
			doc:     "nvidia:\n  deviceSplitCount: 1001\n",
			wantErr: []string{"nvidia.deviceSplitCount: Invalid value: 1001: must be between 1 and 1000"},
		},
		{
			name:    "negative defaultCores",
			doc:     "nvidia:\n  defaultCores: -5\n",
			wantErr: []string{"nvidia.defaultCores: Invalid value: -5: must be between 0 and 100 (percent of the card's SMs)"},
		},
		{
			name:    "defaultCores above 100",
			doc:     "nvidia:\n  defaultCores: 101\n",
			wantErr: []string{"nvidia.defaultCores: Invalid value: 101: must be between 0 and 100"},
		},
		{
			name:    "negative defaultMemory",
			doc:     "nvidia:\n  defaultMemory: -1\n",
			wantErr: []string{"nvidia.defaultMemory: Invalid value: -1: must be >= 0"},
		},
		{
			name:    "negative defaultGPUNum",
			doc:     "nvidia:\n  defaultGPUNum: -1\n",
			wantErr: []string{"nvidia.defaultGPUNum: Invalid value: -1: must be >= 0"},
		},
		{
			name:    "zero deviceMemoryScaling",
			doc:     "nvidia:\n  deviceMemoryScaling: 0\n",
			wantErr: []string{"nvidia.deviceMemoryScaling: Invalid value: 0: must be a number > 0"},
		},
		{
			name:    "negative deviceCoreScaling",
			doc:     "nvidia:\n  deviceCoreScaling: -0.5\n",
			wantErr: []string{"nvidia.deviceCoreScaling: Invalid value: -0.5: must be a number > 0"},
		},
		{
			name:    "negative gpuMemoryFactor",
			doc:     "nvidia:\n  gpuMemoryFactor: -2\n",
			wantErr: []string{"nvidia.gpuMemoryFactor: Invalid value: -2: must be >= 1"},
		},
		{
			name:    "memoryFactor disagreeing with gpuMemoryFactor",
			doc:     "nvidia:\n  gpuMemoryFactor: 2\n  memoryFactor: 4\n",
			wantErr: []string{"nvidia.memoryFactor: Invalid value: 4: must equal nvidia.gpuMemoryFactor (2) when both are set"},
		},
		{
			name:    "resource name with a space",
			doc:     "nvidia:\n  resourceCountName: volcano.sh/vgpu number\n",
			wantErr: []string{`nvidia.resourceCountName: Invalid value: "volcano.sh/vgpu number": name part must consist of alphanumeric characters`},
		},
		{
			name:    "resource name without a domain",
			doc:     "nvidia:\n  resourceMemoryName: vgpu-memory\n",
			wantErr: []string{`nvidia.resourceMemoryName: Invalid value: "vgpu-memory": must have a domain prefix`},
		},
		{
			name:    "resource name in kubernetes.io",
			doc:     "nvidia:\n  resourceCoreName: kubernetes.io/vgpu-cores\n",
			wantErr: []string{`nvidia.resourceCoreName: Invalid value: "kubernetes.io/vgpu-cores": must not be in the kubernetes.io domain`},
		},
		{
			name:    "resource name used twice",
			doc:     "nvidia:\n  resourceCoreName: volcano.sh/vgpu-memory\n",
			wantErr: []string{`nvidia.resourceCoreName: Duplicate value: "volcano.sh/vgpu-memory": already used by nvidia.resourceMemoryName`},
		},
		{
			name:    "unknown gpuCorePolicy",
			doc:     "nvidia:\n  gpuCorePolicy: always\n",
			wantErr: []string{`nvidia.gpuCorePolicy: Unsupported value: "always": supported values: "default", "force", "disable"`},
		},
		{
			name:    "log level out of range",
			doc:     "nvidia:\n  libCudaLogLevel: 7\n",
			wantErr: []string{`nvidia.libCudaLogLevel: Invalid value: "7": must be a libvgpu log level from 0 to 4`},
		},

		// MIG geometries.
		{
			name:    "MIG count zero",
			doc:     migDoc("- {name: 1g.5gb, memory: 5120, count: 0}"),
			wantErr: []string{"nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].count: Invalid value: 0: must be between 1 and 7"},
		},
		{
			name:    "MIG profile name malformed",
			doc:     migDoc("- {name: 1g-5gb, memory: 5120, count: 1}"),
			wantErr: []string{`nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].name: Invalid value: "1g-5gb": must be a MIG profile name like 1g.5gb`},
		},
		{
			name:    "MIG layout with more than seven slices",
			doc:     migDoc("- {name: 3g.20gb, memory: 20480, count: 2}\n        - {name: 2g.10gb, memory: 10240, count: 1}"),
			wantErr: []string{"nvidia.knownMigGeometries[0].allowedGeometries[0].geometries: Invalid value: 8: the layout uses 8 compute slices; a GPU has at most 7"},
		},
		{
			name:    "MIG memory zero",
			doc:     migDoc("- {name: 1g.5gb, count: 1}"),
			wantErr: []string{"nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].memory: Invalid value: 0: must be >= 1 (MiB)"},
		},
		{
			name: "MIG group names repeated",
			doc: "nvidia:\n  knownMigGeometries:\n  - models: [A30]\n    allowedGeometries:\n" +
				"    - {group: g, geometries: [{name: 1g.6gb, memory: 6144, count: 4}]}\n" +
				"    - {group: g, geometries: [{name: 4g.24gb, memory: 24576, count: 1}]}\n",
			wantErr: []string{`nvidia.knownMigGeometries[0].allowedGeometries[1].group: Duplicate value: "g"`},
		},
		{
			name: "MIG model in two entries",
			doc: "nvidia:\n  knownMigGeometries:\n" +
				"  - {models: [A30], allowedGeometries: [{group: g, geometries: [{name: 1g.6gb, memory: 6144, count: 4}]}]}\n" +
				"  - {models: [A100, A30], allowedGeometries: [{group: g, geometries: [{name: 1g.5gb, memory: 5120, count: 7}]}]}\n",
			wantErr: []string{`nvidia.knownMigGeometries[1].models[1]: Duplicate value: "A30": already listed at nvidia.knownMigGeometries[0].models[0]`},
		},
		{
			name:    "MIG entry without models or layouts",
			doc:     "nvidia:\n  knownMigGeometries:\n  - {models: [], allowedGeometries: []}\n",
			wantErr: []string{"nvidia.knownMigGeometries[0].models: Required value", "nvidia.knownMigGeometries[0].allowedGeometries: Required value"},
		},

		// vnpus.
		{
			name:    "duplicate commonWord",
			doc:     "vnpus:" + chip310P + strings.Replace(chip310P, "chipName: 310P3", "chipName: 310P1", 1),
			wantErr: []string{`vnpus[1].commonWord: Duplicate value: "Ascend310P": already used by vnpus[0].commonWord`},
		},
		{
			name:    "duplicate chipName",
			doc:     "vnpus:" + chip310P + strings.Replace(chip310P, "commonWord: Ascend310P", "commonWord: Ascend310Q", 1),
			wantErr: []string{`vnpus[1].chipName: Duplicate value: "310P3"`},
		},
		{
			name:    "template memory larger than the chip",
			doc:     "vnpus:" + strings.Replace(chip310P, "memory: 3072", "memory: 30000", 1),
			wantErr: []string{"vnpus[0].templates[0].memory: Invalid value: 30000: must be between 1 and the chip's memoryAllocatable (21527)"},
		},
		{
			name:    "template with more AI cores than the chip",
			doc:     "vnpus:" + strings.Replace(chip310P, "aiCore: 1,", "aiCore: 9,", 1),
			wantErr: []string{"vnpus[0].templates[0].aiCore: Invalid value: 9: must be between 1 and the chip's aiCore (8)"},
		},
		{
			name:    "object form paths go through configs",
			doc:     "vnpus:\n  configs:" + indent(strings.Replace(chip310P, "aiCPU: 1}", "aiCPU: 8}", 1)),
			wantErr: []string{"vnpus.configs[0].templates[0].aiCPU: Invalid value: 8: must be between 0 and the chip's aiCPU (7)"},
		},
		{
			name:    "duplicate template names",
			doc:     "vnpus:" + chip310P + "  - {name: vir01, memory: 6144, aiCore: 2, aiCPU: 2}\n",
			wantErr: []string{`vnpus[0].templates[1].name: Duplicate value: "vir01"`},
		},
		{
			name:    "memoryAllocatable above memoryCapacity",
			doc:     "vnpus:" + strings.Replace(chip310P, "memoryAllocatable: 21527", "memoryAllocatable: 30000", 1),
			wantErr: []string{"vnpus[0].memoryAllocatable: Invalid value: 30000: must be between 1 and 24576"},
		},
		{
			name:    "missing commonWord and memoryCapacity",
			doc:     "vnpus:\n- {chipName: 910B3, aiCore: 20}\n",
			wantErr: []string{"vnpus[0].commonWord: Required value", "vnpus[0].memoryCapacity: Invalid value: 0: must be >= 1 (MiB)"},
		},
		{
			name:    "commonWord that breaks the annotation key",
			doc:     "vnpus:" + strings.Replace(chip310P, "commonWord: Ascend310P", "commonWord: Ascend 310P", 1),
			wantErr: []string{`vnpus[0].commonWord: Invalid value: "Ascend 310P": must fit the annotation key hami.io/node-register-<commonWord>`},
		},
		{
			name:    "vnpu resource name clashing with nvidia",
			doc:     "vnpus:" + strings.Replace(chip310P, "commonWord: Ascend310P", "commonWord: Ascend310P\n  resourceName: volcano.sh/vgpu-number", 1),
			wantErr: []string{`vnpus[0].resourceName: Duplicate value: "volcano.sh/vgpu-number": already used by nvidia.resourceCountName`},
		},
		{
			name:    "unknown vNPU mode",
			doc:     "vnpus:\n  hamiVnpuMode: slices\n",
			wantErr: []string{`vnpus.hamiVnpuMode: Unsupported value: "slices"`},
		},

		// nodeconfig.
		{
			name:    "duplicate node names",
			doc:     "nodeconfig:\n- name: n1\n- name: n1\n",
			wantErr: []string{`nodeconfig[1].name: Duplicate value: "n1": already used by nodeconfig[0].name`},
		},
		{
			name:    "node without a name",
			doc:     "nodeconfig:\n- devicesplitcount: 4\n",
			wantErr: []string{"nodeconfig[0].name: Required value"},
		},
		{
			name:    "node name that is not a node name",
			doc:     "nodeconfig:\n- name: GPU_Node\n",
			wantErr: []string{`nodeconfig[0].name: Invalid value: "GPU_Node"`},
		},
		{
			name:    "unknown operating mode",
			doc:     "nodeconfig:\n- name: n1\n  operatingmode: vgpu\n",
			wantErr: []string{`nodeconfig[0].operatingmode: Unsupported value: "vgpu": supported values: "hami-core", "mig", "mps"`},
		},
		{
			name:    "unknown MIG strategy",
			doc:     "nodeconfig:\n- name: n1\n  migstrategy: all\n",
			wantErr: []string{`nodeconfig[0].migstrategy: Unsupported value: "all"`},
		},
		{
			name:    "negative node split count",
			doc:     "nodeconfig:\n- name: n1\n  devicesplitcount: -1\n",
			wantErr: []string{"nodeconfig[0].devicesplitcount: Invalid value: -1: must be between 1 and 1000"},
		},
		{
			name:    "negative node memory scaling",
			doc:     "nodeconfig:\n- name: n1\n  devicememoryscaling: -1\n",
			wantErr: []string{"nodeconfig[0].devicememoryscaling: Invalid value: -1: must be a number > 0"},
		},
		{
			name:    "negative filtered index",
			doc:     "nodeconfig:\n- name: n1\n  filterdevices: {index: [1, -2]}\n",
			wantErr: []string{"nodeconfig[0].filterdevices.index[1]: Invalid value: -2: must be >= 0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse() = %+v, want an error containing %q", got, tc.wantErr)
			}
			if got != nil {
				t.Errorf("Parse() returned a config with the error %v", err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Parse() error:\n  %s\nwant it to contain:\n  %s", err, want)
				}
			}
		})
	}
}

// migDoc is a knownMigGeometries document with one layout made of the given
// template lines.
func migDoc(templates string) string {
	return "nvidia:\n  knownMigGeometries:\n  - models: [A100]\n    allowedGeometries:\n    - group: g\n      geometries:\n        " +
		templates + "\n"
}

// indent shifts a YAML block two spaces right.
func indent(s string) string {
	return strings.ReplaceAll(s, "\n", "\n  ")
}
