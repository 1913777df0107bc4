package control

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The control protocol. One unix connection carries one operation: the
// client (the runtime) sends a request frame, then data frames (stdin, file
// content) and an end frame; the init answers with data frames (stdout,
// stderr, file content) and a final done frame. A frame is a one-byte kind,
// a big-endian uint32 length and the payload.
const (
	FrameRequest = 'R' // JSON Request
	FrameData    = 'D' // stdin (to the init) or file content (both ways)
	FrameEnd     = 'Z' // end of the client's data
	FrameStdout  = 'O'
	FrameStderr  = 'E'
	FrameDone    = 'X' // JSON Done; last frame of the init
	// FrameResize (to the init, during OpExec with a terminal or OpAttach)
	// is JSON Resize: the terminal's new size.
	FrameResize = 'W'
	// FrameDropped (from the init, while following output) is a decimal
	// count of output bytes a slow follower missed at this point.
	FrameDropped = 'L'
	// FrameStarted (from the init, during OpExec) is the decimal pid of the
	// command, sent once it started; a request refused before (a missing
	// cwd) gets none.
	FrameStarted = 'S'
)

// MaxFrame bounds a frame's payload; larger writes are split.
const MaxFrame = 1 << 20

// Operations of Request.Op.
const (
	OpPing = "ping"
	OpExec = "exec"
	OpPut  = "put"
	OpGet  = "get"
	// OpConfigure adds Request.Env to the environment of every later
	// command (a sandbox started before it was given to its user).
	OpConfigure = "configure"

	// Processes (every command the init starts is one, foreground or not).
	OpStart     = "start"     // start Argv in the background; Done.Data: Process
	OpProcesses = "processes" // Done.Data: []Process, oldest first
	OpProcess   = "process"   // Pid; Done.Data: Process
	OpOutput    = "output"    // Pid, Follow: output frames from its buffer (then live), then Done
	OpSignal    = "signal"    // Pid, Signal: to the process's group
	OpStdin     = "stdin"     // Pid, data frames to its stdin, end frame; Close closes it after
	OpAttach    = "attach"    // Pid: stdin and resize frames in, output frames out until it exits

	// Files beyond put and get.
	OpList   = "list"    // Path (a directory); data frames of JSON lines, one FileInfo each
	OpRemove = "remove"  // Path, Recursive
	OpMkdir  = "mkdir"   // Path, with its parents
	OpTarGet = "tar-get" // Path: data frames of a tar of the tree
	OpTarPut = "tar-put" // Path, data frames of a tar: unpacked all or nothing

	// The sandbox's one headless browser (see BrowserDelimiter).
	OpBrowserStart = "browser-start" // Argv: start it unless it runs; Done.Data: Process
	OpBrowser      = "browser"       // Argv: start it unless it runs, then carry its CDP messages both ways
)

// The browser's messages. During OpBrowser the init first sends a started
// frame (the browser's pid), then both sides send data frames that carry the
// Chrome DevTools Protocol's messages as Chromium's --remote-debugging-pipe
// does: each one a JSON text ended by BrowserDelimiter, split across frames
// at will. The init forwards only whole messages to the browser and to the
// client (so a client that leaves mid-message corrupts nothing for the next
// one), at most MaxBrowserMessage bytes each; the browser's messages while
// no client is connected are dropped. The end frame (or the connection's
// end) detaches the client; the browser runs on. The done frame comes when
// the browser ended (CodeFailed, its exit in Error) or refused the client
// (CodeBusy: another client is connected; CodeTooLarge: a message over the
// bound).
const (
	BrowserDelimiter  = 0
	MaxBrowserMessage = 64 << 20
)

// Error codes of Done.Code: what went wrong, kept as a code across the
// boundary so that no side matches error text.
const (
	CodePath      = "path"          // the path leaves the workspace
	CodeNotExist  = "not_exist"     // no such file
	CodeNoSpace   = "no_space"      // the workspace is full (its size or inode cap)
	CodeIsDir     = "is_directory"  // a file operation on a directory
	CodeNotDir    = "not_directory" // a directory operation on a file
	CodeNoProcess = "no_process"    // no process with that pid
	CodeExited    = "exited"        // the process has exited: it takes no signal or stdin
	CodeTooLarge  = "too_large"     // a request or upload over the init's bounds
	CodeExists    = "exists"        // the path exists (and the operation will not replace it)
	CodeNotEmpty  = "not_empty"     // a directory with entries, removed without Recursive
	CodeInvalid   = "invalid"       // bad request
	CodeBusy      = "busy"          // the browser already has a client
	CodeFailed    = "failed"        // anything else

	// CodeBadArchive: OpTarPut refused the archive; Error says which entry
	// and why, for the person who sent it.
	CodeBadArchive = "bad_archive"
)

// Request is the first frame of every operation.
type Request struct {
	Op      string            `json:"op"`
	Argv    []string          `json:"argv,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Timeout int64             `json:"timeout_ns,omitempty"`
	// TTY gives the command a pseudo-terminal of Size (exec and start).
	TTY  bool   `json:"tty,omitempty"`
	Size Resize `json:"size,omitempty"`
	// Pid names a process of the init's table (see Process).
	Pid    int    `json:"pid,omitempty"`
	Follow bool   `json:"follow,omitempty"` // OpOutput: stay until the process exits
	Signal string `json:"signal,omitempty"` // OpSignal: TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT
	Close  bool   `json:"close,omitempty"`  // OpStdin: close stdin after the data
	Path   string `json:"path,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
	// Recursive removes a directory with what is in it (OpRemove).
	Recursive bool `json:"recursive,omitempty"`
	// Port is the sandbox's own TCP port of OpPort.
	Port int `json:"port,omitempty"`
}

// Resize is a terminal's size.
type Resize struct {
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// Done is the init's last frame: how an exec ended, an operation's result
// (Data, JSON), or an error (Code and Error).
type Done struct {
	ExitCode int             `json:"exit_code"`
	Reason   string          `json:"reason,omitempty"`
	Code     string          `json:"code,omitempty"`
	Error    string          `json:"error,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// Process is one command of the init's table.
type Process struct {
	Pid     int      `json:"pid"`
	Argv    []string `json:"argv"`
	Started int64    `json:"started_unix_ns"`
	TTY     bool     `json:"tty,omitempty"`
	// Background is false for a foreground exec (it ends with its caller).
	Background bool `json:"background,omitempty"`
	Running    bool `json:"running"`
	// ExitCode and Reason are set once it ended (Reason as an exec's).
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason,omitempty"`
}

// FileInfo is one directory entry of OpList.
type FileInfo struct {
	Name string `json:"name"`
	// Type is "file", "directory", "symlink" or "other".
	Type    string `json:"type"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	ModTime int64  `json:"mtime_unix_ns"`
}

// Writer writes frames; safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// Frame writes p as frames of kind: one, or several of at most MaxFrame.
func (f *Writer) Frame(kind byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), MaxFrame)
		var hdr [5]byte
		hdr[0] = kind
		binary.BigEndian.PutUint32(hdr[1:], uint32(n))
		if _, err := f.w.Write(append(hdr[:], p[:n]...)); err != nil {
			return fmt.Errorf("write frame: %w", err)
		}
		p = p[n:]
	}
	return nil
}

// ErrFrameTooLarge is returned by JSON for a value that does not fit in one
// frame (a request whose argv and env are too large).
var ErrFrameTooLarge = errors.New("larger than a frame")

// JSON writes v as one frame of kind.
func (f *Writer) JSON(kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if len(b) > MaxFrame {
		return fmt.Errorf("encode frame: %d bytes: %w of %d", len(b), ErrFrameTooLarge, MaxFrame)
	}
	return f.Frame(kind, b)
}

// KindWriter is an io.Writer that sends each write as one frame of a kind.
type KindWriter struct {
	W    *Writer
	Kind byte
}

func (k KindWriter) Write(p []byte) (int, error) {
	if err := k.W.Frame(k.Kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Reader reads frames.
type Reader struct {
	r   *bufio.Reader
	buf []byte
}

func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next frame; the payload is valid until the next call.
func (f *Reader) Next() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, errors.New("read frame: frame too large")
	}
	if cap(f.buf) < int(n) {
		f.buf = make([]byte, n)
	}
	p := f.buf[:n]
	if _, err := io.ReadFull(f.r, p); err != nil {
		return 0, nil, fmt.Errorf("read frame: %w", err)
	}
	return hdr[0], p, nil
}

// CopyFrames sends r to f as data frames followed by an end frame.
func CopyFrames(f *Writer, r io.Reader) error {
	if r != nil {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if werr := f.Frame(FrameData, buf[:n]); werr != nil {
					return werr
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read input: %w", err)
			}
		}
	}
	return f.Frame(FrameEnd, nil)
}

// NewWriter returns a Writer of frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }
