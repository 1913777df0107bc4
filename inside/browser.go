package inside

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox/sandbox/control"
)

// The sandbox's one headless browser: started by the init on the first
// OpBrowserStart or OpBrowser with the argv the runtime sends (the init adds
// only where its egress bridge listens), as a background process of the
// table (its log is its output), with the DevTools pipe at its descriptors 3
// (commands in) and 4 (answers and events out). At most one client at a
// time carries its messages (see control.OpBrowser); it lives until it
// exits or the sandbox ends.

// errBrowserBusy refuses a second client.
var errBrowserBusy = errors.New("the browser already has a client: one CDP connection per sandbox; close the other first")

// browserHost is the init's browser, if one runs.
type browserHost struct {
	mu    sync.Mutex
	proc  *process
	in    *os.File      // the browser's fd 3, written with the client's messages
	ended chan struct{} // closed once the browser's messages ended
	// client receives the browser's whole messages while one is connected.
	client *browserClient
}

// browserClient is the one connection carrying the browser's messages.
type browserClient struct {
	msgs chan []byte
	gone chan struct{} // closed when it detaches
	once sync.Once
}

// ensureBrowser starts the browser unless it runs, and returns it.
func (s *initServer) ensureBrowser(req control.Request) (*process, error) {
	b := &s.browser
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc != nil && b.proc.state().Running {
		return b.proc, nil
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("empty argv")
	}
	cmdIn, in, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	out, cmdOut, err := os.Pipe()
	if err != nil {
		cmdIn.Close()
		in.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	argv := slices.Clone(req.Argv)
	if s.proxy != "" {
		argv = slices.Insert(argv, 1, "--proxy-server="+s.proxy)
	}
	p, _, err := s.startProcess(control.Request{Op: control.OpStart, Argv: argv, Env: req.Env}, true, cmdIn, cmdOut)
	cmdIn.Close()
	cmdOut.Close()
	if err != nil {
		in.Close()
		out.Close()
		return nil, err
	}
	b.proc, b.in, b.client, b.ended = p, in, nil, make(chan struct{})
	go b.readMessages(p, out, b.ended)
	go func() { <-p.done; in.Close() }()
	return p, nil
}

// readMessages reads the browser's messages until they end, handing each
// whole one to the client connected at that moment (none: dropped). A
// message over the bound ends the browser: the pipe cannot be resynced.
func (b *browserHost) readMessages(p *process, out *os.File, ended chan<- struct{}) {
	defer close(ended)
	defer out.Close()
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		msg, err := readMessage(r)
		if err != nil {
			if errors.Is(err, errMessageTooLarge) {
				p.killer.kill("too_large")
			}
			return
		}
		b.mu.Lock()
		c := b.client
		b.mu.Unlock()
		if c != nil {
			select {
			case c.msgs <- msg:
			case <-c.gone:
			}
		}
	}
}

// attach makes c the browser's client, unless it has one. A client that
// is leaving (its connection closed, which the init reads a moment later)
// is waited for, up to handover: a caller that asked /json/version and
// then connects must not be refused by its own last connection.
func (b *browserHost) attach(c *browserClient) (in *os.File, ended <-chan struct{}, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.client; old != nil {
		b.mu.Unlock()
		select {
		case <-old.gone:
		case <-time.After(handover):
		}
		b.mu.Lock()
	}
	if b.client != nil {
		return nil, nil, false
	}
	b.client = c
	return b.in, b.ended, true
}

// handover bounds how long a new client waits for the last one to leave.
const handover = time.Second

// detach ends c's turn.
func (b *browserHost) detach(c *browserClient) {
	b.mu.Lock()
	if b.client == c {
		b.client = nil
	}
	b.mu.Unlock()
	c.once.Do(func() { close(c.gone) }) // after: a waiting client finds the place free
}

// errBrowserGone is a write to a browser that closed its pipe (it is
// ending).
var errBrowserGone = errors.New("the browser closed its pipe")

// errMessageTooLarge is a browser message over control.MaxBrowserMessage.
var errMessageTooLarge = fmt.Errorf("a CDP message is over %d bytes", control.MaxBrowserMessage)

// readMessage reads one delimited message (without its delimiter).
func readMessage(r *bufio.Reader) ([]byte, error) {
	var msg []byte
	for {
		part, err := r.ReadSlice(control.BrowserDelimiter)
		if len(msg)+len(part) > control.MaxBrowserMessage+1 {
			return nil, errMessageTooLarge
		}
		msg = append(msg, part...)
		switch {
		case err == nil:
			return msg[:len(msg)-1], nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

// browserStart starts the browser unless it runs and answers its record.
func (s *initServer) browserStart(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	p, err := s.ensureBrowser(req)
	if err != nil {
		return control.Done{Code: control.CodeFailed, Error: "cannot start the browser: " + err.Error()}
	}
	return withData(p.state())
}

// browserConnect carries one client's messages to and from the browser
// (starting it first), until the client detaches or the browser ends.
func (s *initServer) browserConnect(req control.Request, fr *control.Reader, fw *control.Writer) control.Done {
	p, err := s.ensureBrowser(req)
	if err != nil { // the client waits for this answer: nothing of its is read
		return control.Done{Code: control.CodeFailed, Error: "cannot start the browser: " + err.Error()}
	}
	b := &s.browser
	c := &browserClient{msgs: make(chan []byte, 16), gone: make(chan struct{})}
	in, ended, ok := b.attach(c)
	if !ok {
		return control.Done{Code: control.CodeBusy, Error: errBrowserBusy.Error()}
	}
	defer b.detach(c)
	if err := fw.Frame(control.FrameStarted, []byte(strconv.Itoa(p.info.Pid))); err != nil {
		return control.Done{}
	}
	inErr := make(chan error, 1)
	go func() {
		inErr <- copyMessages(fr, in)
		b.detach(c)
	}()
	func() {
		for {
			select {
			case msg := <-c.msgs:
				if writeMessage(fw, msg) != nil {
					return
				}
			case <-c.gone:
				return
			case <-ended:
				<-p.done
				return
			}
		}
	}()
	select {
	case err := <-inErr:
		switch {
		case errors.Is(err, errMessageTooLarge):
			return control.Done{Code: control.CodeTooLarge, Error: err.Error()}
		case errors.Is(err, errBrowserGone): // it is ending: say how, once it did
			select {
			case <-p.done:
			case <-time.After(waitDelay):
			}
		}
	default:
	}
	if st := p.state(); !st.Running {
		return control.Done{Code: control.CodeFailed, ExitCode: st.ExitCode, Reason: st.Reason,
			Error: "the browser ended (exit code " + strconv.Itoa(st.ExitCode) + ")"}
	}
	return control.Done{}
}

// copyMessages writes the client's whole messages to the browser until the
// client's end frame or its connection's end; a part of a message left at
// the end is dropped.
func copyMessages(fr *control.Reader, in io.Writer) error {
	var msg []byte
	for {
		kind, p, err := fr.Next()
		if err != nil || kind == control.FrameEnd {
			return nil
		}
		if kind != control.FrameData {
			continue
		}
		for len(p) > 0 {
			i := bytes.IndexByte(p, control.BrowserDelimiter)
			if i < 0 {
				if len(msg)+len(p) > control.MaxBrowserMessage {
					return errMessageTooLarge
				}
				msg = append(msg, p...)
				break
			}
			msg = append(append(msg, p[:i]...), control.BrowserDelimiter)
			if len(msg) > control.MaxBrowserMessage+1 {
				return errMessageTooLarge
			}
			if _, err := in.Write(msg); err != nil {
				return errBrowserGone
			}
			msg, p = msg[:0], p[i+1:]
		}
	}
}

// writeMessage sends msg and its delimiter as data frames (Frame splits
// what is over control.MaxFrame).
func writeMessage(fw *control.Writer, msg []byte) error {
	return fw.Frame(control.FrameData, append(msg, control.BrowserDelimiter))
}

// proxyOf is the egress bridge's address for the browser's --proxy-server
// (from the bridge's HTTP_PROXY), or "" without egress.
func proxyOf(env map[string]string) string {
	return strings.TrimSuffix(env["HTTP_PROXY"], "/")
}
