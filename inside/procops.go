package inside

import (
	"encoding/json"
	"fmt"
	"syscall"

	"openvibe.network/agentsandbox/sandbox/control"
)

// The operations on the process table beyond a foreground exec. A
// background process runs until it exits, is signalled, or the sandbox
// ends; its output waits in its ring for readers.

// signalByName is a signal a client may send, by name.
func signalByName(name string) (syscall.Signal, bool) {
	sig, ok := map[string]syscall.Signal{
		"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
		"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
		"STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "WINCH": syscall.SIGWINCH,
	}[name]
	return sig, ok
}

// start starts a command in the background and answers its record.
func (s *initServer) start(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return control.Done{Code: control.CodeInvalid, Error: "empty argv"}
	}
	if done, ok := s.checkCwd(req.Cwd); !ok {
		return done
	}
	p, code, err := s.startProcess(req, true)
	if err != nil {
		return control.Done{Code: control.CodeInvalid, ExitCode: code, Error: "cannot start " + req.Argv[0] + ": " + err.Error()}
	}
	return withData(p.state())
}

// processes answers the table.
func (s *initServer) processes(control.Request, *control.Reader, *control.Writer) control.Done {
	return withData(s.procs.list())
}

// process answers one process's record.
func (s *initServer) process(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	p, done, ok := s.lookup(req.Pid)
	if !ok {
		return done
	}
	return withData(p.state())
}

// output writes a process's output from what its ring holds, and with
// Follow on until it ends, then answers its record.
func (s *initServer) output(req control.Request, _ *control.Reader, fw *control.Writer) control.Done {
	p, done, ok := s.lookup(req.Pid)
	if !ok {
		return done
	}
	follow(p, fw, 0, req.Follow, false)
	return withData(p.state())
}

// signal sends a signal to a running process's group (the command and the
// children that stayed in its group).
func (s *initServer) signal(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	p, done, ok := s.lookup(req.Pid)
	if !ok {
		return done
	}
	sig, known := signalByName(req.Signal)
	if !known {
		return control.Done{Code: control.CodeInvalid, Error: fmt.Sprintf("signal %q: give one of TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT, WINCH", req.Signal)}
	}
	st := p.state()
	if !st.Running {
		return exited(st)
	}
	if err := syscall.Kill(-st.Pid, sig); err != nil {
		return control.Done{Code: control.CodeFailed, Error: err.Error()}
	}
	return control.Done{}
}

// stdin writes the client's data frames to a process's stdin, and closes
// it after them when asked.
func (s *initServer) stdin(req control.Request, fr *control.Reader, _ *control.Writer) control.Done {
	p, done, ok := s.lookup(req.Pid)
	if !ok {
		_ = drain(fr, nil)
		return done
	}
	if st := p.state(); !st.Running {
		_ = drain(fr, nil)
		return exited(st)
	}
	if err := drainInput(fr, p); err != nil {
		return control.Done{Code: control.CodeFailed, Error: "the client went away before the end of stdin"}
	}
	if req.Close {
		p.closeStdin()
	}
	return control.Done{}
}

// attach joins the client to a process: its frames (stdin, resizes) in,
// the output from what the ring holds out, until the process ends (then the
// record is answered) or the client goes away (the process runs on).
func (s *initServer) attach(req control.Request, fr *control.Reader, fw *control.Writer) control.Done {
	p, done, ok := s.lookup(req.Pid)
	if !ok {
		return done
	}
	go func() { _ = drainInput(fr, p) }()
	follow(p, fw, 0, true, false)
	return withData(p.state())
}

// exited is the answer to a signal or stdin for a process that has exited:
// the same for both.
func exited(st control.Process) control.Done {
	return control.Done{Code: control.CodeExited, Error: fmt.Sprintf("process %d has exited with code %d", st.Pid, st.ExitCode)}
}

// lookup finds a process of the table, or the answer that it is not there.
func (s *initServer) lookup(pid int) (*process, control.Done, bool) {
	p, ok := s.procs.get(pid)
	if !ok {
		return nil, control.Done{Code: control.CodeNoProcess, Error: fmt.Sprintf("no process %d in this sandbox", pid)}, false
	}
	return p, control.Done{}, true
}

// withData is a done frame carrying v as its result.
func withData(v any) control.Done {
	b, err := json.Marshal(v)
	if err != nil {
		return control.Done{Code: control.CodeFailed, Error: "encode result: " + err.Error()}
	}
	return control.Done{Data: b}
}
