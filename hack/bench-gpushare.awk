# Mean pods/s per (plugins, nodes) and implementation of
# BenchmarkAllocateGPUShare lines; ratio ours / built-in (hack/bench.sh).
/^BenchmarkAllocateGPUShare\// {
	split($1, parts, "/"); key = parts[2] "/" parts[3]; impl = parts[4]; sub(/-[0-9]+$/, "", impl)
	for (i = 1; i <= NF; i++) if ($(i) == "pods/s") { sum[key, impl] += $(i-1); n[key, impl]++ }
	keys[key] = 1
}
END {
	for (k in keys) {
		if (!n[k, "impl=builtin"] || !n[k, "impl=ours"]) continue
		b = sum[k, "impl=builtin"] / n[k, "impl=builtin"]; o = sum[k, "impl=ours"] / n[k, "impl=ours"]
		printf "%-28s built-in %8.1f pods/s   ours %8.1f pods/s   ratio %.2fx\n", k, b, o, o / b
	}
}
