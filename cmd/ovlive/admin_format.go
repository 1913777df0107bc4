package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printResult prints v, an admin command's result, as one JSON object or,
// with format "table", as a table: a listing ({"items":[…]}) one row per
// item under a header of every field name, any other object one field a
// line.
func printResult(w io.Writer, format string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if format != "table" {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	obj, err := orderedObject(data)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(obj) == 1 && obj[0].key == "items" && bytes.HasPrefix(obj[0].raw, []byte("[")) {
		var rows []json.RawMessage
		if err := json.Unmarshal(obj[0].raw, &rows); err != nil {
			return fmt.Errorf("table: %w", err)
		}
		if err := writeRows(tw, rows); err != nil {
			return err
		}
	} else {
		for _, f := range obj {
			fmt.Fprintf(tw, "%s\t%s\n", f.key, cell(f.raw))
		}
	}
	return tw.Flush()
}

// writeRows writes a header of every key the rows have (in the order they
// first appear) and one line per row.
func writeRows(tw io.Writer, rows []json.RawMessage) error {
	var cols []string
	seen := map[string]bool{}
	parsed := make([]map[string]json.RawMessage, len(rows))
	for i, r := range rows {
		obj, err := orderedObject(r)
		if err != nil {
			return err
		}
		parsed[i] = map[string]json.RawMessage{}
		for _, f := range obj {
			parsed[i][f.key] = f.raw
			if !seen[f.key] {
				seen[f.key] = true
				cols = append(cols, f.key)
			}
		}
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(tw, "(none)")
		return err
	}
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	for _, r := range parsed {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = cell(r[c])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return nil
}

// field is one key of a JSON object, with its raw value.
type field struct {
	key string
	raw json.RawMessage
}

// orderedObject decodes a JSON object keeping the order of its keys.
func orderedObject(data []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("table: not an object: %s", data)
	}
	var out []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("table: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("table: %w", err)
		}
		out = append(out, field{tok.(string), raw})
	}
	return out, nil
}

// cell shows a JSON value in a table: a string as it is, "-" for none,
// anything else as compact JSON.
func cell(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "-"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return "-"
		}
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return "-"
		}
		return strings.Join(list, ",")
	}
	return string(raw)
}
