// Package wsmsg sends and receives whole WebSocket messages, text or
// binary, over github.com/gorilla/websocket: the framing of the worker API's
// attach protocol, shared by the server and its Go client, and the
// Upgrader both of the worker's WebSocket routes use.
package wsmsg

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Message is one WebSocket message: text (JSON, in the attach protocol) or
// binary.
type Message struct {
	Text bool
	Data []byte
}

// Conn is a WebSocket connection that sends and receives Messages. Send
// may be called from several goroutines at once; Receive from one at a
// time.
type Conn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

// New wraps ws; the Conn owns it from then on.
func New(ws *websocket.Conn) *Conn { return &Conn{ws: ws} }

// Send writes m as one message; a write that takes longer than timeout
// (when positive) fails.
func (c *Conn) Send(m Message, timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if timeout > 0 {
		_ = c.ws.SetWriteDeadline(time.Now().Add(timeout))
	}
	kind := websocket.BinaryMessage
	if m.Text {
		kind = websocket.TextMessage
	}
	return c.ws.WriteMessage(kind, m.Data)
}

// Receive reads the next message (SetReadLimit bounds it). A peer that
// closed, with a close message or without, is io.EOF.
func (c *Conn) Receive() (Message, error) {
	kind, data, err := c.ws.ReadMessage()
	if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) {
		return Message{}, io.EOF
	}
	if err != nil {
		return Message{}, err
	}
	return Message{Text: kind == websocket.TextMessage, Data: data}, nil
}

// SetReadLimit bounds the messages Receive takes: a larger one ends the
// connection.
func (c *Conn) SetReadLimit(n int64) { c.ws.SetReadLimit(n) }

// Close closes the connection (no close message: the peer reads io.EOF).
func (c *Conn) Close() error { return c.ws.Close() }

// Upgrader is the server side of the worker's WebSockets: any origin (the
// bearer token authenticates, not the page that connects), frames of
// bufferSize bytes, and a failed handshake answered by refuse, with its
// status and why.
func Upgrader(bufferSize int, refuse func(w http.ResponseWriter, status int, why string)) *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize: bufferSize, WriteBufferSize: bufferSize,
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			refuse(w, status, "the WebSocket handshake: "+reason.Error())
		},
	}
}
