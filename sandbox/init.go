package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// initSpec is the init's argument.
type initSpec struct {
	// Env is the sandbox's Options.Env, added to every command.
	Env map[string]string `json:"env,omitempty"`
	// Egress makes the init run the bridge before its first command.
	Egress bool `json:"egress,omitempty"`
	// ReadyFD is the inherited pipe the init writes one byte to, and closes,
	// once it accepts commands.
	ReadyFD int `json:"ready_fd"`
}

// initServer serves the control socket inside the sandbox.
type initServer struct {
	env       map[string]string // base environment of every command
	workspace *os.File          // the workspace directory, for file operations
	reaper    *reaper
}

// RunInit is the init of a sandbox, run inside it as the sandbox user: it
// starts the egress bridge when the sandbox has egress (hooks.Bridge), listens
// on the control socket, signals readiness to the runtime and then serves
// exec and file requests until the sandbox is killed. arg is the JSON
// initSpec. It returns an exit code only when it cannot start.
func RunInit(arg string, hooks InitHooks) int {
	var spec initSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		return initFail("decode spec", err)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	// No descriptor but the standard streams reaches a command (the ready
	// pipe is written below through its own handle).
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	// The init is pid 1: it reaps from the start (before the bridge, which
	// might start processes).
	rp := newReaper()
	ctx := context.Background()
	if spec.Egress {
		if hooks.Bridge == nil {
			return initFail("start egress bridge", errors.New("this program has no egress bridge"))
		}
		benv, err := hooks.Bridge(ctx, EgressSocket, true)
		if err != nil {
			return initFail("start egress bridge", err)
		}
		maps.Copy(env, benv)
	}
	maps.Copy(env, spec.Env)
	ws, err := os.Open(Workspace)
	if err != nil {
		return initFail("open workspace", err)
	}
	_ = os.Remove(controlSocket)
	ln, err := net.Listen("unix", controlSocket)
	if err != nil {
		return initFail("listen", err)
	}
	ready := os.NewFile(uintptr(spec.ReadyFD), "ready")
	if _, err := ready.Write([]byte{'R'}); err != nil {
		return initFail("signal ready", err)
	}
	_ = ready.Close()
	s := &initServer{env: env, workspace: ws, reaper: rp}
	for {
		c, err := ln.Accept()
		if err != nil {
			return initFail("accept", err)
		}
		go s.serve(c)
	}
}

func initFail(op string, err error) int {
	fmt.Fprintf(os.Stderr, "sandbox init: %s: %v\n", op, err)
	return 126
}

// serve runs one operation on c.
func (s *initServer) serve(c net.Conn) {
	defer c.Close()
	fr := newFrameReader(c)
	fw := &frameWriter{w: c}
	kind, p, err := fr.next()
	if err != nil || kind != frameRequest {
		return
	}
	var req controlRequest
	if err := json.Unmarshal(p, &req); err != nil {
		_ = fw.json(frameDone, controlDone{Code: codeInvalid, Error: "bad request"})
		return
	}
	var done controlDone
	switch req.Op {
	case opPing:
	case opExec:
		done = s.exec(req, fr, fw)
	case opPut:
		done = s.put(req, fr)
	case opGet:
		done = s.get(req, fw)
	default:
		done = controlDone{Code: codeInvalid, Error: "unknown operation " + req.Op}
	}
	_ = fw.json(frameDone, done)
}

// commandEnv returns the environment of a command: the base environment
// with the request's variables on top, sorted.
func (s *initServer) commandEnv(extra map[string]string) []string {
	env := maps.Clone(s.env)
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
func drain(fr *frameReader, w io.Writer) error {
	for {
		kind, p, err := fr.next()
		if err != nil {
			return io.EOF
		}
		switch kind {
		case frameEnd:
			return nil
		case frameData:
			if w != nil {
				if _, err := w.Write(p); err != nil {
					return err
				}
			}
		}
	}
}
