package config

import (
	"strings"
	"testing"
)

// Each key nothing acts on is accepted at the value the product's behaviour
// matches and refused otherwise, with an error naming the key, the value,
// that it is not supported and what to do instead.
func TestParseUnsupportedKeys(t *testing.T) {
	const (
		migStrategy = `not supported: the node agent never exposes MIG devices as resources of their own ` +
			`(with operatingmode: mig it creates the MIG instances the scheduler places); supported values: "none" (or leave the key out)`
		preferred = "not supported: the node agent always answers GetPreferredAllocation, so that the device IDs the kubelet " +
			"records name the cards the scheduler chose; leave the key out or set it to true"
	)
	tests := []struct {
		name string
		doc  string
		// wantErr is the whole error; empty means the document parses.
		wantErr string
	}{
		{name: "migProfileAllowlist empty", doc: "nvidia:\n  migProfileAllowlist: []\n"},
		{
			name: "migProfileAllowlist with entries",
			doc:  "nvidia:\n  migProfileAllowlist:\n  - {models: [A30], profiles: [1g.6gb, 2g.12gb]}\n  - {models: [A100-SXM4-40GB], profiles: [7g.40gb]}\n",
			wantErr: `validate device config: nvidia.migProfileAllowlist: Unsupported value: ` +
				`"models [A30] profiles [1g.6gb 2g.12gb]; models [A100-SXM4-40GB] profiles [7g.40gb]": ` +
				"not supported: MIG instances are placed by the layouts of nvidia.knownMigGeometries, which no allowlist restricts; " +
				"keep only the layouts you allow there for these models and remove the key",
		},

		{name: "migstrategy none", doc: "nodeconfig:\n- name: n1\n  migstrategy: none\n"},
		{name: "migstrategy empty", doc: "nodeconfig:\n- name: n1\n  migstrategy: \"\"\n"},
		{
			name:    "migstrategy single",
			doc:     "nodeconfig:\n- name: n1\n  migstrategy: single\n",
			wantErr: `validate device config: nodeconfig[0].migstrategy: Unsupported value: "single": ` + migStrategy,
		},
		{
			name:    "migstrategy mixed",
			doc:     "nodeconfig:\n- name: n1\n  operatingmode: mig\n  migstrategy: mixed\n",
			wantErr: `validate device config: nodeconfig[0].migstrategy: Unsupported value: "mixed": ` + migStrategy,
		},
		{
			name:    "migstrategy unknown",
			doc:     "nodeconfig:\n- name: n1\n  migstrategy: all\n",
			wantErr: `validate device config: nodeconfig[0].migstrategy: Unsupported value: "all": supported values: "none"`,
		},

		{name: "enablegetpreferredallocation true", doc: "nodeconfig:\n- name: n1\n  enablegetpreferredallocation: true\n"},
		{
			name:    "enablegetpreferredallocation false",
			doc:     "nodeconfig:\n- name: n1\n- name: n2\n  enablegetpreferredallocation: false\n",
			wantErr: "validate device config: nodeconfig[1].enablegetpreferredallocation: Unsupported value: false: " + preferred,
		},

		{name: "hamiVnpuMode template", doc: "vnpus:\n  hamiVnpuMode: template\n"},
		{name: "hamiVnpuMode hamiCore", doc: "vnpus:\n  hamiVnpuMode: hamiCore\n"},
		{
			name: "hamiVnpuMode enpu",
			doc:  "vnpus:\n  hamiVnpuMode: enpu\n",
			wantErr: `validate device config: vnpus.hamiVnpuMode: Unsupported value: "enpu": not supported: HAMi's ENPU mode is not ` +
				`implemented (chips would be sliced by templates instead); supported values: "template", "hami-core", "hamiCore"`,
		},
		{
			name:    "hamiVnpuMode unknown",
			doc:     "vnpus:\n  hamiVnpuMode: slices\n",
			wantErr: `validate device config: vnpus.hamiVnpuMode: Unsupported value: "slices": supported values: "template", "hami-core", "hamiCore"`,
		},

		{name: "enpuPolicy empty", doc: "vnpus:\n  enpuPolicy: \"\"\n"},
		{
			name: "enpuPolicy set",
			doc:  "vnpus:\n  enpuPolicy: spread\n",
			wantErr: `validate device config: vnpus.enpuPolicy: Unsupported value: "spread": ` +
				"not supported: HAMi's ENPU mode is not implemented; remove the key",
		},

		{name: "superPod false", doc: "vnpus:" + strings.Replace(chip310P, "aiCPU: 7\n", "aiCPU: 7\n  superPod: false\n", 1)},
		{
			name: "superPod true, list form",
			doc:  "vnpus:" + strings.Replace(chip310P, "aiCPU: 7\n", "aiCPU: 7\n  superPod: true\n", 1),
			wantErr: "validate device config: vnpus[0].superPod: Unsupported value: true: not supported: requests for super-pod chips " +
				"are not rounded up to whole modules (HAMi's webhook does that); ask for chips in pairs and remove the key, or set it to false",
		},
		{
			name: "superPod true, object form",
			doc:  "vnpus:\n  configs:" + indent(strings.Replace(chip310P, "aiCPU: 7\n", "aiCPU: 7\n  superPod: true\n", 1)),
			wantErr: "validate device config: vnpus.configs[0].superPod: Unsupported value: true: not supported: requests for super-pod chips " +
				"are not rounded up to whole modules (HAMi's webhook does that); ask for chips in pairs and remove the key, or set it to false",
		},

		// The keys the admission webhook acts on stay accepted.
		{name: "webhook keys", doc: "nvidia:\n  overwriteEnv: true\n  runtimeClassName: nvidia\n  defaultMemory: 1024\n  defaultCores: 10\n" +
			"vnpus:\n  overwriteEnv: true\n  runtimeClassName: ascend\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.doc))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Parse() error: %v", err)
			case tc.wantErr == "":
				if got == nil {
					t.Fatal("Parse() = nil, nil")
				}
			case err == nil:
				t.Fatalf("Parse() = %+v, want the error\n  %s", got, tc.wantErr)
			case err.Error() != tc.wantErr:
				t.Errorf("Parse() error:\n  %s\nwant:\n  %s", err, tc.wantErr)
			}
		})
	}
}

// The scheduler and the node agent both follow the ConfigMap through a
// Loader: a document with an unsupported key is refused there (the last good
// configuration keeps serving), never served with the key ignored.
func TestLoaderRefusesUnsupportedKeys(t *testing.T) {
	l := NewLoader(LoaderOptions{})
	l.Apply(configMap("1", splitCount(4)))
	l.Apply(configMap("2", "nvidia:\n  deviceSplitCount: 8\nnodeconfig:\n- name: n1\n  migstrategy: mixed\n"))
	if got := l.Current().NVIDIA.DeviceSplitCount; got != 4 {
		t.Errorf("deviceSplitCount = %d after a refused edit, want 4 (the last good document)", got)
	}
	if err := l.LastError(); err == nil || !strings.Contains(err.Error(), `nodeconfig[0].migstrategy: Unsupported value: "mixed": not supported`) {
		t.Errorf("LastError() = %v, want the refusal of nodeconfig[0].migstrategy", err)
	}
}
