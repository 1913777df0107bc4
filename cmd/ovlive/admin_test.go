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
		admin(t, other, "person", "add", "--name", "x") // a write creates the database
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
		{"UnknownNoun", 2, []string{"admin", "--db", db, "persons", "add"}, `ovlive admin: unknown command "persons"`},
		{"UnknownVerb", 2, []string{"admin", "--db", db, "person", "frob"}, `ovlive admin person: unknown command "frob"`},
		{"NounWithoutVerb", 2, []string{"admin", "--db", db, "person"}, "usage: ovlive admin person COMMAND"},
		{"MissingName", 2, []string{"admin", "--db", db, "person", "add"}, "--name is required"},
		{"UnknownFlag", 2, []string{"admin", "--db", db, "person", "add", "--nmae", "x"}, "flag provided but not defined: -nmae"},
		{"ExtraArgument", 2, []string{"admin", "--db", db, "person", "list", "extra"}, "unexpected arguments: extra"},
		{"RevokeNoID", 2, []string{"admin", "--db", db, "credential", "revoke"}, "want 1 argument"},
		{"TokenBothHolders", 2, []string{"admin", "--db", db, "token", "issue", "--service", "s", "--person", "p"}, "exactly one of --service"},
		{"TokenNoHolder", 2, []string{"admin", "--db", db, "token", "issue"}, "exactly one of --service"},
		{"NegativeTTL", 2, []string{"admin", "--db", db, "session", "issue", "--person", person, "--ttl", "-1h"}, "--ttl must not be negative"},
		{"BadKind", 2, []string{"admin", "--db", db, "credential", "list", "--kind", "cookie"}, `--kind "cookie" is unknown`},
		{"BadFormat", 2, []string{"admin", "--db", db, "--format", "yaml", "person", "list"}, `--format "yaml": use json or table`},
		{"LinkTooLong", 2, []string{"admin", "--db", db, "session", "link", "--person", person, "--ttl", "48h"}, "at most 24h0m0s"},
		{"LinkBadBase", 2, []string{"admin", "--db", db, "session", "link", "--person", person, "--base-url", "ftp://x"}, "give an http:// or https:// URL"},
		{"CapabilityNoService", 2, []string{"admin", "--db", db, "capability", "add", "x.y"}, "--service is required"},
		{"DeleteNoID", 2, []string{"admin", "--db", db, "person", "delete"}, "want 1 argument"},
		{"UnknownOwner", 1, []string{"admin", "--db", db, "stream", "add", "--owner", "per_nobody"}, `owner "per_nobody" is not a known person`},
		{"TakenStreamID", 1, []string{"admin", "--db", db, "stream", "add", "--owner", person, "--id", "taken"}, `stream "taken" already exists`},
		{"BadStreamID", 1, []string{"admin", "--db", db, "stream", "add", "--owner", person, "--id", "a/b"}, `stream id "a/b" is not valid`},
		{"UnknownService", 1, []string{"admin", "--db", db, "token", "issue", "--service", "svc_nobody"}, `service "svc_nobody" does not exist`},
		{"RevokeUnknown", 1, []string{"admin", "--db", db, "credential", "revoke", "cred_nobody"}, `credential "cred_nobody" not found`},
		{"DeleteUnknownPerson", 1, []string{"admin", "--db", db, "person", "delete", "per_nobody"}, `person "per_nobody" not found`},
		{"DeleteUnknownStream", 1, []string{"admin", "--db", db, "stream", "delete", "nope"}, `stream "nope" not found`},
		{"CapabilityUnknownService", 1, []string{"admin", "--db", db, "capability", "remove", "--service", "svc_nobody", "x"}, `service "svc_nobody" not found`},
		{"SessionsOfNobody", 1, []string{"admin", "--db", db, "session", "revoke", "--person", "per_nobody"}, `person "per_nobody" not found`},
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

// TestHelp: every command and subcommand answers --help on stdout with
// exit 0 and nothing on stderr.
func TestHelp(t *testing.T) {
	cases := [][]string{{"--help"}, {"help"}, {"serve", "--help"}, {"admin", "--help"}, {"admin", "person", "--help"}}
	for _, a := range adminActions() {
		cases = append(cases, []string{"admin", a.noun, a.verb, "--help"})
	}
	for _, args := range cases {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			out, errText := runCode(t, 0, args...)
			if !strings.Contains(out, "usage: ovlive") || errText != "" {
				t.Fatalf("--help printed %q on stdout and %q on stderr", out, errText)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, errText := runCode(t, 0, "--version")
	if !strings.HasPrefix(out, "ovlive ") || !strings.Contains(out, "go1.") || errText != "" {
		t.Fatalf("--version printed %q, %q", out, errText)
	}
}
