package sandbox

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The control protocol between the runtime (host side) and the init (inside
// the sandbox). One unix connection carries one operation: the client sends a
// request frame, then data frames (stdin, file content) and an end frame; the
// init answers with data frames (stdout, stderr, file content) and a final
// done frame. A frame is a one-byte kind, a big-endian uint32 length and the
// payload.
const (
	frameRequest = 'R' // JSON controlRequest
	frameData    = 'D' // stdin (to the init) or file content (both ways)
	frameEnd     = 'Z' // end of the client's data
	frameStdout  = 'O'
	frameStderr  = 'E'
	frameDone    = 'X' // JSON controlDone; last frame of the init
)

// maxFrame bounds a frame's payload; larger writes are split.
const maxFrame = 1 << 20

// Operations of controlRequest.Op.
const (
	opPing = "ping"
	opExec = "exec"
	opPut  = "put"
	opGet  = "get"
)

// Error codes of controlDone.Code.
const (
	codePath     = "path"      // the path leaves the workspace
	codeNotExist = "not_exist" // no such file
	codeInvalid  = "invalid"   // bad request
	codeFailed   = "failed"    // anything else
)

// controlRequest is the first frame of every operation.
type controlRequest struct {
	Op      string            `json:"op"`
	Argv    []string          `json:"argv,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Timeout int64             `json:"timeout_ns,omitempty"`
	Path    string            `json:"path,omitempty"`
	Mode    uint32            `json:"mode,omitempty"`
}

// controlDone is the init's last frame: how an exec ended, or an error.
type controlDone struct {
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason,omitempty"`
	Code     string `json:"code,omitempty"`
	Error    string `json:"error,omitempty"`
}

// frameWriter writes frames; safe for concurrent use.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) frame(kind byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), maxFrame)
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

func (f *frameWriter) json(kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	return f.frame(kind, b)
}

// kindWriter is an io.Writer that sends each write as one frame of a kind.
type kindWriter struct {
	f    *frameWriter
	kind byte
}

func (k kindWriter) Write(p []byte) (int, error) {
	if err := k.f.frame(k.kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// frameReader reads frames.
type frameReader struct {
	r   *bufio.Reader
	buf []byte
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next frame; the payload is valid until the next call.
func (f *frameReader) next() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
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

// copyFrames sends r to f as data frames followed by an end frame.
func copyFrames(f *frameWriter, r io.Reader) error {
	if r != nil {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if werr := f.frame(frameData, buf[:n]); werr != nil {
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
	return f.frame(frameEnd, nil)
}
