package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// DecodeError says why DecodeStrict refused its input and where.
type DecodeError struct {
	// Offset is the byte offset in the input at or after which the problem is.
	Offset int64
	// Reason says what is wrong, for a person, e.g. `duplicate key "a" in /isolation`.
	Reason string
}

// Error returns the reason and the byte offset.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("%s at byte offset %d", e.Reason, e.Offset)
}

// DecodeStrict parses data as exactly one JSON value, more strictly than
// encoding/json: it refuses invalid UTF-8 (and \u escapes of unpaired
// surrogates), duplicate object keys at any depth, trailing data after the
// value, numbers outside the range of a double (these three as I-JSON, RFC
// 7493, does), nesting deeper than 10000 levels and anything else that is not
// well-formed JSON.
// Objects decode to map[string]any, arrays to []any, numbers to json.Number,
// and strings, booleans and null to string, bool and nil.
//
// Its error is a *DecodeError whose message says what is wrong and at which
// byte offset, so that a person can fix the input.
func DecodeStrict(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, &DecodeError{Offset: invalidUTF8Offset(data), Reason: "invalid UTF-8"}
	}
	d := decoder{dec: jsontext.NewDecoder(bytes.NewReader(data))}
	v, err := d.value()
	if err != nil {
		return nil, describe(err)
	}
	end := d.dec.InputOffset()
	if _, err := d.dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, &DecodeError{Offset: skipSpace(data, end), Reason: "trailing data after the JSON value"}
	}
	return v, nil
}

// decoder builds the value tree from jsontext tokens; jsontext itself refuses
// duplicate names and malformed input.
type decoder struct {
	dec *jsontext.Decoder
}

func (d *decoder) value() (any, error) {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return d.number(tok.String())
	case '{':
		return d.object()
	default: // '[': ReadToken returns only valid value starts here
		return d.array()
	}
}

func (d *decoder) number(text string) (any, error) {
	if f, err := strconv.ParseFloat(text, 64); err != nil || math.IsInf(f, 0) {
		return nil, &DecodeError{
			Offset: d.dec.InputOffset() - int64(len(text)),
			Reason: fmt.Sprintf("number %s is out of the range of a double", text),
		}
	}
	return json.Number(text), nil
}

func (d *decoder) object() (any, error) {
	obj := make(map[string]any)
	for d.dec.PeekKind() == '"' {
		tok, err := d.dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids tok
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		obj[name] = v
	}
	if _, err := d.dec.ReadToken(); err != nil { // '}', or the syntax error
		return nil, err
	}
	return obj, nil
}

func (d *decoder) array() (any, error) {
	arr := make([]any, 0, 4)
	for k := d.dec.PeekKind(); k != ']' && k != 0; k = d.dec.PeekKind() {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	if _, err := d.dec.ReadToken(); err != nil { // ']', or the syntax error
		return nil, err
	}
	return arr, nil
}

// describe turns a jsontext error into a DecodeError a person can act on.
func describe(err error) error {
	var de *DecodeError
	if errors.As(err, &de) {
		return de
	}
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) { // jsontext returns a bare io.EOF when there is no value at all
		return &DecodeError{Reason: "no JSON value (the input is empty or only whitespace)"}
	}
	reason, ptr := se.Err.Error(), se.JSONPointer
	switch {
	case errors.Is(se.Err, io.ErrUnexpectedEOF):
		reason = "unexpected end of input"
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		reason = "duplicate key " + strconv.Quote(ptr.LastToken())
		ptr = parentPointer(ptr)
	}
	if ptr != "" {
		reason += " in " + shorten(string(ptr))
	}
	return &DecodeError{Offset: se.ByteOffset, Reason: reason}
}

// shorten cuts a long JSON Pointer (a deeply nested value) to keep the
// message readable.
func shorten(ptr string) string {
	const max = 120
	if len(ptr) <= max {
		return ptr
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(ptr[cut]) {
		cut--
	}
	return ptr[:cut] + "…"
}

func parentPointer(p jsontext.Pointer) jsontext.Pointer {
	i := bytes.LastIndexByte([]byte(p), '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

func invalidUTF8Offset(data []byte) int64 {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return int64(i)
		}
		i += size
	}
	return int64(len(data))
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\n', '\r':
			off++
		default:
			return off
		}
	}
	return off
}
