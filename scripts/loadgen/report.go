package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// reportCmd reads the JSON lines of several runs on stdin and prints them as
// a table, each run's throughput also as a share of the run named "bare".
func reportCmd(stdin io.Reader, stdout io.Writer) error {
	var runs []result
	var bare float64
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if r.Name == "bare" {
			bare = r.PerSec
		}
		runs = append(runs, r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tcheck-ins/s\tp50 ms\tp99 ms\tmax ms\tnon-2xx\terrors\tvs bare\tserver CPU µs/req\t")
	for _, r := range runs {
		ratio := "-"
		if bare > 0 {
			ratio = fmt.Sprintf("%.1f%%", 100*r.PerSec/bare)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%s\t%.0f\t\n", r.Name, r.PerSec, r.P50ms, r.P99ms, r.MaxMs, r.Non2xx, r.Errors, ratio, r.ServerCPUus)
	}
	return tw.Flush()
}
