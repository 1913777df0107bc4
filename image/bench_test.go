package image

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"openvibe.network/agentsandbox/image/registrytest"
	"openvibe.network/agentsandbox/internal/testenv"
)

// BenchmarkPullVsSkopeoUmoci (scripts/bench-images.sh): a pull and unpack
// of the Debian test image (about 60 MB compressed, 200 MB unpacked) into
// an empty store, against Debian's skopeo copying the same image from the
// same loopback registry into an OCI layout and umoci unpacking it,
// interleaved (store, skopeo + umoci, store…). It reports both p50s and
// the ratio store/(skopeo+umoci).
func BenchmarkPullVsSkopeoUmoci(b *testing.B) {
	testenv.RequireRoot(b)
	skopeo := testenv.RequireBinary(b, "skopeo", "apt-get install skopeo")
	umoci := testenv.RequireBinary(b, "umoci", "apt-get install umoci")
	reg := registrytest.Start(b, registrytest.Options{})
	reg.Push(b, "debian/python:1", registrytest.Debian(b))
	ref := reg.Ref("debian/python:1")
	var ours, theirs []time.Duration
	for range b.N {
		dir := b.TempDir()
		start := time.Now()
		s, err := Open(Config{Dir: filepath.Join(dir, "store"), Registries: private(b, reg)})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		if _, err := s.Pull(ctx, ref); err != nil {
			b.Fatal(err)
		}
		cancel()
		ours = append(ours, time.Since(start))
		s.Close()
		start = time.Now()
		for _, argv := range [][]string{
			{skopeo, "copy", "--quiet", "--src-tls-verify=false", "docker://" + ref, "oci:" + filepath.Join(dir, "oci") + ":1"},
			{umoci, "unpack", "--image", filepath.Join(dir, "oci") + ":1", filepath.Join(dir, "bundle")},
		} {
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %v\n%s", argv, err, out)
			}
		}
		theirs = append(theirs, time.Since(start))
		_ = os.RemoveAll(dir)
	}
	slices.Sort(ours)
	slices.Sort(theirs)
	b.ReportMetric(ours[len(ours)/2].Seconds()*1000, "store-p50-ms")
	b.ReportMetric(theirs[len(theirs)/2].Seconds()*1000, "skopeo+umoci-p50-ms")
	b.ReportMetric(float64(ours[len(ours)/2])/float64(theirs[len(theirs)/2]), "store/skopeo+umoci-p50")
}
