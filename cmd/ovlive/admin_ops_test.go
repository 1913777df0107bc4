package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadOnlyNeverCreates: the commands that only read fail with "no
// database at" on a path where none is, and leave nothing there.
func TestReadOnlyNeverCreates(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, noun := range []string{"person", "stream", "service", "credential"} {
		t.Run(noun, func(t *testing.T) {
			args := []string{"admin", "--db=sqlite:" + filepath.Join(dir, "elsewhere.db"), noun, "list"}
			out, errText := runCode(t, 1, args...)
			if out != "" || !strings.Contains(errText, "no database at") {
				t.Fatalf("%v: stdout %q stderr %q, want no database at", args, out, errText)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("a read-only command left %d files in %s", len(entries), dir)
			}
		})
	}
}

// TestNoDatabaseNamed: without --db (nor OVLIVE_DB, nor db in the config
// file) every command is a usage error and creates nothing where it was
// started: there is no ./ovlive.db by default.
func TestNoDatabaseNamed(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	config := filepath.Join(dir, "ovlive.toml")
	if err := os.WriteFile(config, []byte("listen = \"127.0.0.1:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"admin", "person", "list"},
		{"admin", "person", "add", "--name", "Ada"},
		{"admin", "--config", config, "person", "add", "--name", "Ada"},
		{"serve", "--listen", "127.0.0.1:0"},
		{"serve", "--config", config},
	} {
		out, errText := runCode(t, 2, args...)
		if out != "" || !strings.Contains(errText, "no database: give --db sqlite:PATH") || strings.Count(errText, "\n") > 3 {
			t.Errorf("%v: stdout %q stderr %q, want a short usage error saying to give --db", args, out, errText)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("commands without a database left files in %s: %v", dir, entries)
	}
}

// TestAdminLifecycle: delete, capabilities, sessions revoked at once,
// sign-in links, and the credential list with names and last use.
func TestAdminLifecycle(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "live.db")
	ada := str(t, admin(t, db, "person", "add", "--name", "Ada"), "id")
	bob := str(t, admin(t, db, "person", "add", "--name", "Bob"), "id")
	admin(t, db, "stream", "add", "--owner", ada, "--id", "ada-1")
	admin(t, db, "stream", "add", "--owner", bob, "--id", "bob-1")
	svc := str(t, admin(t, db, "service", "add", "--name", "codes-sandbox", "--first-party"), "id")
	t.Run("Capabilities", func(t *testing.T) {
		for _, tc := range []struct {
			verb, cap string
			want      []any
		}{
			{"add", "live.agent_sandbox.register", []any{"live.agent_sandbox.register"}},
			{"add", "x.y", []any{"live.agent_sandbox.register", "x.y"}},
			{"add", "x.y", []any{"live.agent_sandbox.register", "x.y"}},
			{"remove", "live.agent_sandbox.register", []any{"x.y"}},
		} {
			got := admin(t, db, "capability", tc.verb, "--service", svc, tc.cap)
			if want := map[string]any{"id": svc, "capabilities": tc.want}; !reflect.DeepEqual(got, want) {
				t.Fatalf("capability %s %s = %v, want %v", tc.verb, tc.cap, got, want)
			}
		}
	})
	tok := str(t, admin(t, db, "token", "issue", "--service", svc), "id")
	s1 := str(t, admin(t, db, "session", "issue", "--person", ada), "id")
	s2 := str(t, admin(t, db, "session", "issue", "--person", ada), "id")
	bobSession := str(t, admin(t, db, "session", "issue", "--person", bob), "id")
	t.Run("SessionRevoke", func(t *testing.T) {
		got := admin(t, db, "session", "revoke", "--person", ada)
		ids, _ := got["revoked"].([]any)
		if len(ids) != 2 || !containsAll(ids, s1, s2) {
			t.Fatalf("session revoke = %v, want %s and %s", got, s1, s2)
		}
		if again := admin(t, db, "session", "revoke", "--person", ada); !reflect.DeepEqual(again, map[string]any{"revoked": []any{}}) {
			t.Fatalf("second revoke = %v", again)
		}
	})
	var links []string
	t.Run("SessionLink", func(t *testing.T) {
		before := time.Now()
		got := admin(t, db, "session", "link", "--person", ada, "--base-url", "https://live.example.test/", "--ttl", "10m")
		links = append(links, str(t, got, "id"))
		u, err := url.Parse(str(t, got, "url"))
		if err != nil || u.Scheme != "https" || u.Host != "live.example.test" || u.Path != "/login" || !strings.HasPrefix(u.Query().Get("ticket"), "ovl_") {
			t.Fatalf("session link url %q (%v)", got["url"], err)
		}
		exp, err := time.Parse(time.RFC3339Nano, str(t, got, "expires_at"))
		if err != nil || exp.Before(before.Add(10*time.Minute-time.Second)) || exp.After(time.Now().Add(10*time.Minute)) {
			t.Fatalf("expires_at %v (%v), want 10 minutes from now", got["expires_at"], err)
		}
		t.Setenv("OVLIVE_BASE_URL", "http://127.0.0.1:9")
		got = admin(t, db, "session", "link", "--person", ada)
		if !strings.HasPrefix(got["url"].(string), "http://127.0.0.1:9/login?ticket=ovl_") {
			t.Fatalf("with OVLIVE_BASE_URL the link is %v", got["url"])
		}
		links = append(links, str(t, got, "id"))
	})
	t.Run("CredentialList", func(t *testing.T) {
		out, _ := runCode(t, 0, "admin", "--db", db, "credential", "list")
		var v struct{ Items []map[string]any }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		names := map[string]string{}
		for _, c := range v.Items {
			names[c["id"].(string)], _ = c["holder_name"].(string)
		}
		if names[tok] != "codes-sandbox" || names[s1] != "Ada" || names[bobSession] != "Bob" {
			t.Fatalf("holder names %v", names)
		}
	})
	t.Run("FormatTable", func(t *testing.T) {
		out, _ := runCode(t, 0, "admin", "--db", db, "--format", "table", "person", "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !regexp.MustCompile(`^ID\s+NAME\s+CREATED_AT$`).MatchString(lines[0]) ||
			!regexp.MustCompile(`^`+ada+`\s+Ada\s+20\d\d-`).MatchString(lines[1]) {
			t.Fatalf("table:\n%s", out)
		}
		out, _ = runCode(t, 0, "admin", "--db", db, "service", "list", "--format", "table")
		if !regexp.MustCompile(`(?m)^` + svc + `\s+codes-sandbox\s+true\s+x\.y\s`).MatchString(out) {
			t.Fatalf("service table:\n%s", out)
		}
		out, _ = runCode(t, 0, "admin", "--db", db, "--format", "table", "person", "add", "--name", "Cy")
		if !regexp.MustCompile(`^id\s+per_\S+\n$`).MatchString(out) {
			t.Fatalf("object as table: %q", out)
		}
	})
	t.Run("DeletePerson", func(t *testing.T) {
		got := admin(t, db, "person", "delete", ada)
		want := map[string]any{"kind": "person", "id": ada, "credentials": sortedAny(append(links, s1, s2)...), "streams": []any{"ada-1"}, "registrations": []any{}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("person delete = %v, want %v", got, want)
		}
	})
	t.Run("DeleteService", func(t *testing.T) {
		got := admin(t, db, "service", "delete", svc)
		want := map[string]any{"kind": "service", "id": svc, "credentials": []any{tok}, "streams": []any{}, "registrations": []any{}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("service delete = %v, want %v", got, want)
		}
	})
	t.Run("DeleteStream", func(t *testing.T) {
		if got := admin(t, db, "stream", "delete", "bob-1"); got["id"] != "bob-1" || got["kind"] != "stream" {
			t.Fatalf("stream delete = %v", got)
		}
		out, _ := runCode(t, 0, "admin", "--db", db, "stream", "list")
		if out != "{\"items\":[]}\n" {
			t.Fatalf("streams after the deletes: %s", out)
		}
	})
}

func containsAll(list []any, want ...string) bool {
	for _, w := range want {
		found := false
		for _, x := range list {
			found = found || x == w
		}
		if !found {
			return false
		}
	}
	return true
}

func sortedAny(ids ...string) []any {
	slices.Sort(ids)
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// TestSettings: a flag's value comes from the command line, else the
// environment, else the config file (TOML or JSON), else its default.
func TestSettings(t *testing.T) {
	dir := t.TempDir()
	toml := filepath.Join(dir, "ovlive.toml")
	if err := os.WriteFile(toml, []byte("# Live\nlisten = \"127.0.0.1:7001\"\nshutdown-timeout = \"7s\"\nsecure-cookies = true\nlog-level = \"debug\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jsonFile := filepath.Join(dir, "ovlive.json")
	if err := os.WriteFile(jsonFile, []byte(`{"listen":"127.0.0.1:7002","shutdown-timeout":"8s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("lisen = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type got struct {
		Listen, Timeout, Level string
		Secure                 bool
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    got
		wantErr string
	}{
		{"Defaults", nil, nil, got{"127.0.0.1:8080", "30s", "INFO", false}, ""},
		{"TOML", []string{"--config", toml}, nil, got{"127.0.0.1:7001", "7s", "DEBUG", true}, ""},
		{"JSON", []string{"--config", jsonFile}, nil, got{"127.0.0.1:7002", "8s", "INFO", false}, ""},
		{"ConfigFromEnv", nil, map[string]string{"OVLIVE_CONFIG": toml}, got{"127.0.0.1:7001", "7s", "DEBUG", true}, ""},
		{"EnvOverFile", []string{"--config", toml}, map[string]string{"OVLIVE_LISTEN": "127.0.0.1:7003", "OVLIVE_SECURE_COOKIES": "false"}, got{"127.0.0.1:7003", "7s", "DEBUG", false}, ""},
		{"FlagOverEnv", []string{"--listen", "127.0.0.1:7004", "--config", toml}, map[string]string{"OVLIVE_LISTEN": "127.0.0.1:7003"}, got{"127.0.0.1:7004", "7s", "DEBUG", true}, ""},
		{"ErrBadEnv", nil, map[string]string{"OVLIVE_SHUTDOWN_TIMEOUT": "soon"}, got{}, `OVLIVE_SHUTDOWN_TIMEOUT="soon"`},
		{"ErrUnknownKey", []string{"--config", bad}, nil, got{}, `unknown setting "lisen"`},
		{"ErrNoFile", []string{"--config", filepath.Join(dir, "missing.toml")}, nil, got{}, "read config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs, f := serveFlagSet()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := applySettings(fs, f.config)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("applySettings = %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := (got{f.listen, f.shutdownTimeout.String(), f.logLevel.String(), f.secureCookies}); g != tc.want {
				t.Fatalf("settings %+v, want %+v", g, tc.want)
			}
		})
	}
}
