package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// runCode runs ovlive in process and returns its output, failing unless it
// exits with want.
func runCode(tb testing.TB, want int, args ...string) (stdout, stderr string) {
	tb.Helper()
	var out, errb bytes.Buffer
	if code := run(tb.Context(), args, strings.NewReader(""), &out, &errb); code != want {
		tb.Fatalf("ovlive %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// admin runs `ovlive admin --db db args...`, wants exit 0 and one JSON
// object on stdout, and returns it.
func admin(tb testing.TB, db string, args ...string) map[string]any {
	tb.Helper()
	out, _ := runCode(tb, 0, append([]string{"admin", "--db", db}, args...)...)
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&v); err != nil || dec.More() {
		tb.Fatalf("admin %v printed %q: want one JSON object (%v)", args, out, err)
	}
	return v
}

func str(tb testing.TB, v map[string]any, key string) string {
	tb.Helper()
	s, ok := v[key].(string)
	if !ok || s == "" {
		tb.Fatalf("%v has no string %q", v, key)
	}
	return s
}

func TestAdmin(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "live.db")
	person := str(t, admin(t, db, "person", "add", "--name", "Ada"), "id")
	// --db may also follow the command.
	out, _ := runCode(t, 0, "admin", "person", "add", "--name", "Bob", "--db", db)
	if !strings.HasPrefix(out, `{"id":"per_`) {
		t.Fatalf("person add with a trailing --db printed %q", out)
	}
	if got := str(t, admin(t, db, "stream", "add", "--owner", person, "--id", "demo"), "id"); got != "demo" {
		t.Fatalf("stream add --id demo gave id %q", got)
	}
	service := str(t, admin(t, db, "service", "add", "--name", "codes-sandbox", "--first-party",
		"--capability", "live.agent_sandbox.register", "--capability", "x.y"), "id")
	issued := map[string]string{}
	for _, tc := range []struct {
		name, field, prefix string
		args                []string
	}{
		{"ServiceToken", "token", "ovs_", []string{"token", "issue", "--service", service}},
		{"PersonToken", "token", "ovp_", []string{"token", "issue", "--person", person, "--ttl", "720h"}},
		{"DeskTicket", "ticket", "ovd_", []string{"desk-ticket", "issue", "--person", person}},
		{"Session", "session", "ovsess_", []string{"session", "issue", "--person", person, "--ttl", "24h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := admin(t, db, tc.args...)
			if secret := str(t, v, tc.field); !strings.HasPrefix(secret, tc.prefix) {
				t.Fatalf("%s = %q, want prefix %s", tc.field, secret, tc.prefix)
			}
			issued[str(t, v, "id")] = str(t, v, tc.field)
		})
	}
	t.Run("Lists", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want int
		}{
			{[]string{"person", "list"}, 2},
			{[]string{"stream", "list"}, 1},
			{[]string{"service", "list"}, 1},
			{[]string{"credential", "list"}, 4},
			{[]string{"credential", "list", "--kind", "desk_ticket"}, 1},
			{[]string{"credential", "list", "--kind", "session"}, 1},
		} {
			out, _ := runCode(t, 0, append([]string{"admin", "--db", db}, tc.args...)...)
			var v struct{ Items []map[string]any }
			if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Items) != tc.want {
				t.Fatalf("%v: %d items (%v), want %d: %s", tc.args, len(v.Items), err, tc.want, out)
			}
			for _, secret := range issued {
				if strings.Contains(out, secret) || strings.Contains(out, "hash") {
					t.Fatalf("%v shows a secret or hash: %s", tc.args, out)
				}
			}
		}
	})
	t.Run("Revoke", func(t *testing.T) {
		for id := range issued {
			if v := admin(t, db, "credential", "revoke", id); v["revoked"] != true {
				t.Fatalf("revoke printed %v", v)
			}
			out, _ := runCode(t, 0, "admin", "--db", db, "credential", "list")
			if !strings.Contains(out, `"revoked_at"`) {
				t.Fatalf("credential list after revoke shows no revoked_at: %s", out)
			}
			break
		}
	})
	t.Run("EmptyList", func(t *testing.T) {
		other := "sqlite:" + filepath.Join(t.TempDir(), "empty.db")
		if out, _ := runCode(t, 0, "admin", "--db", other, "stream", "list"); out != "{\"items\":[]}\n" {
			t.Fatalf("empty list printed %q", out)
		}
	})
}

// TestAdminErrors checks exit codes and that stderr says what to fix.
func TestAdminErrors(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "live.db")
	person := str(t, admin(t, db, "person", "add", "--name", "Ada"), "id")
	admin(t, db, "stream", "add", "--owner", person, "--id", "taken")
	for _, tc := range []struct {
		name string
		code int
		args []string
		want string
	}{
		{"NoCommand", 2, []string{}, "usage: ovlive COMMAND"},
		{"UnknownCommand", 2, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"AdminNoAction", 2, []string{"admin", "--db", db}, "name what to do"},
		{"UnknownAction", 2, []string{"admin", "--db", db, "person", "delete"}, `unknown admin command "person delete"`},
		{"MissingName", 2, []string{"admin", "--db", db, "person", "add"}, "--name is required"},
		{"UnknownFlag", 2, []string{"admin", "--db", db, "person", "add", "--nmae", "x"}, "flag provided but not defined: -nmae"},
		{"ExtraArgument", 2, []string{"admin", "--db", db, "person", "list", "extra"}, "unexpected arguments: extra"},
		{"RevokeNoID", 2, []string{"admin", "--db", db, "credential", "revoke"}, "want 1 argument"},
		{"TokenBothHolders", 2, []string{"admin", "--db", db, "token", "issue", "--service", "s", "--person", "p"}, "exactly one of --service"},
		{"TokenNoHolder", 2, []string{"admin", "--db", db, "token", "issue"}, "exactly one of --service"},
		{"NegativeTTL", 2, []string{"admin", "--db", db, "session", "issue", "--person", person, "--ttl", "-1h"}, "--ttl must not be negative"},
		{"BadKind", 2, []string{"admin", "--db", db, "credential", "list", "--kind", "cookie"}, `--kind "cookie" is unknown`},
		{"UnknownOwner", 1, []string{"admin", "--db", db, "stream", "add", "--owner", "per_nobody"}, `owner "per_nobody" is not a known person`},
		{"TakenStreamID", 1, []string{"admin", "--db", db, "stream", "add", "--owner", person, "--id", "taken"}, `stream "taken" already exists`},
		{"BadStreamID", 1, []string{"admin", "--db", db, "stream", "add", "--owner", person, "--id", "a/b"}, `stream id "a/b" is not valid`},
		{"UnknownService", 1, []string{"admin", "--db", db, "token", "issue", "--service", "svc_nobody"}, `service "svc_nobody" does not exist`},
		{"RevokeUnknown", 1, []string{"admin", "--db", db, "credential", "revoke", "cred_nobody"}, `credential "cred_nobody" not found`},
		{"BadDSN", 1, []string{"admin", "--db", "mysql://x", "person", "list"}, "use sqlite:PATH or postgres://"},
		{"SchemaOnSQLite", 1, []string{"admin", "--db", db, "--db-schema", "x", "person", "list"}, "--db-schema is for PostgreSQL only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errText := runCode(t, tc.code, tc.args...)
			if out != "" {
				t.Fatalf("stdout %q, want nothing", out)
			}
			if !strings.Contains(errText, tc.want) {
				t.Fatalf("stderr %q does not say %q", errText, tc.want)
			}
		})
	}
}

// TestHelp checks that every command answers --help with exit 0.
func TestHelp(t *testing.T) {
	cases := [][]string{{"--help"}, {"serve", "--help"}, {"admin", "--help"}}
	for name := range adminActions() {
		cases = append(cases, append([]string{"admin"}, append(strings.Fields(name), "--help")...))
	}
	for _, args := range cases {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			_, errText := runCode(t, 0, args...)
			if !strings.Contains(errText, "usage: ovlive") {
				t.Fatalf("--help printed %q", errText)
			}
		})
	}
}
