package contract

import (
	"math/big"
	"net/url"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"openvibe.network/agentsandbox"
)

// flatten appends the leaves of the engine's error tree to errs, each as ajv
// reports it: instancePath and ajv's message. Inner nodes (the schema, a group
// of errors at one place, allOf, $ref) carry no error of their own in ajv.
func (v *validator) flatten(e *jsonschema.ValidationError, errs []agentsandbox.ValidationError) []agentsandbox.ValidationError {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			errs = v.flatten(c, errs)
		}
		return errs
	}
	path := instancePath(e.InstanceLocation)
	if r, ok := e.ErrorKind.(*kind.Required); ok {
		for _, p := range r.Missing { // ajv: one error per missing property
			errs = append(errs, agentsandbox.ValidationError{Path: path, Message: "must have required property '" + p + "'"})
		}
		return errs
	}
	return append(errs, agentsandbox.ValidationError{Path: path, Message: v.message(e)})
}

// message is ajv 8's wording for the error kinds the contracts' keywords
// produce; any other kind keeps the engine's English text.
func (v *validator) message(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return "must be " + strings.Join(v.declaredTypes(e.SchemaURL, k.Want), ",")
	case *kind.Const:
		return "must be equal to constant"
	case *kind.MaxLength:
		return "must NOT have more than " + strconv.Itoa(k.Want) + " characters"
	case *kind.MaxItems:
		return "must NOT have more than " + strconv.Itoa(k.Want) + " items"
	case *kind.Minimum:
		return "must be >= " + jsNumber(k.Want)
	case *kind.Format:
		return `must match format "` + k.Want + `"`
	default:
		return k.LocalizedString(message.NewPrinter(language.English))
	}
}

// declaredTypes returns the schema's "type" keyword at schemaURL in source
// order, as ajv prints it ("string,null"); the engine keeps types as a set.
func (v *validator) declaredTypes(schemaURL string, fallback []string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	node := v.doc
	for _, tok := range strings.Split(frag, "/")[1:] {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return fallback
		}
		tok = pointerUnescaper.Replace(tok)
		switch n := node.(type) {
		case map[string]any:
			node = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return fallback
			}
			node = n[i]
		default:
			return fallback
		}
	}
	obj, _ := node.(map[string]any)
	switch t := obj["type"].(type) {
	case string:
		return []string{t}
	case []any:
		types := make([]string, 0, len(t))
		for _, x := range t {
			s, _ := x.(string)
			types = append(types, s)
		}
		return types
	}
	return fallback
}

// pointerEscaper and pointerUnescaper escape and unescape a JSON Pointer
// reference token (RFC 6901). Replacers are safe for concurrent use.
var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// instancePath is ajv's instancePath: a JSON Pointer, "" for the root.
func instancePath(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(tok))
	}
	return b.String()
}

// jsNumber formats a schema number as JavaScript prints it.
func jsNumber(r *big.Rat) string {
	if r.IsInt() {
		return r.RatString()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
