package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// run is one measured wrk run of one side, as checkin.lua prints it plus
// the fields bench-live.sh adds (round, server CPU).
type run struct {
	Name         string  `json:"name"`
	Round        int     `json:"round"`
	Requests     int     `json:"requests"`
	PerSecond    float64 `json:"per_second"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	Non2xx       int     `json:"non_2xx"`
	SocketErrors int     `json:"socket_errors"`
	// ServerCPUus is the server process's CPU time (user+system) per
	// request, in microseconds.
	ServerCPUus float64 `json:"server_cpu_us"`
}

// side is every run of one side, in round order.
type side struct {
	name string
	runs []run
}

// summaryCmd reads the runs' JSON lines and prints, per side, the median
// over the rounds of each figure with its range, and the median of the
// per-round ratios to the run named "bare" in the same round.
func summaryCmd(stdin io.Reader, stdout io.Writer) error {
	sides, err := readRuns(stdin)
	if err != nil {
		return err
	}
	bare := map[int]float64{}
	for _, s := range sides {
		if s.name == "bare" {
			for _, r := range s.runs {
				bare[r.Round] = r.PerSecond
			}
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "side\trounds\tcheck-ins/s median (min-max)\tvs bare (median of rounds)\tp50 ms\tp99 ms median (max)\tnon-2xx\tsocket errors\tserver CPU µs/req\t")
	for _, s := range sides {
		var ratios []float64
		var non2xx, sockErr int
		for _, r := range s.runs {
			if b := bare[r.Round]; b > 0 {
				ratios = append(ratios, r.PerSecond/b)
			}
			non2xx += r.Non2xx
			sockErr += r.SocketErrors
		}
		ratio := "-"
		if len(ratios) > 0 {
			ratio = fmt.Sprintf("%.2f×", median(ratios))
		}
		rps := field(s.runs, func(r run) float64 { return r.PerSecond })
		p99 := field(s.runs, func(r run) float64 { return r.P99ms })
		fmt.Fprintf(tw, "%s\t%d\t%.0f (%.0f-%.0f)\t%s\t%.2f\t%.2f (%.2f)\t%d\t%d\t%.0f\t\n",
			s.name, len(s.runs), median(rps), slices.Min(rps), slices.Max(rps), ratio,
			median(field(s.runs, func(r run) float64 { return r.P50ms })), median(p99), slices.Max(p99),
			non2xx, sockErr, median(field(s.runs, func(r run) float64 { return r.ServerCPUus })))
	}
	return tw.Flush()
}

// readRuns groups the JSON lines by side, in the order the sides first appear.
func readRuns(r io.Reader) ([]side, error) {
	var sides []side
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var x run
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("summary: %q: %w", sc.Text(), err)
		}
		i := slices.IndexFunc(sides, func(s side) bool { return s.name == x.Name })
		if i < 0 {
			sides = append(sides, side{name: x.Name})
			i = len(sides) - 1
		}
		sides[i].runs = append(sides[i].runs, x)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("summary: %w", err)
	}
	if len(sides) == 0 {
		return nil, fmt.Errorf("summary: no runs")
	}
	return sides, nil
}

func field(runs []run, f func(run) float64) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = f(r)
	}
	return out
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs must not be empty. xs is not modified.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
