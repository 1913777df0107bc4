package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
)

// hopHeaders are removed both ways, with every header that Connection names.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// httpTarget returns the "host:port" of an absolute-form http request, or
// the reason it is not one. An origin-form request is addressed to the
// proxy itself and is refused with ReasonSelf.
func httpTarget(req *http.Request) (string, string, string) {
	u := req.URL
	switch {
	case req.RequestURI == "*" || strings.HasPrefix(req.RequestURI, "/"):
		return "", ReasonSelf, "origin-form request: the proxy is not a web server"
	case u.Scheme != "http":
		return "", ReasonBadRequest, fmt.Sprintf("scheme %q (use CONNECT for https)", u.Scheme)
	case u.User != nil:
		return "", ReasonNotCanonical, "userinfo in the URL"
	case u.Host == "":
		return "", ReasonNotCanonical, "empty host"
	case strings.HasSuffix(u.Host, ":"):
		return "", ReasonBadPort, "empty port"
	case u.Port() == "":
		return u.Host + ":80", "", ""
	}
	return u.Host, "", ""
}

// forward answers an absolute-form request: check, dial, send it in
// origin-form without hop-by-hop headers, and pass the response back as it
// is (redirects included: the proxy never follows them). One request per
// connection: both sides are closed after the response.
func (p *Proxy) forward(a *attachment, c *meter, req *http.Request, rec *record) {
	rec.target = req.RequestURI
	target, reason, detail := httpTarget(req)
	if reason != "" {
		p.answer(c.Conn, rec, reason, detail)
		return
	}
	up, ok := p.open(a, c.Conn, target, rec)
	if !ok {
		return
	}
	defer a.untrack(up)
	mu := &meter{Conn: up, idle: p.idleTimeout}
	defer func() { rec.up, rec.down = mu.written, mu.read }()
	req.Host = req.URL.Host
	removeHop(req.Header)
	req.Close = true
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return
		}
	}
	req.Header.Del("Expect")
	if err := req.Write(mu); err != nil {
		p.answer(c.Conn, rec, ReasonUpstream, "write request: "+err.Error())
		return
	}
	lr := &io.LimitedReader{R: mu, N: maxHeaderBytes}
	resp, err := finalResponse(bufio.NewReaderSize(lr, 64<<10), req, c)
	if err != nil {
		p.answer(c.Conn, rec, ReasonUpstream, "read response: "+err.Error())
		return
	}
	lr.N = math.MaxInt64 // the header is read; the body is not bounded here
	defer resp.Body.Close()
	removeHop(resp.Header)
	resp.Close = true
	rec.status = resp.StatusCode
	_ = resp.Write(c)
}

// finalResponse reads the upstream response, passing informational (1xx)
// responses through to w first. A protocol switch is an error: Upgrade was
// removed from the request.
func finalResponse(br *bufio.Reader, req *http.Request, w io.Writer) (*http.Response, error) {
	for {
		named := connectionTokens(br)
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		for _, name := range named {
			resp.Header.Del(name)
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			resp.Body.Close()
			return nil, errors.New("unrequested protocol switch")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			removeHop(resp.Header)
			if _, err := fmt.Fprintf(w, "HTTP/1.1 %s\r\n", resp.Status); err != nil {
				return nil, err
			}
			if err := resp.Header.Write(w); err != nil {
				return nil, err
			}
			if _, err := io.WriteString(w, "\r\n"); err != nil {
				return nil, err
			}
		default:
			return resp, nil
		}
	}
}

// connectionTokens returns the header names that the Connection header of
// the response waiting in br lists. http.ReadResponse drops a Connection
// header that says close, and the names with it, so they are read from the
// raw header block first (br must hold a whole header block).
func connectionTokens(br *bufio.Reader) []string {
	var block []byte
	for {
		b, _ := br.Peek(br.Buffered())
		if end := bytes.Index(b, []byte("\r\n\r\n")); end >= 0 {
			block = b[:end]
			break
		}
		if br.Buffered() == br.Size() {
			return nil
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return nil
		}
	}
	var names []string
	for _, line := range strings.Split(string(block), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "Connection") {
			continue
		}
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !strings.EqualFold(name, "close") {
				names = append(names, name)
			}
		}
	}
	return names
}
