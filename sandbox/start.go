package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/cgroup"
)

// File descriptors of bubblewrap (ExtraFiles from 3 on). The ready pipe is
// last: a sandbox that runs one command directly has none.
const (
	fdSeccomp = 3
	fdInfo    = 4
	fdBlock   = 5
	fdReady   = 6
)

// baseEnv returns the environment of the init and so of every command,
// before the egress variables, Options.Env and the request's env.
func baseEnv() map[string]string {
	return map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": Workspace,
		"LANG": "C.UTF-8",
		"TERM": "dumb",
		"USER": "sandbox",
	}
}

// start makes b's cgroup and control directory, attaches egress, starts
// bubblewrap as the slot's uid, moves it into the cgroup while it waits
// before starting the init, and waits until the init is ready. For a direct
// sandbox (b.direct) there is no init: start returns once the command may
// run.
func (r *Runtime) start(ctx context.Context, b *box) error {
	o := b.opts
	if b.direct == nil {
		if err := mkControlDir(b.dir, b.slot.uid); err != nil {
			return err
		}
	}
	g, err := r.cg.Create(b.id, cgroup.Limits{
		MemoryBytes: int64(o.Limits.MemoryMB) << 20,
		Pids:        o.Limits.Pids,
		CPUPercent:  o.Limits.CPUPercent,
	})
	if err != nil {
		return err
	}
	b.group = g
	if o.Egress {
		detach, err := r.cfg.Egress.Attach(ctx, b.id, filepath.Join(b.dir, "egress.sock"), b.slot.uid)
		if err != nil {
			return fmt.Errorf("attach egress: %w", err)
		}
		b.detach = detach
	}
	p, err := r.launch(b)
	if err != nil {
		return err
	}
	defer p.close()
	if err := r.enter(ctx, b, p); err != nil {
		return err
	}
	if b.direct != nil {
		return nil
	}
	return waitReady(ctx, p.ready, b)
}

// enter reads the sandbox's pid from bubblewrap's info, moves bubblewrap and
// the sandbox into the cgroup, opens the low ports when the sandbox has
// egress, and lets bubblewrap go on. bubblewrap waits (--block-fd) after
// its setup and before starting the init, so every process that runs
// sandboxed code is in the cgroup from its first instruction.
func (r *Runtime) enter(ctx context.Context, b *box, p *launchPipes) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = p.info.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = p.info.SetReadDeadline(time.Now()) })
	defer stop()
	var st struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(p.info).Decode(&st); err != nil || st.ChildPid <= 0 {
		return startError(ctx, b, fmt.Errorf("read bubblewrap info: %v", err))
	}
	for _, pid := range []int{b.cmd.Process.Pid, st.ChildPid} {
		if err := b.group.Enter(pid); err != nil {
			return fmt.Errorf("start sandbox: %w", err)
		}
	}
	if b.opts.Egress {
		if err := openLowPorts(st.ChildPid); err != nil {
			return err
		}
	}
	if _, err := p.block.Write([]byte{1}); err != nil {
		return fmt.Errorf("start sandbox: release bubblewrap: %w", err)
	}
	return nil
}

// launchPipes are the runtime's ends of the pipes to a starting sandbox.
type launchPipes struct {
	ready *os.File // the init writes one byte when it accepts commands
	info  *os.File // bubblewrap's info: the sandbox's host pid
	block *os.File // bubblewrap waits for a byte here
}

func (p *launchPipes) close() {
	for _, f := range []*os.File{p.ready, p.info, p.block} {
		if f != nil {
			f.Close()
		}
	}
}

// newLaunchPipes makes the pipes to a starting sandbox: the seccomp
// program (written whole), bubblewrap's info and block pipes and, unless
// direct, the init's ready pipe. It returns the runtime's ends and
// bubblewrap's, in the order of their descriptors from 3.
func newLaunchPipes(prog []byte, direct bool) (*launchPipes, []*os.File, error) {
	p := &launchPipes{}
	var child []*os.File
	fail := func(err error) (*launchPipes, []*os.File, error) {
		p.close()
		for _, f := range child {
			f.Close()
		}
		return nil, nil, fmt.Errorf("start sandbox: %w", err)
	}
	secR, secW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	child = append(child, secR)
	// The program is a few KiB, well within a pipe's buffer.
	_, err = secW.Write(prog)
	secW.Close()
	if err != nil {
		return fail(fmt.Errorf("seccomp: %w", err))
	}
	pipes := []struct {
		keep   **os.File
		parent bool // the runtime keeps the read end
	}{{&p.info, true}, {&p.block, false}, {&p.ready, true}}
	if direct {
		pipes = pipes[:2]
	}
	for _, pair := range pipes {
		rd, wr, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		if pair.parent {
			*pair.keep = rd
			child = append(child, wr)
		} else {
			*pair.keep = wr
			child = append(child, rd)
		}
	}
	return p, child, nil
}

// launch starts bubblewrap for b as the slot's uid and gid, with no
// supplementary groups, an empty environment, and the parent-death signal.
func (r *Runtime) launch(b *box) (*launchPipes, error) {
	p, child, err := newLaunchPipes(r.seccomp, b.direct != nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	uid := uint32(b.slot.uid)
	b.stderr = &tailBuffer{}
	b.cmd = &exec.Cmd{
		Path:       r.cfg.Bwrap,
		Args:       append([]string{"bwrap"}, Argv(r.bwrapSpec(b))...),
		Env:        []string{},
		Dir:        "/",
		Stderr:     b.stderr,
		ExtraFiles: child,
		SysProcAttr: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if d := b.direct; d != nil {
		b.cmd.Stdin, b.cmd.Stdout, b.cmd.Stderr = d.stdin, d.stdout, d.stderr
		b.cmd.WaitDelay = waitDelay
	}
	// Only the files above reach bubblewrap: any descriptor this process
	// inherited without close-on-exec (Go opens its own with it) is marked.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		p.close()
		return nil, fmt.Errorf("start sandbox: mark descriptors close-on-exec: %w", err)
	}
	if err := b.cmd.Start(); err != nil {
		p.close()
		return nil, fmt.Errorf("start sandbox: bubblewrap: %w", err)
	}
	go func() {
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	return p, nil
}

// bwrapSpec resolves b's options into the bubblewrap spec.
func (r *Runtime) bwrapSpec(b *box) BwrapSpec {
	spec := BwrapSpec{
		EtcDir:    r.etcDir,
		UsrLinks:  r.links,
		DiskBytes: int64(b.opts.Limits.DiskMB) << 20,
		TmpBytes:  min(tmpBytes, int64(b.opts.Limits.DiskMB)<<20),
		Hostname:  hostname,
		Env:       baseEnv(),
		SeccompFD: fdSeccomp,
		InfoFD:    fdInfo,
		BlockFD:   fdBlock,
	}
	if b.direct != nil {
		spec.Command = b.direct.argv
		maps.Copy(spec.Env, b.opts.Env)
		return spec
	}
	init, _ := json.Marshal(initSpec{Env: b.opts.Env, Egress: b.opts.Egress, ReadyFD: fdReady})
	spec.InitBinary, spec.InitArgs, spec.ControlDir = r.init, []string{initMarker, string(init)}, b.dir
	return spec
}

// waitReady waits for the init's ready byte; EOF means the sandbox died
// while starting, and its stderr says why.
func waitReady(ctx context.Context, ready *os.File, b *box) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = ready.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = ready.SetReadDeadline(time.Now()) })
	defer stop()
	var one [1]byte
	_, err := io.ReadFull(ready, one[:])
	if err == nil {
		return nil
	}
	return startError(ctx, b, fmt.Errorf("wait for init: %w", err))
}

// startError explains a failed start: ctx ended, or bubblewrap or the init
// died (what they wrote to stderr says why), or err.
func startError(ctx context.Context, b *box, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("start sandbox: %w", ctx.Err())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		<-b.exited
		msg := strings.TrimSpace(b.stderr.String())
		if msg == "" {
			msg = b.cmd.ProcessState.String()
		}
		return fmt.Errorf("start sandbox: %s", msg)
	}
	return fmt.Errorf("start sandbox: %w", err)
}

// openLowPorts lets the sandbox's unprivileged user bind ports below 1024
// in the sandbox's own network namespace (for the transparent egress
// listeners on 53, 80 and 443), so the init needs no capability at all. It
// writes the sysctl from a locked thread that joins the namespace of pid
// and then returns to its own. The thread must not end: it may be the one
// that started a bubblewrap, whose parent-death signal its end would fire.
func openLowPorts(pid int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := setSysctlIn(pid, "/proc/sys/net/ipv4/ip_unprivileged_port_start", "0")
		if restored {
			runtime.UnlockOSThread()
		} else {
			// Back in no known namespace: keep the goroutine, and so the
			// thread, parked for good rather than let either be reused or
			// end.
			errc <- errors.Join(err, errors.New("could not return to the runtime's network namespace"))
			select {}
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("start sandbox: open low ports: %w", err)
	}
	return nil
}

// setSysctlIn joins pid's network namespace on the calling (locked) thread,
// writes a network sysctl there and returns to the thread's namespace;
// restored reports whether the thread is back where it started.
func setSysctlIn(pid int, file, value string) (restored bool, err error) {
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true, err
	}
	defer unix.Close(self)
	target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true, err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return true, err
	}
	werr := os.WriteFile(file, []byte(value), 0)
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		return false, err
	}
	return true, werr
}
