# BenchmarkAllocateVGPU lines (hack/bench.sh) as
#   mode=csv:   one row per run: nodes,pods,impl,pods_bound,pods_per_s,
#               callback_us_per_pod,allocs_per_pod,peak_heap_mb
#   mode=table: a markdown table of the means per (nodes, impl), pods/s
#               against impl=base (default noop) at the same size, and the
#               pods each left unplaced; then per implementation the
#               ratio of the means, and the ratio of each run to base's run
#               of the same round (the i-th run of each, hack/bench.sh runs
#               them interleaved) with their median, which the machine's
#               drift between rounds does not move.
function metric(name,   i) { for (i = 1; i <= NF; i++) if ($(i) == name) return $(i-1); return "" }
BEGIN { if (base == "") base = "noop"; if (mode == "csv") print "nodes,pods,impl,pods_bound,pods_per_s,callback_us_per_pod,allocs_per_pod,peak_heap_mb" }
/^BenchmarkAllocateVGPU\// {
	split($1, parts, "/"); nodes = parts[2]; sub(/^nodes=/, "", nodes); pods = parts[3]; sub(/^pods=/, "", pods)
	impl = parts[4]; sub(/^impl=/, "", impl); sub(/-[0-9]+$/, "", impl)
	bound = metric("allocated/op"); pps = metric("pods/s"); cb = metric("cb-us/pod"); heap = metric("peak-heap-MB")
	allocs = bound > 0 ? metric("allocs/op") / bound : 0
	if (mode == "csv") { printf "%s,%s,%s,%d,%.1f,%.1f,%.0f,%.0f\n", nodes, pods, impl, bound, pps, cb, allocs, heap; next }
	k = nodes SUBSEP impl
	if (!(k in n)) { order[++nk] = k; knodes[k] = nodes; kimpl[k] = impl; kpods[k] = pods; minb[k] = bound }
	n[k]++; run[k, n[k]] = pps; sb[k] += bound; spps[k] += pps; scb[k] += cb; sal[k] += allocs; sheap[k] += heap
	if (bound < minb[k]) minb[k] = bound
	if (pps < lo[k] || n[k] == 1) lo[k] = pps
	if (pps > hi[k] || n[k] == 1) hi[k] = pps
}
END {
	if (mode == "csv") exit
	print "| nodes | impl | runs | pods bound (of pods) | unplaced | pods/s (min-max) | vs " base " | callback µs/pod | allocs/pod | peak heap MB |"
	print "|---|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= nk; i++) {
		k = order[i]; b = knodes[k] SUBSEP base; m = spps[k] / n[k]
		ratio = (b in n) ? sprintf("%.2fx", m / (spps[b] / n[b])) : "-"
		unplaced = kpods[k] - minb[k]; up = "0"
		if (unplaced > 0) up = "up to " unplaced
		printf "| %s | %s | %d | %.0f (of %s) | %s | %.1f (%.1f-%.1f) | %s | %.0f | %.0f | %.0f |\n", knodes[k], kimpl[k], n[k], sb[k] / n[k], kpods[k], \
			up, m, lo[k], hi[k], ratio, scb[k] / n[k], sal[k] / n[k], sheap[k] / n[k]
	}
	for (i = 1; i <= nk; i++) {
		k = order[i]
		if (kpods[k] - minb[k] > 0)
			printf "note: %s nodes, %s left up to %d of %d pods unplaced; its pods/s counts bound pods only and is not like for like with rows that placed all\n", \
				knodes[k], kimpl[k], kpods[k] - minb[k], kpods[k]
	}
	for (i = 1; i <= nk; i++) {
		k = order[i]; b = knodes[k] SUBSEP base
		if (kimpl[k] == base || !(b in n)) continue
		printf "ratio: %s nodes, %s / %s pods/s = %.2fx\n", knodes[k], kimpl[k], base, (spps[k] / n[k]) / (spps[b] / n[b])
	}
	for (i = 1; i <= nk; i++) {
		k = order[i]; b = knodes[k] SUBSEP base
		if (kimpl[k] == base || !(b in n)) continue
		m = n[k] < n[b] ? n[k] : n[b]; line = ""
		for (r = 1; r <= m; r++) {
			pr[r] = run[k, r] / run[b, r]; line = line sprintf(" %.2fx", pr[r])
		}
		# insertion sort for the median
		for (r = 2; r <= m; r++) { v = pr[r]; for (j = r - 1; j >= 1 && pr[j] > v; j--) pr[j+1] = pr[j]; pr[j+1] = v }
		med = m % 2 ? pr[(m + 1) / 2] : (pr[m / 2] + pr[m / 2 + 1]) / 2
		printf "paired: %s nodes, %s / %s pods/s per round:%s; median %.2fx\n", knodes[k], kimpl[k], base, line, med
	}
}
