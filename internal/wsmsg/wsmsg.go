// Package wsmsg sends and receives whole WebSocket messages, text or
// binary, over golang.org/x/net/websocket: the framing of the worker API's
// attach protocol, shared by the server and its Go client.
package wsmsg

import "golang.org/x/net/websocket"

// Message is one WebSocket message: text (JSON, in the attach protocol) or
// binary.
type Message struct {
	Text bool
	Data []byte
}

// codec sends and receives Messages.
func codec() websocket.Codec {
	return websocket.Codec{
		Marshal: func(v any) ([]byte, byte, error) {
			m := v.(Message)
			if m.Text {
				return m.Data, websocket.TextFrame, nil
			}
			return m.Data, websocket.BinaryFrame, nil
		},
		Unmarshal: func(data []byte, payloadType byte, v any) error {
			*v.(*Message) = Message{Text: payloadType == websocket.TextFrame, Data: data}
			return nil
		},
	}
}

// Send writes m as one message.
func Send(ws *websocket.Conn, m Message) error { return codec().Send(ws, m) }

// Receive reads the next message (ws.MaxPayloadBytes bounds it).
func Receive(ws *websocket.Conn) (Message, error) {
	var m Message
	err := codec().Receive(ws, &m)
	return m, err
}
