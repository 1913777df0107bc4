package inside

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// reaper reaps every child of the init, which is the sandbox's pid 1
// (bubblewrap --as-pid-1): the commands it started, whose statuses it hands
// to their waiters, and orphans reparented to it, which it just reaps. The
// init never calls os/exec's Wait, which would race with it.
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus
}

func newReaper() *reaper {
	r := &reaper{waiting: map[int]chan syscall.WaitStatus{}}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	go func() {
		for range sig {
			r.reap()
		}
	}()
	return r
}

// reap collects every exited child.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			ch <- ws
			delete(r.waiting, pid)
		}
	}
}

// start starts cmd (whose standard streams must be *os.File or nil, so that
// os/exec starts no copying goroutine) and returns a channel that receives
// its wait status. Starting under the lock means the command cannot be
// reaped before it is registered.
func (r *reaper) start(cmd *exec.Cmd) (<-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiting[cmd.Process.Pid] = ch
	return ch, nil
}
