package inside

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"sync"
	"time"

	"openvibe.network/agentsandbox/sandbox/control"
)

// waitDelay bounds how long an exec waits for its output pipes after the
// command exited (a background child may hold them open).
const waitDelay = time.Second

// exec runs one command for the client in the foreground: stdin from the
// client's data frames (resize frames for a terminal), stdout and stderr
// streamed back as they arrive. The command leads a session and process
// group of its own; on timeout, or when the client goes away, it and
// everything it started (see killTree) are killed.
func (s *initServer) exec(req control.Request, fr *control.Reader, fw *control.Writer) control.Done {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return control.Done{Code: control.CodeInvalid, Error: "empty argv"}
	}
	if done, ok := s.checkCwd(req.Cwd); !ok {
		_ = drain(fr, nil)
		return done
	}
	p, code, err := s.startProcess(req, false)
	if err != nil {
		_ = fw.Frame(control.FrameStderr, []byte("sandbox: "+err.Error()+"\n"))
		_ = drain(fr, nil)
		return control.Done{ExitCode: code}
	}
	if fw.Frame(control.FrameStarted, []byte(strconv.Itoa(p.info.Pid))) != nil {
		p.killer.kill("deleted")
	}
	go func() {
		err := drainInput(fr, p)
		p.closeStdin()
		if err == nil {
			_ = drain(fr, nil) // the client closes the connection to cancel
		}
		p.killer.kill("deleted") // the client went away
	}()
	if req.Timeout > 0 {
		t := time.AfterFunc(time.Duration(req.Timeout), func() { p.killer.kill("timeout") })
		defer t.Stop()
	}
	follow(p, fw, 0, true, true)
	<-p.done
	st := p.state()
	done := control.Done{ExitCode: st.ExitCode}
	if st.Reason == "timeout" {
		done.Reason = "timeout"
	}
	return done
}

// checkCwd answers a request whose working directory does not exist with
// the code that says so (not blamed on the command).
func (s *initServer) checkCwd(cwd string) (control.Done, bool) {
	dir, err := s.workDir(cwd)
	if err != nil {
		return control.Done{Code: control.CodePath, Error: err.Error()}, false
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return control.Done{Code: control.CodeNotExist, Error: fmt.Sprintf("cwd %q does not exist in the workspace", cwd)}, false
	case !fi.IsDir():
		return control.Done{Code: control.CodeNotDir, Error: fmt.Sprintf("cwd %q is not a directory", cwd)}, false
	}
	return control.Done{}, true
}

// drainInput passes the client's frames to p until the client's end frame
// (nil) or its going away (io.EOF): data to stdin, resizes to the terminal.
func drainInput(fr *control.Reader, p *process) error {
	for {
		kind, b, err := fr.Next()
		if err != nil {
			return io.EOF
		}
		switch kind {
		case control.FrameEnd:
			return nil
		case control.FrameData:
			p.writeStdin(b)
		case control.FrameResize:
			var size control.Resize
			if json.Unmarshal(b, &size) == nil {
				_ = p.resize(size)
			}
		}
	}
}

// follow writes p's output from offset off to fw as frames (with a dropped
// frame where the follower missed output), then, when wait, everything
// written until the output ends. It returns the offset after what it wrote,
// or early when a write to the client fails. The holder of p's ring (the
// caller of a foreground exec) follows with hold: it tells the ring what it
// took, and releases it when it returns.
func follow(p *process, fw *control.Writer, off int64, wait, hold bool) int64 {
	if hold {
		defer p.out.release()
	}
	for {
		chunks, missed, next, ended, changed := p.out.readFrom(off)
		if missed > 0 {
			if fw.Frame(control.FrameDropped, []byte(strconv.FormatInt(missed, 10))) != nil {
				return next
			}
		}
		for _, c := range chunks {
			if fw.Frame(c.stream, c.data) != nil {
				return next
			}
		}
		off = next
		if hold {
			p.out.took(off)
		}
		if ended || !wait {
			return off
		}
		<-changed
	}
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

// workDir resolves an exec's working directory: empty is the workspace, a
// relative path is under it, an absolute path must be within it.
func (s *initServer) workDir(cwd string) (string, error) {
	if cwd == "" {
		return s.cwd, nil
	}
	rel, err := control.WorkspaceRel(cwd)
	if err != nil {
		return "", fmt.Errorf("cwd %q: %w", cwd, err)
	}
	return path.Join(control.Workspace, rel), nil
}
