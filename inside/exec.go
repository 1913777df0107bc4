package inside

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/sandbox/control"
)

// waitDelay bounds how long an exec waits for its output pipes after the
// command exited (a background child may hold them open).
const waitDelay = time.Second

// exec runs one command for the client: stdin from the client's data
// frames, stdout and stderr streamed back as they arrive. The command leads
// a session and process group of its own; on timeout, or when the client
// goes away, it and everything it started (see killTree) are killed.
func (s *initServer) exec(req control.Request, fr *control.Reader, fw *control.Writer) control.Done {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return control.Done{Code: control.CodeInvalid, Error: "empty argv"}
	}
	dir, err := workDir(req.Cwd)
	if err != nil {
		return control.Done{Code: control.CodeInvalid, Error: err.Error()}
	}
	env := s.commandEnv(req.Env)
	prog, err := lookPath(req.Argv[0], env)
	if err != nil {
		_ = fw.Frame(control.FrameStderr, []byte("sandbox: "+err.Error()+"\n"))
		_ = drain(fr, nil)
		return control.Done{ExitCode: exitCodeOf(err)}
	}
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        req.Argv,
		Env:         env,
		Dir:         dir,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	p, err := newCommandPipes(cmd)
	if err != nil {
		return control.Done{Code: control.CodeFailed, Error: err.Error()}
	}
	defer p.closeAll()
	status, err := s.reaper.start(cmd)
	p.closeChild()
	if err != nil {
		_ = fw.Frame(control.FrameStderr, []byte("sandbox: "+err.Error()+"\n"))
		_ = drain(fr, nil)
		return control.Done{ExitCode: exitCodeOf(err)}
	}
	k := &treeKiller{leader: cmd.Process.Pid}
	go func() {
		err := drain(fr, stdinWriter{p.stdin})
		_ = p.stdin.Close()
		if err == nil {
			_ = drain(fr, nil) // the client closes the connection to cancel
		}
		k.kill("deleted") // the client went away
	}()
	if req.Timeout > 0 {
		t := time.AfterFunc(time.Duration(req.Timeout), func() { k.kill("timeout") })
		defer t.Stop()
	}
	exited := make(chan struct{})
	output := make(chan struct{})
	go func() { p.copyOutput(fw, exited); close(output) }()
	ws := <-status
	close(exited)
	<-output
	done := control.Done{ExitCode: control.ExitCode(ws)}
	if k.finish() == "timeout" {
		done.Reason = "timeout"
	}
	return done
}

// treeKiller kills a command's tree once, and never after the command was
// waited for (its pid could then be another's).
type treeKiller struct {
	mu       sync.Mutex
	leader   int
	reason   string
	finished bool
}

func (k *treeKiller) kill(why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.finished {
		return
	}
	if k.reason == "" {
		k.reason = why
	}
	killTree("/proc", k.leader)
}

// finish marks the command waited for and returns why it was killed, if it
// was.
func (k *treeKiller) finish() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.finished = true
	return k.reason
}

// stdinWriter writes to a command's stdin and ignores a command that stopped
// reading (EPIPE), so the client's frames are still drained.
type stdinWriter struct{ w io.Writer }

func (s stdinWriter) Write(p []byte) (int, error) {
	_, _ = s.w.Write(p)
	return len(p), nil
}

// exitCodeOf maps a start failure to the shell's codes: 127 not found, 126
// not executable.
func exitCodeOf(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// workDir resolves an exec's working directory: empty is the workspace, a
// relative path is under it, an absolute path must be within it.
func workDir(cwd string) (string, error) {
	if cwd == "" {
		return control.Workspace, nil
	}
	rel, err := control.WorkspaceRel(cwd)
	if err != nil {
		return "", fmt.Errorf("cwd %q: %w", cwd, err)
	}
	return path.Join(control.Workspace, rel), nil
}

// lookPath finds a program like the shell would, in the command's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}
