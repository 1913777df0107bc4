package podmantest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerSeccompRefusal: with every setting of files/security.json but
// a seccomp profile that refuses the namespaces a sandbox needs (Docker's
// and containerd's default does so without CAP_SYS_ADMIN: clone only
// without namespace flags, clone3 ENOSYS, no unshare), the worker starts no
// sandbox, and its self-test names the seccomp filter and the profile that
// fixes it.
func TestWorkerSeccompRefusal(t *testing.T) {
	h := newHost(t)
	sec := readSecurity(t)
	b, err := os.ReadFile(filepath.Join(chartFiles, sec.SeccompProfile))
	if err != nil {
		t.Fatal(err)
	}
	var profile struct {
		DefaultAction   string           `json:"defaultAction"`
		DefaultErrnoRet int              `json:"defaultErrnoRet"`
		Architectures   []string         `json:"architectures"`
		Syscalls        []map[string]any `json:"syscalls"`
	}
	if err := json.Unmarshal(b, &profile); err != nil {
		t.Fatal(err)
	}
	for _, rule := range profile.Syscalls {
		if rule["action"] == "SCMP_ACT_ALLOW" && rule["args"] == nil {
			var keep []any
			for _, n := range rule["names"].([]any) {
				if n != "clone" && n != "clone3" && n != "unshare" {
					keep = append(keep, n)
				}
			}
			rule["names"] = keep
		}
	}
	const namespaceFlags = 0x7E020000 // CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
	profile.Syscalls = append(profile.Syscalls,
		map[string]any{"names": []string{"clone"}, "action": "SCMP_ACT_ALLOW",
			"args": []map[string]any{{"index": 0, "value": namespaceFlags, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}}},
		map[string]any{"names": []string{"clone3"}, "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
	refusing := filepath.Join(t.TempDir(), "refusing.json")
	writeJSON(t, refusing, profile)

	var opts []string
	all := sec.flags(t)
	for i := 0; i < len(all); i++ {
		if all[i] == "--security-opt" && strings.HasPrefix(all[i+1], "seccomp=") {
			i++
			continue
		}
		opts = append(opts, all[i])
	}
	name := names(t, "worker")[0]
	args := append(append(append([]string{"run", "--rm", "--pull=never", "--network", "none", "--name", name}, h.limits...), opts...),
		"--security-opt", "seccomp="+refusing, h.workerImage, "selftest", "--json")
	out, err := h.try(args...)
	var res struct {
		Passed  bool     `json:"passed"`
		Reasons []string `json:"reasons"`
	}
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
		t.Fatalf("selftest --json: %v (%v): %s", jerr, err, out)
	}
	text := strings.Join(res.Reasons, "\n")
	for _, want := range []string{"the seccomp filter the worker runs under refuses the namespaces every sandbox needs",
		"--security-opt seccomp=/usr/share/codes-sandbox/seccomp.json", "seccompProfile type Localhost"} {
		if res.Passed || !strings.Contains(text, want) {
			t.Errorf("the self-test (passed %v) does not say %q:\n%s", res.Passed, want, text)
		}
	}
	for _, raw := range rawBubblewrap {
		if strings.Contains(text, raw) {
			t.Errorf("the self-test's reasons hold bubblewrap's own words %q:\n%s", raw, text)
		}
	}
}
