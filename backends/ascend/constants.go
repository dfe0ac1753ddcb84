package ascend

import "github.com/vgpushare/vshare/protocol/ascendproto"

// Filter failure reasons, stable across nodes so that Volcano's fit-error
// histogram groups them. The chip type is not part of them.
const (
	ReasonUnhealthy      = "NPU card unhealthy"
	ReasonCordoned       = "NPU card cordoned by node annotation hami.io/device-cordon"
	ReasonTypeMismatch   = "NPU card of another chip type"
	ReasonUUIDExcluded   = "NPU card excluded by use-<chip>-uuid or no-use-<chip>-uuid"
	ReasonModeMismatch   = "NPU node slices by templates; huawei.com/vnpu-mode hami-core or a core request needs a hami-vnpu-core node"
	ReasonCardTooSmall   = "NPU card memory smaller than the request or its template"
	ReasonCountFull      = "NPU card shared by its maximum number of vNPUs"
	ReasonExclusiveBusy  = "NPU card in use; a core request of 100 needs an unused card"
	ReasonWholeBusy      = "NPU card in use; a whole-card request needs an unused card"
	ReasonCoresFull      = "NPU card cores fully allocated; a request without cores cannot share it"
	ReasonInsufficientCo = "insufficient NPU cores on card"
	ReasonInsufficientMe = "insufficient NPU memory on card"
	ReasonSlicing        = "NPU card cannot hold the template next to its other vNPUs (AI cores, AI CPUs or DVPP)"
	ReasonTooFewCards    = "node has fewer NPU cards than requested"
	ReasonTooFewFitting  = "fewer fitting NPU cards than requested"
)

// Limits and weights; the limits on decoded annotations are
// protocol/ascendproto's.
const (
	// fullCores is a whole card in soft mode, in percent.
	fullCores = ascendproto.FullCores
	// networkWeight is the share of the node score given to keeping a
	// multi-card Ascend910 request inside one network group (HAMi's
	// Ascend910NetworkWeight).
	networkWeight = 10
	// ascend910Prefix marks chip types whose cards carry NetworkID.
	ascend910Prefix = "Ascend910"
)
