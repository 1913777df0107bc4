package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
)

// maxAnswerBytes bounds how much of Live's answer is read.
const maxAnswerBytes = 1 << 20

// Live checks a worker in with one OpenVibe.Live. Its token is sent only to
// the base URL it was made with: redirects are never followed.
type Live struct {
	base  *url.URL
	token string
	http  *http.Client
}

// CheckInAnswer is what Live answered to a check-in: the HTTP status, the raw
// body, and the fields of the body a worker acts on.
type CheckInAnswer struct {
	// Status is the HTTP status code (200 when registered).
	Status int `json:"status"`
	// Body is Live's answer as sent (at most 1 MiB).
	Body json.RawMessage `json:"body,omitempty"`
	// Registered, State and AliveUntil are set on 200.
	Registered bool       `json:"registered"`
	State      string     `json:"state,omitempty"`
	AliveUntil *time.Time `json:"alive_until,omitempty"`
	// Errors are the contract violations of a 422.
	Errors []agentsandbox.ValidationError `json:"errors,omitempty"`
	// Code and Message are the `{error: {code, message}}` of other refusals.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// OK reports whether Live registered the worker.
func (a CheckInAnswer) OK() bool { return a.Status == http.StatusOK && a.Registered }

// Summary is a one-line description of the answer for logs and people.
func (a CheckInAnswer) Summary() string {
	switch {
	case a.OK():
		return "registered, state " + a.State
	case a.Status == http.StatusUnprocessableEntity:
		parts := make([]string, 0, len(a.Errors))
		for _, e := range a.Errors {
			parts = append(parts, strings.TrimSpace(e.Path+" "+e.Message))
		}
		return fmt.Sprintf("refused by the contract (422): %s", strings.Join(parts, "; "))
	case a.Code != "" || a.Message != "":
		return fmt.Sprintf("refused (%d %s): %s", a.Status, a.Code, a.Message)
	default:
		return fmt.Sprintf("unexpected answer (%d)", a.Status)
	}
}

// NewLive returns a check-in client for the Live at baseURL (http or https,
// no query), sending token as a Bearer credential. A nil httpClient means a
// client with a 10 s timeout that connects straight to Live, never through a
// proxy named by the environment (HTTP_PROXY would see the token over http).
// The client is copied so that redirects are never followed (the token must
// not travel elsewhere). It returns an error when baseURL is not an absolute
// http(s) URL or the token is empty.
func NewLive(baseURL, token string, httpClient *http.Client) (*Live, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("new live client: parse url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, errors.New("new live client: the Live URL must be http(s)://host[:port][/path] without query or user")
	}
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("new live client: empty service token")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	if httpClient != nil {
		cp := *httpClient
		c = &cp
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	u.Path = strings.TrimRight(u.Path, "/")
	return &Live{base: u, token: token, http: c}, nil
}

// URL returns the check-in URL of stream (it carries no secret).
func (l *Live) URL(stream string) string {
	u := *l.base
	raw := u.EscapedPath() + "/api/streams/agent/" + url.PathEscape(stream) + "/plays/worker"
	u.Path += "/api/streams/agent/" + stream + "/plays/worker"
	u.RawPath = raw
	return u.String()
}

// CheckIn posts report (the JSON body) for stream on behalf of subject (the
// person who owns the stream, sent as X-OV-Subject). Whenever Live answered,
// the answer is returned with a nil error, whatever its status: the caller
// decides what a refusal means. It returns an error only when no answer
// arrived (connection, TLS, timeout, unreadable body).
func (l *Live) CheckIn(ctx context.Context, stream, subject string, report []byte) (CheckInAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL(stream), bytes.NewReader(report))
	if err != nil {
		return CheckInAnswer{}, fmt.Errorf("check in: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("X-OV-Subject", subject)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := l.http.Do(req)
	if err != nil {
		return CheckInAnswer{}, fmt.Errorf("check in: %w", scrub(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return CheckInAnswer{}, fmt.Errorf("check in: read answer: %w", err)
	}
	return parseAnswer(resp.StatusCode, body), nil
}

// scrub drops the URL from a *url.Error (it carries no secret, but the
// caller logs it next to its own fields; keep the cause only).
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

func parseAnswer(status int, body []byte) CheckInAnswer {
	a := CheckInAnswer{Status: status}
	if json.Valid(body) {
		a.Body = json.RawMessage(body)
	}
	var b struct {
		Registered bool                           `json:"registered"`
		State      string                         `json:"state"`
		AliveUntil *time.Time                     `json:"alive_until"`
		Errors     []agentsandbox.ValidationError `json:"errors"`
		Error      *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		a.Message = strings.TrimSpace(string(body))
		if len(a.Message) > 200 {
			a.Message = a.Message[:200]
		}
		return a
	}
	a.Registered, a.State, a.AliveUntil, a.Errors = b.Registered, b.State, b.AliveUntil, b.Errors
	if b.Error != nil {
		a.Code, a.Message = b.Error.Code, b.Error.Message
	}
	return a
}
