package inside

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// proc is one process as the init sees it in the sandbox's /proc.
type proc struct {
	pid, ppid, pgid, sid int
	zombie               bool // it has exited and waits to be reaped
}

// readProcs lists the sandbox's processes from procRoot (the sandbox's own
// /proc: its pid namespace holds nothing else).
func readProcs(procRoot string) []proc {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]proc, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readStat(procRoot, pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid pgrp session ...";
// comm may hold spaces and parentheses, so fields are counted from its last
// ')'.
func readStat(procRoot string, pid int) (proc, bool) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return proc{}, false
	}
	p := proc{pid: pid, zombie: string(f[0]) == "Z"}
	for j, dst := range []*int{&p.ppid, &p.pgid, &p.sid} {
		n, err := strconv.Atoi(string(f[j+1]))
		if err != nil {
			return proc{}, false
		}
		*dst = n
	}
	return p, true
}

// treeOf returns the processes that belong to the command leader: its
// session and process group (the init starts each command as the leader of
// both) and every descendant, wherever it moved (a child that called
// setsid or setpgid is still a descendant).
func treeOf(procs []proc, leader int) []int {
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	in := map[int]bool{}
	var out []int
	add := func(pid int) {
		if pid > 1 && !in[pid] {
			in[pid] = true
			out = append(out, pid)
		}
	}
	for _, p := range procs {
		if p.pid == leader || p.sid == leader || p.pgid == leader {
			add(p.pid)
		}
	}
	for i := 0; i < len(out); i++ { // out grows as descendants are found
		for _, c := range children[out[i]] {
			add(c)
		}
	}
	return out
}

// maxStopRounds bounds the rounds of killTree's stop phase (each round
// stops what the previous one missed; a stopped process cannot fork).
const maxStopRounds = 64

// killTree ends every process of the command leader's tree (see treeOf):
// it stops them, round after round until no new member appears (so none
// can fork or leave while it looks), kills them all, and waits (at most
// killWait) until none of them runs any more.
func killTree(procRoot string, leader int) {
	stopped := map[int]bool{}
	for range maxStopRounds {
		fresh := 0
		for _, pid := range treeOf(readProcs(procRoot), leader) {
			if !stopped[pid] {
				stopped[pid] = true
				fresh++
				_ = syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
		if fresh == 0 {
			break
		}
	}
	for pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(killWait)
	for d := 100 * time.Microsecond; time.Now().Before(deadline); d = min(2*d, 20*time.Millisecond) {
		running := false
		for pid := range stopped {
			if p, ok := readStat(procRoot, pid); ok && !p.zombie {
				running = true
				break
			}
		}
		if !running {
			return
		}
		time.Sleep(d)
	}
}

// killWait bounds how long killTree waits for killed processes to end.
const killWait = 2 * time.Second
