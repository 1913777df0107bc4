package bridge

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/miekg/dns"
	"openvibe.network/agentsandbox/internal/hostname"
)

// syntheticTTL is the TTL of the synthetic answers: they hold for the
// sandbox's life.
const syntheticTTL = 3600

// ServeDNS answers the in-sandbox resolver's queries: an A query gets the
// name's synthetic address (localhost gets 127.0.0.1), any other type an
// empty answer, and a name the guard would refuse as not canonical NXDOMAIN.
func (t *nameTable) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative, m.RecursionAvailable = true, true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	if _, _, problem := hostname.Parse(name); problem != "" {
		m.Rcode = dns.RcodeNameError
		_ = w.WriteMsg(m)
		return
	}
	if q.Qtype == dns.TypeA && q.Qclass == dns.ClassINET {
		a := net.IPv4(127, 0, 0, 1)
		if name != "localhost" {
			sa, ok := t.addrFor(name)
			if !ok {
				m.Rcode = dns.RcodeServerFailure
				_ = w.WriteMsg(m)
				return
			}
			a = sa.AsSlice()
		}
		m.Answer = []dns.RR{&dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: syntheticTTL},
			A:   a,
		}}
	}
	_ = w.WriteMsg(m)
}

// listenDNS serves t on addr over TCP and, where the sandbox may open UDP
// sockets, over UDP; the sockets are bound when it returns. It returns
// closers for the servers and the bound address (both share the port).
// Port 0 picks a port free for both. On a cgroup v1 host the sandbox's
// seccomp filter refuses UDP sockets (their buffers would be uncharged):
// the resolver then serves TCP only, which the sandbox's resolv.conf
// (options use-vc) asks for.
func listenDNS(addr string, t *nameTable) ([]io.Closer, string, error) {
	ln, pc, err := listenBoth(addr)
	for try := 0; err != nil && strings.HasSuffix(addr, ":0") && try < 10; try++ {
		ln, pc, err = listenBoth(addr) // the TCP port was taken for UDP
	}
	if err != nil {
		return nil, "", err
	}
	tcp := &dns.Server{Listener: ln, Handler: t}
	go func() { _ = tcp.ActivateAndServe() }()
	closers := []io.Closer{shutdown{tcp, ln}}
	if pc != nil {
		udp := &dns.Server{PacketConn: pc, Handler: t}
		go func() { _ = udp.ActivateAndServe() }()
		closers = append(closers, shutdown{udp, pc})
	}
	return closers, ln.Addr().String(), nil
}

// listenBoth binds TCP on addr, then UDP on the same address and port. The
// PacketConn is nil when the seccomp filter refuses UDP sockets (EPERM).
func listenBoth(addr string) (net.Listener, net.PacketConn, error) {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, nil, err
	}
	pc, err := net.ListenPacket("udp4", ln.Addr().String())
	if errors.Is(err, syscall.EPERM) {
		return ln, nil, nil
	}
	if err != nil {
		_ = ln.Close()
		return nil, nil, err
	}
	return ln, pc, nil
}

// shutdown closes a DNS server's socket (which ends its serve loop).
type shutdown struct {
	srv *dns.Server
	c   io.Closer
}

func (s shutdown) Close() error {
	if err := s.srv.Shutdown(); err != nil {
		return s.c.Close()
	}
	return nil
}
