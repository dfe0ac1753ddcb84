# Keeps go test's benchmark lines and the context benchstat reads, and
# mends benchmark lines that klog split: Volcano logs to stderr, which go
# test merges into stdout, so a line can read "BenchmarkX-2 <tab>E1126 ...
# log ...", then more log lines, then "  1  123 ns/op ...".
function klog(s) { return s ~ /^[IWEF][0-9][0-9][0-9][0-9] [0-9:.]+ +[0-9]+ / }
{
	if (pending != "") {
		if (klog($0)) next
		if ($0 ~ /^[ \t]+[0-9]+[ \t]/) { print pending $0; pending = ""; next }
		print pending; pending = ""
	}
	if ($0 ~ /^Benchmark/) {
		if (match($0, /[IWEF][0-9][0-9][0-9][0-9] [0-9:.]+ +[0-9]+ /)) { pending = substr($0, 1, RSTART - 1); next }
		print; next
	}
	if ($0 ~ /^(goos|goarch|pkg|cpu|--- FAIL|FAIL|ok)/) print
}
END { if (pending != "") print pending }
