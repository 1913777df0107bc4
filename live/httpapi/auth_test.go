package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

func TestReadCredentials(t *testing.T) {
	for _, tc := range []struct {
		name    string
		auth    []string
		cookies string
		want    presented
	}{
		{name: "Nothing", want: presented{}},
		{name: "Bearer", auth: []string{"Bearer ovs_x"}, want: presented{authHeader: true, bearer: "ovs_x"}},
		{name: "LowerCaseScheme", auth: []string{"bearer ovs_x"}, want: presented{authHeader: true, bearer: "ovs_x"}},
		{name: "Basic", auth: []string{"Basic abc"}, want: presented{authHeader: true, badScheme: true}},
		{name: "TwoHeaders", auth: []string{"Bearer a", "Bearer b"}, want: presented{authHeader: true, badScheme: true}},
		{name: "SpaceInside", auth: []string{"Bearer a b"}, want: presented{authHeader: true, badScheme: true}},
		{name: "SchemeOnly", auth: []string{"Bearer"}, want: presented{authHeader: true, badScheme: true}},
		{name: "Session", cookies: "a=1; ov_session=s1; ov_session=s2", want: presented{session: "s1", hasSession: true}},
		{name: "EmptySession", cookies: "ov_session=", want: presented{hasSession: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "/", nil)
			for _, a := range tc.auth {
				r.Header.Add("Authorization", a)
			}
			if tc.cookies != "" {
				r.Header.Set("Cookie", tc.cookies)
			}
			if got := readCredentials(r); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDecideCheckIn covers the decision's reasons beside the HTTP matrix,
// including the expiry boundary the matrix cannot pin.
func TestDecideCheckIn(t *testing.T) {
	now := epoch
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	svc := &live.Service{ID: "svc_w", FirstParty: true, Capabilities: []string{live.CapabilityRegister}}
	tok := func(c live.Credential) *live.Credential {
		c.Kind, c.ServiceID = live.KindServiceToken, "svc_w"
		return &c
	}
	bearer := presented{authHeader: true, bearer: "ovs_x"}
	for _, tc := range []struct {
		name   string
		p      presented
		f      found
		reason string
		status int
	}{
		{"OK", bearer, found{tok(live.Credential{}), svc}, "service_token", 0},
		{"ExpiresLater", bearer, found{tok(live.Credential{ExpiresAt: at(time.Nanosecond)}), svc}, "service_token", 0},
		{"ExpiresNow", bearer, found{tok(live.Credential{ExpiresAt: at(0)}), svc}, "expired_credential", 401},
		{"RevokedAndExpired", bearer, found{tok(live.Credential{ExpiresAt: at(-time.Hour), RevokedAt: at(-time.Hour)}), svc}, "revoked_credential", 401},
		{"ServiceUnknown", bearer, found{tok(live.Credential{}), nil}, "unknown_service", 403},
		{"NotFirstParty", bearer, found{tok(live.Credential{}), &live.Service{ID: "svc_w", Capabilities: svc.Capabilities}}, "not_first_party", 403},
		{"SessionCookieBeside", presented{authHeader: true, bearer: "ovs_x", hasSession: true}, found{tok(live.Credential{}), svc}, "session_cookie", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideCheckIn(tc.p, tc.f, now)
			if d.reason != tc.reason || (tc.status == 0) != d.ok() || (!d.ok() && infoOf(d.code).status != tc.status) {
				t.Fatalf("decision %+v, want reason %s status %d", d, tc.reason, tc.status)
			}
			if d.principal != "svc_w" {
				t.Fatalf("principal %q, want svc_w", d.principal)
			}
		})
	}
}

func TestDescribeHidesSecrets(t *testing.T) {
	secret, _, err := live.NewSecret(live.KindServiceToken)
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(secret); strings.Contains(got, secret) {
		t.Fatalf("describe echoed the secret: %s", got)
	}
	if got := live.RedactSecrets("key " + secret + " x"); got != "key [redacted] x" {
		t.Fatalf("RedactSecrets: %s", got)
	}
	if got := describe(strings.Repeat("é", 100)); len(got) > 90*2 || !strings.HasSuffix(got, `…"`) {
		t.Fatalf("describe did not clip: %s", got)
	}
}

// TestCodesTable: every code maps to one status, and a code outside the
// table is answered as internal.
func TestCodesTable(t *testing.T) {
	for code, want := range map[string]int{
		live.EUNAUTHORIZED: 401, live.EFORBIDDEN: 403, live.EINVALID: 400, live.ENOTFOUND: 404,
		ETOOLARGE: 413, EMEDIATYPE: 415, EMALFORMED: 400, ECONTRACT: 422, live.EINTERNAL: 500,
		live.ECONFLICT: 409, live.EUNAVAILABLE: 503, EMETHOD: 405, "no_such_code": 500,
	} {
		if got := infoOf(code).status; got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}

// TestRefusal: every error answer, JSON or page, is classified the same way:
// the table's code and status, internal for anything else, and the detail of
// an internal or unavailable error kept for the log (never a refusal's).
func TestRefusal(t *testing.T) {
	earlier := errors.New("noted by the handler")
	errStore := errors.New("store: connection refused")
	unknownCode := &live.Error{Code: "no_such_code", Message: "x"}
	for _, tc := range []struct {
		name    string
		err     error
		noted   error // rl.err before
		code    string
		status  int
		logged  error // rl.err after
		outcome string
	}{
		{"Forbidden", live.Errorf(live.EFORBIDDEN, "no"), nil, live.EFORBIDDEN, 403, nil, "forbidden"},
		{"Contract", live.Errorf(ECONTRACT, "no"), nil, ECONTRACT, 422, nil, "refused_contract"},
		{"PlainError", errStore, nil, live.EINTERNAL, 500, errStore, "internal"},
		{"UnknownCode", unknownCode, nil, live.EINTERNAL, 500, unknownCode, "internal"},
		{"UnavailableKeepsNoted", live.Errorf(live.EUNAVAILABLE, "down"), earlier, live.EUNAVAILABLE, 503, earlier, "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := &reqLog{err: tc.noted}
			code, ci := rl.refusal(tc.err)
			if code != tc.code || ci.status != tc.status || rl.code != tc.code || rl.outcome != tc.outcome {
				t.Fatalf("refusal = %s %d, log %s %s; want %s %d %s", code, ci.status, rl.code, rl.outcome, tc.code, tc.status, tc.outcome)
			}
			if rl.err != tc.logged {
				t.Fatalf("logged error %v, want %v", rl.err, tc.logged)
			}
		})
	}
}
