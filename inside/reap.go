package inside

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/sandbox/control"
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

// commandPipes are the init's ends of a command's standard streams.
type commandPipes struct {
	stdin          *os.File
	stdout, stderr *os.File
	child          []*os.File // the command's ends, closed once it started
}

func newCommandPipes(cmd *exec.Cmd) (*commandPipes, error) {
	p := &commandPipes{}
	var f [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		rd, wr, err := os.Pipe()
		if err != nil {
			for _, x := range f[:i] {
				x.Close()
			}
			return nil, fmt.Errorf("pipe: %w", err)
		}
		f[i], f[i+1] = rd, wr
	}
	p.stdin, p.stdout, p.stderr = f[1], f[2], f[4]
	p.child = []*os.File{f[0], f[3], f[5]}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f[0], f[3], f[5]
	return p, nil
}

func (p *commandPipes) closeChild() {
	for _, f := range p.child {
		f.Close()
	}
}

func (p *commandPipes) closeAll() {
	p.closeChild()
	for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// copyOutput streams the command's stdout and stderr to w until both end;
// once the command exited (exited closes), it waits at most waitDelay more
// (a background child may hold them open), then cuts them.
func (p *commandPipes) copyOutput(fw *control.Writer, exited <-chan struct{}) {
	var wg sync.WaitGroup
	for _, c := range []struct {
		f    *os.File
		kind byte
	}{{p.stdout, control.FrameStdout}, {p.stderr, control.FrameStderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(control.KindWriter{W: fw, Kind: c.kind}, c.f)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-exited:
	}
	t := time.NewTimer(waitDelay)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = p.stdout.SetReadDeadline(time.Now())
		_ = p.stderr.SetReadDeadline(time.Now())
		<-done
	}
}
