#!/usr/bin/env bash
# bench-files.sh: a 100 MiB file into a real sandbox through the API and out
# again, against `cp` tmpfs to tmpfs, in the same rounds
# (BenchmarkRealFileTransfer in worker/httpapi); with BASE, the same
# benchmark built from the tree at commit BASE too, the two alternating
# run by run, so the machine's load falls on both. Prints each run's
# medians (MiB/s, and the rounds' ratios to cp), then per tree the median
# over its runs. Root (a real sandbox).
#
#   scripts/bench-files.sh [BASE] [RUNS] [ROUNDS]   (defaults: none, 3, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
[[ $(id -u) == 0 ]] || { echo "bench-files: run as root" >&2; exit 1; }
base=${1:-}
runs=${2:-3}
rounds=${3:-5}
tmp=$(mktemp -d /tmp/agentsandbox-bench-files-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sides=(head)
go test -c -o "$tmp/head.test" ./worker/httpapi/
if [[ -n "$base" ]]; then
	mkdir "$tmp/base"
	git archive "$base" | tar -x -C "$tmp/base"
	# the base runs this tree's benchmark (the same rounds and figures)
	cp worker/httpapi/real_files_bench_test.go "$tmp/base/worker/httpapi/"
	(cd "$tmp/base" && go test -c -o "$tmp/base.test" ./worker/httpapi/)
	sides=(base head)
fi
echo "bench-files: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); head $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')${base:+, base $base}; $runs runs of $rounds rounds per tree"
for r in $(seq "$runs"); do
	order=("${sides[@]}")
	((r % 2 == 0)) && [[ ${#sides[@]} == 2 ]] && order=(head base)
	for s in "${order[@]}"; do
		(cd worker/httpapi && CI=true "$tmp/$s.test" -test.run '^$' -test.bench BenchmarkRealFileTransfer -test.benchtime "${rounds}x") |
			awk -v side="$s" -v run="$r" '/^BenchmarkRealFileTransfer/ {
				for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
				printf "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", side, run, v["upload-MiB/s"], v["download-MiB/s"], v["cp-MiB/s"], v["upload/cp"], v["download/cp"]
			}' | tee -a "$tmp/results"
	done
done | awk -F'\t' '{ printf "  run %d %-4s upload %6.0f MiB/s  download %6.0f MiB/s  cp %6.0f MiB/s  upload/cp %.2f  download/cp %.2f\n", $2, $1, $3, $4, $5, $6, $7 }'
echo "medians over the runs:"
for s in "${sides[@]}"; do
	awk -F'\t' -v side="$s" '$1 == side { n++; u[n] = $3; d[n] = $4; c[n] = $5; ur[n] = $6; dr[n] = $7 }
		function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
		END { printf "  %-4s upload %6.0f MiB/s  download %6.0f MiB/s  cp %6.0f MiB/s  upload/cp %.2f  download/cp %.2f\n", side, med(u, n), med(d, n), med(c, n), med(ur, n), med(dr, n) }' "$tmp/results"
done
