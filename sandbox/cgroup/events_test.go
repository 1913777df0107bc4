package cgroup

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

func TestEventsPidsMax(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{Pids: 8})
	if ev, err := g.Events(); err != nil || ev.PidsMax != 0 {
		t.Fatalf("fresh group: events %+v, err %v", ev, err)
	}
	// sh itself is one task; at most 7 sleeps fit, the rest of the forks fail.
	// sh exits at the first fork that fails.
	p := startIn(t, g, `for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do sleep 300 >/dev/null & done 2>/dev/null; echo looped`)
	if err := p.wait(t); err == nil {
		t.Fatal("sh forked 16 times in a group limited to 8")
	}
	ev, err := g.Events()
	if err != nil {
		t.Fatal(err)
	}
	if ev.PidsMax < 1 {
		t.Fatalf("events %+v, want PidsMax >= 1", ev)
	}
	pids, err := g.Pids()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 8 {
		t.Fatalf("%d tasks in a group limited to 8", len(pids))
	}
}

func TestEventsOOMKill(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{MemoryBytes: 32 << 20})
	if ev, err := g.Events(); err != nil || ev.OOMKills != 0 {
		t.Fatalf("fresh group: events %+v, err %v", ev, err)
	}
	// tail keeps its whole newline-free input in memory: 256 MB > 32 MB.
	p := startIn(t, g, `head -c 256M /dev/zero | tail -c 300M >/dev/null`)
	err := p.wait(t)
	// The kernel kills the group's biggest process, tail (the shell then
	// exits 137), or under a loaded guest at times the shell itself.
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("pipeline ended with %v, want it killed", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); ws.ExitStatus() != 128+int(syscall.SIGKILL) && (!ws.Signaled() || ws.Signal() != syscall.SIGKILL) {
		t.Fatalf("pipeline ended with %v, want tail or the shell killed (exit 137 or SIGKILL)", err)
	}
	ev, err := g.Events()
	if err != nil {
		t.Fatal(err)
	}
	if ev.OOMKills < 1 {
		t.Fatalf("events %+v, want OOMKills >= 1", ev)
	}
}
