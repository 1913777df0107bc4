package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// maxHello bounds the ClientHello the proxy reads to find its SNI (a
// hello with post-quantum key shares is about 2 KiB; the TLS record limit
// is 16 KiB, and a hello may span records).
const maxHello = 32 << 10

// errNotHello is returned by readClientHello for bytes that are not a TLS
// ClientHello.
var errNotHello = errors.New("not a TLS ClientHello")

// readClientHello reads from r the TLS records that hold the client's
// first handshake message, a ClientHello, and returns every byte read (to
// be passed on unchanged) and its SNI host name ("" when it has none). It
// reads nothing past the records it needs. Errors: errNotHello (wrapped)
// for anything else, or the read error.
func readClientHello(r io.Reader) (raw []byte, sni string, err error) {
	var msg []byte // the handshake bytes: the first record's own, or copied across records
	for records := 0; ; records++ {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return raw, "", err
		}
		n := int(binary.BigEndian.Uint16(hdr[3:]))
		if hdr[0] != 22 || hdr[1] != 3 || n == 0 || n > 1<<14+256 || len(raw)+5+n > maxHello {
			return append(raw, hdr[:]...), "", fmt.Errorf("%w: record type %d, version %d.%d, length %d", errNotHello, hdr[0], hdr[1], hdr[2], n)
		}
		start := len(raw) + 5
		if raw == nil {
			raw = make([]byte, 5+n) // one allocation for the usual one-record hello
		} else {
			raw = append(raw, make([]byte, 5+n)...)
		}
		copy(raw[start-5:], hdr[:])
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw, "", err
		}
		if records == 0 {
			msg = raw[start:]
		} else {
			msg = append(msg[:len(msg):len(msg)], raw[start:]...)
		}
		if len(msg) < 4 {
			continue
		}
		if msg[0] != 1 {
			return raw, "", fmt.Errorf("%w: handshake type %d", errNotHello, msg[0])
		}
		size := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if size > maxHello {
			return raw, "", fmt.Errorf("%w: a %d-byte ClientHello", errNotHello, size)
		}
		if len(msg) >= 4+size {
			sni, err := helloSNI(msg[4 : 4+size])
			return raw, sni, err
		}
	}
}

// helloSNI returns the host_name of a ClientHello body's server_name
// extension, "" when there is none.
func helloSNI(b []byte) (string, error) {
	p := parser{b: b}
	p.skip(2 + 32)  // legacy_version, random
	p.skip(p.u8())  // legacy_session_id
	p.skip(p.u16()) // cipher_suites
	p.skip(p.u8())  // legacy_compression_methods
	if p.bad || len(p.b) == 0 {
		return "", p.err()
	}
	ext := parser{b: p.take(p.u16())}
	for len(ext.b) > 0 && !ext.bad {
		typ, data := ext.u16(), ext.take(ext.u16())
		if typ != 0 { // server_name
			continue
		}
		list := parser{b: data}
		names := parser{b: list.take(list.u16())}
		for len(names.b) > 0 && !names.bad {
			kind, name := names.u8(), names.take(names.u16())
			if kind == 0 && !names.bad { // host_name
				return string(name), nil
			}
		}
		return "", errors.Join(list.err(), names.err())
	}
	return "", errors.Join(p.err(), ext.err())
}

// parser reads big-endian fields; a short read sets bad and yields zeros.
type parser struct {
	b   []byte
	bad bool
}

func (p *parser) take(n int) []byte {
	if n > len(p.b) {
		p.bad, p.b = true, nil
		return nil
	}
	out := p.b[:n]
	p.b = p.b[n:]
	return out
}

func (p *parser) skip(n int) { p.take(n) }

func (p *parser) u8() int {
	b := p.take(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (p *parser) u16() int {
	b := p.take(2)
	if b == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(b))
}

func (p *parser) err() error {
	if p.bad {
		return fmt.Errorf("%w: truncated", errNotHello)
	}
	return nil
}

// alertAccessDenied returns a fatal TLS access_denied alert record, the
// answer to a ClientHello the proxy refuses (the tunnel was already
// answered 200).
func alertAccessDenied() []byte { return []byte{21, 3, 3, 0, 2, 2, 49} }

// MatchSNI decides whether a TLS client's SNI fits the destination host it
// asked the proxy for (canonical, lower case): for a name the SNI must be
// that name (in any case); for an address literal there must be none (TLS
// puts no addresses in SNI). A mismatch means the client would reach
// another name at the checked address (domain fronting). It returns the
// reason for a log when they do not fit.
func MatchSNI(host, sni string) (bool, string) {
	if _, err := netip.ParseAddr(host); err == nil {
		if sni != "" {
			return false, fmt.Sprintf("SNI %q on a tunnel to the address %s", clip(sni), host)
		}
		return true, ""
	}
	switch {
	case sni == "":
		return false, fmt.Sprintf("no SNI on a tunnel to %s", host)
	case !strings.EqualFold(sni, host):
		return false, fmt.Sprintf("SNI %q on a tunnel to %s", clip(sni), host)
	}
	return true, ""
}

// MatchHost decides whether an HTTP request's Host header fits the
// destination (host canonical, lower case, and port) it was checked for:
// the same host, and the same port (80 when none is given). An absent
// header fits (the proxy sends the checked name on).
func MatchHost(host string, port uint16, header string, present bool) (bool, string) {
	if !present {
		return true, ""
	}
	h, ps, err := splitHostDefault(header, "80")
	if err == nil && strings.EqualFold(h, host) && ps == fmt.Sprint(port) {
		return true, ""
	}
	return false, fmt.Sprintf("Host %q on a request for %s:%d", clip(header), host, port)
}

// splitHostDefault splits "host[:port]" ("[v6][:port]"), with port def when
// absent.
func splitHostDefault(hp, def string) (string, string, error) {
	if strings.HasPrefix(hp, "[") {
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return "", "", errors.New("unclosed bracket")
		}
		host, rest := hp[1:end], hp[end+1:]
		if rest == "" {
			return host, def, nil
		}
		if rest[0] != ':' {
			return "", "", errors.New("junk after ]")
		}
		return host, rest[1:], nil
	}
	if host, port, ok := strings.Cut(hp, ":"); ok {
		return host, port, nil
	}
	return hp, def, nil
}
