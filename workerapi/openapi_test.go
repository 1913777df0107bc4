package workerapi

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
)

// schemaTypes maps every schema of docs/openapi.yaml to the Go type(s)
// that state it; a schema that several types state together (the events of
// a command's output, one struct on the wire) names them all.
var schemaTypes = map[string][]reflect.Type{
	"ErrorBody":       {reflect.TypeFor[ErrorBody]()},
	"Error":           {reflect.TypeFor[Error]()},
	"CreateRequest":   {reflect.TypeFor[CreateRequest]()},
	"Limits":          {reflect.TypeFor[SandboxLimits]()},
	"Sandbox":         {reflect.TypeFor[Sandbox]()},
	"SandboxList":     {reflect.TypeFor[SandboxList]()},
	"FileEntry":       {reflect.TypeFor[FileEntry]()},
	"DirListing":      {reflect.TypeFor[DirListing]()},
	"ExecRequest":     {reflect.TypeFor[ExecRequest]()},
	"SelfTestSummary": {reflect.TypeFor[SelfTestSummary]()},
	"Status":          {reflect.TypeFor[Status]()},
	"RequestLimits":   {reflect.TypeFor[agentsandbox.Limits]()},
	"PatchRequest":    {reflect.TypeFor[PatchRequest]()},
	"Usage":           {reflect.TypeFor[agentsandbox.Usage]()},
	"SandboxState":    {reflect.TypeFor[SandboxState]()},
	"Process":         {reflect.TypeFor[Process]()},
	"ProcessList":     {reflect.TypeFor[ProcessList]()},
	"SignalRequest":   {reflect.TypeFor[SignalRequest]()},
	"StdinRequest":    {reflect.TypeFor[StdinRequest]()},
	"AttachMessage":   {reflect.TypeFor[AttachMessage]()},
	"WipeReport":      {reflect.TypeFor[WipeReport]()},
	"EgressPolicy":    {reflect.TypeFor[agentsandbox.EgressPolicy]()},
	"EgressRule":      {reflect.TypeFor[agentsandbox.EgressEntry]()},
	"SecretRequest":   {reflect.TypeFor[agentsandbox.Secret]()},
	"SecretInfo":      {reflect.TypeFor[SecretInfo]()},
	"BrowserVersion":  {reflect.TypeFor[BrowserVersion]()},
	"PreviewRequest":  {reflect.TypeFor[PreviewRequest]()},
	"Preview":         {reflect.TypeFor[Preview]()},
	"ImageRequest":    {reflect.TypeFor[ImageRequest]()},
	"Image":           {reflect.TypeFor[Image]()},
	"ImageList":       {reflect.TypeFor[ImageList]()},
	// ExecEvent is a oneOf of the five below; ExecEvent states them all.
	"ExecEvent":  nil,
	"TextEvent":  {reflect.TypeFor[ExecEvent]()},
	"BytesEvent": {reflect.TypeFor[ExecEvent]()},
	"DropEvent":  {reflect.TypeFor[ExecEvent]()},
	"ExitEvent":  {reflect.TypeFor[ExecEvent]()},
	"ErrorEvent": {reflect.TypeFor[ExecEvent]()},
}

// unions are the Go types that state several schemas at once.
var unions = map[reflect.Type][]string{
	reflect.TypeFor[ExecEvent](): {"TextEvent", "BytesEvent", "DropEvent", "ExitEvent", "ErrorEvent"},
}

// jsonFields are the JSON names of t's fields, embedded structs' included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && tag == "":
			out = append(out, jsonFields(f.Type)...)
		case tag != "":
			out = append(out, tag)
		default:
			out = append(out, f.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIFields keeps docs/openapi.yaml equal to this package, field by
// field: every schema is stated by a Go type here (or the root package's
// vocabulary), and each type's JSON fields are its schema's properties.
func TestOpenAPIFields(t *testing.T) {
	raw, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	props := func(name string) []string {
		var out []string
		for p := range doc.Components.Schemas[name].Properties {
			out = append(out, p)
		}
		slices.Sort(out)
		return out
	}
	for name := range doc.Components.Schemas {
		types, ok := schemaTypes[name]
		if !ok {
			t.Errorf("schema %s of docs/openapi.yaml has no Go type in workerapi (add it, and to schemaTypes)", name)
		}
		for _, typ := range types {
			want := props(name)
			if names, ok := unions[typ]; ok {
				want = nil
				for _, n := range names {
					want = append(want, props(n)...)
				}
				slices.Sort(want)
				want = slices.Compact(want)
			}
			if got := jsonFields(typ); !slices.Equal(got, want) {
				t.Errorf("%s: %v has JSON fields %v, the document %v", name, typ, got, want)
			}
		}
	}
	for name := range schemaTypes {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("schemaTypes names %s, which docs/openapi.yaml lacks", name)
		}
	}
}
