package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// answer is what a run printed and returned.
type answer struct {
	Code           int
	Stdout, Stderr string
}

func TestProgramRun(t *testing.T) {
	echo := func(_ context.Context, args []string, _ io.Reader, stdout, _ io.Writer) int {
		io.WriteString(stdout, "ran "+strings.Join(args, " "))
		return 7
	}
	p := Program{Name: "prog", Version: "1.2 (x)", Footer: "exit status: 7 always",
		Commands: []Command{{Name: "serve", Summary: "serve things", Run: echo}, {Name: "admin", Summary: "administer", Run: echo}}}
	usage := "usage: prog COMMAND [flags]  (COMMAND --help for its flags)\n  serve  serve things\n  admin  administer\nexit status: 7 always\n"
	for _, tc := range []struct {
		name string
		args []string
		want answer
	}{
		{"OK", []string{"admin", "--x"}, answer{7, "ran --x", ""}},
		{"Help", []string{"--help"}, answer{0, usage, ""}},
		{"HelpWord", []string{"help"}, answer{0, usage, ""}},
		{"Version", []string{"--version"}, answer{0, "prog 1.2 (x)\n", ""}},
		{"ErrNoCommand", nil, answer{2, "", usage}},
		{"ErrUnknown", []string{"nope"}, answer{2, "", "prog: unknown command \"nope\"\n" + usage}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := answer{p.Run(t.Context(), tc.args, nil, &out, &errb), out.String(), errb.String()}
			if got != tc.want {
				t.Fatalf("Run(%q) = %+v,\nwant %+v", tc.args, got, tc.want)
			}
		})
	}
	t.Run("NoVersion", func(t *testing.T) {
		var out, errb bytes.Buffer
		p.Version = ""
		if code := p.Run(t.Context(), []string{"--version"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "--version"`) {
			t.Fatalf("exit %d, stderr %q", code, errb.String())
		}
	})
}

func TestParse(t *testing.T) {
	usage := "usage: prog sub [--x V] ARG\n\nDoes things.\n\nflags:\n  -x string\n    \tthe x\n"
	// A usage error says why in one line, then the synopsis and where the
	// rest is: not the whole usage.
	short := "usage: prog sub [--x V] ARG\n(prog sub --help tells every flag)\n"
	for _, tc := range []struct {
		name     string
		args     []string
		min, max int
		want     answer
		ok       bool
		wantX    string
	}{
		{"OK", []string{"--x", "v", "a"}, 1, 1, answer{0, "", ""}, true, "v"},
		{"OKUnbounded", []string{"a", "b", "c"}, 1, -1, answer{0, "", ""}, true, ""},
		{"Help", []string{"--help"}, 1, 1, answer{0, usage, ""}, false, ""},
		{"ErrBadFlag", []string{"--nope"}, 1, 1, answer{2, "", "prog sub: flag provided but not defined: -nope\n" + short}, false, ""},
		{"ErrBadValue", []string{"-x"}, 1, 1, answer{2, "", "prog sub: flag needs an argument: -x\n" + short}, false, ""},
		{"ErrMissing", nil, 1, 1, answer{2, "", "prog sub: want 1 argument(s), got 0\n" + short}, false, ""},
		{"ErrExtra", []string{"a", "b"}, 0, 0, answer{2, "", "prog sub: unexpected arguments: a b\n" + short}, false, ""},
		{"ErrRange", []string{"a", "b", "c"}, 1, 2, answer{2, "", "prog sub: wrong number of arguments (3)\n" + short}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewFlagSet("prog sub", "[--x V] ARG", "Does things.")
			x := fs.String("x", "", "the x")
			var out, errb bytes.Buffer
			code, ok := Parse(fs, tc.args, tc.min, tc.max, &out, &errb)
			got := answer{code, out.String(), errb.String()}
			if got != tc.want || ok != tc.ok || *x != tc.wantX {
				t.Fatalf("Parse = %+v ok=%v x=%q,\nwant %+v ok=%v x=%q", got, ok, *x, tc.want, tc.ok, tc.wantX)
			}
		})
	}
}

func TestUsageError(t *testing.T) {
	fs := NewFlagSet("prog sub", "ARG", "")
	var errb bytes.Buffer
	if code := UsageError(fs, &errb, "--%s is required", "name"); code != 2 || errb.String() != "prog sub: --name is required\nusage: prog sub ARG\n(prog sub --help tells every flag)\n" {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
