package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	var ran []string
	cmds := []Command{
		{Name: "serve", Summary: "serve things", Run: func(_ context.Context, args []string, _ io.Reader, _, _ io.Writer) int {
			ran = append(ran, "serve "+strings.Join(args, " "))
			return 7
		}},
		{Name: "admin", Summary: "administer", Run: func(context.Context, []string, io.Reader, io.Writer, io.Writer) int { return 0 }},
	}
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stderr  string
		wantRan string
	}{
		{"OK", []string{"serve", "--x", "y"}, 7, "", "serve --x y"},
		{"ErrNoCommand", nil, 2, "usage: prog COMMAND", ""},
		{"Help", []string{"--help"}, 0, "  serve  serve things\n  admin  administer\n", ""},
		{"ErrUnknown", []string{"nope"}, 2, `prog: unknown command "nope"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = nil
			var out, errb bytes.Buffer
			code := Dispatch(context.Background(), "prog", cmds, tc.args, nil, &out, &errb)
			if code != tc.code || out.Len() != 0 || !strings.Contains(errb.String(), tc.stderr) {
				t.Fatalf("exit %d stdout %q stderr %q, want %d and %q", code, out.String(), errb.String(), tc.code, tc.stderr)
			}
			if strings.Join(ran, "|") != tc.wantRan {
				t.Fatalf("ran %q, want %q", ran, tc.wantRan)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		ok    bool
		wantX string
	}{
		{"OK", []string{"--x", "v", "rest"}, 0, true, "v"},
		{"Help", []string{"--help"}, 0, false, ""},
		{"ErrBadFlag", []string{"--nope"}, 2, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			x := fs.String("x", "", "")
			code, ok := ParseFlags(fs, tc.args)
			if code != tc.code || ok != tc.ok || *x != tc.wantX {
				t.Fatalf("ParseFlags = %d, %v (x %q), want %d, %v (x %q)", code, ok, *x, tc.code, tc.ok, tc.wantX)
			}
		})
	}
}
