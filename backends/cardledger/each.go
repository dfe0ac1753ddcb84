package cardledger

// Each calls f with what every accounted pod holds, in no particular
// order, for read-only reports (a backend's card layouts). f must not
// change the ledger.
func Each[H Holding](l Ledger[H], f func(H)) {
	for _, r := range l.pods.held {
		f(r.h)
	}
}
