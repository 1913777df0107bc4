package control

// OpPort connects to Request.Port on the sandbox's own loopback
// (127.0.0.1, else [::1]) from inside the sandbox and splices that TCP
// connection over the control connection: the init answers a started frame
// once it connected (or a done frame with CodeRefused when nothing listens,
// CodeInvalid for a port out of 1..65535), and from then on the control
// connection carries the TCP connection's bytes as they are, both ways,
// without frames and without a done frame. The client sends nothing after
// its request until the started frame came. The client's end of its
// writing (its connection's end) ends the TCP connection; the TCP
// connection's end of its writing reaches the client as the control
// connection's end of writing (shutdown), after which the client closes.
// Nothing inside the sandbox, and nothing on the host, listens for it:
// the worker reaches a sandbox's servers only this way.
const OpPort = "port"

// CodeRefused (OpPort): nothing listens on the port inside the sandbox.
const CodeRefused = "refused"

// Buffered is the number of bytes read from the connection beyond the
// frames returned so far (a splice must start with none held back).
func (f *Reader) Buffered() int { return f.r.Buffered() }
