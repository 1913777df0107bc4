package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"openvibe.network/agentsandbox/image/unpack"
)

// zstdMaxWindow bounds the memory a zstd layer may make the decoder take.
const zstdMaxWindow = 64 << 20

// ensureLayer makes sure the layer with diff ID diff is unpacked: held
// already, being unpacked by another pull (it waits for that), or fetched
// now.
func (s *Store) ensureLayer(ctx context.Context, img v1.Image, desc v1.Descriptor, diff v1.Hash) error {
	if s.ready(diff.Hex) {
		return nil
	}
	_, err := s.join(ctx, "layer "+diff.Hex, func(ctx context.Context) (string, error) {
		if s.ready(diff.Hex) {
			return "", nil
		}
		return "", s.fetchLayer(ctx, img, desc, diff)
	})
	return err
}

// ready reports whether layer hex is unpacked.
func (s *Store) ready(hex string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.layers[hex]
	return l != nil && l.ready
}

// fetchLayer downloads one layer, decompresses it, checks its compressed
// digest (go-containerregistry's reader does, at its end) and its diff ID
// (here), and unpacks it into tmp/; only a layer that passed every check is
// renamed into layers/. Every byte it unpacks is charged to the cache first.
func (s *Store) fetchLayer(ctx context.Context, img v1.Image, desc v1.Descriptor, diff v1.Hash) (err error) {
	start := time.Now()
	l, err := img.LayerByDigest(desc.Digest)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	counted := &countingReader{r: rc}
	defer func() { s.metrics.downloaded(counted.n) }()
	dec, closeDec, err := decompressor(desc.MediaType, counted)
	if err != nil {
		return err
	}
	defer closeDec()
	tmp, err := os.MkdirTemp(s.path("tmp"), "layer-")
	if err != nil {
		return err
	}
	var charged int64
	defer func() {
		if err != nil {
			s.unreserve(charged)
			if rerr := os.RemoveAll(tmp); rerr != nil {
				s.log.Error("cannot remove a failed layer; the next start removes it", "dir", tmp, "err", rerr.Error())
			}
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	h := sha256.New()
	st, err := unpack.Layer(ctx, tmp, io.TeeReader(dec, h), unpack.Limits{
		MaxEntries: s.cfg.MaxLayerEntries,
		Reserve: func(n int64) error {
			if err := s.reserve(n); err != nil {
				return err
			}
			charged += n
			return nil
		},
	})
	if err != nil {
		return fmt.Errorf("layer %s: %w", desc.Digest, asBadImage(err))
	}
	// The compressed stream's end: go-containerregistry checks its digest
	// and size there.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("%w: layer %s: %w", ErrBadImage, desc.Digest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != diff.Hex {
		return fmt.Errorf("%w: layer %s unpacks to sha256:%s, not its diff ID %s", ErrBadImage, desc.Digest, got, diff)
	}
	// Kept only while a pull still needs it (all of them may have failed
	// or gone while it downloaded).
	s.mu.Lock()
	ly := s.layers[diff.Hex]
	if ly != nil && (ly.pins > 0 || s.named(diff.Hex)) {
		if err = os.Rename(tmp, s.layerDir(diff.Hex)); err == nil {
			ly.Size, ly.ready = charged, true
		}
	} else {
		err = errors.New("no pull needs the layer any more")
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("layer %s: %w", desc.Digest, err)
	}
	s.metrics.unpacked(time.Since(start))
	s.log.Info("image layer unpacked", "layer", desc.Digest.String(), "diff_id", diff.String(),
		"compressed", counted.n, "entries", st.Entries, "bytes", st.Bytes, "devices_skipped", st.Devices,
		"fifos_skipped", st.FIFOs, "setid_cleared", st.SetID, "xattrs_dropped", st.Xattrs,
		"duration_ms", time.Since(start).Milliseconds())
	return nil
}

// asBadImage marks what the layer itself is to blame for as ErrBadImage;
// the cache's, the disk's and ctx's errors stay as they are.
func asBadImage(err error) error {
	switch {
	case errors.Is(err, ErrCacheFull), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, unpack.ErrUnsafe), errors.Is(err, unpack.ErrTooMany), errors.Is(err, unpack.ErrTrailer):
		return fmt.Errorf("%w: %w", ErrBadImage, err)
	}
	return err
}

// decompressor reads a layer of media type mt.
func decompressor(mt types.MediaType, r io.Reader) (io.Reader, func(), error) {
	switch mt {
	case types.DockerLayer, types.OCILayer:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: layer is not gzip: %w", ErrBadImage, err)
		}
		return z, func() { z.Close() }, nil
	case types.OCILayerZStd:
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(1<<40))
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	case types.OCIUncompressedLayer, "application/vnd.docker.image.rootfs.diff.tar":
		return r, func() {}, nil
	}
	// Foreign and restricted layers (Windows bases) would be fetched from
	// URLs the manifest names: never.
	return nil, nil, fmt.Errorf("%w: layer media type %s is not supported", ErrBadImage, mt)
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
