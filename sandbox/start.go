package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/cgroup"
)

// File descriptors of the launcher and bubblewrap (ExtraFiles from 3 on).
const (
	fdSeccomp = 3
	fdReady   = 4
	fdInfo    = 5
	fdBlock   = 6
)

// baseEnv is the environment of the init and so of every command, before the
// egress variables, Options.Env and the request's env.
var baseEnv = map[string]string{
	"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME": Workspace,
	"LANG": "C.UTF-8",
	"TERM": "dumb",
	"USER": "sandbox",
}

// start makes b's cgroup and control directory, attaches egress, starts the
// launcher (which enters the cgroup, drops to the slot uid and execs
// bubblewrap) and waits until the init is ready.
func (r *Runtime) start(ctx context.Context, b *box) error {
	o := b.opts
	t0 := time.Now()
	defer func() { fmt.Fprintf(os.Stderr, "TIMING total %v\n", time.Since(t0)) }()
	if err := mkControlDir(b.dir, b.slot.uid); err != nil {
		return err
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
	fmt.Fprintf(os.Stderr, "TIMING cgroup %v\n", time.Since(t0))
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
	fmt.Fprintf(os.Stderr, "TIMING launched %v\n", time.Since(t0))
	if o.Egress {
		if err := openLowPorts(ctx, p.info); err != nil {
			return err
		}
		if _, err := p.block.Write([]byte{1}); err != nil {
			return fmt.Errorf("start sandbox: release: %w", err)
		}
	}
	return waitReady(ctx, p.ready, b)
}

// launchPipes are the runtime's ends of the pipes to a starting sandbox.
type launchPipes struct {
	ready *os.File // the init writes one byte when it accepts commands
	info  *os.File // bubblewrap's info (egress only)
	block *os.File // bubblewrap waits for a byte here (egress only)
}

func (p *launchPipes) close() {
	for _, f := range []*os.File{p.ready, p.info, p.block} {
		if f != nil {
			f.Close()
		}
	}
}

// launch starts the launcher for b with a clean environment.
func (r *Runtime) launch(b *box) (*launchPipes, error) {
	var p launchPipes
	var child []*os.File
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	pipe := func() (*os.File, *os.File, error) {
		rd, wr, err := os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("start sandbox: %w", err)
		}
		return rd, wr, nil
	}
	secR, secW, err := pipe()
	if err != nil {
		return nil, err
	}
	child = append(child, secR)
	// The program is a few KiB, well within a pipe's buffer.
	_, err = secW.Write(r.seccomp)
	secW.Close()
	if err != nil {
		return nil, fmt.Errorf("start sandbox: seccomp: %w", err)
	}
	readyR, readyW, err := pipe()
	if err != nil {
		return nil, err
	}
	p.ready = readyR
	child = append(child, readyW)
	spec := r.bwrapSpec(b)
	if b.opts.Egress {
		infoR, infoW, err := pipe()
		if err != nil {
			p.close()
			return nil, err
		}
		blockR, blockW, err := pipe()
		if err != nil {
			infoR.Close()
			infoW.Close()
			p.close()
			return nil, err
		}
		p.info, p.block = infoR, blockW
		child = append(child, infoW, blockR)
		spec.InfoFD, spec.BlockFD = fdInfo, fdBlock
	}
	ls := launchSpec{
		ProcsFiles: b.group.ProcsFiles(), UID: b.slot.uid, GID: b.slot.uid,
		PPID: os.Getpid(), Bwrap: r.cfg.Bwrap, Args: Argv(spec),
	}
	arg, err := json.Marshal(ls)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	b.stderr = &tailBuffer{}
	b.cmd = &exec.Cmd{
		Path:       r.init,
		Args:       []string{"codes-sandbox", launchMarker, string(arg)},
		Env:        []string{},
		Dir:        "/",
		Stderr:     b.stderr,
		ExtraFiles: child,
	}
	if err := b.cmd.Start(); err != nil {
		p.close()
		return nil, fmt.Errorf("start sandbox: launcher: %w", err)
	}
	go func() {
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	return &p, nil
}

// bwrapSpec resolves b's options into the bubblewrap spec.
func (r *Runtime) bwrapSpec(b *box) BwrapSpec {
	init, _ := json.Marshal(initSpec{Env: b.opts.Env, Egress: b.opts.Egress, ReadyFD: fdReady})
	return BwrapSpec{
		InitBinary:   r.init,
		InitArgs:     []string{initMarker, string(init)},
		ControlDir:   b.dir,
		EtcDir:       r.etcDir,
		EtcGenerated: etcGenerated,
		EtcHost:      etcHostFiles,
		UsrLinks:     r.links,
		DiskBytes:    int64(b.opts.Limits.DiskMB) << 20,
		TmpBytes:     min(tmpBytes, int64(b.opts.Limits.DiskMB)<<20),
		Hostname:     hostname,
		Env:          baseEnv,
		SeccompFD:    fdSeccomp,
	}
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
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		<-b.exited
		msg := strings.TrimSpace(b.stderr.String())
		if msg == "" {
			msg = b.cmd.ProcessState.String()
		}
		return fmt.Errorf("start sandbox: %s", msg)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("start sandbox: %w", ctx.Err())
	}
	return fmt.Errorf("start sandbox: wait for init: %w", err)
}

// openLowPorts lets the sandbox's unprivileged user bind ports below 1024
// in the sandbox's own network namespace (for the transparent egress
// listeners on 53, 80 and 443), so the init needs no capability at all. It
// reads the sandbox's pid from bubblewrap's info and writes the sysctl from
// a thread that joined that namespace (and is then discarded).
func openLowPorts(ctx context.Context, info *os.File) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = info.SetReadDeadline(dl)
	}
	var st struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(info).Decode(&st); err != nil || st.ChildPid <= 0 {
		return fmt.Errorf("start sandbox: read bubblewrap info: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, so no other
		// code runs in the sandbox's network namespace.
		runtime.LockOSThread()
		errc <- setSysctlIn(st.ChildPid, "/proc/sys/net/ipv4/ip_unprivileged_port_start", "0")
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("start sandbox: open low ports: %w", err)
	}
	return nil
}

// setSysctlIn joins pid's network namespace on the calling (locked) thread
// and writes a network sysctl there.
func setSysctlIn(pid int, file, value string) error {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(value), 0)
}
