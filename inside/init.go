package inside

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/inside/capexec"
	"openvibe.network/agentsandbox/sandbox/control"
)

// maxSpec bounds the init's spec (the environment is at most a few hundred
// KiB).
const maxSpec = 4 << 20

// initServer serves the control socket inside the sandbox.
type initServer struct {
	mu        sync.Mutex
	env       map[string]string // base environment of every command (under mu)
	workspace *os.File          // the workspace directory, for file operations
	reaper    *reaper
	procs     *table
	// proxy is the egress bridge's address ("" without egress), which the
	// browser is pointed at.
	proxy string
	// cwd is where a command without a working directory runs: the
	// workspace, or an image's working directory when it exists.
	cwd     string
	browser browserHost
	// isolation is the isolate step's mode for every command (see
	// runIsolated).
	isolation string
}

// Run is the init of a sandbox, run inside it as the sandbox user: it
// makes itself undumpable (so no process of the sandbox can read or write
// its memory or borrow its descriptors through /proc, even on a host
// without Yama), takes the signals a sandbox process could send it, reads
// its spec, caps its limits (which every process of the sandbox inherits),
// waits until the runtime has moved the sandbox into its cgroup, starts the
// egress bridge when the sandbox has egress
// (hooks.Bridge), signals readiness to the runtime and then serves exec and
// file requests on the control socket the runtime made (control.FDControl) until the
// sandbox is killed. It returns an exit code only when it cannot start.
func Run(hooks Hooks) int {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return capexec.Fail("make the init undumpable", err)
	}
	holdSignals()
	var spec control.InitSpec
	specFile := os.NewFile(control.FDSpec, "spec")
	err := json.NewDecoder(io.LimitReader(specFile, maxSpec)).Decode(&spec)
	specFile.Close()
	if err != nil {
		return capexec.Fail("read spec", err)
	}
	if err := capexec.CapSelf(spec.MaxOpenFiles); err != nil {
		return capexec.Fail("cap limits", err)
	}
	reserveThreads(spareThreads)
	if err := capexec.AwaitGo(); err != nil {
		return capexec.Fail("wait for the runtime", err)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	// No descriptor but the standard streams reaches a command: the init's
	// own (ready, control, egress, and whatever bubblewrap left open) are
	// marked close-on-exec.
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	// The init is pid 1: it reaps from the start (before the bridge, which
	// might start processes).
	rp := newReaper()
	ctx := context.Background()
	proxy := ""
	if spec.Egress {
		if hooks.Bridge == nil {
			return capexec.Fail("start egress bridge", errors.New("this program has no egress bridge"))
		}
		benv, err := hooks.Bridge(ctx, "/proc/self/fd/"+strconv.Itoa(control.FDEgress), true)
		if err != nil {
			return capexec.Fail("start egress bridge", err)
		}
		maps.Copy(env, benv)
		proxy = proxyOf(benv)
	}
	maps.Copy(env, spec.Env)
	ws, err := os.Open(control.Workspace)
	if err != nil {
		return capexec.Fail("open workspace", err)
	}
	ctlFile := os.NewFile(control.FDControl, "control")
	ln, err := net.FileListener(ctlFile)
	ctlFile.Close() // FileListener holds its own copy
	if err != nil {
		return capexec.Fail("control socket", err)
	}
	ready := os.NewFile(control.FDReady, "ready")
	if _, err := ready.Write([]byte{'R'}); err != nil {
		return capexec.Fail("signal ready", err)
	}
	_ = ready.Close()
	cwd := control.Workspace
	if fi, err := os.Stat(spec.Cwd); spec.Cwd != "" && err == nil && fi.IsDir() {
		cwd = spec.Cwd
	}
	s := &initServer{env: env, workspace: ws, reaper: rp, procs: newTable(), proxy: proxy, cwd: cwd,
		isolation: isolationMode()}
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return capexec.Fail("accept", err)
			}
			time.Sleep(acceptPause) // out of descriptors: the runtime retries
			continue
		}
		go s.serve(c)
	}
}

// acceptPause is how long the init waits after a failed accept.
const acceptPause = 10 * time.Millisecond

// holdSignals installs a handler for every signal that would end the init
// by default, and drops what arrives: the init is the sandbox's pid 1, so
// only signals it handles reach it from inside, and a process of the
// sandbox must not end it (and with it every running command) by sending
// one. Handlers, unlike ignored signals, are not inherited by the commands
// the init starts.
func holdSignals() {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGVTALRM, syscall.SIGXCPU,
		syscall.SIGXFSZ, syscall.SIGPWR, syscall.SIGIO, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for range ch {
		}
	}()
}

// handler runs one operation: req, then the client's frames on fr; it
// writes its own frames on fw and returns the done frame.
type handler func(req control.Request, fr *control.Reader, fw *control.Writer) control.Done

// handlers maps each operation to its handler.
func (s *initServer) handlers() map[string]handler {
	return map[string]handler{
		control.OpPing:      func(control.Request, *control.Reader, *control.Writer) control.Done { return control.Done{} },
		control.OpConfigure: s.configure,
		control.OpExec:      s.exec,
		control.OpStart:     s.start,
		control.OpProcesses: s.processes,
		control.OpProcess:   s.process,
		control.OpOutput:    s.output,
		control.OpSignal:    s.signal,
		control.OpStdin:     s.stdin,
		control.OpAttach:    s.attach,
		control.OpPut:       func(req control.Request, fr *control.Reader, _ *control.Writer) control.Done { return s.put(req, fr) },
		control.OpGet:       func(req control.Request, _ *control.Reader, fw *control.Writer) control.Done { return s.get(req, fw) },
		control.OpList:      s.list,
		control.OpRemove:    s.remove,
		control.OpMkdir:     s.mkdir,
		control.OpTarGet:    s.tarGet,
		control.OpTarPut:    s.tarPut,

		control.OpBrowserStart: s.browserStart,
		control.OpBrowser:      s.browserConnect,
	}
}

// configure adds to the environment of every later command.
func (s *initServer) configure(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	s.mu.Lock()
	maps.Copy(s.env, req.Env)
	s.mu.Unlock()
	return control.Done{}
}

// serve runs one operation on c.
func (s *initServer) serve(c net.Conn) {
	defer c.Close()
	fr := control.NewReader(c)
	fw := control.NewWriter(c)
	kind, p, err := fr.Next()
	if err != nil || kind != control.FrameRequest {
		return
	}
	var req control.Request
	if err := json.Unmarshal(p, &req); err != nil {
		_ = fw.JSON(control.FrameDone, control.Done{Code: control.CodeInvalid, Error: "bad request"})
		return
	}
	if req.Op == control.OpPort { // a splice, not frames: see control.OpPort
		s.port(c, req, fr, fw)
		return
	}
	if uc, ok := c.(*net.UnixConn); ok && (req.Op == control.OpGetFD || req.Op == control.OpPutFD) {
		_ = fw.JSON(control.FrameDone, s.fileFD(uc, req, fr)) // a descriptor, then frames: see control.OpGetFD
		return
	}
	handle, ok := s.handlers()[req.Op]
	done := control.Done{Code: control.CodeInvalid, Error: "unknown operation " + req.Op}
	if ok {
		done = handle(req, fr, fw)
	}
	_ = fw.JSON(control.FrameDone, done)
}

// commandEnv returns the environment of a command: the base environment
// with the request's variables on top, sorted.
func (s *initServer) commandEnv(extra map[string]string) []string {
	s.mu.Lock()
	env := maps.Clone(s.env)
	s.mu.Unlock()
	maps.Copy(env, extra)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// drain reads the client's frames until its end frame or until the
// connection ends, passing data to w (nil: discard). It returns io.EOF when
// the client went away before its end frame.
func drain(fr *control.Reader, w io.Writer) error {
	for {
		kind, p, err := fr.Next()
		if err != nil {
			return io.EOF
		}
		switch kind {
		case control.FrameEnd:
			return nil
		case control.FrameData:
			if w != nil {
				if _, err := w.Write(p); err != nil {
					return err
				}
			}
		}
	}
}

// spareThreads is how many OS threads the init has the Go runtime start
// before any sandboxed code runs, beyond those it runs on, for it to take
// later instead of starting one.
const spareThreads = 3

// reserveThreads makes the Go runtime start, or find idle, n threads at
// once and keep them idle. Threads count against the sandbox's pids limit,
// which its code can hold whole (a fork loop); a thread the runtime cannot
// start then is a fatal error that would end the init, and with it the
// sandbox, so the runtime should not need to start one after the start.
func reserveThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread() // a thread of its own while it waits
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread() // back among the idle threads
		}()
	}
	locked.Wait()
	release.Done()
}
