package quality

import "strings"

// TuningTraces returns the five pod lists the policies were tuned on (the
// published table's, in its order): default, gpushare100, multigpu50,
// gpuspec33 and cpu250. Nothing may be tuned on the others.
func TuningTraces() []string { return Traces() }

// AllTraces returns the 24 openb pod lists: the five tuning traces first,
// as Traces lists them, then the 19 held-out ones grouped by family in the
// same family order (gpushare, multigpu, gpuspec, cpu), each family by its
// parameter.
func AllTraces() []string {
	return append(TuningTraces(),
		"gpushare20", "gpushare40", "gpushare60", "gpushare80",
		"multigpu20", "multigpu30", "multigpu40",
		"gpuspec05", "gpuspec10", "gpuspec20", "gpuspec25",
		"cpu0", "cpu037", "cpu050", "cpu072", "cpu100", "cpu200", "cpu235", "cpu300",
	)
}

// IsTuning reports whether a trace is one of the five tuning traces.
func IsTuning(trace string) bool { return contains(TuningTraces(), trace) }

// TraceSet resolves the --traces flag: "all" is AllTraces, "tuning" is
// TuningTraces, "held-out" the 19 others; anything else is a
// comma-separated list of pod list names, returned as given.
func TraceSet(spec string) []string {
	switch spec {
	case "all":
		return AllTraces()
	case "tuning":
		return TuningTraces()
	case "held-out":
		var out []string
		for _, t := range AllTraces() {
			if !IsTuning(t) {
				out = append(out, t)
			}
		}
		return out
	}
	var out []string
	for _, p := range strings.Split(spec, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
