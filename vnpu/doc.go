// Package vnpu is the Ascend virtual-NPU model, in pure Go without
// Kubernetes types: a chip's resources (memory, AI cores, AI CPUs, DVPP), the
// template catalogue a chip can be sliced into, the rules that decide which
// templates coexist on one chip, the rounding of a memory request up to the
// smallest fitting template, MindCluster's AI-CPU downgrade of vNPU requests,
// and a cross-node batch score.
//
// Two catalogues exist. HAMi mode reads the templates of each vnpus entry of
// the device ConfigMap (the backend converts them with NewCatalogue). The
// MindCluster 310P catalogue is built in (Ascend310P): an Atlas inference chip
// has 8 AI cores, 7 AI CPUs and 24 GB of memory, and MindCluster slices it
// into vir01, vir02, vir02_1c, vir04, vir04_3c, vir04_3c_ndvpp and
// vir04_4c_dvpp (figures from MindCluster's "Virtualization Rules" and
// Volcano's mindcluster vnpu plugin).
//
// # Slicing rules
//
// Templates on one chip coexist when the sums of their AI cores, AI CPUs and
// memory stay within the chip's totals, and the DVPP rule holds: a template
// that takes the chip's DVPP (…_dvpp) shares the chip only with templates
// that use no DVPP (…_ndvpp); templates that share DVPP (no suffix) never
// sit next to one that takes it. A whole chip takes everything.
//
// # Downgrade
//
// MindCluster reads the pod label vnpu-level (low, the default, or high) and
// vnpu-dvpp (yes, no, or absent) to choose a template for an AI-core count:
// 1 core is vir01; 2 cores are vir02_1c (low) or vir02 (high); 4 cores are
// vir04_4c_dvpp (dvpp yes), vir04_3c_ndvpp (dvpp no), vir04_3c (low) or vir04
// (high). When a node lacks the AI CPUs for a template that has a variant
// with one AI CPU less (vir02 to vir02_1c, vir04 to vir04_3c), Volcano's
// plugin downgrades the request on that node and remembers it; Downgrade
// returns that variant. Nodes that need a downgrade score lower (BatchScore).
package vnpu
