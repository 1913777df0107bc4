package agentsandbox

// The five isolation facts Live requires, as JSON names in the check-in's
// isolation object, and the values the contract holds them to.
const (
	// FactHostNetwork must be false: the sandbox has its own network namespace.
	FactHostNetwork = "host_network"
	// FactCredentials must be false: no credential of the host, the worker or
	// the person is inside the sandbox.
	FactCredentials = "credentials"
	// FactProfile must be false: no browser or desktop profile of the host is
	// mounted.
	FactProfile = "profile"
	// FactEgressProxy must be true: the only way out is the worker's proxy.
	FactEgressProxy = "egress_proxy"
	// FactWorkspace must be WorkspaceEphemeral: the workspace is the
	// sandbox's own and is gone with the wipe.
	FactWorkspace = "workspace"

	// WorkspaceEphemeral is the only value the contract allows for FactWorkspace.
	WorkspaceEphemeral = "ephemeral"
)

// IsolationFacts returns the five facts' names in the contract's order. The
// slice is the caller's own.
func IsolationFacts() []string {
	return []string{FactHostNetwork, FactCredentials, FactProfile, FactEgressProxy, FactWorkspace}
}

// The self-test's checks: each is a probe in a real sandbox (or, for the
// guard's refusals, the guard's verdict asked without dialling).
const (
	CheckNetworkNamespace     = "network_namespace"
	CheckNoDirectEgress       = "no_direct_egress"
	CheckEgressRefusesPrivate = "egress_refuses_private"
	CheckCleanEnv             = "clean_env"
	CheckNoHostFiles          = "no_host_files"
	CheckNoCapabilities       = "no_capabilities"
	CheckSeccomp              = "seccomp"
	CheckLimits               = "limits"
	CheckWipe                 = "wipe"
	// CheckBrowser runs only on a worker with a headless browser: Chromium
	// starts in a browser sandbox, loads a page served on its own loopback,
	// and its request for the host's canary through the proxy is refused.
	// It is not one of Checks(): a worker without a browser does not run
	// it, and claims no browser.
	CheckBrowser = "browser"
	// CheckCredentialsBrokered runs only on a worker with egress: the
	// probe sandbox is created with a probe secret, and the probe finds its
	// placeholder (never the value) in the environment, the sandbox's CA
	// (never a private key) in the system bundle that SSL_CERT_FILE names,
	// and the value in no environment, command line or output of the
	// sandbox; and the proxy refuses the placeholder sent to a host the
	// secret is not for (secret-host-mismatch). It is not one of Checks().
	CheckCredentialsBrokered = "credentials_brokered"
)

// Checks returns every check of the self-test, in the order they are shown.
// A check missing from a report's checks did not run. The slice is the
// caller's own.
func Checks() []string {
	return []string{
		CheckNetworkNamespace, CheckNoDirectEgress, CheckEgressRefusesPrivate, CheckCleanEnv,
		CheckNoHostFiles, CheckNoCapabilities, CheckSeccomp, CheckLimits, CheckWipe,
	}
}
