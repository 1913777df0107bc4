package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"openvibe.network/agentsandbox/workerapi"
)

// Previews: a signed, expiring URL that opens one port of one sandbox in a
// person's browser, which has no bearer token. POST …/ports/{port}/preview
// answers a URL on the preview listener (PreviewHandler), whose host name
// (PortsConfig.PreviewBaseURL with the port and the sandbox's id) makes
// each sandbox-port its own origin, so one tenant's pages can read neither
// another's cookies nor the API's. The URL carries a token: an expiry and
// an HMAC-SHA256 of the sandbox's id, the port and that expiry, under a key
// the worker makes at start and never writes anywhere, so a restart
// invalidates every preview. The first visit moves the token into a cookie
// of that origin (HttpOnly, SameSite=Lax, Secure on https) and redirects to
// the same URL without it, so the app's own links work; the token and the
// cookie never reach the sandbox. A token opens its sandbox's port until it
// expires or the sandbox ends, and nothing else: an expired, altered or
// other sandbox's token is a 403.

// previewParam is the query parameter of a preview URL's token.
const previewParam = "sandbox_preview_token"

// The preview cookie's name: with the __Host- prefix on https, which
// browsers keep to the exact origin that set it.
const (
	previewCookie       = "sandbox-preview"
	previewCookieSecure = "__Host-sandbox-preview"
)

// previewCookieNames are both names, stripped from every forwarded request.
var previewCookieNames = []string{previewCookie, previewCookieSecure}

// previewer issues and checks preview tokens and maps preview host names
// to sandbox ports.
type previewer struct {
	key    [32]byte
	scheme string // http or https
	// host is the base URL's host name with {port} and {id}, listen its
	// ":PORT" ("" for the scheme's default).
	host, listen string
	re           *regexp.Regexp // a Host's name: port and id
	portGroup    int
	idGroup      int
	cookie       string
	now          func() time.Time
}

// newPreviewer parses base (see PortsConfig.PreviewBaseURL) and makes the
// key.
func newPreviewer(base string, now func() time.Time) (*previewer, error) {
	bad := func(why string) error {
		return fmt.Errorf("preview base URL %q: %s; give one like https://{port}-{id}.preview.example", base, why)
	}
	scheme, rest, ok := strings.Cut(base, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return nil, bad("it must start with http:// or https://")
	}
	rest = strings.TrimSuffix(rest, "/")
	if strings.ContainsAny(rest, "/?#@") {
		return nil, bad("it must be an origin only (no path, query or user)")
	}
	p := &previewer{scheme: scheme, host: strings.ToLower(rest), now: now, cookie: previewCookie}
	if i := strings.LastIndexByte(p.host, ':'); i > strings.LastIndexByte(p.host, '}') {
		if n, err := strconv.Atoi(p.host[i+1:]); err != nil || n < 1 || n > 65535 {
			return nil, bad("its port is not a number 1..65535")
		}
		p.host, p.listen = p.host[:i], p.host[i:]
	}
	if strings.Count(p.host, "{port}") != 1 || strings.Count(p.host, "{id}") != 1 {
		return nil, bad("its host name must hold {port} and {id} once each")
	}
	if sample := strings.NewReplacer("{port}", "8000", "{id}", "a1").Replace(p.host); !validHostName(sample) {
		return nil, bad("its host name is not a DNS name")
	}
	pattern := regexp.QuoteMeta(p.host)
	pattern = strings.Replace(pattern, regexp.QuoteMeta("{port}"), `(?P<port>[1-9][0-9]{0,4})`, 1)
	pattern = strings.Replace(pattern, regexp.QuoteMeta("{id}"), `(?P<id>[0-9a-z](?:[0-9a-z-]{0,61}[0-9a-z])?)`, 1)
	p.re = regexp.MustCompile("^" + pattern + "$")
	p.portGroup, p.idGroup = p.re.SubexpIndex("port"), p.re.SubexpIndex("id")
	if scheme == "https" {
		p.cookie = previewCookieSecure
	}
	if _, err := rand.Read(p.key[:]); err != nil {
		return nil, fmt.Errorf("preview key: %w", err)
	}
	return p, nil
}

// CheckPreviewBaseURL checks a PortsConfig.PreviewBaseURL as New does.
// Errors say what is wrong and give an example.
func CheckPreviewBaseURL(base string) error {
	_, err := newPreviewer(base, time.Now)
	return err
}

// validHostName reports whether h is a DNS name of letters, digits and
// hyphens.
var validHostName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]*[a-z0-9])?$`).MatchString

// origin is the preview origin of port of sandbox id.
func (p *previewer) origin(id string, port int) string {
	return p.scheme + "://" + strings.NewReplacer("{port}", strconv.Itoa(port), "{id}", id).Replace(p.host) + p.listen
}

// match finds the sandbox and port of a request's Host.
func (p *previewer) match(hostport string) (id string, port int, ok bool) {
	host := strings.ToLower(hostport)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	m := p.re.FindStringSubmatch(host)
	if m == nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(m[p.portGroup])
	if err != nil || port > 65535 {
		return "", 0, false
	}
	return m[p.idGroup], port, true
}

// mac is the token's HMAC of sandbox id's port until exp (Unix seconds).
func (p *previewer) mac(id string, port int, exp int64) []byte {
	h := hmac.New(sha256.New, p.key[:])
	fmt.Fprintf(h, "agentsandbox preview v1\x00%s\x00%d\x00%d", id, port, exp)
	return h.Sum(nil)
}

// issue makes the preview of sandbox id's port for ttl.
func (p *previewer) issue(id string, port int, ttl time.Duration) workerapi.Preview {
	exp := p.now().Add(ttl).Truncate(time.Second)
	token := strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(p.mac(id, port, exp.Unix()))
	origin := p.origin(id, port)
	return workerapi.Preview{URL: origin + "/?" + previewParam + "=" + token, Origin: origin, Port: port, ExpiresAt: exp.UTC()}
}

// tokenVerdict is what a check made of a token, with the reason.
type tokenVerdict string

const (
	tokenOK      tokenVerdict = "ok"
	tokenAbsent  tokenVerdict = "absent"
	tokenExpired tokenVerdict = "expired"
	tokenInvalid tokenVerdict = "invalid" // altered, another sandbox's or port's, or a restarted worker's
)

// check checks token for sandbox id's port; with tokenOK it returns the
// token's expiry.
func (p *previewer) check(id string, port int, token string) (tokenVerdict, time.Time) {
	expText, macText, ok := strings.Cut(token, ".")
	exp, err := strconv.ParseInt(expText, 10, 64)
	if !ok || err != nil || strconv.FormatInt(exp, 10) != expText {
		return tokenInvalid, time.Time{}
	}
	mac, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil || !hmac.Equal(mac, p.mac(id, port, exp)) {
		return tokenInvalid, time.Time{}
	}
	until := time.Unix(exp, 0)
	if !p.now().Before(until) {
		return tokenExpired, time.Time{}
	}
	return tokenOK, until
}

// checkCookies checks the request's preview cookies (another origin's
// page may have set more than one of the name): ok when any is, else the
// reason of the best.
func (p *previewer) checkCookies(r *http.Request, id string, port int) tokenVerdict {
	best := tokenAbsent
	for _, c := range r.CookiesNamed(p.cookie) {
		switch v, _ := p.check(id, port, c.Value); {
		case v == tokenOK:
			return v
		case v == tokenExpired || best == tokenAbsent:
			best = v
		}
	}
	return best
}

// previewCreate handles POST /v1/sandboxes/{id}/ports/{port}/preview.
func (s *Server) previewCreate(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	if _, ok := s.info(id); !ok {
		return errSandboxNotFound(id)
	}
	p := s.ports.previews
	if p == nil {
		return newError(CodeNoPreview, "this worker serves no previews; start it with --preview-listen (and --preview-base-url)")
	}
	var req workerapi.PreviewRequest
	if err := s.decodeOptionalJSON(w, r, &req); err != nil {
		return err
	}
	ttl := workerapi.DefaultPreviewTTL
	if req.TTLSeconds != 0 {
		ttl = time.Duration(req.TTLSeconds) * time.Second
		if req.TTLSeconds < 0 || ttl > workerapi.MaxPreviewTTL {
			return badRequest("ttl_seconds is %d; give 1 to %d", req.TTLSeconds, int(workerapi.MaxPreviewTTL/time.Second))
		}
	}
	addLog(r.Context(), slog.Int("port", port), slog.Float64("ttl_s", ttl.Seconds()))
	writeJSON(w, http.StatusOK, p.issue(id, port, ttl))
	return nil
}

// PreviewHandler is the handler of the preview listener: each request's
// Host names a sandbox and a port (PortsConfig.PreviewBaseURL), its token
// or cookie must open them, and it is forwarded there as the API's port
// route forwards, within the same bounds. It logs one line per request,
// never its URL or cookies. Without previews it answers 404.
func (s *Server) PreviewHandler() http.Handler {
	return s.logRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.servePreview(w, r); err != nil {
			writePreviewError(w, toError(err))
		}
	}))
}

// servePreview serves one request of the preview listener.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request) error {
	p := s.ports.previews
	if p == nil {
		return newError(CodeNoRoute, "this worker serves no previews")
	}
	id, port, ok := p.match(r.Host)
	if !ok {
		return newError(CodeNoRoute, "no preview here: a preview's host name is %s", p.host+p.listen)
	}
	r.Pattern = "preview"
	r.SetPathValue("id", id)
	token, query, inQuery := takeParam(r.URL.RawQuery, previewParam)
	verdict, until := tokenAbsent, time.Time{}
	if inQuery {
		verdict, until = p.check(id, port, token)
	} else {
		verdict = p.checkCookies(r, id, port)
	}
	addLog(r.Context(), slog.String("preview_token", string(verdict)))
	if verdict != tokenOK {
		return previewRefusal(verdict, id, port)
	}
	if _, ok := s.info(id); !ok {
		return newError(CodeSandboxNotFound, "the sandbox of this preview is gone (deleted, or its time box ended)")
	}
	if inQuery {
		http.SetCookie(w, &http.Cookie{Name: p.cookie, Value: token, Path: "/", HttpOnly: true, Secure: p.scheme == "https",
			SameSite: http.SameSiteLaxMode, MaxAge: int((until.Sub(p.now()) + time.Second - 1) / time.Second)})
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			loc := r.URL.EscapedPath()
			if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
				loc = "/" // never another host's URL
			}
			if query != "" {
				loc += "?" + query
			}
			w.Header().Set("Location", loc)
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			w.WriteHeader(http.StatusSeeOther)
			return nil
		}
	}
	return s.ports.forward(w, r, &portTarget{id: id, port: port, path: r.URL.Path, rawPath: r.URL.RawPath,
		query: query, proto: p.scheme, preview: true})
}

// previewRefusal is the 403 of a verdict other than tokenOK.
func previewRefusal(v tokenVerdict, id string, port int) *Error {
	ask := fmt.Sprintf("ask for a new one with POST /v1/sandboxes/%s/ports/%d/preview", id, port)
	switch v {
	case tokenExpired:
		return newError(CodePreviewForbidden, "this preview link has expired; %s", ask)
	case tokenInvalid:
		return newError(CodePreviewForbidden, "this preview link does not open port %d of sandbox %s (it is altered, made for another sandbox or port, or made before this worker restarted); %s", port, id, ask)
	}
	return newError(CodePreviewForbidden, "open this preview with its link first (it gives this browser the preview's cookie); %s", ask)
}

// takeParam removes every parameter name from a raw query, returning the
// first one's value and the query without them, in order.
func takeParam(raw, name string) (value, rest string, found bool) {
	if raw == "" {
		return "", "", false
	}
	var kept []string
	for part := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(part, "=")
		if key, err := url.QueryUnescape(k); err == nil && key == name {
			if !found {
				value, _ = url.QueryUnescape(v)
				found = true
			}
			continue
		}
		kept = append(kept, part)
	}
	return value, strings.Join(kept, "&"), found
}

// writePreviewError answers a preview request with e as a short text page
// (a person's browser reads it).
func writePreviewError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	fmt.Fprintf(w, "%d %s (%s)\n\n%s\n", e.Status, http.StatusText(e.Status), e.Code, e.Message)
}
