package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/internal/buildinfo"
)

// TestMain lets this test binary serve as the sandbox init, as main does.
func TestMain(m *testing.M) {
	if code, ok := maybeInit(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestDispatchFlags covers what every subcommand does before any work: -h
// exits 0, a bad flag or a stray argument exits 2 with the usage.
func TestDispatchFlags(t *testing.T) {
	for _, tc := range []struct {
		name             string
		args             []string
		wantCode         int
		wantOut, wantErr string // substrings; "" means nothing
	}{
		{name: "Help", args: []string{"help"}, wantOut: "usage: codes-sandbox COMMAND"},
		{name: "Version", args: []string{"--version"}, wantOut: "codes-sandbox " + buildinfo.Read().String()},
		{name: "ErrNoCommand", args: nil, wantCode: 2, wantErr: "usage: codes-sandbox COMMAND"},
		{name: "ErrUnknownCommand", args: []string{"nope"}, wantCode: 2, wantErr: `unknown command "nope"`},
		{name: "RunHelp", args: []string{"run", "-h"}, wantOut: "usage: codes-sandbox run"},
		{name: "ErrRunBadFlag", args: []string{"run", "--bogus"}, wantCode: 2, wantErr: "flag provided but not defined: -bogus"},
		{name: "ServeHelp", args: []string{"serve", "--help"}, wantOut: "usage: codes-sandbox serve"},
		{name: "ErrServeBadFlag", args: []string{"serve", "--bogus"}, wantCode: 2, wantErr: "flag provided but not defined: -bogus"},
		{name: "ErrServeStrayArg", args: []string{"serve", "stray"}, wantCode: 2, wantErr: "codes-sandbox serve: unexpected arguments: stray"},
		{name: "ErrServeUploadZero", args: []string{"serve", "--max-upload-mb", "0"}, wantCode: 2, wantErr: "--max-upload-mb is 0; give at least 1"},
		{name: "ErrServeCapacityZero", args: []string{"serve", "--capacity", "0"}, wantCode: 2, wantErr: "--capacity is 0; give 1 to 4096"},
		// Every error in what serve was given is one plain line and exit 2,
		// never a JSON log line.
		{name: "ErrServeEgressDefault", args: []string{"serve", "--egress-default", "bogus"}, wantCode: 2, wantErr: `codes-sandbox serve: --egress-default "bogus": give none or public`},
		{name: "ErrServeEgressResolver", args: []string{"serve", "--egress-resolver", "nonsense"}, wantCode: 2, wantErr: `codes-sandbox serve: --egress-resolver "nonsense": want an IP address and port`},
		{name: "ErrServeEgressDeny", args: []string{"serve", "--egress-deny", "a.*.b"}, wantCode: 2, wantErr: `codes-sandbox serve: --egress-deny[0]: "a.*.b"`},
		{name: "ErrServeEgressHostAddress", args: []string{"serve", "--egress-host-address", "host.example"}, wantCode: 2, wantErr: `codes-sandbox serve: --egress-host-address "host.example": give an IP address without zone`},
		{name: "ErrServePool", args: []string{"serve", "--pool", "9"}, wantCode: 2, wantErr: "codes-sandbox serve: --pool is 9; give 0 to the capacity (2)"},
		{name: "ErrServePoolNegative", args: []string{"serve", "--pool", "-1"}, wantCode: 2, wantErr: "codes-sandbox serve: --pool is -1; give 0 to the capacity (2)"},
		{name: "ErrServePoolBrowser", args: []string{"serve", "--pool-browser", "3"}, wantCode: 2, wantErr: "codes-sandbox serve: --pool-browser is 3; give 0 to the capacity (2)"},
		{name: "ErrServePoolBrowserNoBrowser", args: []string{"serve", "--browser", "off", "--pool-browser", "1"}, wantCode: 2,
			wantErr: "codes-sandbox serve: --pool-browser 1 needs browser sandboxes: install Chromium and give --browser auto or on, or give --pool-browser 0"},
		{name: "ErrServePoolsOverCapacity", args: []string{"serve", "--browser", "off", "--pool", "2", "--pool-browser", "1"}, wantCode: 2,
			wantErr: "codes-sandbox serve: --pool (2), --pool-browser (1) and --pool-image (0) keep more sandboxes than the capacity (2): lower one of them"},
		{name: "ErrServeBrowser", args: []string{"serve", "--browser", "maybe"}, wantCode: 2, wantErr: `codes-sandbox serve: --browser is "maybe"; give auto, on or off`},
		{name: "ErrServeNoToken", args: []string{"serve"}, wantCode: 2, wantErr: "codes-sandbox serve: --api-token-file is required"},
		{name: "ErrServeTokenFile", args: []string{"serve", "--api-token-file", "/nonexistent/token"}, wantCode: 2, wantErr: "codes-sandbox serve: api token: read token file: open /nonexistent/token"},
		{name: "ErrServeConfig", args: []string{"serve", "--config", "/nonexistent/config.json"}, wantCode: 2, wantErr: "codes-sandbox serve: read config: open /nonexistent/config.json"},
		{name: "ErrServeSelfTestInterval", args: []string{"serve", "--selftest-interval", "0"}, wantCode: 2, wantErr: "codes-sandbox serve: --selftest-interval is 0s; give at least 1s"},
		{name: "ServeHelpOneDefault", args: []string{"serve", "--help"}, wantOut: "(0..capacity; default: the capacity)\n"},
		{name: "ErrSelftestMemoryZero", args: []string{"selftest", "--memory-mb", "0"}, wantCode: 2, wantErr: "--memory-mb is 0; give at least 16"},
		{name: "ErrSelftestPids", args: []string{"selftest", "--pids", "4"}, wantCode: 2, wantErr: "--pids is 4; give at least 16"},
		{name: "ErrSelftestBrowser", args: []string{"selftest", "--browser", "maybe"}, wantCode: 2, wantErr: `--browser is "maybe"; give auto, on or off`},
		{name: "SelftestHelp", args: []string{"selftest", "--help"}, wantOut: "usage: codes-sandbox selftest"},
		{name: "ErrSelftestStrayArg", args: []string{"selftest", "stray"}, wantCode: 2, wantErr: "usage: codes-sandbox selftest"},
		{name: "CheckinHelp", args: []string{"checkin", "--help"}, wantOut: "usage: codes-sandbox checkin"},
		{name: "ErrCheckinNoOnce", args: []string{"checkin"}, wantCode: 2, wantErr: "--once is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			if code != tc.wantCode || (tc.wantOut == "") != (out.Len() == 0) || !strings.Contains(out.String(), tc.wantOut) ||
				(tc.wantErr == "") != (errb.Len() == 0) || !strings.Contains(errb.String(), tc.wantErr) {
				t.Fatalf("exit %d stdout %q stderr %q; want %d, %q and %q", code, out.String(), errb.String(), tc.wantCode, tc.wantOut, tc.wantErr)
			}
			if strings.Contains(errb.String(), `"level":`) {
				t.Fatalf("a usage error as a log line: %q", errb.String())
			}
		})
	}
}
