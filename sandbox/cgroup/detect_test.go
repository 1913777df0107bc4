package cgroup

import (
	"errors"
	"io/fs"
	"maps"
	"strings"
	"testing"
)

// hybridV1 is this machine's kind of layout: v1 controllers plus an empty
// cgroup2 at unified.
const hybridV1 = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const pureV2 = `22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

const systemdV1 = `25 22 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
27 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
28 25 0:26 / /sys/fs/cgroup/memory rw,nosuid shared:10 - cgroup cgroup rw,memory
29 25 0:27 / /sys/fs/cgroup/pids rw,nosuid shared:11 - cgroup cgroup rw,pids
`

func TestDetect(t *testing.T) {
	allV2 := map[string]string{"/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"}
	for _, tc := range []struct {
		name      string
		mountinfo string
		root      string
		files     map[string]string
		want      layout
		wantErr   string // substring; the error must wrap ErrUnavailable
	}{
		{name: "HybridUsesV1", mountinfo: hybridV1,
			files: map[string]string{"/sys/fs/cgroup/unified/cgroup.controllers": "\n"},
			want: layout{version: 1, dirs: map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids",
				"cpu": "/sys/fs/cgroup/cpu", "freezer": "/sys/fs/cgroup/freezer", "cpuacct": "/sys/fs/cgroup/cpuacct"},
				roots: map[string]string{"memory": "/", "pids": "/", "cpu": "/", "freezer": "/", "cpuacct": "/"}}},
		{name: "HybridUnifiedWithControllersUsesV2", mountinfo: hybridV1,
			files: map[string]string{"/sys/fs/cgroup/unified/cgroup.controllers": "memory pids cpu\n"},
			want: layout{version: 2, dirs: map[string]string{"memory": "/sys/fs/cgroup/unified", "pids": "/sys/fs/cgroup/unified",
				"cpu": "/sys/fs/cgroup/unified"}}},
		{name: "PureV2", mountinfo: pureV2, files: allV2,
			want: layout{version: 2, dirs: map[string]string{"memory": "/sys/fs/cgroup", "pids": "/sys/fs/cgroup", "cpu": "/sys/fs/cgroup"}}},
		{name: "CombinedCPUMountWithoutFreezer", mountinfo: systemdV1,
			want: layout{version: 1, dirs: map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids",
				"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"},
				roots: map[string]string{"memory": "/", "pids": "/", "cpu": "/", "cpuacct": "/"}}},
		{name: "V1InACgroupNamespace", mountinfo: strings.ReplaceAll(systemdV1, " / /sys/fs/cgroup/", " /docker/c1 /sys/fs/cgroup/"),
			want: layout{version: 1, dirs: map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids",
				"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"},
				roots: map[string]string{"memory": "/docker/c1", "pids": "/docker/c1", "cpu": "/docker/c1", "cpuacct": "/docker/c1"}}},
		{name: "EscapedPath", root: "/mnt/c g",
			mountinfo: "26 22 0:23 / /mnt/c\\040g rw - cgroup2 cgroup2 rw\n",
			files:     map[string]string{"/mnt/c g/cgroup.controllers": "memory pids cpu"},
			want:      layout{version: 2, dirs: map[string]string{"memory": "/mnt/c g", "pids": "/mnt/c g", "cpu": "/mnt/c g"}}},
		{name: "ErrV2MissingPids", mountinfo: pureV2,
			files:   map[string]string{"/sys/fs/cgroup/cgroup.controllers": "cpu memory\n"},
			wantErr: `v2 controller "pids"`},
		{name: "ErrV1MissingPids", mountinfo: strings.ReplaceAll(systemdV1, "rw,pids", "rw,blkio"),
			wantErr: `v1 controller "pids"`},
		{name: "ErrV1MissingMemory", mountinfo: strings.ReplaceAll(hybridV1, "rw,memory", "rw,devices"),
			wantErr: `v1 controller "memory"`},
		{name: "ErrOutsideRoot", mountinfo: "26 22 0:23 / /mnt/cg rw - cgroup2 cgroup2 rw\n",
			files: map[string]string{"/mnt/cg/cgroup.controllers": "memory pids cpu"}, wantErr: "no cgroup filesystem"},
		{name: "ErrUnreadableV2", mountinfo: pureV2, wantErr: "no cgroup filesystem"},
		{name: "ErrNothingMounted", mountinfo: "22 1 0:21 / /sys rw - sysfs sysfs rw\n", wantErr: "no cgroup filesystem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root
			if root == "" {
				root = DefaultRoot
			}
			read := func(p string) ([]byte, error) {
				if s, ok := tc.files[p]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			got, err := detect(tc.mountinfo, root, read)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrUnavailable) {
					t.Fatalf("err = %v, want one with %q wrapping ErrUnavailable", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.version != tc.want.version || !maps.Equal(got.dirs, tc.want.dirs) || !maps.Equal(got.roots, tc.want.roots) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int
		limits  Limits
		want    map[string]string
	}{
		{name: "V2Limits", version: 2, limits: Limits{MemoryBytes: 32 << 20, Pids: 8, CPUPercent: 50},
			want: map[string]string{"memory.max": "33554432", "memory.swap.max": "0", "pids.max": "8", "cpu.max": "50000 100000"}},
		{name: "V2Unlimited", version: 2,
			want: map[string]string{"memory.max": "max", "memory.swap.max": "0", "pids.max": "max", "cpu.max": "max 100000"}},
		{name: "V2TwoCores", version: 2, limits: Limits{CPUPercent: 200},
			want: map[string]string{"memory.max": "max", "memory.swap.max": "0", "pids.max": "max", "cpu.max": "200000 100000"}},
		{name: "V1Limits", version: 1, limits: Limits{MemoryBytes: 2 << 30, Pids: 256, CPUPercent: 100},
			want: map[string]string{"memory.limit_in_bytes": "2147483648", "memory.memsw.limit_in_bytes": "2147483648",
				"memory.kmem.tcp.limit_in_bytes": "536870912", "pids.max": "256", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "100000"}},
		{name: "V1Unlimited", version: 1,
			want: map[string]string{"memory.limit_in_bytes": "-1", "memory.memsw.limit_in_bytes": "-1",
				"memory.kmem.tcp.limit_in_bytes": "-1", "pids.max": "max", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, s := range settings(tc.version, tc.limits) {
				got[s.file] = s.value
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
