# Means per benchmark of go test -benchmem lines (hack/bench.sh, section
# backends), as a markdown table: package, benchmark, ns/op, B/op, allocs/op.
/^pkg: / { pkg = $2; sub(/.*\/backends\//, "", pkg) }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); k = pkg SUBSEP name
	if (!(k in n)) { order[++nk] = k; kp[k] = pkg; kn[k] = name }
	n[k]++
	for (i = 1; i <= NF; i++) {
		if ($i == "ns/op") ns[k] += $(i-1)
		if ($i == "B/op") by[k] += $(i-1)
		if ($i == "allocs/op") al[k] += $(i-1)
	}
}
END {
	print "| package | benchmark | ns/op | B/op | allocs/op |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= nk; i++) {
		k = order[i]
		printf "| %s | %s | %.0f | %.0f | %.0f |\n", kp[k], kn[k], ns[k] / n[k], by[k] / n[k], al[k] / n[k]
	}
}
