package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/worker"
)

// selftestCmd runs the self-test once and prints a table (or JSON with
// --json). Exit 0 only when every check passed.
func selftestCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("codes-sandbox selftest", "[--json] [--state-dir DIR] [--no-egress] [flags]",
		"Proves each isolation fact with probes in one real sandbox (needs root, bubblewrap, cgroups).\nExit 0 only when every check passes.")
	asJSON := fs.Bool("json", false, "print {checks, not_run, reasons, checked_at, passed} as JSON")
	verbose := fs.Bool("v", false, "log the runtime's lines (JSON) on stderr")
	var sf stackFlags
	sf.register(fs)
	if code, ok := cli.Parse(fs, args, 0, 0, stdout, stderr); !ok {
		return code
	}
	logOut := io.Discard
	if *verbose {
		logOut = stderr
	}
	sf.pool, sf.poolBrowser = optionalInt{n: 0, set: true}, 0 // one self-test: nothing to start ahead
	cfg, err := sf.config(fileConfig{}, 1)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox selftest: %v\n", err)
		return 2
	}
	st, err := newStack(cfg, newLogger(logOut))
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox selftest: %v\n", err)
		return 1
	}
	res := st.tester.Run(ctx)
	st.close()
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		printTable(stdout, res)
	}
	if !res.Passed {
		return 1
	}
	return 0
}

func printTable(w io.Writer, res worker.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT")
	checks := agentsandbox.Checks()
	for _, c := range []string{agentsandbox.CheckCredentialsBrokered, agentsandbox.CheckBrowser} {
		if _, ran := res.Checks[c]; ran || slices.Contains(res.NotRun, c) {
			checks = append(checks, c)
		}
	}
	for _, c := range checks {
		r := "FAIL"
		if ok, ran := res.Checks[c]; !ran {
			r = "not run"
		} else if ok {
			r = "ok"
		}
		fmt.Fprintf(tw, "%s\t%s\n", c, r)
	}
	tw.Flush()
	verdict := "all checks passed"
	if !res.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "\n%s (%s, in %v)\n", verdict, res.CheckedAt.UTC().Format("2006-01-02T15:04:05Z"), res.Duration.Round(1e6))
	for _, r := range res.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
}
