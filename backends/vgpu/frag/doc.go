// Package frag is the vGPU backend's fragment policy model
// (deviceshare.SchedulePolicy: fragment): the workload it learns from the
// requests it observes, the fragmentation of a node's cards under that
// workload, and the scarcity of the card models pods name. It works on
// plain card figures (Card, cardledger.Usage, device.Host) and knows
// nothing of pods' annotations, nodes' registrations or the card choice:
// backends/vgpu parses the requests into Shapes, describes each card as a
// Card, measures its nodes with a Measure and turns the measures into
// scores (Score) beside its own card choice.
//
// # The policy
//
// The fragment policy is Fragmentation Gradient Descent (Weng et al.,
// ATC'23) over what a live scheduler can know, with these changes:
//
//   - The target workload is learned online from the requests the backend
//     observes (Workload), not read from a trace.
//   - Whether a card serves a request class is decided by the card check's
//     own conditions (memory, cores, share count, exclusivity, type
//     selectors), so fragmentation is measured in the cards' own terms.
//   - A class the node's free CPU or free memory cannot host strands all
//     the node's free cards for it. FGD weighs CPU only; host memory
//     strands cards just the same (measured: it is what wins gpushare100
//     and takes 0.2 points off multigpu50).
//   - FGD scores int(100 * sigmoid(ΔF/1000)) and leaves the many ties to
//     an arbitrary node order. Here the fragmentation decrease decides in
//     the same whole steps, and within a step the node whose chosen cards
//     end fullest wins (best fit of cards), which keeps whole cards free
//     for the whole-card requests instead of scattering shares (Score).
//   - Cards are chosen fullest after placement first (the binpack order),
//     the fragmentation they leave breaking ties (backends/vgpu fragRank).
//   - A pod without vGPUs, when the plugin scores it, goes where its CPU
//     and memory strand the fewest cards, then where the fewest cards are
//     idle.
//   - A placement also costs the card share it takes times its card
//     model's pressure, the learned demand of the pods naming that model
//     (use-gputype, nouse-gputype) against the model's share of the
//     registered cards (scarcity.go). FGD's measure alone draws the
//     pods that may run anywhere to the models the fewest classes name,
//     whatever their supply, and fails the pods that can run only there.
//
// Node fragmentation F sums, over the target classes with their weights,
// the free card milli the class could not use on the node: all of it when
// fewer cards than the class asks for fit or the node lacks the class's
// CPU or memory, else the free milli of the cards it does not fit.
//
// # Concurrency and cost
//
// A Workload is safe for concurrent use; the Target it publishes is an
// immutable snapshot, read without locks, whose pointer identifies it. A
// Measure is written while it is built and read-only after. Measuring a
// node allocates its Measure; evaluating one (Value, ValueWith) allocates
// nothing and calls no interface, so the backend's per-node paths stay
// as cheap as when this code was part of it.
package frag
