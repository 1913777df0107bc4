package mountinfo

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sample = `22 1 0:21 / / rw,relatime - ext4 /dev/vda rw,discard
42 22 0:39 / /run/a\040b rw,nosuid,nodev - tmpfs tmpfs rw,size=16384k,nr_inodes=1000,mode=711
43 22 0:40 / /dev/pts rw,nosuid,noexec - devpts devpts rw,mode=620,ptmxmode=666
44 22 0:41 / /dev/pts rw,nosuid,noexec - devpts devpts rw,mode=620,ptmxmode=666,max=8
45 22 0:42 /usr /usr ro,nosuid - ext4 /dev/vda rw
not a mount line
`

func TestParse(t *testing.T) {
	want := []Mount{
		{Dev: "0:21", Root: "/", Point: "/", Options: []string{"rw", "relatime"}, FSType: "ext4", Source: "/dev/vda", SuperOptions: []string{"rw", "discard"}},
		{Dev: "0:39", Root: "/", Point: "/run/a b", Options: []string{"rw", "nosuid", "nodev"}, FSType: "tmpfs", Source: "tmpfs", SuperOptions: []string{"rw", "size=16384k", "nr_inodes=1000", "mode=711"}},
		{Dev: "0:40", Root: "/", Point: "/dev/pts", Options: []string{"rw", "nosuid", "noexec"}, FSType: "devpts", Source: "devpts", SuperOptions: []string{"rw", "mode=620", "ptmxmode=666"}},
		{Dev: "0:41", Root: "/", Point: "/dev/pts", Options: []string{"rw", "nosuid", "noexec"}, FSType: "devpts", Source: "devpts", SuperOptions: []string{"rw", "mode=620", "ptmxmode=666", "max=8"}},
		{Dev: "0:42", Root: "/usr", Point: "/usr", Options: []string{"ro", "nosuid"}, FSType: "ext4", Source: "/dev/vda", SuperOptions: []string{"rw"}},
	}
	got := Parse(sample)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Parse (-want +got):\n%s", diff)
	}
	vis := Visible(got)
	if diff := cmp.Diff([]Mount{want[0], want[1], want[3], want[4]}, vis); diff != "" {
		t.Fatalf("Visible (-want +got):\n%s", diff)
	}
	if !vis[1].Has("nr_inodes") || vis[1].Value("size") != "16384k" || vis[2].Value("max") != "8" || !vis[3].ReadOnly() || vis[0].ReadOnly() {
		t.Fatal("option accessors")
	}
}

func TestRead(t *testing.T) {
	ms, err := Read("/proc", os.Getpid())
	if err != nil || len(ms) == 0 {
		t.Fatalf("Read: %v %v", ms, err)
	}
	if _, err := Read("/proc", 1<<30); err == nil {
		t.Fatal("Read of a missing process succeeded")
	}
}

// TestCovering: the mounts over parts of a file system are those below it
// mounted after its last mount; a fresh mount over it covers them.
func TestCovering(t *testing.T) {
	masked := "500 480 0:171 / /proc rw - proc proc rw\n" +
		"126 500 0:171 /sys /proc/sys ro - proc proc rw\n" +
		"130 500 0:172 /null /proc/kcore rw - tmpfs tmpfs rw\n" +
		"131 480 0:173 / /procfoo rw - tmpfs tmpfs rw\n"
	for _, tc := range []struct {
		name, text, dir string
		want            []string
	}{
		{"Masked", masked, "/proc", []string{"/proc/sys", "/proc/kcore"}},
		{"FreshOverIt", masked + "700 480 0:180 / /proc rw - proc proc rw\n", "/proc", nil},
		{"MaskedAgain", masked + "700 480 0:180 / /proc rw - proc proc rw\n701 700 0:181 / /proc/acpi ro - tmpfs tmpfs ro\n", "/proc", []string{"/proc/acpi"}},
		{"NotMounted", masked, "/sys", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Covering(Parse(tc.text), tc.dir)); diff != "" {
				t.Errorf("Covering (-want +got):\n%s", diff)
			}
		})
	}
}
