package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	failCreate error
	// limitProblems are what the runtime says it cannot enforce.
	limitProblems []string
	execArgv      []string
	deleted       bool
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
	if f.failCreate != nil {
		return sandbox.Info{}, f.failCreate
	}
	pids := strconv.Itoa(opts.Limits.Pids)
	if f.cgroupPids != "" {
		pids = f.cgroupPids
	}
	f.writeFile(filepath.Join(f.cg, "memory.max"), strconv.Itoa(opts.Limits.MemoryMB<<20)+"\n")
	f.writeFile(filepath.Join(f.cg, "pids.max"), pids+"\n")
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
		"hostfiles checked",
		"status CapInh 0000000000000000", "status CapPrm 0000000000000000", "status CapEff 0000000000000000",
		"status CapBnd 0000000000000000", "status CapAmb 0000000000000000", "status NoNewPrivs 1", "status Seccomp 2",
		"uid_map 1000 201000 1", "unshare 1", "cgroup 0::/", "fork-begin",
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
		LimitProblems: func() []string { return f.limitProblems },
	})
	if ents, _ := os.ReadDir(canaryDir); len(ents) != 0 {
		t.Errorf("canary files left in %s", canaryDir)
	}
	return res
}

func TestSelfTestPasses(t *testing.T) {
	f := newFakeBox(t)
	res := runFake(t, f, nil, true)
	if !res.Passed || len(res.Reasons) != 0 || len(res.Checks) != len(agentsandbox.Checks()) {
		t.Fatalf("result = %+v, want every check passed", res)
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
