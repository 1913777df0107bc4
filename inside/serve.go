package inside

import (
	"bufio"
	"fmt"
	"html"
	"net"
	"net/textproto"
	"os"
	"time"
)

// servePage is the tiny web server of control.ServeMarker: on addr (the
// sandbox's own loopback) it answers every request with one HTML page that
// holds text, until it is killed. It reads at most a request's head, for at
// most a few seconds, so that no client holds it.
func servePage(addr, text string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox serve: %v\n", err)
		return 1
	}
	fmt.Printf("serving on %s\n", ln.Addr())
	page := "<!doctype html><html><head><title>sandbox</title></head><body><p id=\"text\">" +
		html.EscapeString(text) + "</p></body></html>"
	reply := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(page), page)
	for {
		c, err := ln.Accept()
		if err != nil {
			time.Sleep(acceptPause)
			continue
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			r := textproto.NewReader(bufio.NewReaderSize(c, 4<<10))
			if _, err := r.ReadLine(); err != nil {
				return
			}
			if _, err := r.ReadMIMEHeader(); err != nil {
				return
			}
			_, _ = c.Write([]byte(reply))
		}()
	}
}
