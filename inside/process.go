package inside

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/inside/capexec"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Bounds of the process table: every command is kept with its output (a
// foreground exec's ring paced by its caller, a background one's kept for
// later readers), and ended ones are forgotten oldest first.
const (
	foregroundRing = 256 << 10
	backgroundRing = 1 << 20
	maxProcesses   = 1024
)

// errTooMany refuses a start while the table is full of running commands.
var errTooMany = errors.New("too many processes in the table; let some end first")

// process is one command the init started.
type process struct {
	info   control.Process // Running, ExitCode and Reason under mu
	out    *ring
	killer *treeKiller
	done   chan struct{} // closed once it was waited for and its output ended

	mu    sync.Mutex
	stdin io.WriteCloser // nil once closed
	pty   *os.File       // the terminal's master, nil without one
}

// state returns the process's record now.
func (p *process) state() control.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// writeStdin writes to the process's stdin (its terminal's input for a
// terminal); a process that stopped reading is not an error.
func (p *process) writeStdin(b []byte) {
	p.mu.Lock()
	w := p.stdin
	p.mu.Unlock()
	if w != nil {
		_, _ = w.Write(b)
	}
}

// closeStdin closes the process's stdin; on a terminal it sends the EOF
// character instead (the terminal stays the process's).
func (p *process) closeStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.pty != nil:
		_, _ = p.pty.Write([]byte{4}) // ^D
	case p.stdin != nil:
		_ = p.stdin.Close()
		p.stdin = nil
	}
}

// resize sets the process's terminal size; without a terminal it does
// nothing.
func (p *process) resize(size control.Resize) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pty == nil {
		return nil
	}
	return setWinsize(p.pty, size)
}

// table is the init's processes.
type table struct {
	mu    sync.Mutex
	procs map[int]*process
	order []int // pids, oldest first
}

func newTable() *table { return &table{procs: map[int]*process{}} }

func (t *table) get(pid int) (*process, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.procs[pid]
	return p, ok
}

// list returns every process's record, oldest first.
func (t *table) list() []control.Process {
	t.mu.Lock()
	procs := make([]*process, 0, len(t.order))
	for _, pid := range t.order {
		procs = append(procs, t.procs[pid])
	}
	t.mu.Unlock()
	out := make([]control.Process, len(procs))
	for i, p := range procs {
		out[i] = p.state()
	}
	return out
}

// room makes room for one more entry by forgetting the oldest ended
// process; it fails when every entry is a running process.
func (t *table) room() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.order) < maxProcesses {
		return nil
	}
	for i, pid := range t.order {
		if !t.procs[pid].state().Running {
			delete(t.procs, pid)
			t.order = slices.Delete(t.order, i, i+1)
			return nil
		}
	}
	return errTooMany
}

func (t *table) add(p *process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.procs[p.info.Pid] = p
	t.order = append(t.order, p.info.Pid)
}

// startProcess starts req's command as the leader of a new session and
// process group, through the isolate step (a Landlock domain of its own and
// a subreaper, see runIsolated), with its output going into a ring and its stdin a pipe
// (or, with req.TTY, all three a terminal of its own in the sandbox's
// devpts), and records it in the table. Errors: the command cannot be found
// or started (the exit code a shell would give is in the returned code), or
// the table is full. extra become the command's descriptors 3, 4, ...
// (the init closes its copies once the command started).
func (s *initServer) startProcess(req control.Request, background bool, extra ...*os.File) (*process, int, error) {
	if err := s.procs.room(); err != nil {
		return nil, 126, err
	}
	dir, err := s.workDir(req.Cwd)
	if err != nil {
		return nil, 126, err
	}
	env := s.commandEnv(req.Env)
	if req.TTY {
		env = withDefault(env, "TERM", "xterm-256color")
	}
	prog, err := capexec.LookPath(req.Argv[0], env)
	if err != nil {
		return nil, capexec.ExitCode(err), err
	}
	// The isolate step (runIsolated) becomes the command, under the same pid.
	cmd := &exec.Cmd{Path: control.InitPath, Args: isolateArgv(s.isolation, prog, req.Argv), Env: env, Dir: dir,
		ExtraFiles: extra, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	ringSize := foregroundRing
	if background {
		ringSize = backgroundRing
	}
	p := &process{out: newRing(ringSize, !background), done: make(chan struct{})}
	var streams *commandStreams
	if req.TTY {
		streams, err = newTerminalStreams(cmd, req.Size)
	} else {
		streams, err = newCommandStreams(cmd)
	}
	if err != nil {
		return nil, 126, err
	}
	status, err := s.reaper.start(cmd)
	streams.closeChild()
	if err != nil {
		streams.closeAll()
		return nil, capexec.ExitCode(err), err
	}
	p.stdin, p.pty = streams.stdin, streams.pty
	p.killer = &treeKiller{leader: cmd.Process.Pid}
	p.info = control.Process{
		Pid: cmd.Process.Pid, Argv: req.Argv, Started: time.Now().UnixNano(), TTY: req.TTY,
		Background: background, Running: true,
	}
	s.procs.add(p)
	exited := make(chan struct{})
	copied := make(chan struct{})
	go func() { streams.copyOutput(p.out, exited); close(copied) }()
	go func() {
		ws := <-status
		close(exited)
		<-copied
		streams.closeAll()
		reason := p.killer.finish()
		p.mu.Lock()
		p.info.Running, p.info.ExitCode, p.info.Reason = false, control.ExitCode(ws), reason
		p.stdin, p.pty = nil, nil
		p.mu.Unlock()
		p.out.end()
		close(p.done)
	}()
	return p, 0, nil
}

// withDefault sets key in env unless it is there.
func withDefault(env []string, key, value string) []string {
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			return env
		}
	}
	return append(env, key+"="+value)
}

// commandStreams are the init's ends of a command's standard streams:
// three pipes, or one terminal.
type commandStreams struct {
	stdin   io.WriteCloser
	outputs []output   // what to copy into the ring
	pty     *os.File   // the terminal's master, nil for pipes
	child   []*os.File // the command's ends, closed once it started
	own     []*os.File // the init's ends, closed at the end
}

// output is one stream to copy into the ring.
type output struct {
	f      *os.File
	stream byte
}

func newCommandStreams(cmd *exec.Cmd) (*commandStreams, error) {
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
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f[0], f[3], f[5]
	return &commandStreams{
		stdin:   f[1],
		outputs: []output{{f[2], control.FrameStdout}, {f[4], control.FrameStderr}},
		child:   []*os.File{f[0], f[3], f[5]},
		own:     []*os.File{f[1], f[2], f[4]},
	}, nil
}

func (c *commandStreams) closeChild() {
	for _, f := range c.child {
		f.Close()
	}
}

func (c *commandStreams) closeAll() {
	c.closeChild()
	for _, f := range c.own {
		f.Close()
	}
}

// copyOutput copies the command's output into out until every stream ends;
// once the command exited (exited closes), it waits at most waitDelay more
// (a background child may hold the streams open), then cuts them.
func (c *commandStreams) copyOutput(out *ring, exited <-chan struct{}) {
	var wg sync.WaitGroup
	for _, o := range c.outputs {
		wg.Go(func() { _, _ = io.Copy(ringWriter{out, o.stream}, o.f) })
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
		for _, o := range c.outputs {
			_ = o.f.SetReadDeadline(time.Now())
		}
		<-done
	}
}

// ringWriter writes one stream into a ring.
type ringWriter struct {
	r      *ring
	stream byte
}

func (w ringWriter) Write(p []byte) (int, error) {
	w.r.write(w.stream, p)
	return len(p), nil
}
