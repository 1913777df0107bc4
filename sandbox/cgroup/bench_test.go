package cgroup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkCreateRemove measures making and removing an empty group with
// all three limits.
func BenchmarkCreateRemove(b *testing.B) {
	h := realHierarchy(b, Options{})
	l := Limits{MemoryBytes: 2 << 30, Pids: 256, CPUPercent: 100}
	for i := 0; b.Loop(); i++ {
		g, err := h.Create(fmt.Sprintf("bench-%d-%d", os.Getpid(), i), l)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Remove(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKillRemove measures the cgroup part of a wipe: kill a group
// holding one process, then remove it (process start is excluded).
func BenchmarkKillRemove(b *testing.B) {
	h := realHierarchy(b, Options{})
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		g, err := h.Create(fmt.Sprintf("bench-%d-%d", os.Getpid(), i), Limits{Pids: 16})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if err := g.Enter(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := g.Kill(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := g.Remove(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = cmd.Wait()
		b.StartTimer()
	}
}
