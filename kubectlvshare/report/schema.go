package report

import (
	"strconv"
	"strings"
)

// APIVersion is the version of the JSON and YAML reports. Fields are only
// ever added within one version; a renamed or removed field or a changed
// meaning takes a new version.
const APIVersion = "vshare.kubectl/v1"

// Report kinds, the "kind" of each JSON and YAML report.
const (
	KindCards = "CardReport"
	KindPods  = "PodReport"
	KindFit   = "FitReport"
	KindWhy   = "WhyReport"
)

// TypeMeta heads every report.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// CardReport is `kubectl vshare cards`: every card of the selected nodes.
type CardReport struct {
	TypeMeta `json:",inline"`
	Nodes    []NodeCards `json:"nodes"`
	// Totals sums the nodes, per device type.
	Totals []Totals `json:"totals"`
}

// NodeCards is one node's cards, of every device type it registers.
type NodeCards struct {
	Name string `json:"name"`
	// Cordoned is the node's spec.unschedulable.
	Cordoned bool   `json:"cordoned"`
	Cards    []Card `json:"cards"`
	// Errors are registrations and pod allocations that cannot be read
	// (their cards are left out, or the pod's share is not counted, as the
	// scheduler does).
	Errors []Problem `json:"errors,omitempty"`
	Totals []Totals  `json:"totals"`
}

// Card is one card (GPU, NPU chip) and what the pods hold of it.
type Card struct {
	// Device is the device type: hamivgpu, an Ascend chip type such as
	// Ascend910B3, gpushare or mindcluster310p.
	Device string `json:"device"`
	// Index is the card's index on its node; ID its UUID (or index).
	Index int    `json:"index"`
	ID    string `json:"id"`
	Model string `json:"model"`
	// Healthy is false for cards the scheduler never chooses.
	Healthy bool `json:"healthy"`
	// Cordoned is true for a card a node annotation takes out of
	// scheduling (volcano.sh/vgpu-cordon, hami.io/device-cordon): new pods
	// skip it, pods holding it keep it.
	Cordoned       bool  `json:"cordoned,omitempty"`
	MemoryUsedMiB  int64 `json:"memoryUsedMiB"`
	MemoryTotalMiB int64 `json:"memoryTotalMiB"`
	// CoresUsed and CoresTotal are percent of the card's SMs (vGPU, Ascend
	// hami-core) or AI cores (Ascend templates, MindCluster); 0 when the
	// device type does not model cores (GPU share).
	CoresUsed  int64 `json:"coresUsed"`
	CoresTotal int64 `json:"coresTotal"`
	// Shares counts the holders (one per container holding the card);
	// MaxShares is the most it takes (0: not modelled).
	Shares    int `json:"shares"`
	MaxShares int `json:"maxShares"`
	// Layout is a MIG card's geometry and instances in use, or the vNPU
	// templates an Ascend chip holds; "" when not partitioned.
	Layout string       `json:"layout,omitempty"`
	Pods   []CardHolder `json:"pods"`
}

// CardHolder is a pod holding a share of a card.
type CardHolder struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	MemoryMiB int64  `json:"memoryMiB"`
	Cores     int64  `json:"cores"`
}

// Totals sums the cards of one device type.
type Totals struct {
	Device         string `json:"device"`
	Cards          int    `json:"cards"`
	IdleCards      int    `json:"idleCards"`
	MemoryUsedMiB  int64  `json:"memoryUsedMiB"`
	MemoryTotalMiB int64  `json:"memoryTotalMiB"`
	CoresUsed      int64  `json:"coresUsed"`
	CoresTotal     int64  `json:"coresTotal"`
	Shares         int    `json:"shares"`
	// Pods counts the distinct pods holding cards.
	Pods int `json:"pods"`
}

// Problem is an annotation that cannot be read: a node's registration (Pod
// empty) or a pod's allocation.
type Problem struct {
	Node   string `json:"node"`
	Device string `json:"device"`
	// Pod is "namespace/name", empty for the node's registration.
	Pod string `json:"pod,omitempty"`
	// Setting is true for a node setting that was partly ignored (a card
	// cordon naming no card of the node); the node's cards are listed, as
	// they are for a registration part left out (unreadable link scores).
	Setting bool   `json:"setting,omitempty"`
	Message string `json:"message"`
}

// PodReport is `kubectl vshare pods`: every pod asking for a device type.
type PodReport struct {
	TypeMeta `json:",inline"`
	Pods     []PodCards `json:"pods"`
}

// PodCards is one pod, the cards it holds and how far its bind went.
type PodCards struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Phase is the pod's status.phase.
	Phase string `json:"phase"`
	// Node is spec.nodeName, empty while the pod waits.
	Node string `json:"node,omitempty"`
	// Devices are the device types the pod asks for.
	Devices []string   `json:"devices"`
	Cards   []HeldCard `json:"cards"`
	// BindPhase is the device type's bind-phase annotation (allocating,
	// success, failed), empty when it has none.
	BindPhase string `json:"bindPhase,omitempty"`
	// Admitted says whether the node agent gave the pod its devices: "yes",
	// "no" (refused; AdmissionMessage says why), "pending" (bound, not
	// served yet), or "" (not bound).
	Admitted         string `json:"admitted"`
	AdmissionMessage string `json:"admissionMessage,omitempty"`
	// Waiting is the scheduler's message on a pod that is not bound
	// (condition PodScheduled=False).
	Waiting string `json:"waiting,omitempty"`
	// Errors are allocation annotations of this pod that cannot be read.
	Errors []Problem `json:"errors,omitempty"`
}

// HeldCard is one card a pod holds and its share of it.
type HeldCard struct {
	Device    string `json:"device"`
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"`
	Cores     int64  `json:"cores"`
}

// FitReport is `kubectl vshare fit`: where a pod of the shape fits now.
type FitReport struct {
	TypeMeta `json:",inline"`
	Request  Shape `json:"request"`
	// Device is the device type the shape asks for.
	Device string `json:"device"`
	Policy string `json:"policy"`
	// Fits is true when at least one node takes the shape.
	Fits  bool      `json:"fits"`
	Nodes []NodeFit `json:"nodes"`
}

// NodeFit is whether a pod fits one node's cards now, and why not.
type NodeFit struct {
	Name string `json:"name"`
	Fits bool   `json:"fits"`
	// Score is the scheduler's node score in [0, 100] when it fits.
	Score float64 `json:"score,omitempty"`
	// Chosen are the cards the scheduler would take.
	Chosen []CardRef `json:"chosen,omitempty"`
	// Reasons are the scheduler's reasons for the node, as its fit error
	// reports them (and the plugin's: no such devices, invalid
	// registration, cordoned node, nodeSelector not matched).
	Reasons []string `json:"reasons,omitempty"`
	// Resolvable is true when pods leaving could make the node fit (never
	// on a cordoned node or one the pod's nodeSelector excludes).
	Resolvable bool `json:"resolvable,omitempty"`
	// Cards is the verdict of every card on the first container that does
	// not fit (Reason "" for a card that would take it).
	Cards []CardVerdict `json:"cards,omitempty"`
}

// CardRef names a card.
type CardRef struct {
	Index int    `json:"index"`
	ID    string `json:"id"`
}

// CardVerdict is why one card does not take the pod, with what it has free.
type CardVerdict struct {
	Index      int    `json:"index"`
	ID         string `json:"id"`
	Reason     string `json:"reason"`
	Resolvable bool   `json:"resolvable"`
	// MemoryFreeMiB and CoresFree are what the card has left now.
	MemoryFreeMiB int64 `json:"memoryFreeMiB"`
	CoresFree     int64 `json:"coresFree"`
}

// WhyReport is `kubectl vshare why`: why a pod waits.
type WhyReport struct {
	TypeMeta  `json:",inline"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Node      string `json:"node,omitempty"`
	// Waiting is true when the pod is not bound to a node.
	Waiting bool `json:"waiting"`
	// Summary is one sentence for people.
	Summary string `json:"summary"`
	// Devices are the device types the pod asks for; InvalidRequest the
	// scheduler's objection to its request, if any.
	Devices        []string `json:"devices"`
	InvalidRequest string   `json:"invalidRequest,omitempty"`
	// PodGroup is the pod's PodGroup (annotation scheduling.k8s.io/group-name).
	PodGroup *PodGroupState `json:"podGroup,omitempty"`
	// Scheduled is the pod's PodScheduled condition, which the scheduler
	// writes with its fit error.
	Scheduled *Condition `json:"scheduled,omitempty"`
	// Recorded are the reasons the scheduler recorded, with the number of
	// nodes each applied to, read from its latest fit error.
	Recorded []RecordedReason `json:"recorded"`
	// Events are the pod's and its PodGroup's events, oldest first.
	Events []Event `json:"events"`
	// Policy is the scheduling policy Nodes and FreeUp were computed with.
	Policy string `json:"policy"`
	// Nodes is whether the pod fits each node's cards now, card by card.
	Nodes []NodeFit `json:"nodes"`
	// FreeUp is, per node where pods leaving would let it fit, the
	// smallest set found of pods whose cards would have to free up.
	FreeUp []FreeUp `json:"freeUp"`
}

// PodGroupState is a PodGroup's phase and conditions.
type PodGroupState struct {
	Name       string      `json:"name"`
	Phase      string      `json:"phase"`
	MinMember  int32       `json:"minMember"`
	Running    int32       `json:"running"`
	Conditions []Condition `json:"conditions"`
}

// Condition is a pod or PodGroup condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Time is the last transition, RFC 3339.
	Time string `json:"time,omitempty"`
}

// RecordedReason is one reason of the scheduler's fit error histogram.
type RecordedReason struct {
	Nodes  int    `json:"nodes"`
	Reason string `json:"reason"`
}

// Event is one Kubernetes event.
type Event struct {
	// Time is the event's last occurrence, RFC 3339.
	Time    string `json:"time"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Object  string `json:"object"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
}

// FreeUp is what would let the pod fit one node: these pods' cards freed.
type FreeUp struct {
	Node   string       `json:"node"`
	Device string       `json:"device"`
	Pods   []CardHolder `json:"pods"`
	// Cards are the cards those pods hold there.
	Cards []CardRef `json:"cards"`
}

// Shape is the pod shape `fit` asks about: one container asking for
// Number cards of one device type.
type Shape struct {
	// Type is a card model (vGPU: a substring of the registered type, as
	// nvidia.com/use-gputype matches) or an Ascend chip type
	// (its commonWord, like Ascend910B3, or chip name); "" means any vGPU.
	Type string `json:"type,omitempty"`
	// Number is the number of cards.
	Number int64 `json:"number"`
	// MemoryMiB is the memory per card; 0 leaves it to the device type's
	// default (a whole vGPU card, an Ascend chip's whole memory).
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// MemoryPercent is the memory per card as a percentage (vGPU only).
	MemoryPercent int64 `json:"memoryPercent,omitempty"`
	// Cores is the percentage of each card's cores (vGPU SMs, Ascend AI
	// cores in hami-core mode); 0 asks for none.
	Cores int64 `json:"cores,omitempty"`
	// Mode is volcano.sh/vgpu-mode (hami-core, mig) or, for Ascend,
	// huawei.com/vnpu-mode (hami-core).
	Mode string `json:"mode,omitempty"`
}

// Describe renders a shape for people: "2 cards x 20000 MiB, 30% cores of A100".
func (s Shape) Describe(device string) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(s.Number, 10) + " " + device + " card")
	if s.Number != 1 {
		b.WriteString("s")
	}
	switch {
	case s.MemoryMiB > 0:
		b.WriteString(" x " + strconv.FormatInt(s.MemoryMiB, 10) + " MiB")
	case s.MemoryPercent > 0:
		b.WriteString(" x " + strconv.FormatInt(s.MemoryPercent, 10) + "% memory")
	}
	if s.Cores > 0 {
		b.WriteString(", " + strconv.FormatInt(s.Cores, 10) + "% cores")
	}
	if s.Type != "" && !strings.EqualFold(s.Type, device) {
		b.WriteString(", type " + s.Type)
	}
	if s.Mode != "" {
		b.WriteString(", mode " + s.Mode)
	}
	return b.String()
}

// Idle reports whether nothing holds the card.
func (c Card) Idle() bool { return c.Shares == 0 && c.MemoryUsedMiB == 0 && c.CoresUsed == 0 }

// Summary names the nodes the shape fits.
func (rep *FitReport) Summary() string {
	var fits []string
	for _, n := range rep.Nodes {
		if n.Fits {
			fits = append(fits, n.Name)
		}
	}
	if len(fits) == 0 {
		return "fits no node now (exit code 3)"
	}
	return "fits " + plural(len(fits), "node") + " of " + itoa(len(rep.Nodes)) + ": " + strings.Join(fits, ", ")
}
