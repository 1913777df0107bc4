package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Request bodies are decoded as strictly as Live decodes a check-in: names
// match fields exactly (case included), an unknown name at any depth and a
// name given twice in one object are refused, strings must be valid UTF-8,
// and the body holds one JSON object and nothing after it. Every refusal is
// a 400 naming the field, in the API's words, never Go's.

// decodeJSON reads exactly one JSON object into v (see above); an empty
// body is refused.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return s.decode(w, r, v, false)
}

// decodeOptionalJSON is decodeJSON, except that an empty body (or one of
// white space only) leaves v as it is: every field its default.
func (s *Server) decodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return s.decode(w, r, v, true)
}

func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &Error{Status: statusOf(CodeUnsupportedType), Code: CodeUnsupportedType,
			Message: "send the body as application/json"}
	}
	dec := jsontext.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if dec.PeekKind() == 0 {
		if _, err := dec.ReadToken(); errors.Is(err, io.EOF) {
			if emptyOK {
				return nil
			}
			return badRequest("the body is empty; send a JSON object")
		}
	}
	if err := jsonv2.UnmarshalDecode(dec, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return jsonError(err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return tooBig
		}
		return badRequest("the body must hold one JSON object and nothing after it")
	}
	return nil
}

// jsonError explains why a body could not be decoded, naming the field.
func jsonError(err error) error {
	var tooBig *http.MaxBytesError
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &tooBig):
		return tooBig
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("the body ends in the middle of the JSON")
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		return badRequest("field %q is given twice; give each field once", fieldPath(syn.JSONPointer))
	case errors.As(err, &syn):
		return badRequest("the body is not valid JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem) && errors.Is(sem.Err, jsonv2.ErrUnknownName):
		return badRequest("unknown field %q; see docs/openapi.yaml", fieldPath(sem.JSONPointer))
	case errors.As(err, &sem) && sem.JSONPointer == "":
		return badRequest("the body must be a JSON object, not %s", jsonKind(sem.JSONKind, nil))
	case errors.As(err, &sem) && sem.Err != nil && sem.GoType != nil && reflect.PointerTo(sem.GoType).Implements(unmarshaler):
		return badRequest("field %q: %v", fieldPath(sem.JSONPointer), sem.Err) // a type that reads itself says what is wrong
	case errors.As(err, &sem) && sem.JSONKind != 0 && sem.GoType != nil:
		return badRequest("field %q must be %s, not %s", fieldPath(sem.JSONPointer), goKind(sem.GoType), jsonKind(sem.JSONKind, sem.JSONValue))
	case errors.As(err, &sem) && sem.Err != nil:
		return badRequest("field %q: %v", fieldPath(sem.JSONPointer), sem.Err)
	}
	return badRequest("the body is not the JSON this route takes; see docs/openapi.yaml")
}

// unmarshaler is the interface of a type that reads its JSON itself
// (agentsandbox.EgressEntry).
var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// fieldPath names the value at p as a person writes it: limits.memory_mb,
// argv[0].
func fieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 32); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// jsonKind names a JSON value of kind k (a number by its value, when
// known).
func jsonKind(k jsontext.Kind, v jsontext.Value) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		if len(v) > 0 && len(v) <= 32 {
			return string(v)
		}
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "that"
}

// goKind says what JSON a field of type t takes.
func goKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return fmt.Sprintf("a %s", t.Kind())
}
