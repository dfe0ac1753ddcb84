package deviceshare

import (
	"math"

	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/fitcache"
)

// nodeOrder is the NodeOrderFn: the weighted device score of a node the
// task fits, summed over the device types it asks for. Backends scoring
// across nodes are left to batchNodeOrder.
func (p *plugin) nodeOrder(task *vcapi.TaskInfo, node *vcapi.NodeInfo) (float64, error) {
	s := p.sess
	req := s.requestOf(task)
	if req == nil && s.args.SchedulePolicy == device.PolicyFragment && s.args.ScheduleWeight != 0 {
		return s.hostOnlyScore(task, node) * float64(s.args.ScheduleWeight), nil
	}
	if req == nil || req.invalid != nil || s.args.ScheduleWeight == 0 {
		return 0, nil
	}
	idx, ok := s.indexOf(node)
	if !ok {
		return 0, nil
	}
	// A node the predicate kept a result for: its score is kept beside it.
	var ent *fitcache.Entry
	score := math.NaN()
	if t := req.results; t != nil {
		if hit, _ := s.fits.Lookup(t, idx, t.Epoch()); hit != nil && hit.Fail == nil {
			ent, score = hit, hit.Score
		}
	}
	if math.IsNaN(score) {
		score = s.deviceScore(task, node, req, &s.slab[idx])
		if ent != nil {
			ent.Score = score
		}
	}
	// Guarded: once per node and task, and the arguments cost even when
	// the level is off (a tenth of this function's time at 1000 nodes).
	if klog.V(5).Enabled() {
		klog.V(5).InfoS("Scored node", "plugin", PluginName, "pod", klog.KObj(task.Pod), "node", node.Name, "score", score)
	}
	return score, nil
}

// deviceScore is nodeOrder's work on a known node: the weighted sum of
// the request's backends' ScoreNode, batch scorers left out.
func (s *sessionState) deviceScore(task *vcapi.TaskInfo, node *vcapi.NodeInfo, req *taskRequest, sn *sessionNode) float64 {
	var score float64
	for j, i := range req.backends {
		if _, batch := s.backends[i].(device.BatchScorer); batch {
			continue
		}
		if d := sn.devices[i]; d != nil && d.invErr == nil {
			score += scoreOn(d.read(), task.Pod, req.prep(j), s.args.SchedulePolicy, hostOf(s.args.SchedulePolicy, node.Idle, nil))
		}
	}
	return score * float64(s.args.ScheduleWeight)
}

// batchNodeOrder is the BatchNodeOrderFn: backends whose score depends on
// the other candidates score all nodes at once.
func (p *plugin) batchNodeOrder(task *vcapi.TaskInfo, nodes []*vcapi.NodeInfo) (map[string]float64, error) {
	s := p.sess
	req := s.requestOf(task)
	if req == nil || req.invalid != nil || s.args.ScheduleWeight == 0 {
		return nil, nil
	}
	var out map[string]float64
	for _, i := range req.backends {
		bs, ok := s.backends[i].(device.BatchScorer)
		if !ok {
			continue
		}
		candidates := make(map[string]device.Devices, len(nodes))
		for _, n := range nodes {
			if sn := s.nodes[n.Name]; sn != nil {
				if d := sn.devices[i]; d != nil && d.invErr == nil {
					candidates[n.Name] = d.read()
				}
			}
		}
		if out == nil {
			out = make(map[string]float64, len(nodes))
		}
		for name, sc := range bs.BatchScore(task.Pod, s.args.SchedulePolicy, candidates) {
			out[name] += sc * float64(s.args.ScheduleWeight)
		}
	}
	return out, nil
}
