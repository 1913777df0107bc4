package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/internal/osthread"
	"openvibe.network/agentsandbox/internal/unixsock"
	"openvibe.network/agentsandbox/sandbox/cgroup"
	"openvibe.network/agentsandbox/sandbox/control"
	"openvibe.network/agentsandbox/sandbox/hostcheck"
)

// File descriptors of bubblewrap (ExtraFiles from 3 on), with the init's
// control.FDGo among them; the init's others follow (control.FDReady and
// on). A sandbox that runs one command directly has only these.
const (
	fdSeccomp = 3 // the BPF program
	fdInfo    = 4 // bubblewrap writes the sandbox's host pid here
	fdArgs    = 6 // bubblewrap's own arguments (--args), NUL-separated
)

// controlBacklog bounds the control connections waiting to be accepted.
const controlBacklog = 64

// pipeBuffer is what a pipe holds without a reader (Linux's default).
const pipeBuffer = 64 << 10

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

// start makes b's host directory (its capped tmpfs and devpts), its cgroup
// and its control socket, attaches egress, starts bubblewrap as the slot's
// uid, moves it into the cgroup and caps its descriptors while it waits
// before starting the init, and waits until the init is ready. For a direct
// sandbox (b.direct) there is no init: start returns once the command may
// run.
func (r *Runtime) start(ctx context.Context, b *sandboxState) error {
	o := b.opts
	if err := makeBoxDir(b.dir, b.slot.uid, int64(o.Limits.DiskMB)<<20, r.cfg.MaxPtys); err != nil {
		return err
	}
	b.dirMade = true
	if o.Image != nil {
		if err := r.mountImageRoot(b); err != nil {
			return err
		}
	}
	g, err := r.createGroup(b, cgroup.Limits{
		MemoryBytes: int64(o.Limits.MemoryMB) << 20,
		Pids:        o.Limits.Pids,
		CPUPercent:  o.Limits.CPUPercent,
	})
	if err != nil {
		return err
	}
	b.group = g
	var initFiles []*os.File // the init's, from control.FDReady on; closed here once passed on
	defer func() {
		for _, f := range initFiles {
			if f != nil {
				f.Close()
			}
		}
	}()
	if b.direct == nil {
		ctl, err := unixsock.Listen(filepath.Join(b.dir, "ctl.sock"), controlBacklog, -1)
		if err != nil {
			return fmt.Errorf("start sandbox: control socket: %w", err)
		}
		b.control = ctl.Path
		initFiles = append(initFiles, ctl.Listener)
		if o.Egress {
			ao := AttachOptions{Policy: o.EgressPolicy}
			if len(o.Secrets) > 0 || len(o.EgressPolicy.RuleHosts()) > 0 {
				st, err := r.setupSecrets(b)
				if err != nil {
					return err
				}
				b.secretEnv, ao.Secrets, ao.CA, ao.Canary = st.env, st.secrets, st.ca, o.EgressCanary
				b.secrets, b.caDomains = st.secrets, st.ca.Leaf.PermittedDNSDomains
			}
			sock, detach, err := r.cfg.Egress.Attach(ctx, b.id, filepath.Join(b.dir, "egress.sock"), b.slot.uid, ao)
			if err != nil {
				return fmt.Errorf("attach egress: %w", err)
			}
			b.detach = detach
			initFiles = append(initFiles, sock)
		}
	}
	p, err := r.launch(b, initFiles)
	if err != nil {
		return err
	}
	defer p.close()
	if err := r.enter(ctx, b, p); err != nil {
		if b.direct != nil {
			// Bubblewrap takes the go-ahead pipe's end of file for a
			// go-ahead (--block-fd): it is killed, and gone, before the
			// pipe is closed. (The init reads end of file as a failed
			// start.)
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
		return err
	}
	if b.direct != nil {
		return nil
	}
	return waitReady(ctx, p.ready, b)
}

// createGroup makes b's cgroup with limits l: a directory named by the
// sandbox in the runtime's own; or, for the one-command sandbox of a
// runtime that holds one sandbox at a time (one slot, no self-test slot, no
// pool: `codes-sandbox run`), the runtime's own directory itself, which saves
// making and removing a directory per hierarchy (on v1, five). Either way
// the runtime's name is the top of everything a runtime that dies leaves,
// and the next runtime removes it by that name (removeStale). (Sandboxes
// made by Create keep a directory of their own: making the runtime's
// directory again just after the last wipe removed it cost a create about
// a millisecond.)
func (r *Runtime) createGroup(b *sandboxState, l cgroup.Limits) (*cgroup.Group, error) {
	if b.direct != nil && r.cfg.Capacity == 1 && !r.cfg.SelfTestSlot && r.cfg.poolSize() == 0 {
		return r.base.Create(r.name, l)
	}
	return r.cg.Create(b.id, l)
}

// enter reads the sandbox's pid from bubblewrap's info, moves bubblewrap and
// the sandbox into the cgroup when they were not born in it (see launch),
// gives both the sandbox's oom_score_adj (setOOMScoreAdj), opens the low ports when the sandbox has egress, and tells the init to go
// on; in a one-command sandbox that starts as its command, it first sets
// the command's limits (capLimits). The init (or, in a one-command sandbox,
// bubblewrap before it becomes the command or prlimit, or the init's
// capped-exec shim) waits for that before it runs
// anything of the sandbox's, so every process that runs
// sandboxed code is in the cgroup from its first instruction; bubblewrap's
// setup and the init's own start overlap a move (which, on cgroup v1, waits
// for an RCU grace period).
func (r *Runtime) enter(ctx context.Context, b *sandboxState, p *launchPipes) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = p.info.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = p.info.SetReadDeadline(time.Now()) })
	defer stop()
	var st struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(p.info).Decode(&st); err != nil {
		return startError(ctx, b, fmt.Errorf("read bubblewrap info: %w", err))
	}
	if st.ChildPid <= 0 {
		return startError(ctx, b, fmt.Errorf("read bubblewrap info: no child pid"))
	}
	b.initPid = st.ChildPid
	if !b.bornInGroup {
		for _, pid := range []int{b.cmd.Process.Pid, st.ChildPid} {
			if err := b.group.Enter(pid); errors.Is(err, syscall.ESRCH) {
				// It died before it could be moved: its stderr says why.
				return startError(ctx, b, fmt.Errorf("enter cgroup: %w: %w", err, io.EOF))
			} else if err != nil {
				return fmt.Errorf("start sandbox: %w", err)
			}
		}
	}
	if err := setOOMScoreAdj(b.cmd.Process.Pid, st.ChildPid); errors.Is(err, syscall.ESRCH) {
		return startError(ctx, b, fmt.Errorf("start sandbox: %w: %w", err, io.EOF))
	} else if errors.Is(err, os.ErrPermission) {
		// A worker without CAP_DAC_OVERRIDE (a container's least
		// privilege) may not write another uid's oom_score_adj: its
		// sandboxes keep the default score.
		if r.oomUnset.CompareAndSwap(false, true) {
			r.log.Warn("cannot give sandboxes oom_score_adj 1000 (the worker needs CAP_DAC_OVERRIDE and CAP_SYS_RESOURCE): "+
				"under host memory pressure the kernel chooses among all processes by size alone", "err", err.Error())
		}
	} else if err != nil {
		return fmt.Errorf("start sandbox: %w", err)
	}
	if b.opts.Egress {
		if err := openLowPorts(st.ChildPid); err != nil {
			return err
		}
	}
	if b.direct != nil && b.direct.first == firstCommand {
		// The sandbox's pid 1 waits on the go-ahead pipe, as bubblewrap's
		// child, before it becomes the command (--as-pid-1).
		if err := capLimits(st.ChildPid, b.slot.uid, r.cfg.MaxOpenFiles); err != nil {
			return startError(ctx, b, err)
		}
	}
	if _, err := p.goAhead.Write([]byte{1}); err != nil {
		return fmt.Errorf("start sandbox: let the init go on: %w", err)
	}
	return nil
}

// launchPipes are the runtime's ends of the pipes to a starting sandbox.
type launchPipes struct {
	ready   *os.File // the init writes one byte when it accepts commands
	info    *os.File // bubblewrap's info: the sandbox's host pid
	goAhead *os.File // the init waits for a byte here (control.FDGo)
}

func (p *launchPipes) close() {
	for _, f := range []*os.File{p.ready, p.info, p.goAhead} {
		if f != nil {
			f.Close()
		}
	}
}

// newLaunchPipes makes the pipes to a starting sandbox: the seccomp
// program, bubblewrap's info pipe, the init's go pipe, bubblewrap's argument
// pipe and, unless direct,
// the init's ready and spec pipes. It returns the runtime's ends and the
// child's, in the order of their descriptors from 3. A content (seccomp,
// args, spec) that fits a pipe's buffer is written at once, a larger one by
// a goroutine, so that none is bounded by the buffer.
func newLaunchPipes(prog, args, spec []byte, direct bool) (*launchPipes, []*os.File, error) {
	p := &launchPipes{}
	var child []*os.File
	fail := func(err error) (*launchPipes, []*os.File, error) {
		p.close()
		for _, f := range child {
			f.Close()
		}
		return nil, nil, fmt.Errorf("start sandbox: %w", err)
	}
	pipes := []struct {
		keep    **os.File // the runtime's end, or nil for a content pipe
		parent  bool      // the runtime keeps the read end
		content []byte
	}{
		{content: prog}, {keep: &p.info, parent: true}, {keep: &p.goAhead}, {content: args},
		{keep: &p.ready, parent: true}, {content: spec},
	}
	if direct {
		pipes = pipes[:4]
	}
	for _, pair := range pipes {
		rd, wr, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		switch {
		case pair.keep == nil && len(pair.content) <= pipeBuffer:
			child = append(child, rd)
			_, err := wr.Write(pair.content) // fits the pipe: never blocks
			wr.Close()
			if err != nil {
				return fail(err)
			}
		case pair.keep == nil:
			child = append(child, rd)
			go func(w *os.File, data []byte) {
				_, _ = w.Write(data) // a sandbox that died early reads nothing: EPIPE
				w.Close()
			}(wr, pair.content)
		case pair.parent:
			*pair.keep = rd
			child = append(child, wr)
		default:
			*pair.keep = wr
			child = append(child, rd)
		}
	}
	return p, child, nil
}

// launch starts bubblewrap for b as the slot's uid and gid, with no
// supplementary groups, an empty environment, the parent-death signal and
// its options read from a pipe (so no secret is ever on a command line: the
// command line is `bwrap --args 6 -- COMMAND`).
// initFiles are passed on to the init from control.FDControl on.
func (r *Runtime) launch(b *sandboxState, initFiles []*os.File) (*launchPipes, error) {
	spec := r.bwrapSpec(b)
	var initSpecJSON []byte
	if b.direct == nil {
		var err error
		env := b.opts.Env
		if len(b.secretEnv) > 0 {
			env = maps.Clone(b.secretEnv)
			maps.Copy(env, b.opts.Env)
		}
		is := control.InitSpec{Env: env, Egress: b.opts.Egress, MaxOpenFiles: r.cfg.MaxOpenFiles}
		if b.opts.Image != nil {
			is.Cwd = b.opts.Image.WorkingDir
		}
		if initSpecJSON, err = json.Marshal(is); err != nil {
			return nil, fmt.Errorf("start sandbox: encode init spec: %w", err)
		}
	}
	options, command := Argv(spec)
	p, child, err := newLaunchPipes(r.seccomp, argsFile(options), initSpecJSON, b.direct != nil)
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
		Args:       append([]string{"bwrap", "--args", strconv.Itoa(fdArgs), "--"}, command...),
		Env:        []string{},
		Dir:        "/",
		Stderr:     b.stderr,
		ExtraFiles: append(child, initFiles...),
		SysProcAttr: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if d := b.direct; d != nil {
		b.cmd.Stdin, b.cmd.Stdout, b.cmd.Stderr = d.stdin, d.stdout, d.stderr
		b.cmd.WaitDelay = directWaitDelay
	}
	// Bubblewrap is born in the sandbox's cgroup, and so is everything it
	// starts: on v2 through CLONE_INTO_CGROUP, on v1 from a thread that
	// joined the cgroup first (see cgroup.Group.StartInside). Only when
	// neither can be done is it moved in once started (see enter).
	if dir, derr := b.group.OpenDir(); derr == nil {
		defer dir.Close()
		b.cmd.SysProcAttr.UseCgroupFD, b.cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
		b.bornInGroup = true
		err = b.cmd.Start()
	} else {
		err = b.group.StartInside(b.cmd.Start)
		b.bornInGroup = err == nil
		if errors.Is(err, cgroup.ErrUnavailable) {
			err = b.cmd.Start()
		}
	}
	if err != nil && b.cmd.Process != nil { // started, but its thread could not leave the cgroup
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
	}
	if err != nil && b.bornInGroup && errors.Is(err, syscall.ENOSYS) {
		// clone3 refused (a container's seccomp profile answers ENOSYS, an
		// old kernel has none): start it the old way and move it in.
		c, attr := b.cmd, *b.cmd.SysProcAttr
		attr.UseCgroupFD, attr.CgroupFD = false, 0
		b.cmd = &exec.Cmd{Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir, Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr,
			ExtraFiles: c.ExtraFiles, SysProcAttr: &attr, WaitDelay: c.WaitDelay}
		b.bornInGroup = false
		err = b.cmd.Start()
	}
	if err != nil {
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
func (r *Runtime) bwrapSpec(b *sandboxState) BwrapSpec {
	spec := BwrapSpec{
		EtcDir:      r.etcBind,
		EtcBinds:    r.etcBinds,
		UsrLinks:    r.links,
		WritableDir: filepath.Join(b.dir, boxFS),
		PtsDir:      filepath.Join(b.dir, boxPts),
		Hostname:    hostname,
		Env:         baseEnv(),
		SeccompFD:   fdSeccomp,
		InfoFD:      fdInfo,
		CABundle:    b.caBundle,
		ProcMask:    r.procMask,
		BootID:      filepath.Join(b.dir, boxBootID),
	}
	spec.InitBinary, spec.InitArgs = r.initBind, []string{control.InitMarker}
	if img := b.opts.Image; img != nil {
		spec.Root = filepath.Join(b.dir, boxFS, boxRoot)
		spec.UID, spec.GID = img.UID, img.GID
		spec.Env = imageEnv(img)
		if b.caBundle != "" {
			spec.CABundleAlso = imageCABundles(spec.Root)
		}
	}
	if b.direct == nil {
		return spec
	}
	maps.Copy(spec.Env, b.opts.Env)
	switch b.direct.first {
	case firstCommand:
		// The command itself, once the runtime set its limits (enter) and
		// bubblewrap lets it run.
		spec.Exec, spec.BlockFD = slices.Clone(b.direct.argv), control.FDGo
	case firstPrlimit:
		// prlimit caps the command's limits and becomes it, once bubblewrap
		// lets it run.
		spec.Exec, spec.BlockFD = capExecArgv(r.prlimit, r.cfg.MaxOpenFiles, b.direct.argv), control.FDGo
	default:
		// The init does, after the go-ahead byte.
		spec.InitArgs = append([]string{control.ExecMarker, strconv.Itoa(r.cfg.MaxOpenFiles), "--"}, b.direct.argv...)
	}
	return spec
}

// waitReady waits for the init's ready byte; EOF means the sandbox died
// while starting, and its stderr says why.
func waitReady(ctx context.Context, ready *os.File, b *sandboxState) error {
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
// died (what they wrote to stderr says why, and what on this host causes
// it: see hostcheck), or err.
func startError(ctx context.Context, b *sandboxState, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("start sandbox: %w", ctx.Err())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		<-b.exited
		msg := strings.TrimSpace(b.stderr.String())
		if msg == "" {
			msg = b.cmd.ProcessState.String()
		}
		if cause := (hostcheck.Host{Root: "/"}).Explain(msg); cause != "" {
			return fmt.Errorf("start sandbox: %s; bubblewrap said: %s", cause, msg)
		}
		return fmt.Errorf("start sandbox: %s", msg)
	}
	return fmt.Errorf("start sandbox: %w", err)
}

// openLowPorts lets the sandbox's unprivileged user bind ports below 1024
// in the sandbox's own network namespace (for the transparent egress
// listeners on 53, 80 and 443), so the init needs no capability at all. It
// writes the sysctl from a thread of its own (osthread.Run) that joins the
// namespace of pid and then returns to its own.
func openLowPorts(pid int) error {
	err := osthread.Run(func() (bool, error) {
		restored, err := setSysctlIn(pid, "/proc/sys/net/ipv4/ip_unprivileged_port_start", "0")
		if !restored {
			err = errors.Join(err, errors.New("could not return to the runtime's network namespace"))
		}
		return restored, err
	})
	if err != nil {
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
