package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"openvibe.network/agentsandbox/internal/wsmsg"
	"openvibe.network/agentsandbox/sandbox"
)

// The attach protocol, over one WebSocket (GET …/processes/{pid}/attach):
//
//	client → worker  binary: bytes for the process's stdin (its terminal)
//	                 text:   {"type":"resize","rows":R,"cols":C} | {"type":"eof"}
//	worker → client  binary: one byte, 1 stdout or 2 stderr, then output
//	                 text:   {"type":"dropped","stream":S,"bytes":N}
//	                         {"type":"exit","process":{…}} (last)
//	                         {"type":"error","error":{"code","message"}} (last)
//
// The output starts with what the process's buffer holds. Output the client
// is too slow for is dropped (a dropped message says where and how much):
// neither the process nor the worker ever waits for the client, and a
// client that stalls one write for Config.WriteTimeout is cut off.

// maxAttachMessage bounds one message from the client.
const maxAttachMessage = 1 << 20

// attach handles GET …/processes/{pid}/attach: see the attach protocol.
// Everything that can be refused is refused before the upgrade, as a plain
// JSON error.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) error {
	id, pid, err := s.processTarget(r)
	if err != nil {
		return err
	}
	if !wantsWebSocket(r) {
		return badRequest("attach is a WebSocket: connect with Upgrade: websocket (see the attach protocol in docs/openapi.yaml)")
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	att, err := s.cfg.Runtime.Attach(ctx, id, pid)
	if err != nil {
		return processError(id, pid, err)
	}
	defer att.Close()
	// The init answers an unknown pid at once: read the first piece of
	// output (or the refusal) before upgrading.
	first, rec, firstErr := att.Next()
	if firstErr != nil && !errors.Is(firstErr, io.EOF) {
		return processError(id, pid, firstErr)
	}
	conn, err := wsmsg.Upgrader(attachFrame, refuseHandshake).Upgrade(w, r, nil)
	if err != nil {
		return nil // refuseHandshake answered
	}
	ws := wsmsg.New(conn)
	defer ws.Close()
	ws.SetReadLimit(maxAttachMessage)
	sent, dropped := s.serveAttach(ctx, ws, att, id, pid, attachFirst{first, rec, firstErr})
	addLog(r.Context(), slog.Int("pid", pid), slog.Int64("sent_bytes", sent), slog.Int64("dropped_bytes", dropped))
	return nil
}

// attachFrame is the size of the attach WebSocket's buffers.
const attachFrame = 32 << 10

// wantsWebSocket reports whether r asks for a WebSocket (its Upgrade
// header); the upgrade itself checks the rest of the handshake.
func wantsWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// refuseHandshake answers a failed WebSocket handshake as every error of
// the API is answered.
func refuseHandshake(w http.ResponseWriter, status int, why string) {
	writeError(w, &Error{Status: status, Code: CodeInvalidRequest, Message: why})
}

// attachFirst is what Next returned before the upgrade.
type attachFirst struct {
	out sandbox.Output
	rec sandbox.Process
	err error
}

// serveAttach runs one attached WebSocket until the process exits or
// either side goes away, and returns the output bytes queued for the client
// and dropped.
func (s *Server) serveAttach(ctx context.Context, ws *wsmsg.Conn, att *sandbox.Attachment, id string, pid int, first attachFirst) (sent, dropped int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := newOutQueue(s.cfg.StreamBuffer)
	type ending struct {
		rec sandbox.Process
		err error
	}
	ended := make(chan ending, 1)
	go func() { // the sandbox's output, into the queue: never waits for the client
		o, rec, err := first.out, first.rec, first.err
		for {
			if err != nil {
				ended <- ending{rec, err}
				return
			}
			queueOutput(q, o)
			o, rec, err = att.Next()
		}
	}()
	go func() { // the client's input
		defer cancel()
		for {
			m, err := ws.Receive()
			if err != nil {
				return
			}
			if !m.Text {
				if att.Input(m.Data) != nil {
					return
				}
				continue
			}
			var msg AttachMessage
			if json.Unmarshal(m.Data, &msg) != nil {
				continue
			}
			switch msg.Type {
			case "resize":
				if msg.Rows > 0 && msg.Cols > 0 && msg.Rows <= maxTermSize && msg.Cols <= maxTermSize {
					_ = att.Resize(uint16(msg.Rows), uint16(msg.Cols))
				}
			case "eof":
				_ = s.cfg.Runtime.Stdin(ctx, id, pid, nil, true)
			}
		}
	}()

	send := func(m wsmsg.Message) bool { return ws.Send(m, s.cfg.WriteTimeout) == nil }
	sendJSON := func(msg AttachMessage) bool {
		b, _ := json.Marshal(msg)
		return send(wsmsg.Message{Text: true, Data: b})
	}
	drain := func() bool {
		for _, c := range q.take() {
			if c.data == nil {
				for st, n := range c.dropped {
					if n > 0 && !sendJSON(AttachMessage{Type: "dropped", Stream: streamNames[st], Bytes: n}) {
						return false
					}
				}
				continue
			}
			tag := AttachStdout
			if c.stream == stderr {
				tag = AttachStderr
			}
			if !send(wsmsg.Message{Data: append([]byte{tag}, c.data...)}) {
				return false
			}
		}
		return true
	}
	defer func() {
		total, d := q.counts()
		dropped = d[stdout] + d[stderr]
		sent = total[stdout] + total[stderr] - dropped
	}()
	for {
		select {
		case <-q.wake:
			if !drain() {
				return
			}
		case end := <-ended:
			if !drain() {
				return
			}
			if errors.Is(end.err, io.EOF) {
				rec := processOf(end.rec)
				sendJSON(AttachMessage{Type: "exit", Process: &rec})
			} else if ctx.Err() == nil {
				sendJSON(AttachMessage{Type: "error", Error: toError(processError(id, pid, end.err)).wire()})
			}
			return
		case <-ctx.Done(): // the client went away
			return
		}
	}
}

// queueOutput puts one piece of output into q.
func queueOutput(q *outQueue, o sandbox.Output) {
	st := stdout
	if o.Stream == "stderr" {
		st = stderr
	}
	if o.Dropped > 0 {
		streamWriter{q, st}.Dropped(o.Dropped)
		return
	}
	q.write(st, o.Data)
}
