package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
)

// Bounds of what a tool hands back to the model.
const (
	defaultMaxOutput = 32 << 10
	maxMaxOutput     = 1 << 20
	maxFileBytes     = 1 << 20
	maxArchiveBytes  = 8 << 20
)

// CreateInput is create_sandbox's input.
type CreateInput struct {
	TimeBoxMinutes int      `json:"time_box_minutes,omitempty" jsonschema:"how long the sandbox lives, 5 to 30 minutes (default 5); it is wiped at the end"`
	MemoryMB       int      `json:"memory_mb,omitempty" jsonschema:"memory limit in MB (default: the worker's)"`
	DiskMB         int      `json:"disk_mb,omitempty" jsonschema:"writable space in MB (default: the worker's)"`
	Pids           int      `json:"pids,omitempty" jsonschema:"most tasks (default: the worker's)"`
	CPUPercent     int      `json:"cpu_percent,omitempty" jsonschema:"percent of one core (default: the worker's)"`
	Egress         string   `json:"egress,omitempty" jsonschema:"network access: none, public (any public host on ports 80/443; the default) or allow (only the hosts in allow)"`
	Allow          []string `json:"allow,omitempty" jsonschema:"with egress allow: the host names it may reach, e.g. pypi.org or *.pythonhosted.org"`
	Browser        bool     `json:"browser,omitempty" jsonschema:"give it a headless Chromium for browser_navigate, browser_screenshot and browser_page_text (needs memory_mb >= 512)"`
	Image          string   `json:"image,omitempty" jsonschema:"an OCI or Docker image to run on instead of the default Debian root, e.g. registry.example/team/py:3.12 or python:3.12 (Docker Hub), from a registry the worker allows; pulled first when the worker does not hold it; not with browser"`
}

// SandboxOutput describes a sandbox.
type SandboxOutput struct {
	SandboxID      string                    `json:"sandbox_id"`
	ExpiresAt      time.Time                 `json:"expires_at"`
	TimeBoxMinutes int                       `json:"time_box_minutes"`
	Limits         client.Limits             `json:"limits"`
	Egress         agentsandbox.EgressPolicy `json:"egress"`
	Browser        bool                      `json:"browser"`
	Image          string                    `json:"image,omitempty" jsonschema:"the image it runs on, as asked (absent: the default Debian root)"`
	ImageDigest    string                    `json:"image_digest,omitempty" jsonschema:"the digest of that image's manifest"`
}

func sandboxOutput(in client.SandboxInfo) SandboxOutput {
	return SandboxOutput{SandboxID: in.ID, ExpiresAt: in.ExpiresAt, TimeBoxMinutes: in.Limits.TimeBoxMinutes,
		Limits: in.Limits, Egress: in.Egress, Browser: in.Browser, Image: in.Image, ImageDigest: in.ImageDigest}
}

// SandboxInput names a sandbox.
type SandboxInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, as create_sandbox answered it"`
}

// RunInput is run_command's input.
type RunInput struct {
	SandboxID      string            `json:"sandbox_id" jsonschema:"the sandbox, as create_sandbox answered it"`
	Command        string            `json:"command,omitempty" jsonschema:"a shell command line, run by sh -c (give this or argv)"`
	Argv           []string          `json:"argv,omitempty" jsonschema:"the program and its arguments, run without a shell (give this or command)"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory relative to /workspace (default /workspace)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables for this command"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text for the command's standard input"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"end the command after this many seconds (default: the sandbox's time box)"`
	MaxOutputBytes int               `json:"max_output_bytes,omitempty" jsonschema:"most bytes of stdout and of stderr to hand back, its start and end kept (default 32768, at most 1048576)"`
}

// RunOutput is how a command ended and its (bounded) output.
type RunOutput struct {
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason,omitempty" jsonschema:"the limit that ended it: timeout, time_box, memory, pids or deleted"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Cut says how many bytes of each stream were left out of the middle.
	StdoutCut int64 `json:"stdout_cut_bytes,omitempty"`
	StderrCut int64 `json:"stderr_cut_bytes,omitempty"`
}

// StartInput is start_process's input.
type StartInput struct {
	SandboxID string            `json:"sandbox_id" jsonschema:"the sandbox, as create_sandbox answered it"`
	Command   string            `json:"command,omitempty" jsonschema:"a shell command line, run by sh -c (give this or argv)"`
	Argv      []string          `json:"argv,omitempty" jsonschema:"the program and its arguments (give this or command)"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"working directory relative to /workspace"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"environment variables for this command"`
}

// ProcessOutput is a background process's state.
type ProcessOutput struct {
	Pid      int    `json:"pid"`
	State    string `json:"state" jsonschema:"running or exited"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ReadOutputInput is read_output's input.
type ReadOutputInput struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"the sandbox"`
	Pid            int    `json:"pid" jsonschema:"the process, as start_process answered it"`
	MaxOutputBytes int    `json:"max_output_bytes,omitempty" jsonschema:"most bytes of each stream to hand back (default 32768)"`
}

// ReadOutputOutput is what a background process wrote so far, and its state.
type ReadOutputOutput struct {
	ProcessOutput
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	StdoutCut int64  `json:"stdout_cut_bytes,omitempty"`
	StderrCut int64  `json:"stderr_cut_bytes,omitempty"`
}

// WriteFileInput is write_file's input.
type WriteFileInput struct {
	SandboxID     string `json:"sandbox_id" jsonschema:"the sandbox"`
	Path          string `json:"path" jsonschema:"path relative to /workspace; parent directories are made"`
	Content       string `json:"content,omitempty" jsonschema:"the file's text"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's bytes in base64, instead of content"`
}

// PathInput names a path of a sandbox.
type PathInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox"`
	Path      string `json:"path,omitempty" jsonschema:"path relative to /workspace (empty: /workspace itself)"`
}

// FileOutput is a file's content.
type FileOutput struct {
	Path          string `json:"path"`
	Content       string `json:"content,omitempty"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"set instead of content when the file is not UTF-8 text"`
	Size          int    `json:"size"`
}

// ListOutput is a directory's entries.
type ListOutput struct {
	Entries []Entry `json:"entries"`
}

// Entry is one directory entry.
type Entry struct {
	Name string `json:"name"`
	Type string `json:"type" jsonschema:"file, directory, symlink or other"`
	Size int64  `json:"size"`
}

// ArchiveInput is upload_archive's input.
type ArchiveInput struct {
	SandboxID     string `json:"sandbox_id" jsonschema:"the sandbox"`
	Path          string `json:"path,omitempty" jsonschema:"directory relative to /workspace to unpack into (empty: /workspace)"`
	ArchiveBase64 string `json:"archive_base64" jsonschema:"a tar or gzipped tar, in base64"`
}

// ArchiveOutput is a downloaded tree.
type ArchiveOutput struct {
	ArchiveBase64 string `json:"archive_base64" jsonschema:"a tar of the directory's tree, in base64"`
	Size          int    `json:"size"`
}

// ExtendInput is extend_sandbox's input.
type ExtendInput struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"the sandbox"`
	TimeBoxMinutes int    `json:"time_box_minutes" jsonschema:"the new time box, 5 to 30 minutes counted from the sandbox's start"`
}

// DeleteOutput is a wipe's report.
type DeleteOutput struct {
	Verified   bool    `json:"verified" jsonschema:"every process, mount and file of the sandbox is gone, and the worker checked"`
	DurationMS float64 `json:"duration_ms"`
}

// Done is the output of a tool that has nothing more to say.
type Done struct {
	OK bool `json:"ok"`
}

// tool registers a typed tool whose handler gets the calling session.
func tool[In, Out any](s *Server, name, desc string, h func(ctx context.Context, ss *mcp.ServerSession, in In) (Out, error)) {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: desc}, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		out, err := h(ctx, req.Session, in)
		return nil, out, err
	})
}

func (s *Server) addTools() {
	tool(s, "create_sandbox", "Create an isolated Linux sandbox (Debian's /usr, or the container image you name, a writable /workspace, "+
		"no host files or credentials) with a time box, limits and network access of your choice. Answers its sandbox_id; every other tool takes it. "+
		"It belongs to this session and is wiped when the session ends.", s.create)
	tool(s, "run_command", "Run a command in a sandbox to its end and answer its exit code, stdout and stderr. "+
		"Output over max_output_bytes is cut in the middle (start and end kept) and the answer says how much was left out. "+
		"A non-zero exit is an answer, not an error.", s.run)
	tool(s, "start_process", "Start a command in the background (a server, a watcher); it runs on until it exits or the sandbox ends. "+
		"Answers its pid for read_output.", s.start)
	tool(s, "read_output", "What a background process wrote so far (its buffer keeps the last 1 MiB), and whether it exited.", s.readOutput)
	tool(s, "write_file", "Write a file in the sandbox's workspace (parent directories are made).", s.writeFile)
	tool(s, "read_file", "Read a file of the sandbox's workspace (at most 1 MiB).", s.readFile)
	tool(s, "list_files", "List a directory of the sandbox's workspace.", s.listFiles)
	tool(s, "upload_archive", "Unpack a tar (or gzipped tar), given in base64, into a directory of the workspace; all or nothing.", s.uploadArchive)
	tool(s, "download_archive", "A tar of a directory of the workspace, in base64 (at most 8 MiB).", s.downloadArchive)
	tool(s, "extend_sandbox", "Give a sandbox a longer time box (5 to 30 minutes from its start).", s.extend)
	tool(s, "delete_sandbox", "Delete a sandbox now: every process is ended and everything it held is wiped and verified gone.", s.delete)
	tool(s, "preview_port", "A URL that opens a server the sandbox runs on 127.0.0.1:port (start it with start_process) in a person's "+
		"browser, on an origin of its own, for ttl_seconds; give it to the user to see a web app you built. The URL carries a token: "+
		"whoever has it sees that port until it expires or the sandbox ends.", s.previewPort)
	s.addBrowserTools()
}

func (s *Server) create(ctx context.Context, ss *mcp.ServerSession, in CreateInput) (SandboxOutput, error) {
	opts := client.CreateOptions{TimeBoxMinutes: in.TimeBoxMinutes, Browser: in.Browser, Image: in.Image,
		Limits: client.RequestLimits{MemoryMB: in.MemoryMB, DiskMB: in.DiskMB, Pids: in.Pids, CPUPercent: in.CPUPercent}}
	if in.Egress != "" || len(in.Allow) > 0 {
		mode := in.Egress
		if mode == "" {
			mode = agentsandbox.EgressAllow
		}
		opts.Egress = &agentsandbox.EgressPolicy{Mode: mode, Allow: agentsandbox.EgressHosts(in.Allow...)}
	}
	info, err := s.cfg.Worker.Create(ctx, opts)
	if err != nil {
		return SandboxOutput{}, err
	}
	if err := s.own(ss, info.ID); err != nil {
		_, _ = s.cfg.Worker.Delete(context.WithoutCancel(ctx), info.ID)
		return SandboxOutput{}, err
	}
	return sandboxOutput(info), nil
}

// argvOf is a tool's command: argv, or command run by sh -c.
func argvOf(command string, argv []string) ([]string, error) {
	switch {
	case command != "" && len(argv) > 0:
		return nil, errors.New("give command or argv, not both")
	case command != "":
		return []string{"sh", "-c", command}, nil
	case len(argv) > 0:
		return argv, nil
	}
	return nil, errors.New("give command (a shell command line) or argv (the program and its arguments)")
}

func maxOutput(n int) int {
	if n <= 0 {
		return defaultMaxOutput
	}
	return min(n, maxMaxOutput)
}

func (s *Server) run(ctx context.Context, ss *mcp.ServerSession, in RunInput) (RunOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return RunOutput{}, err
	}
	argv, err := argvOf(in.Command, in.Argv)
	if err != nil {
		return RunOutput{}, err
	}
	max := maxOutput(in.MaxOutputBytes)
	out, errOut := newBounded(max), newBounded(max)
	res, err := sb.Exec(ctx, client.ExecRequest{Argv: argv, Cwd: in.Cwd, Env: in.Env, Stdin: []byte(in.Stdin),
		Timeout: time.Duration(in.TimeoutSeconds) * time.Second}, out, errOut)
	if err != nil {
		return RunOutput{}, err
	}
	return RunOutput{ExitCode: res.ExitCode, Reason: res.Reason, Stdout: out.String(), Stderr: errOut.String(),
		StdoutCut: out.cut, StderrCut: errOut.cut}, nil
}

func (s *Server) start(ctx context.Context, ss *mcp.ServerSession, in StartInput) (ProcessOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return ProcessOutput{}, err
	}
	argv, err := argvOf(in.Command, in.Argv)
	if err != nil {
		return ProcessOutput{}, err
	}
	p, err := sb.Start(ctx, client.ExecRequest{Argv: argv, Cwd: in.Cwd, Env: in.Env})
	if err != nil {
		return ProcessOutput{}, err
	}
	return ProcessOutput{Pid: p.Pid(), State: "running"}, nil
}

func (s *Server) readOutput(ctx context.Context, ss *mcp.ServerSession, in ReadOutputInput) (ReadOutputOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return ReadOutputOutput{}, err
	}
	max := maxOutput(in.MaxOutputBytes)
	out, errOut := newBounded(max), newBounded(max)
	rec, err := sb.Process(in.Pid).Output(ctx, false, func(ev client.ExecEvent) error {
		if ev.Stream == "stderr" {
			_, _ = errOut.Write(ev.Data)
		} else {
			_, _ = out.Write(ev.Data)
		}
		return nil
	})
	if err != nil {
		return ReadOutputOutput{}, err
	}
	po := ProcessOutput{Pid: rec.Pid, State: rec.State, Reason: rec.Reason}
	if !rec.Running() {
		code := rec.ExitCode
		po.ExitCode = &code
	}
	return ReadOutputOutput{ProcessOutput: po, Stdout: out.String(), Stderr: errOut.String(), StdoutCut: out.cut, StderrCut: errOut.cut}, nil
}

func (s *Server) writeFile(ctx context.Context, ss *mcp.ServerSession, in WriteFileInput) (Done, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return Done{}, err
	}
	data := []byte(in.Content)
	if in.ContentBase64 != "" {
		if in.Content != "" {
			return Done{}, errors.New("give content or content_base64, not both")
		}
		if data, err = base64.StdEncoding.DecodeString(in.ContentBase64); err != nil {
			return Done{}, fmt.Errorf("content_base64 is not standard base64: %w", err)
		}
	}
	return Done{OK: true}, sb.Files().Put(ctx, in.Path, bytes.NewReader(data), 0)
}

func (s *Server) readFile(ctx context.Context, ss *mcp.ServerSession, in PathInput) (FileOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return FileOutput{}, err
	}
	var buf limitedBuffer
	buf.max = maxFileBytes
	if err := sb.Files().Get(ctx, in.Path, &buf); err != nil {
		if errors.Is(err, errTooLong) {
			return FileOutput{}, fmt.Errorf("%s is larger than %d bytes: read a part with run_command (head, tail, sed -n) or fetch it with download_archive", in.Path, maxFileBytes)
		}
		return FileOutput{}, err
	}
	out := FileOutput{Path: in.Path, Size: buf.Len()}
	if utf8.Valid(buf.Bytes()) {
		out.Content = buf.String()
	} else {
		out.ContentBase64 = base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	return out, nil
}

func (s *Server) listFiles(ctx context.Context, ss *mcp.ServerSession, in PathInput) (ListOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return ListOutput{}, err
	}
	fis, err := sb.Files().List(ctx, in.Path)
	if err != nil {
		return ListOutput{}, err
	}
	out := ListOutput{Entries: make([]Entry, 0, len(fis))}
	for _, fi := range fis {
		out.Entries = append(out.Entries, Entry{Name: fi.Name, Type: fi.Type, Size: fi.Size})
	}
	return out, nil
}

func (s *Server) uploadArchive(ctx context.Context, ss *mcp.ServerSession, in ArchiveInput) (Done, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return Done{}, err
	}
	data, err := base64.StdEncoding.DecodeString(in.ArchiveBase64)
	if err != nil {
		return Done{}, fmt.Errorf("archive_base64 is not standard base64: %w", err)
	}
	return Done{OK: true}, sb.Files().PutArchive(ctx, in.Path, bytes.NewReader(data))
}

func (s *Server) downloadArchive(ctx context.Context, ss *mcp.ServerSession, in PathInput) (ArchiveOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return ArchiveOutput{}, err
	}
	var buf limitedBuffer
	buf.max = maxArchiveBytes
	if err := sb.Files().GetArchive(ctx, in.Path, &buf); err != nil {
		if errors.Is(err, errTooLong) {
			return ArchiveOutput{}, fmt.Errorf("the archive of %q is larger than %d bytes: archive a smaller directory", in.Path, maxArchiveBytes)
		}
		return ArchiveOutput{}, err
	}
	return ArchiveOutput{ArchiveBase64: base64.StdEncoding.EncodeToString(buf.Bytes()), Size: buf.Len()}, nil
}

func (s *Server) extend(ctx context.Context, ss *mcp.ServerSession, in ExtendInput) (SandboxOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return SandboxOutput{}, err
	}
	info, err := sb.Extend(ctx, in.TimeBoxMinutes)
	if err != nil {
		return SandboxOutput{}, err
	}
	return sandboxOutput(info), nil
}

func (s *Server) delete(ctx context.Context, ss *mcp.ServerSession, in SandboxInput) (DeleteOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return DeleteOutput{}, err
	}
	rep, err := sb.Delete(ctx)
	if err != nil && !errors.Is(err, client.ErrSandboxNotFound) {
		return DeleteOutput{}, err
	}
	s.disown(ss, in.SandboxID)
	if err != nil {
		return DeleteOutput{}, fmt.Errorf("sandbox %s had already ended (its time box): %w", in.SandboxID, err)
	}
	return DeleteOutput{Verified: rep.Verified, DurationMS: float64(rep.Duration.Microseconds()) / 1000}, nil
}

// bounded keeps the first and the last half of max bytes written to it and
// counts what it left out between them.
type bounded struct {
	max        int
	head, tail []byte
	cut        int64
}

func newBounded(max int) *bounded { return &bounded{max: max} }

func (b *bounded) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.max/2 - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.tail = append(b.tail, p...)
	if keep := b.max - b.max/2; len(b.tail) > keep {
		b.cut += int64(len(b.tail) - keep)
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-keep:]...)
	}
	return n, nil
}

// String is the output kept, with a note where it was cut.
func (b *bounded) String() string {
	if b.cut == 0 {
		return strings.ToValidUTF8(string(b.head)+string(b.tail), "\uFFFD")
	}
	return strings.ToValidUTF8(string(b.head), "\uFFFD") +
		fmt.Sprintf("\n[… %d bytes cut here: max_output_bytes is %d; redirect the output to a file and read parts of it …]\n", b.cut, b.max) +
		strings.ToValidUTF8(string(b.tail), "\uFFFD")
}

// errTooLong is limitedBuffer's error past its bound.
var errTooLong = errors.New("too long")

// limitedBuffer is a bytes.Buffer that fails past max bytes.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errTooLong
	}
	return b.Buffer.Write(p)
}
