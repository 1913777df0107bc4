package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

// fakeBox simulates a sandbox that keeps every property, with knobs that
// break one property each, the way a broken sandbox would show it.
type fakeBox struct {
	tb   testing.TB
	proc string // fake /proc
	cg   string // fake cgroup dir
	dir  string // fake sandbox state dir
	uid  int
	// break knobs
	edit       func(lines []string) []string // rewrite the probe output
	secret     string                        // a value of the worker's environment
	leakEnv    bool                          // the worker's env reaches the sandbox
	dialCanary bool                          // the sandbox reaches the host's loopback
	seeHost    bool                          // host files are mounted
	cgroupPids string                        // pids.max on the host
	outsidePid bool                          // a sandbox process escaped its cgroup
	unverified bool                          // the runtime's wipe is not verified
	leaveDir   bool                          // the wipe forgets the state dir
	leaveProc  bool                          // a process survives the wipe
	hostMount  bool                          // a writable host directory is mounted
	fdUncapped bool                          // sandbox processes may open 20,000 files
	// v1TCP, when set, makes the cgroup a v1 memory directory whose
	// memory.kmem.tcp.limit_in_bytes is v1TCP ("absent": none).
	v1TCP string
	// datagramsRefused is Deps.InetDatagramsRefused (a cgroup v1 host).
	datagramsRefused bool
	failCreate       error
	// limitProblems are what the runtime says it cannot enforce;
	// hostProblems why the host cannot run sandboxes at all.
	limitProblems []string
	hostProblems  []string
	creates       int
	execArgv      []string
	deleted       bool
	// canary and value are the broker check's canary and the probe
	// secret's value the sandbox was created with; brokerSends, when set,
	// is what the fake broker puts in Authorization instead of "Bearer "
	// and the value.
	canary      *agentsandbox.EgressCanary
	value       string
	brokerSends string
}

func newFakeBox(tb testing.TB) *fakeBox {
	tb.Helper()
	root := tb.TempDir()
	f := &fakeBox{tb: tb, proc: filepath.Join(root, "proc"), cg: filepath.Join(root, "cg", "codes-sandbox", "box1"), dir: filepath.Join(root, "box"), uid: 201000,
		secret: "secret-" + randomHex(8)}
	return f
}

func (f *fakeBox) writeFile(path, data string) {
	f.tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		f.tb.Fatal(err)
	}
}

// goodMounts is the mount table of a sandbox that keeps every property.
const goodMounts = `22 1 0:50 / / ro,nosuid,nodev - tmpfs tmpfs rw
23 22 254:0 /usr /usr ro,nosuid,nodev - ext4 /dev/vda rw
30 22 0:51 / /proc rw,nosuid,nodev,noexec - proc proc rw
31 22 0:52 / /dev ro,nosuid,nodev - tmpfs tmpfs rw,mode=755
32 31 0:5 /null /dev/null rw,nosuid - devtmpfs devtmpfs rw,size=1k
33 31 0:53 / /dev/pts rw,nosuid,noexec - devpts devpts rw,mode=620,ptmxmode=666
34 31 0:54 / /dev/pts rw,nosuid,noexec - devpts devpts rw,mode=620,ptmxmode=666,max=32
35 22 0:55 /workspace /workspace rw,nosuid,nodev - tmpfs tmpfs rw,size=16384k,nr_inodes=4096,mode=711
36 22 0:55 /tmp /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=16384k,nr_inodes=4096,mode=711
`

func (f *fakeBox) symlink(path, target string) {
	f.tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.tb.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil && !os.IsExist(err) {
		f.tb.Fatal(err)
	}
}

func (f *fakeBox) addProc(pid int, cgroup string) {
	f.writeFile(filepath.Join(f.proc, strconv.Itoa(pid), "status"), fmt.Sprintf("Name:\tsleep\nUid:\t%d\t%d\t%d\t%d\n", f.uid, f.uid, f.uid, f.uid))
	f.writeFile(filepath.Join(f.proc, strconv.Itoa(pid), "cgroup"), "0::"+cgroup+"\n")
	f.writeFile(filepath.Join(f.proc, strconv.Itoa(pid), "stat"), strconv.Itoa(pid)+" (sleep) S 1 1 1 0 -1\n")
}

func (f *fakeBox) Create(_ context.Context, opts sandbox.Options) (sandbox.Info, error) {
	f.creates++
	if f.failCreate != nil {
		return sandbox.Info{}, f.failCreate
	}
	f.canary, f.value = opts.EgressCanary, opts.Secrets[probeSecret].Value
	pids := strconv.Itoa(opts.Limits.Pids)
	if f.cgroupPids != "" {
		pids = f.cgroupPids
	}
	f.writeFile(filepath.Join(f.cg, "memory.max"), strconv.Itoa(opts.Limits.MemoryMB<<20)+"\n")
	f.writeFile(filepath.Join(f.cg, "pids.max"), pids+"\n")
	if f.v1TCP != "" {
		f.writeFile(filepath.Join(f.cg, "memory.limit_in_bytes"), strconv.Itoa(opts.Limits.MemoryMB<<20)+"\n")
		if f.v1TCP != "absent" {
			f.writeFile(filepath.Join(f.cg, "memory.kmem.tcp.limit_in_bytes"), f.v1TCP+"\n")
		}
	}
	f.writeFile(filepath.Join(f.cg, "cpu.max"), fmt.Sprintf("%d 100000\n", opts.Limits.CPUPercent*1000))
	f.writeFile(filepath.Join(f.dir, "ctl.sock"), "")
	f.addProc(4242, "/codes-sandbox/box1")
	if f.outsidePid {
		f.addProc(4243, "/elsewhere")
	}
	f.symlink(filepath.Join(f.proc, "self", "ns", "mnt"), "mnt:[4026531841]")
	f.symlink(filepath.Join(f.proc, "4242", "ns", "mnt"), "mnt:[4026532999]")
	mounts := goodMounts
	if f.hostMount {
		mounts += "60 22 254:0 /run/codes-sandbox/x /.sandbox rw,nosuid,nodev - ext4 /dev/vda rw\n"
	}
	f.writeFile(filepath.Join(f.proc, "4242", "mountinfo"), mounts)
	files := "4096"
	if f.fdUncapped {
		files = "20000"
	}
	f.writeFile(filepath.Join(f.proc, "4242", "limits"), "Limit                     Soft Limit           Hard Limit           Units\n"+
		"Max open files            "+files+"                 "+files+"                 files\n")
	f.writeFile(filepath.Join(f.proc, "1", "status"), "Name:\tinit\nUid:\t0\t0\t0\t0\n")
	return sandbox.Info{ID: "box1"}, nil
}

func (f *fakeBox) Exec(_ context.Context, id string, req agentsandbox.ExecRequest, stdout, _ io.Writer) (agentsandbox.ExecResult, error) {
	f.execArgv = req.Argv
	canary, files := req.Argv[4], req.Argv[5:]
	lines := goodProbeOutput(canary)
	if f.leakEnv {
		lines = append(lines, "OPENVIBE_TOKEN="+f.secret)
	}
	if f.canary != nil {
		lines = append(lines, "broker_fetch "+f.brokerFetch())
	}
	if f.dialCanary {
		if c, err := net.Dial("tcp", canary); err == nil {
			c.Close()
		}
	}
	if f.seeHost {
		for _, p := range files {
			if _, err := os.Stat(p); err == nil {
				lines = append(lines, "hostfile "+p+" present")
			}
		}
	}
	if f.edit != nil {
		lines = f.edit(lines)
	}
	io.WriteString(stdout, strings.Join(lines, "\n")+"\n")
	return agentsandbox.ExecResult{}, nil
}

// brokerFetch does what the proxy does with the probe's request to the
// secret's host: one GET to the canary over TLS verified against its
// roots, with the value in Authorization (or brokerSends); it returns the
// line the probe prints.
func (f *fakeBox) brokerFetch() string {
	auth := "Bearer " + f.value
	if f.brokerSends != "" {
		auth = f.brokerSends
	}
	tr := &http.Transport{
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return f.canary.Dial(ctx) },
		TLSClientConfig: &tls.Config{RootCAs: f.canary.Roots, ServerName: f.canary.Host},
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+f.canary.Host+"/", nil)
	req.Header.Set("Authorization", auth)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "failed " + err.Error()
	}
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode) + " -"
}

func (f *fakeBox) Delete(context.Context, string) (sandbox.WipeReport, error) {
	f.deleted = true
	if !f.leaveDir {
		os.RemoveAll(f.dir)
	}
	if !f.leaveProc {
		os.RemoveAll(filepath.Join(f.proc, "4242"))
		os.RemoveAll(filepath.Join(f.proc, "4243"))
	}
	os.RemoveAll(f.cg)
	if f.unverified {
		return sandbox.WipeReport{Verified: false, Leftovers: []string{"mount /workspace"}}, nil
	}
	return sandbox.WipeReport{Verified: true}, nil
}

func (f *fakeBox) HostPids(string) ([]int, error) { return []int{4242}, nil }

func (f *fakeBox) inspect(sandbox.Info) (HostView, error) {
	return HostView{UID: f.uid, Dirs: []string{f.dir}, Cgroups: []string{f.cg}}, nil
}

func goodProbeOutput(canary string) []string {
	out := []string{
		"netdev lo", "route 0", "direct failed",
		"proxy http " + canary + " 403", "proxy http 10.0.0.1:80 403",
		"proxy http 169.254.169.254:80 403", "proxy connect 169.254.169.254:443 403",
		"env-begin", "PATH=/usr/bin:/bin", "HOME=/workspace", "env-end", "environ_read 3",
		"broker_env " + agentsandbox.SecretPlaceholderPrefix + "00ff", "broker_bundle 140 0 " + agentsandbox.SandboxCABundle,
		"broker_refused 403 secret-host-mismatch",
		"hostfiles checked",
		"status CapInh 0000000000000000", "status CapPrm 0000000000000000", "status CapEff 0000000000000000",
		"status CapBnd 0000000000000000", "status CapAmb 0000000000000000", "status NoNewPrivs 1", "status Seccomp 2",
		"uid_map 1000 201000 1", "unshare 1", "udp refused", "cgroup 0::/", "fork-begin",
	}
	for i := 1; i <= 25; i++ {
		out = append(out, "spawned "+strconv.Itoa(i))
	}
	return append(out, "end")
}

// replace returns an edit that replaces the line starting with prefix.
func replace(prefix, with string) func([]string) []string {
	return func(lines []string) []string {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				lines[i] = with
			}
		}
		return lines
	}
}

// allowAll is a broken guard that allows every destination.
type allowAll struct{}

func (allowAll) Check(context.Context, string) egress.Verdict {
	return egress.Verdict{Allowed: true, Reason: egress.ReasonOK}
}

// testHostAddrs are the fake host's own addresses: a private one, and one
// that looks public and only the guard's host set refuses.
func testHostAddrs() ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.1.2.3"), testHostPublic}, nil
}

var testHostPublic = netip.MustParseAddr("93.184.216.50")

// hostGuard is a guard that knows the fake host's addresses.
func hostGuard(tb testing.TB) *egress.Guard {
	tb.Helper()
	h, err := egress.NewHostAddrs(egress.HostAddrsConfig{Every: time.Hour, Interfaces: func() ([]netip.Prefix, error) {
		as, _ := testHostAddrs()
		var ps []netip.Prefix
		for _, a := range as {
			ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
		}
		return ps, nil
	}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return egress.NewGuard(egress.GuardConfig{Host: h})
}

func runFake(t *testing.T, f *fakeBox, guard Guard, egressOn bool) Result {
	t.Helper()
	if guard == nil {
		guard = hostGuard(t)
	}
	canaryDir := t.TempDir()
	res := SelfTest(context.Background(), Deps{
		Sandboxes: f, Guard: guard, Inspect: f.inspect, CanaryDirs: []string{canaryDir},
		Secrets: []string{f.secret}, MaxOpenFiles: 4096, Egress: egressOn, ProcRoot: f.proc, HostAddrs: testHostAddrs,
		LimitProblems: func() []string { return f.limitProblems }, HostProblems: func() []string { return f.hostProblems },
		InetDatagramsRefused: f.datagramsRefused,
	})
	if ents, _ := os.ReadDir(canaryDir); len(ents) != 0 {
		t.Errorf("canary files left in %s", canaryDir)
	}
	return res
}

// TestSelfTestPassesOnV1: on a cgroup v1 host a probe that cannot open a
// UDP socket, in a cgroup whose TCP buffers are bounded, passes limits.
func TestSelfTestPassesOnV1(t *testing.T) {
	f := newFakeBox(t)
	f.datagramsRefused, f.v1TCP = true, strconv.Itoa(probeLimits().MemoryMB<<20/4)
	if res := runFake(t, f, nil, true); !res.Passed {
		t.Fatalf("result = %+v, want every check passed", res)
	}
}

func TestSelfTestPasses(t *testing.T) {
	f := newFakeBox(t)
	res := runFake(t, f, nil, true)
	if !res.Passed || len(res.Reasons) != 0 || len(res.Checks) != len(agentsandbox.Checks())+1 || !res.Checks[agentsandbox.CheckCredentialsBrokered] {
		t.Fatalf("result = %+v, want every check passed, credentials_brokered too", res)
	}
	for _, c := range agentsandbox.Checks() {
		if !res.Checks[c] {
			t.Errorf("check %s failed", c)
		}
	}
	if !res.UserNamespace || res.CheckedAt.IsZero() || !f.deleted {
		t.Errorf("userns=%v checked_at=%v deleted=%v", res.UserNamespace, res.CheckedAt, f.deleted)
	}
	if f.execArgv[0] != "/bin/bash" || len(f.execArgv) != 6 {
		t.Errorf("probe argv = %q", f.execArgv[:2])
	}
}

// TestSelfTestFailsWhenBroken breaks one property at a time and asserts that
// exactly the checks that prove it fail, with a reason saying why.
func TestSelfTestFailsWhenBroken(t *testing.T) {
	tests := []struct {
		name   string
		breaks func(f *fakeBox)
		guard  Guard
		noEgr  bool
		fail   []string
		reason string
	}{
		{"HostInterfaces", func(f *fakeBox) { f.edit = replace("netdev", "netdev lo eth0") }, nil, false,
			[]string{agentsandbox.CheckNetworkNamespace}, `interfaces "lo eth0"`},
		{"HostRoutes", func(f *fakeBox) { f.edit = replace("route", "route 2") }, nil, false,
			[]string{agentsandbox.CheckNetworkNamespace}, "2 IPv4 route(s)"},
		{"DirectEgress", func(f *fakeBox) { f.dialCanary = true }, nil, false,
			[]string{agentsandbox.CheckNoDirectEgress, agentsandbox.CheckEgressRefusesPrivate}, "received 1 connection(s)"},
		{"DirectConnectClaimed", func(f *fakeBox) { f.edit = replace("direct", "direct connected") }, nil, false,
			[]string{agentsandbox.CheckNoDirectEgress}, "direct connection"},
		{"ProxyAllowsPrivate", func(f *fakeBox) { f.edit = replace("proxy http 10.0.0.1:80", "proxy http 10.0.0.1:80 200") }, nil, false,
			[]string{agentsandbox.CheckEgressRefusesPrivate}, "10.0.0.1:80 200"},
		{"NoProxy", func(f *fakeBox) {
			f.edit = func(l []string) []string {
				return append([]string{"proxy none"}, filterOut(l, "proxy ")...)
			}
		}, nil, false, []string{agentsandbox.CheckEgressRefusesPrivate}, "egress is unavailable"},
		{"NoEgress", func(*fakeBox) {}, nil, true, []string{agentsandbox.CheckEgressRefusesPrivate}, "no egress proxy"},
		{"GuardAllowsPrivate", func(*fakeBox) {}, allowAll{}, false, []string{agentsandbox.CheckEgressRefusesPrivate}, "the egress guard allows 10.0.0.1:443"},
		{"GuardAllowsOtherPorts", func(*fakeBox) {}, egress.NewGuard(egress.GuardConfig{Ports: []uint16{80, 443, 8080}}), false, []string{agentsandbox.CheckEgressRefusesPrivate}, "the egress guard does not refuse 1.1.1.1:8080 for its port"},
		{"GuardAllowsHostAddress", func(*fakeBox) {}, egress.NewGuard(egress.GuardConfig{}), false, []string{agentsandbox.CheckEgressRefusesPrivate},
			"the egress guard does not refuse the host's own address 93.184.216.50:80 (verdict \"ok\")"},
		{"EnvLeaks", func(f *fakeBox) { f.leakEnv = true }, nil, false, []string{agentsandbox.CheckCleanEnv}, "a value of the worker's own environment"},
		{"EnvNotRead", func(f *fakeBox) { f.edit = replace("environ_read", "environ_read 0") }, nil, false, []string{agentsandbox.CheckCleanEnv}, "no /proc/*/environ"},
		{"HostFilesMounted", func(f *fakeBox) { f.seeHost = true }, nil, false, []string{agentsandbox.CheckNoHostFiles}, "/canary present"},
		{"ShadowVisible", func(f *fakeBox) {
			f.edit = replace("hostfiles checked", "hostfile /etc/shadow present\nhostfiles checked")
		}, nil, false,
			[]string{agentsandbox.CheckNoHostFiles}, "/etc/shadow"},
		{"CapEff", func(f *fakeBox) { f.edit = replace("status CapEff", "status CapEff 000001fffeffffff") }, nil, false,
			[]string{agentsandbox.CheckNoCapabilities}, "CapEff is 000001fffeffffff"},
		{"NewPrivs", func(f *fakeBox) { f.edit = replace("status NoNewPrivs", "status NoNewPrivs 0") }, nil, false,
			[]string{agentsandbox.CheckNoCapabilities}, "NoNewPrivs"},
		{"NoSeccomp", func(f *fakeBox) { f.edit = replace("status Seccomp", "status Seccomp 0") }, nil, false,
			[]string{agentsandbox.CheckSeccomp}, "not under a seccomp filter"},
		{"UserNamespaceAllowed", func(f *fakeBox) { f.edit = replace("unshare", "unshare 0") }, nil, false,
			[]string{agentsandbox.CheckSeccomp}, "unshare -U succeeded"},
		{"ForkUnbounded", func(f *fakeBox) { f.edit = replace("end", "spawned 64\nend") }, nil, false,
			[]string{agentsandbox.CheckLimits}, "started 64 processes"},
		{"CgroupWrong", func(f *fakeBox) { f.cgroupPids = "max" }, nil, false, []string{agentsandbox.CheckLimits}, "no pids limit"},
		{"ControllerNotDelegated", func(f *fakeBox) {
			f.limitProblems = []string{"the cgroup controllers memory are not delegated to the worker's cgroup /system.slice/x.service: add Delegate=yes"}
		}, nil, false, []string{agentsandbox.CheckLimits}, "memory are not delegated to the worker's cgroup /system.slice/x.service: add Delegate=yes"},
		{"ProcessOutsideCgroup", func(f *fakeBox) { f.outsidePid = true }, nil, false, []string{agentsandbox.CheckLimits}, "outside its cgroup: 4243"},
		{"ProcessOutsideCgroupNamedOddly", func(f *fakeBox) {
			f.outsidePid = true
			f.writeFile(filepath.Join(f.proc, "4243", "stat"), "4243 (a) Z (b) S 1 1 1 0 -1\n") // running: its name holds ") Z ("
		}, nil, false, []string{agentsandbox.CheckLimits}, "outside its cgroup: 4243"},
		{"WipeUnverified", func(f *fakeBox) { f.unverified = true }, nil, false, []string{agentsandbox.CheckWipe}, "did not verify the wipe"},
		{"WipeLeavesDir", func(f *fakeBox) { f.leaveDir = true }, nil, false, []string{agentsandbox.CheckWipe}, "still there after the wipe"},
		{"WipeLeavesProcess", func(f *fakeBox) { f.leaveProc = true }, nil, false, []string{agentsandbox.CheckWipe}, "process 4242 of the sandbox"},
		{"WritableHostMount", func(f *fakeBox) { f.hostMount = true }, nil, false, []string{agentsandbox.CheckNoHostFiles},
			"the sandbox can write to /.sandbox (ext4)"},
		{"UDPOpenOnV1", func(f *fakeBox) { f.datagramsRefused = true; f.edit = replace("udp", "udp opened") }, nil, false,
			[]string{agentsandbox.CheckLimits}, `could open a UDP socket (["opened"]) on a cgroup v1 host`},
		{"UDPNotProbedOnV1", func(f *fakeBox) {
			f.datagramsRefused = true
			f.edit = func(l []string) []string { return filterOut(l, "udp") }
		}, nil, false,
			[]string{agentsandbox.CheckLimits}, "could open a UDP socket ([]) on a cgroup v1 host"},
		{"TCPUnboundedOnV1", func(f *fakeBox) { f.v1TCP = "absent" }, nil, false,
			[]string{agentsandbox.CheckLimits}, "has no memory.kmem.tcp.limit_in_bytes"},
		{"TCPLimitWrongOnV1", func(f *fakeBox) { f.v1TCP = "9223372036854771712" }, nil, false,
			[]string{agentsandbox.CheckLimits}, "memory.kmem.tcp.limit_in_bytes) is 9223372036854771712, want"},
		{"BrokerSendsPlaceholder", func(f *fakeBox) { f.brokerSends = "Bearer " + agentsandbox.SecretPlaceholderPrefix + "00ff" }, nil, false, nil,
			"credentials_brokered: the TLS canary received the placeholder, not the value"},
		{"DescriptorsUncapped", func(f *fakeBox) { f.fdUncapped = true }, nil, false, []string{agentsandbox.CheckLimits},
			"sandbox process 4242 may open 20000 files (hard 20000), not 4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBox(t)
			tc.breaks(f)
			if f.edit != nil {
				edit := f.edit
				f.edit = func(l []string) []string { return strings.Split(strings.Join(edit(l), "\n"), "\n") }
			}
			res := runFake(t, f, tc.guard, !tc.noEgr)
			if res.Passed {
				t.Fatalf("self-test passed with %s broken", tc.name)
			}
			for _, c := range agentsandbox.Checks() {
				want := !slices.Contains(tc.fail, c)
				if res.Checks[c] != want {
					t.Errorf("check %s = %v, want %v (reasons %q)", c, res.Checks[c], want, res.Reasons)
				}
			}
			if !strings.Contains(strings.Join(res.Reasons, "\n"), tc.reason) {
				t.Errorf("reasons %q do not say %q", res.Reasons, tc.reason)
			}
		})
	}
}

func filterOut(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestSelfTestNotRun: a check that could not run is reported as not run:
// absent from the checks, listed, with why; never as passed.
func TestSelfTestNotRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		breaks func(f *fakeBox)
		ran    []string
		reason string
	}{
		{"NoSandbox", func(f *fakeBox) { f.failCreate = errors.New("no slot") }, nil, "cannot create the probe sandbox: no slot"},
		{"ProbeOutputTooLong", func(f *fakeBox) {
			f.edit = func(l []string) []string { return append(l, strings.Repeat("x", maxProbeOutput)) }
		}, []string{agentsandbox.CheckWipe}, "printed more than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBox(t)
			tc.breaks(f)
			res := runFake(t, f, nil, true)
			var wantNotRun []string
			for _, c := range agentsandbox.Checks() {
				if !slices.Contains(tc.ran, c) {
					wantNotRun = append(wantNotRun, c)
				}
			}
			wantNotRun = append(wantNotRun, agentsandbox.CheckCredentialsBrokered) // with egress
			if res.Passed || !slices.Equal(res.NotRun, wantNotRun) || len(res.Checks) != len(tc.ran) {
				t.Fatalf("passed %v, not run %v, checks %v; want not run %v", res.Passed, res.NotRun, res.Checks, wantNotRun)
			}
			if len(res.Reasons) == 0 || !strings.HasPrefix(res.Reasons[0], "the probe could not run: ") || !strings.Contains(res.Reasons[0], tc.reason) {
				t.Errorf("the first reason does not say the probe could not run because %s: %q", tc.reason, res.Reasons)
			}
			for _, c := range wantNotRun {
				if !slices.ContainsFunc(res.Reasons, func(r string) bool { return strings.HasPrefix(r, c+": not run: ") }) {
					t.Errorf("no reason says %s did not run: %q", c, res.Reasons)
				}
			}
		})
	}
}

// TestSelfTestHostProblems: on a host that cannot run sandboxes no probe is
// tried (nor tried again): every check is not run, and each of the host's
// problems is a reason of its own, whole, right after the first.
func TestSelfTestHostProblems(t *testing.T) {
	f := newFakeBox(t)
	f.hostProblems = []string{"the worker lacks CAP_SYS_ADMIN (…): add it", "/proc is masked (…): unmask it"}
	res := runFake(t, f, nil, true)
	if res.Passed || len(res.Checks) != 0 || len(res.NotRun) != len(agentsandbox.Checks()) || f.creates != 0 {
		t.Fatalf("passed %v, checks %v, not run %v, %d creates: want nothing run", res.Passed, res.Checks, res.NotRun, f.creates)
	}
	want := append([]string{"the probe could not run: this host cannot run sandboxes; each reason below names what is missing and the fix"},
		f.hostProblems...)
	if !slices.Equal(res.Reasons[:3], want) {
		t.Errorf("reasons %q, want them to start %q", res.Reasons, want)
	}
}

// TestSelfTestLeavesEnvironment: the self-test changes nothing of the
// process's environment.
func TestSelfTestLeavesEnvironment(t *testing.T) {
	before := os.Environ()
	runFake(t, newFakeBox(t), nil, true)
	if after := os.Environ(); !slices.Equal(before, after) {
		t.Fatalf("the environment changed:\nbefore %q\nafter  %q", before, after)
	}
}

// TestAlive: a process that ended (gone, or a zombie waiting to be reaped)
// is not one the limits check may find outside the sandbox's cgroup.
func TestAlive(t *testing.T) {
	proc := t.TempDir()
	for pid, stat := range map[string]string{
		"10": "10 (sleep) S 1 1 1", "11": "11 (sleep) Z 1 1 1", "12": "12 (a) Z (b) R 1 1", "13": "13 (x) X 1",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "stat"), []byte(stat+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	for _, pid := range []int{10, 11, 12, 13, 14} {
		if alive(proc, pid) {
			got = append(got, pid)
		}
	}
	if want := []int{10, 12}; !slices.Equal(got, want) {
		t.Fatalf("alive: %v, want %v", got, want)
	}
}

// TestEvaluateBrowser: the browser check is one only on a worker with a
// browser; it passes on proof, fails with its reason, and is not run (never
// passed) when it could not run.
func TestEvaluateBrowser(t *testing.T) {
	tests := []struct {
		name       string
		obs        observation
		wantRan    bool
		wantPassed bool
		wantNotRun bool
		wantReason string // the browser's reason, "" for none
	}{
		{"NoBrowser", observation{}, false, false, false, ""},
		{"Passed", observation{browser: true}, true, true, false, ""},
		{"Failed", observation{browser: true, browserWhy: "Chromium did not start in a sandbox: exit 1"}, true, false, false,
			"browser: Chromium did not start in a sandbox: exit 1"},
		{"NotRun", observation{browser: true, browserNR: "cannot create the browser's sandbox: no slot"}, false, false, true,
			"browser: not run: cannot create the browser's sandbox: no slot"},
		{"ProbeDidNotRun", observation{browser: true, setup: "no sandbox"}, false, false, true,
			"browser: not run: the probe could not run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs
			obs.lines = map[string][]string{}
			res := evaluate(&obs)
			passed, ran := res.Checks[agentsandbox.CheckBrowser]
			var reason string
			for _, r := range res.Reasons {
				if strings.HasPrefix(r, agentsandbox.CheckBrowser+": ") {
					reason = r
				}
			}
			got := []any{ran, passed, slices.Contains(res.NotRun, agentsandbox.CheckBrowser), reason}
			want := []any{tc.wantRan, tc.wantPassed, tc.wantNotRun, tc.wantReason}
			if !slices.Equal(got, want) {
				t.Fatalf("ran, passed, not run, reason = %v, want %v", got, want)
			}
			if tc.wantReason != "" && res.Passed {
				t.Fatal("the self-test passed with the browser's reason")
			}
		})
	}
}

// TestJudgeCredentialsBrokered: the broker check passes only on the whole
// evidence, and each missing piece is its own reason.
func TestJudgeCredentialsBrokered(t *testing.T) {
	const value = "probe-secret-0123"
	good := map[string][]string{
		"broker_env":     {agentsandbox.SecretPlaceholderPrefix + "00ff"},
		"broker_bundle":  {"140 0 " + agentsandbox.SandboxCABundle},
		"broker_refused": {"403 secret-host-mismatch"},
		"broker_fetch":   {"200 -"},
	}
	with := func(k, v string) map[string][]string {
		m := maps.Clone(good)
		m[k] = []string{v}
		return m
	}
	seen := func(host, sni string, auth ...string) []canaryRequest {
		return []canaryRequest{{host: host, sni: sni, auth: auth}}
	}
	goodSeen := seen(probeSecretHost, probeSecretHost, "Bearer "+value)
	for _, tc := range []struct {
		name  string
		lines map[string][]string
		out   string
		seen  []canaryRequest
		files []string
		want  string
	}{
		{"OK", good, "env PROBE_SECRET=agentsandbox-secret-00ff", goodSeen, nil, ""},
		{"ErrValueInside", good, "PROBE_SECRET=" + value, goodSeen, nil, "the probe secret's value is visible inside the sandbox"},
		{"ErrNoPlaceholder", with("broker_env", value), "", goodSeen, nil, "the probe secret's variable holds"},
		{"ErrKeyInBundle", with("broker_bundle", "140 1 "+agentsandbox.SandboxCABundle), "", goodSeen, nil, "trust bundle is not as it must be"},
		{"ErrNoCAVariable", with("broker_bundle", "140 0 unset"), "", goodSeen, nil, "trust bundle is not as it must be"},
		{"ErrNotRefused", with("broker_refused", "502 dial-failed"), "", goodSeen, nil, `the proxy answered "502 dial-failed"`},
		{"ErrCanaryNothing", with("broker_fetch", "502 upstream-certificate"), "", nil, nil, `received no request: the proxy did not pass the probe's request on (the probe got "502 upstream-certificate")`},
		{"ErrCanaryPlaceholder", good, "", seen(probeSecretHost, probeSecretHost, "Bearer "+agentsandbox.SecretPlaceholderPrefix+"00ff"), nil, "received the placeholder, not the value"},
		{"ErrCanaryWrongValue", good, "", seen(probeSecretHost, probeSecretHost, "Bearer x"+value), nil, "not exactly the probe secret's"},
		{"ErrCanaryTwoValues", good, "", seen(probeSecretHost, probeSecretHost, "Bearer "+value, "Bearer "+value), nil, "received 2 Authorization value(s)"},
		{"ErrCanaryOtherName", good, "", seen("other.invalid", probeSecretHost, "Bearer "+value), nil, `a request for "other.invalid"`},
		{"ErrCanaryTwice", good, "", append(slices.Clone(goodSeen), goodSeen...), nil, "received 2 requests"},
		{"ErrFetchFailed", with("broker_fetch", "502 upstream"), "", goodSeen, nil, `got "502 upstream", not 200`},
		{"ErrFileHoldsValue", good, "", goodSeen, []string{"the sandbox's file /x holds the probe secret's value"}, "/x holds the probe secret's value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeCredentialsBrokered(&observation{brokerValue: value, lines: tc.lines, out: tc.out, brokerSeen: tc.seen, brokerFiles: tc.files})
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if strings.Contains(got, value) {
				t.Fatalf("the reason shows the value: %q", got)
			}
		})
	}
}

// TestEvaluateBrokerNotRun: a broker check whose canary could not start is
// not run, with why; never passed.
func TestEvaluateBrokerNotRun(t *testing.T) {
	res := evaluate(&observation{brokerValue: "v", brokerNR: "cannot start the TLS canary: no", lines: map[string][]string{}})
	if _, ran := res.Checks[agentsandbox.CheckCredentialsBrokered]; ran || !slices.Contains(res.NotRun, agentsandbox.CheckCredentialsBrokered) ||
		!slices.Contains(res.Reasons, "credentials_brokered: not run: cannot start the TLS canary: no") || res.Passed {
		t.Fatalf("result %+v", res)
	}
}

// TestScanForSecrets: the host-side search of a sandbox's files finds the
// value and private keys, names the file, never the value.
func TestScanForSecrets(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"clean": "nothing", "a/value": "x probe-secret-42 y", "b/key": "-----BEGIN EC PRIVATE KEY-----"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := scanForSecrets([]string{dir}, "probe-secret-42")
	want := []string{"the sandbox's file " + dir + "/a/value holds the probe secret's value", "the sandbox's file " + dir + "/b/key holds a private key"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
