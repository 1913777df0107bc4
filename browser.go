package agentsandbox

// BrowserVersion is what a browser sandbox's GET …/browser/json/version
// answers: Chromium's own /json/version, with its field names, and
// WebSocketDebuggerURL pointing at the worker's CDP route of the sandbox.
type BrowserVersion struct {
	Browser              string `json:"Browser"`
	ProtocolVersion      string `json:"Protocol-Version"`
	UserAgent            string `json:"User-Agent"`
	V8Version            string `json:"V8-Version"`
	WebKitVersion        string `json:"WebKit-Version"`
	WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
}
