package contract

import (
	"bytes"
	"unicode/utf8"

	"openvibe.network/agentsandbox"
)

// This file is the fast path of Check for the worker check-in
// (live.agent-sandbox-worker-request@1): one pass over the bytes that
// answers "strict JSON that satisfies the contract" without building a value
// tree or running the engine. It only ever says yes; whenever it is not sure
// (an error, or anything it does not handle: escaped keys, surrogate escapes,
// exponents, fractions in integers, deep nesting, many keys) it says no and
// Check takes the full path, whose verdict is ajv's. The golden corpus and
// FuzzCheck prove that a yes here is a yes there; TestFastPathSchema pins
// the schema this file mirrors.

// Bounds beyond which the fast path leaves a document to the full path.
const (
	fastMaxDepth  = 32  // nesting of objects and arrays
	fastMaxKeys   = 64  // names in one object
	fastMaxNumber = 300 // bytes of one number (no double overflows below)
)

// fastWorkerCheckIn reports whether data is one strict JSON value, as
// DecodeStrict accepts it, that satisfies the worker check-in contract.
// False means "not known": the caller must decide with the full path.
func fastWorkerCheckIn(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	s := scanner{data: data}
	s.space()
	if !s.checkIn() {
		return false
	}
	s.space()
	return s.pos == len(s.data)
}

// scanner reads JSON from data at pos. Each method consumes one value and
// reports whether it is well-formed and satisfies what the method checks.
type scanner struct {
	data []byte
	pos  int
	buf  []byte // a decoded string with escapes
}

// span is a key's raw bytes in data.
type span struct{ start, end int }

// keySet remembers an object's keys (none has escapes) to refuse
// duplicates.
type keySet struct {
	spans [fastMaxKeys]span
	n     int
}

// add records the key data[sp.start:sp.end]; false for a duplicate or one
// key too many.
func (k *keySet) add(data []byte, sp span) bool {
	key := data[sp.start:sp.end]
	for _, o := range k.spans[:k.n] {
		if bytes.Equal(data[o.start:o.end], key) {
			return false
		}
	}
	if k.n == fastMaxKeys {
		return false
	}
	k.spans[k.n] = sp
	k.n++
	return true
}

// byteClass sorts bytes for the scanner's two inner loops: JSON whitespace,
// and the bytes that end a run of plain string content.
var byteClass = func() (t [256]uint8) {
	for _, c := range []byte{' ', '\t', '\n', '\r'} {
		t[c] = classSpace
	}
	for c := range 0x20 {
		t[c] |= classStringEnd
	}
	t['"'], t['\\'] = classStringEnd, classStringEnd
	return t
}()

const (
	classSpace     = 1
	classStringEnd = 2
)

func (s *scanner) space() {
	d, i := s.data, s.pos
	for i < len(d) && byteClass[d[i]]&classSpace != 0 {
		i++
	}
	s.pos = i
}

// consume skips space and then c, if c is next.
func (s *scanner) consume(c byte) bool {
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// literal consumes word (true, false or null) if it is next.
func (s *scanner) literal(word string) bool {
	if bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		s.pos += len(word)
		return true
	}
	return false
}

func (s *scanner) boolean() bool { return s.literal("true") || s.literal("false") }

// str consumes a string and returns its raw content (between the quotes)
// and whether it holds escapes. It refuses control characters, bad escapes
// and \u escapes of surrogates (DecodeStrict refuses unpaired ones; the fast
// path leaves pairs to the full path).
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, false, false
	}
	start := s.pos + 1
	d := s.data
	for i := start; i < len(d); i++ {
		for i < len(d) && byteClass[d[i]]&classStringEnd == 0 {
			i++
		}
		if i == len(d) {
			break
		}
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return d[start:i], escaped, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			n := escapeLen(d[i:])
			if n == 0 {
				return nil, false, false
			}
			escaped = true
			i += n - 1
		}
	}
	return nil, false, false
}

// escapeLen returns the length of the escape at the start of b, or 0 when it
// is not one the fast path takes.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		r, ok := hex4(b[2:])
		if !ok || (r >= 0xd800 && r <= 0xdfff) {
			return 0
		}
		return 6
	}
	return 0
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// decode returns the string a raw string content stands for (raw itself when
// it has no escapes; else in s.buf, valid until the next decode).
func (s *scanner) decode(raw []byte, escaped bool) []byte {
	if !escaped {
		return raw
	}
	b := s.buf[:0]
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		switch raw[i+1] { // str checked every escape
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, _ := hex4(raw[i+2:])
			b = utf8.AppendRune(b, r)
			i += 4
		default: // " \ /
			b = append(b, raw[i+1])
		}
		i++
	}
	s.buf = b
	return b
}

// stringMax consumes a string of at most max characters (code points, as
// the contract counts them).
func (s *scanner) stringMax(max int) bool {
	raw, esc, ok := s.str()
	return ok && utf8.RuneCount(s.decode(raw, esc)) <= max
}

// dateTime consumes a string in the contract's date-time format.
func (s *scanner) dateTime() bool {
	raw, esc, ok := s.str()
	return ok && isDateTime(string(s.decode(raw, esc)))
}

// number consumes a JSON number without an exponent and returns its text.
func (s *scanner) number() ([]byte, bool) {
	start, i := s.pos, s.pos
	d := s.data
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return nil, false
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') || i-start > fastMaxNumber {
		return nil, false
	}
	s.pos = i
	return d[start:i], true
}

// integerMin consumes a plain integer (digits only) of at least min (0 or 1).
func (s *scanner) integerMin(min int) bool {
	n, ok := s.number()
	return ok && isDigits(string(n)) && (min == 0 || string(n) != "0")
}

// value consumes any JSON value at nesting depth.
func (s *scanner) value(depth int) bool {
	if s.pos >= len(s.data) {
		return false
	}
	switch c := s.data[s.pos]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{':
		return depth < fastMaxDepth && s.object(func() bool { return s.value(depth + 1) })
	case c == '[':
		return depth < fastMaxDepth && s.array(func(int) bool { return s.value(depth + 1) })
	case c == 't', c == 'f':
		return s.boolean()
	case c == 'n':
		return s.literal("null")
	default:
		_, ok := s.number()
		return ok
	}
}

// object consumes an object whose keys have no escapes and differ, calling
// member for each value (at s.pos, after the colon and space).
func (s *scanner) object(member func() bool) bool {
	return s.members(func([]byte) bool { return member() })
}

// members is object with the key given to member.
func (s *scanner) members(member func(key []byte) bool) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	var keys keySet
	for {
		s.space()
		start := s.pos + 1
		key, esc, ok := s.str()
		if !ok || esc || !keys.add(s.data, span{start, start + len(key)}) || !s.consume(':') {
			return false
		}
		s.space()
		if !member(key) {
			return false
		}
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// array consumes an array, calling item with each item's index.
func (s *scanner) array(item func(i int) bool) bool {
	if !s.consume('[') {
		return false
	}
	if s.consume(']') {
		return true
	}
	for i := 0; ; i++ {
		s.space()
		if !item(i) {
			return false
		}
		if s.consume(']') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// checkIn consumes the report: the contract's properties with their types
// and bounds, any other property as any value, and isolation required.
func (s *scanner) checkIn() bool {
	isolation := false
	ok := s.members(func(key []byte) bool {
		switch string(key) {
		case "worker_id", "service", "version":
			return s.stringMax(64)
		case "ready", "browser":
			return s.boolean()
		case "reasons":
			return s.array(func(i int) bool { return i < 10 && s.stringMax(500) })
		case "checks":
			return s.object(s.boolean)
		case "checked_at":
			return s.literal("null") || s.dateTime()
		case "capacity":
			return s.integerMin(1)
		case "active":
			return s.integerMin(0)
		case "at":
			return s.dateTime()
		case "isolation":
			isolation = s.isolation()
			return isolation
		}
		return s.value(1)
	})
	return ok && isolation
}

// isolation consumes the isolation object: the five facts, each with the
// value the contract holds it to, and any further keys as any value.
func (s *scanner) isolation() bool {
	const all = 1<<5 - 1
	facts := 0
	ok := s.members(func(key []byte) bool {
		switch string(key) {
		case agentsandbox.FactHostNetwork:
			facts |= 1
			return s.literal("false")
		case agentsandbox.FactCredentials:
			facts |= 2
			return s.literal("false")
		case agentsandbox.FactProfile:
			facts |= 4
			return s.literal("false")
		case agentsandbox.FactEgressProxy:
			facts |= 8
			return s.literal("true")
		case agentsandbox.FactWorkspace:
			facts |= 16
			raw, esc, ok := s.str()
			return ok && string(s.decode(raw, esc)) == agentsandbox.WorkspaceEphemeral
		}
		return s.value(2)
	})
	return ok && facts == all
}
