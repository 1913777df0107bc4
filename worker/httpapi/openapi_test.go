package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// openAPIPath is the API's document (JSON, which is YAML too).
const openAPIPath = "../../docs/openapi.yaml"

// openAPI is the parsed document and a schema compiler over it.
type openAPI struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
}

func loadOpenAPI(tb testing.TB) *openAPI {
	tb.Helper()
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		tb.Fatalf("%s is not JSON: %v", openAPIPath, err)
	}
	if doc["openapi"] != "3.1.0" {
		tb.Fatalf("openapi version %v", doc["openapi"])
	}
	generic, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///openapi.json", generic); err != nil {
		tb.Fatal(err)
	}
	return &openAPI{doc: doc, compiler: c}
}

// operations lists "METHOD /path" of every operation of the document.
func (o *openAPI) operations() []string {
	var ops []string
	for p, item := range o.doc["paths"].(map[string]any) {
		for m := range item.(map[string]any) {
			if m != "parameters" {
				ops = append(ops, strings.ToUpper(m)+" "+p)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// TestOpenAPIDocument checks what OpenAPI 3.1 asks of the document beyond
// JSON Schema (a linter, scripts/lint-openapi.sh, checks the rest): info
// with a license, servers, every operation with an operationId, a summary
// and responses, every $ref resolving, and nothing of 3.2 (itemSchema).
func TestOpenAPIDocument(t *testing.T) {
	o := loadOpenAPI(t)
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(`"itemSchema"`)) {
		t.Error("the document uses itemSchema, which is OpenAPI 3.2; describe NDJSON lines with schema")
	}
	info := o.doc["info"].(map[string]any)
	if lic, ok := info["license"].(map[string]any); !ok || lic["name"] == nil {
		t.Errorf("info.license %v, want a name (and identifier or url)", info["license"])
	}
	if srv, ok := o.doc["servers"].([]any); !ok || len(srv) == 0 {
		t.Error("no servers")
	}
	ids := map[string]bool{}
	for p, item := range o.doc["paths"].(map[string]any) {
		for m, v := range item.(map[string]any) {
			if m == "parameters" {
				continue
			}
			op := v.(map[string]any)
			id, _ := op["operationId"].(string)
			if id == "" || ids[id] || op["summary"] == nil || len(op["responses"].(map[string]any)) == 0 {
				t.Errorf("%s %s: operationId %q (unique), summary and responses are required", m, p, id)
			}
			ids[id] = true
		}
	}
	var refs func(v any)
	refs = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if _, err := o.compiler.Compile("file:///openapi.json" + ref); err != nil && !strings.HasPrefix(ref, "#/components/responses/") {
					t.Errorf("$ref %s: %v", ref, err)
				}
				if name, ok := strings.CutPrefix(ref, "#/components/responses/"); ok {
					if _, ok := o.doc["components"].(map[string]any)["responses"].(map[string]any)[name]; !ok {
						t.Errorf("$ref %s resolves to nothing", ref)
					}
				}
			}
			for _, x := range v {
				refs(x)
			}
		case []any:
			for _, x := range v {
				refs(x)
			}
		}
	}
	refs(o.doc["paths"])
}

func TestOpenAPIRoutes(t *testing.T) {
	o := loadOpenAPI(t)
	var served []string
	for _, rt := range routes {
		served = append(served, rt.method+" "+strings.ReplaceAll(rt.path, "...}", "}"))
	}
	slices.Sort(served)
	if got := o.operations(); !slices.Equal(got, served) {
		t.Fatalf("the document's operations\n%v\ndiffer from the server's routes\n%v", got, served)
	}
}

// pointer escapes a JSON pointer token.
func pointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// responseSchema finds the schema the document gives the answer to method
// on urlPath with status and content type; ok false when the operation or
// status is not in the document.
func (o *openAPI) responseSchema(tb testing.TB, method, urlPath string, status int, ctype string) (*jsonschema.Schema, bool) {
	tb.Helper()
	paths := o.doc["paths"].(map[string]any)
	// A path with {path} last: another that matches is the more specific
	// (…/ports/{port}/preview before …/ports/{port}/{path}).
	keys := slices.SortedFunc(maps.Keys(paths), func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(a, "{path}"), strings.Count(b, "{path}")), strings.Compare(a, b))
	})
	for _, p := range keys {
		item := paths[p]
		re := regexp.MustCompile("^" + strings.NewReplacer("{path}", ".*", "{id}", "[^/]+", "{pid}", "[^/]+", "{port}", "[^/]+", "{digest}", "[^/]+").Replace(p) + "$")
		op, ok := item.(map[string]any)[strings.ToLower(method)].(map[string]any)
		if !ok || !re.MatchString(strings.SplitN(urlPath, "?", 2)[0]) {
			continue
		}
		resp, ok := op["responses"].(map[string]any)[strconv.Itoa(status)].(map[string]any)
		if !ok {
			return nil, false
		}
		base := "file:///openapi.json#/paths/" + pointer(p) + "/" + strings.ToLower(method) + "/responses/" + strconv.Itoa(status)
		if ref, ok := resp["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/components/responses/")
			resp = o.doc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
			base = "file:///openapi.json#/components/responses/" + pointer(name)
		}
		content, _ := resp["content"].(map[string]any)
		if status == 204 || status == 101 {
			if len(content) > 0 || ctype != "" {
				tb.Fatalf("%s %s: 204 with content %v / %q", method, p, content, ctype)
			}
			return nil, true
		}
		media, ok := content[ctype].(map[string]any)
		if !ok {
			tb.Fatalf("%s %s %d: content type %q is not in the document", method, p, status, ctype)
		}
		if _, ok := media["schema"]; !ok {
			tb.Fatalf("%s %s %d: no schema for %q", method, p, status, ctype)
		}
		loc := base + "/content/" + pointer(ctype) + "/schema"
		sch, err := o.compiler.Compile(loc)
		if err != nil {
			tb.Fatalf("compile %s: %v", loc, err)
		}
		return sch, true
	}
	return nil, false
}

// validate checks an answer against the document.
func (o *openAPI) validate(tb testing.TB, method, urlPath string, a answer) {
	tb.Helper()
	ctype := a.header.Get("Content-Type")
	sch, ok := o.responseSchema(tb, method, urlPath, a.status, ctype)
	if !ok {
		tb.Fatalf("%s %s: status %d is not in the document", method, urlPath, a.status)
	}
	if sch == nil || ctype == "application/octet-stream" || ctype == "application/x-tar" {
		return
	}
	lines := [][]byte{a.body}
	if ctype == "application/x-ndjson" {
		lines = bytes.Split(bytes.TrimSpace(a.body), []byte("\n"))
	}
	for _, l := range lines {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(l))
		if err != nil {
			tb.Fatalf("%s %s: body %q: %v", method, urlPath, l, err)
		}
		if err := sch.Validate(v); err != nil {
			tb.Fatalf("%s %s %d: body %s does not match the document: %v", method, urlPath, a.status, l, err)
		}
	}
}

// TestOpenAPIResponses checks every answer of the route table, and exec
// streams, against the schemas of the document.
func TestOpenAPIResponses(t *testing.T) {
	o := loadOpenAPI(t)
	for _, tc := range routeCases(func(f *apitest.Fake) { mustCreate(t, f) }) {
		t.Run(tc.name, func(t *testing.T) {
			_, p, a := tc.serve(t)
			if tc.wantCode == "no_route" || tc.wantCode == "method_not_allowed" || !strings.HasPrefix(p, "/v1/") {
				return // not an operation of the document
			}
			o.validate(t, tc.method, p, a)
		})
	}
	t.Run("ExecStream", func(t *testing.T) {
		fake := apitest.NewFake(1)
		id := mustCreate(t, fake)
		ts := newTestServer(t, fake, func(c *Config) { c.StreamBuffer = 100 })
		p := "/v1/sandboxes/" + id + "/exec"
		a := ts.do(t, "POST", p, `{"argv":["cat"],"stdin_base64":"`+base64.StdEncoding.EncodeToString([]byte("\xff"+strings.Repeat("a", 300)))+`"}`, nil)
		evs := readAll(t, bufio.NewReader(bytes.NewReader(a.body)))
		if len(evs) < 3 || evs[len(evs)-1].DroppedBytes == 0 {
			t.Fatalf("want data, a drop and an exit: %s", a.body)
		}
		o.validate(t, "POST", p, a)
	})
}
