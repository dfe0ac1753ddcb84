# BenchmarkAllocateVGPU lines (hack/bench.sh), named
# nodes=N/pods=P[/workload=W]/impl=I (workload "anonymous" when absent), as
#   mode=csv:    one row per run: nodes,pods,workload,impl,pods_bound,
#                pods_per_s,callback_us_per_pod,allocs_per_pod,peak_heap_mb
#   mode=table:  a markdown table of the means per (workload, nodes, impl),
#                pods/s against each implementation of base (a comma list,
#                default noop) at the same workload and size, and the pods
#                each left unplaced; then per implementation and base the
#                ratio of the means, and the ratio of each run to base's run
#                of the same round (the i-th run of each, hack/bench.sh runs
#                them interleaved) with their median, which the machine's
#                drift between rounds does not move.
#   mode=goal:   issue 36's goal: per workload and size, the paired medians
#                ours / floor, ours-fragment / floor and ours / noop (ratio
#                of the means in brackets), and whether ours and
#                ours-fragment reach 0.95x of the floor.
function metric(name,   i) { for (i = 1; i <= NF; i++) if ($(i) == name) return $(i-1); return "" }
# paired sets pr[1..m] to the per-round ratios of k to b and returns m.
function paired(k, b,   m, r) {
	m = n[k] < n[b] ? n[k] : n[b]
	for (r = 1; r <= m; r++) pr[r] = run[k, r] / run[b, r]
	return m
}
# median of pr[1..m] (insertion sort).
function median(m,   r, j, v) {
	for (r = 2; r <= m; r++) { v = pr[r]; for (j = r - 1; j >= 1 && pr[j] > v; j--) pr[j+1] = pr[j]; pr[j+1] = v }
	return m % 2 ? pr[(m + 1) / 2] : (pr[m / 2] + pr[m / 2 + 1]) / 2
}
# ratio is "median (mean)" of impl against base at group g, or "-".
function ratio(g, impl, base,   k, b, m) {
	k = g SUBSEP impl; b = g SUBSEP base
	if (!(k in n) || !(b in n)) return "-"
	m = paired(k, b)
	return sprintf("%.2fx (%.2fx)", median(m), (spps[k] / n[k]) / (spps[b] / n[b]))
}
BEGIN {
	if (base == "") base = "noop"
	nbase = split(base, bases, ",")
	if (mode == "csv") print "nodes,pods,workload,impl,pods_bound,pods_per_s,callback_us_per_pod,allocs_per_pod,peak_heap_mb"
}
/^BenchmarkAllocateVGPU\// {
	name = $1; sub(/-[0-9]+$/, "", name)
	np = split(name, parts, "/"); nodes = pods = impl = ""; workload = "anonymous"
	for (i = 2; i <= np; i++) {
		split(parts[i], kv, "=")
		if (kv[1] == "nodes") nodes = kv[2]
		else if (kv[1] == "pods") pods = kv[2]
		else if (kv[1] == "workload") workload = kv[2]
		else if (kv[1] == "impl") impl = kv[2]
	}
	bound = metric("allocated/op"); pps = metric("pods/s"); cb = metric("cb-us/pod"); heap = metric("peak-heap-MB")
	allocs = bound > 0 ? metric("allocs/op") / bound : 0
	if (mode == "csv") { printf "%s,%s,%s,%s,%d,%.1f,%.1f,%.0f,%.0f\n", nodes, pods, workload, impl, bound, pps, cb, allocs, heap; next }
	g = workload SUBSEP nodes; k = g SUBSEP impl
	if (!(g in seen)) { seen[g] = 1; groups[++ng] = g; gwork[g] = workload; gnodes[g] = nodes }
	if (!(k in n)) { order[++nk] = k; kgroup[k] = g; kimpl[k] = impl; kpods[k] = pods; minb[k] = bound }
	n[k]++; run[k, n[k]] = pps; sb[k] += bound; spps[k] += pps; scb[k] += cb; sal[k] += allocs; sheap[k] += heap
	if (bound < minb[k]) minb[k] = bound
	if (pps < lo[k] || n[k] == 1) lo[k] = pps
	if (pps > hi[k] || n[k] == 1) hi[k] = pps
}
END {
	if (mode == "csv") exit
	if (mode == "goal") {
		print "| workload | nodes | ours / floor | ours-fragment / floor | ours / noop | ours-fragment / noop | goal: ours, ours-fragment >= 0.95x floor |"
		print "|---|---|---|---|---|---|---|"
		for (i = 1; i <= ng; i++) {
			g = groups[i]; verdict = "-"
			if ((g SUBSEP "ours") in n && (g SUBSEP "ours-fragment") in n && (g SUBSEP "floor") in n) {
				m = paired(g SUBSEP "ours", g SUBSEP "floor"); a = median(m)
				m = paired(g SUBSEP "ours-fragment", g SUBSEP "floor"); f = median(m)
				verdict = (a >= 0.95 && f >= 0.95) ? "met" : sprintf("not met (short by %.2f and %.2f)", a < 0.95 ? 0.95 - a : 0, f < 0.95 ? 0.95 - f : 0)
			}
			printf "| %s | %s | %s | %s | %s | %s | %s |\n", gwork[g], gnodes[g], ratio(g, "ours", "floor"), ratio(g, "ours-fragment", "floor"), \
				ratio(g, "ours", "noop"), ratio(g, "ours-fragment", "noop"), verdict
		}
		print "(paired median of the per-round ratios; ratio of the means in brackets)"
		exit
	}
	head = "| workload | nodes | impl | runs | pods bound (of pods) | unplaced | pods/s (min-max) |"; rule = "|---|---|---|---|---|---|---|"
	for (j = 1; j <= nbase; j++) { head = head " vs " bases[j] " |"; rule = rule "---|" }
	print head " callback µs/pod | allocs/pod | peak heap MB |"
	print rule "---|---|---|"
	for (i = 1; i <= nk; i++) {
		k = order[i]; g = kgroup[k]; m = spps[k] / n[k]; vs = ""
		for (j = 1; j <= nbase; j++) {
			b = g SUBSEP bases[j]
			vs = vs sprintf(" %s |", (b in n) ? sprintf("%.2fx", m / (spps[b] / n[b])) : "-")
		}
		unplaced = kpods[k] - minb[k]; up = "0"
		if (unplaced > 0) up = "up to " unplaced
		printf "| %s | %s | %s | %d | %.0f (of %s) | %s | %.1f (%.1f-%.1f) |%s %.0f | %.0f | %.0f |\n", gwork[g], gnodes[g], kimpl[k], n[k], \
			sb[k] / n[k], kpods[k], up, m, lo[k], hi[k], vs, scb[k] / n[k], sal[k] / n[k], sheap[k] / n[k]
	}
	for (i = 1; i <= nk; i++) {
		k = order[i]; g = kgroup[k]
		if (kpods[k] - minb[k] > 0)
			printf "note: %s, %s nodes, %s left up to %d of %d pods unplaced; its pods/s counts bound pods only and is not like for like with rows that placed all\n", \
				gwork[g], gnodes[g], kimpl[k], kpods[k] - minb[k], kpods[k]
	}
	for (j = 1; j <= nbase; j++) for (i = 1; i <= nk; i++) {
		k = order[i]; g = kgroup[k]; b = g SUBSEP bases[j]
		if (kimpl[k] == bases[j] || !(b in n)) continue
		printf "ratio: %s, %s nodes, %s / %s pods/s = %.2fx\n", gwork[g], gnodes[g], kimpl[k], bases[j], (spps[k] / n[k]) / (spps[b] / n[b])
	}
	for (j = 1; j <= nbase; j++) for (i = 1; i <= nk; i++) {
		k = order[i]; g = kgroup[k]; b = g SUBSEP bases[j]
		if (kimpl[k] == bases[j] || !(b in n)) continue
		m = paired(k, b); line = ""
		for (r = 1; r <= m; r++) line = line sprintf(" %.2fx", pr[r])
		printf "paired: %s, %s nodes, %s / %s pods/s per round:%s; median %.2fx\n", gwork[g], gnodes[g], kimpl[k], bases[j], line, median(m)
	}
}
