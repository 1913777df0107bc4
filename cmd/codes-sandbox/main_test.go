package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDispatchFlags covers what every subcommand does before any work: -h
// exits 0, a bad flag or a stray argument exits 2 with the usage.
func TestDispatchFlags(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{name: "Help", args: []string{"help"}, wantCode: 0, wantStderr: "usage: codes-sandbox COMMAND"},
		{name: "ErrNoCommand", args: nil, wantCode: 2, wantStderr: "usage: codes-sandbox COMMAND"},
		{name: "ErrUnknownCommand", args: []string{"nope"}, wantCode: 2, wantStderr: `unknown command "nope"`},
		{name: "RunHelp", args: []string{"run", "-h"}, wantCode: 0, wantStderr: "usage: codes-sandbox run"},
		{name: "ErrRunBadFlag", args: []string{"run", "--bogus"}, wantCode: 2, wantStderr: "flag provided but not defined: -bogus"},
		{name: "ServeHelp", args: []string{"serve", "--help"}, wantCode: 0, wantStderr: "usage: codes-sandbox serve"},
		{name: "ErrServeBadFlag", args: []string{"serve", "--bogus"}, wantCode: 2, wantStderr: "flag provided but not defined: -bogus"},
		{name: "ErrServeStrayArg", args: []string{"serve", "stray"}, wantCode: 2, wantStderr: "usage: codes-sandbox serve"},
		{name: "ErrServeCapacityZero", args: []string{"serve", "--capacity", "0"}, wantCode: 2, wantStderr: "--capacity is 0; give 1 to 4096"},
		{name: "ErrSelftestMemoryZero", args: []string{"selftest", "--memory-mb", "0"}, wantCode: 2, wantStderr: "--memory-mb is 0; give at least 16"},
		{name: "ErrSelftestPids", args: []string{"selftest", "--pids", "4"}, wantCode: 2, wantStderr: "--pids is 4; give at least 16"},
		{name: "SelftestHelp", args: []string{"selftest", "--help"}, wantCode: 0, wantStderr: "usage: codes-sandbox selftest"},
		{name: "ErrSelftestStrayArg", args: []string{"selftest", "stray"}, wantCode: 2, wantStderr: "usage: codes-sandbox selftest"},
		{name: "CheckinHelp", args: []string{"checkin", "--help"}, wantCode: 0, wantStderr: "usage: codes-sandbox checkin"},
		{name: "ErrCheckinNoOnce", args: []string{"checkin"}, wantCode: 2, wantStderr: "usage: codes-sandbox checkin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			if code != tc.wantCode || !strings.Contains(errb.String(), tc.wantStderr) {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, errb.String(), tc.wantCode, tc.wantStderr)
			}
			if out.Len() != 0 {
				t.Fatalf("stdout %q, want nothing", out.String())
			}
		})
	}
}
