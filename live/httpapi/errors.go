package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// Error codes of the HTTP side, beside live's own (live.EUNAUTHORIZED, …).
// Each appears in a refusal body as error.code.
const (
	ETOOLARGE  = "too_large"              // 413: body over MaxBody
	EMEDIATYPE = "unsupported_media_type" // 415: not application/json
	EMALFORMED = "malformed_json"         // 400: not well-formed, strict JSON
	ECONTRACT  = "contract_violation"     // 422: the contract refused the report
	EMETHOD    = "method_not_allowed"     // 405: the path exists, the method does not
	EMOVED     = "moved"                  // 307: the path is not canonical (Location says which is)
)

// codeInfo is what one error code means over HTTP.
type codeInfo struct {
	status  int
	outcome string // the metric and log label
}

// codes is the one table from error codes to HTTP statuses. A code missing
// here is answered as internal.
var codes = map[string]codeInfo{
	live.EINVALID:      {http.StatusBadRequest, "bad_request"},
	EMALFORMED:         {http.StatusBadRequest, "malformed"},
	live.EUNAUTHORIZED: {http.StatusUnauthorized, "unauthorized"},
	live.EFORBIDDEN:    {http.StatusForbidden, "forbidden"},
	live.ENOTFOUND:     {http.StatusNotFound, "not_found"},
	live.ECONFLICT:     {http.StatusConflict, "conflict"},
	ETOOLARGE:          {http.StatusRequestEntityTooLarge, "too_large"},
	EMEDIATYPE:         {http.StatusUnsupportedMediaType, "unsupported_media_type"},
	ECONTRACT:          {http.StatusUnprocessableEntity, "refused_contract"},
	live.EINTERNAL:     {http.StatusInternalServerError, "internal"},
	live.EUNAVAILABLE:  {http.StatusServiceUnavailable, "unavailable"},
	EMETHOD:            {http.StatusMethodNotAllowed, "method_not_allowed"},
	EMOVED:             {http.StatusTemporaryRedirect, "moved"},
}

// infoOf returns the table's entry for code (internal for an unknown code).
func infoOf(code string) codeInfo {
	if ci, ok := codes[code]; ok {
		return ci
	}
	return codes[live.EINTERNAL]
}

// refusal classifies err for an answer: its code (internal when the table
// lacks it) and the table's entry. It notes both in rl and keeps the detail
// of an internal or unavailable error for the log (a detail the handler
// already noted in rl.err is kept). Every error answer, JSON or page, goes
// through it.
func (rl *reqLog) refusal(err error) (string, codeInfo) {
	code := live.ErrorCode(err)
	if _, ok := codes[code]; !ok {
		code = live.EINTERNAL
	}
	ci := infoOf(code)
	rl.note(code, ci.outcome)
	if (code == live.EINTERNAL || code == live.EUNAVAILABLE) && rl.err == nil {
		rl.err = err
	}
	return code, ci
}

// errorBody is the JSON body of every refusal.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// contractBody is the body of a 422: the error plus the validator's verdict.
type contractBody struct {
	Error  errorDetail                    `json:"error"`
	Valid  bool                           `json:"valid"`
	Errors []agentsandbox.ValidationError `json:"errors"`
}

// writeError answers err as {"error":{code,message}} with the table's status
// (see refusal). Internal details stay in the log.
func writeError(w http.ResponseWriter, rl *reqLog, err error) {
	code, ci := rl.refusal(err)
	writeJSON(w, ci.status, errorBody{Error: errorDetail{Code: code, Message: live.RedactSecrets(live.ErrorMessage(err))}})
}

// writeContractRefusal answers a 422 with the validator's errors.
func writeContractRefusal(w http.ResponseWriter, rl *reqLog, errs []agentsandbox.ValidationError) {
	ci := infoOf(ECONTRACT)
	rl.note(ECONTRACT, ci.outcome)
	if errs == nil {
		errs = []agentsandbox.ValidationError{}
	}
	writeJSON(w, ci.status, contractBody{
		Error: errorDetail{Code: ECONTRACT, Message: "the report does not satisfy " +
			agentsandbox.WorkerCheckInContract + "; the worker is not registered until it does: fix each listed error"},
		Errors: errs,
	})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	writeJSONBytes(w, status, append(b, '\n'))
}

// writeJSONBytes answers b, a JSON document and its newline, with status and
// the headers of every JSON answer. The header keys are written in their
// canonical form, so that no answer pays for canonicalising them.
func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ErrorBody is the JSON body, {"error":{"code","message"}}, of an answer
// the HTTP server writes itself to a request it cannot read, for its status
// and net/http's own text (see httpserve.Config.ErrorBody): 400 invalid (a
// malformed request), 431 too_large (a header too large), 501
// not_implemented (a transfer coding it does not take), anything else
// invalid.
func ErrorBody(status int, text string) []byte {
	text = clip(strings.TrimSpace(text), 200)
	d := errorDetail{Code: live.EINVALID, Message: "the request is not well-formed HTTP/1.1 (" + text + "): send a well-formed request"}
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		d = errorDetail{Code: ETOOLARGE, Message: "the request's header is too large: send a smaller one (Live needs only a few headers)"}
	case http.StatusNotImplemented:
		d = errorDetail{Code: "not_implemented", Message: "the request uses a transfer coding Live does not take (" + text + "): send the body as it is, or chunked"}
	}
	b, err := json.Marshal(errorBody{Error: d})
	if err != nil {
		return []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	return b
}
