// Command gorunner is scripts/bench-sdk.sh's Go side: for each line on
// stdin it runs `true` once in sandbox $SANDBOX through the Go client and
// prints the call's wall time and this process's CPU time in nanoseconds. It talks to $WORKER (a
// loopback URL) only.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/client"
)

func main() {
	token, err := os.ReadFile(os.Getenv("TOKEN_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gorunner:", err)
		os.Exit(1)
	}
	sb := client.NewWorker(os.Getenv("WORKER"), strings.TrimSpace(string(token)), nil).Sandbox(os.Getenv("SANDBOX"))
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cpu0 := cpuTime()
		start := time.Now()
		res, err := sb.Exec(ctx, client.ExecRequest{Argv: []string{"true"}}, nil, nil)
		d := time.Since(start)
		cpu := cpuTime() - cpu0
		if err != nil || res.ExitCode != 0 {
			fmt.Fprintln(os.Stderr, "gorunner: run true:", res.ExitCode, err)
			os.Exit(1)
		}
		fmt.Println(d.Nanoseconds(), cpu.Nanoseconds())
	}
}

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
