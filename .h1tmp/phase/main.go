package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"openvibe.network/agentsandbox/sandbox"
)

func main() {
	if c, ok := sandbox.MaybeReexec(sandbox.InitHooks{}); ok {
		os.Exit(c)
	}
	var a, b, c []time.Duration
	n := 100
	if len(os.Args) > 1 {
		fmt.Sscan(os.Args[1], &n)
	}
	for range n {
		t0 := time.Now()
		rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1})
		if err != nil {
			panic(err)
		}
		t1 := time.Now()
		res, rep, err := rt.Run(context.Background(), sandbox.Options{}, []string{"/bin/true"}, nil, os.Stdout, os.Stderr)
		if err != nil || res.ExitCode != 0 || !rep.Verified {
			panic(fmt.Sprint(err, res, rep))
		}
		t2 := time.Now()
		rt.Close()
		t3 := time.Now()
		a, b, c = append(a, t1.Sub(t0)), append(b, t2.Sub(t1)), append(c, t3.Sub(t2))
	}
	for i, s := range [][]time.Duration{a, b, c} {
		slices.Sort(s)
		fmt.Printf("%s p50 %v p90 %v\n", []string{"newruntime", "run", "close"}[i], s[len(s)/2], s[len(s)*9/10])
	}
}
