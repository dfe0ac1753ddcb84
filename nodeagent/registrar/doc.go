// Package registrar keeps a node's registration annotations current and
// answers the scheduler's handshake, for any node agent.
//
// An agent says what the annotations should be (Options.Desired, read again
// whenever Options.Changed fires) and which handshake annotation it owns.
// A Registrar writes only what differs from the Node it last observed (from
// a node informer, see Follow), so an unchanged node gets no patches, and it
// writes again when someone else changes or removes its annotations. A patch
// it made that the informer does not show yet is taken as applied.
//
// The handshake value is "Reported_<2006.01.02 15:04:05>"; schedulers write
// "Requesting_<time>" or "Deleted_<time>". Two policies exist:
//
//   - Answer (Volcano v1.10's vGPU protocol): report with every
//     registration change, and answer a scheduler's value no sooner than
//     HandshakeInterval after the previous report, so the exchange costs one
//     patch per interval on each side instead of a storm.
//   - Renew (HAMi's Ascend device plugin): report every HandshakeInterval,
//     and at once with a registration change or a scheduler's value.
package registrar
