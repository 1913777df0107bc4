package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/image"
)

// fakeImages is an image store whose answers the test decides: each
// reference in errs fails with its error, every other is held.
type fakeImages struct {
	errs map[string]error
}

const fakeDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func (f fakeImages) info(ref string) image.Info {
	return image.Info{Digest: fakeDigest, Refs: []string{ref}, Size: 1 << 20, Layers: 1, Platform: "linux/amd64",
		Pulled: time.Unix(1800000000, 0), LastUsed: time.Unix(1800000000, 0)}
}

func (f fakeImages) Acquire(_ context.Context, ref string) (*image.Image, error) {
	if err := f.errs[ref]; err != nil {
		return nil, err
	}
	return &image.Image{Ref: ref, Digest: fakeDigest, Layers: []string{"/nonexistent"}}, nil
}

func (f fakeImages) Pull(_ context.Context, ref string) (image.Info, error) {
	if err := f.errs[ref]; err != nil {
		return image.Info{}, err
	}
	return f.info(ref), nil
}

func (f fakeImages) List() []image.Info { return []image.Info{f.info("r.example/a:1")} }

func (f fakeImages) Delete(ref string) (image.Info, error) {
	if err := f.errs[ref]; err != nil {
		return image.Info{}, err
	}
	return f.info(ref), nil
}

func withImages(c *Config) {
	c.Images = fakeImages{errs: map[string]error{
		"r.example/missing:1": fmt.Errorf("pull r.example/missing:1: %w: no such repository, tag or digest", image.ErrNotFound),
		"r.example/private:1": fmt.Errorf("pull r.example/private:1: %w: the worker's credentials are missing", image.ErrUnauthorized),
		"r.example/silent:1":  fmt.Errorf("pull r.example/silent:1: %w: r.example did not answer in time", image.ErrUnavailable),
		"r.example/huge:1":    fmt.Errorf("pull r.example/huge:1: %w", image.ErrCacheFull),
		"r.example/disk:1":    fmt.Errorf("pull r.example/disk:1: %w: write /secret/path: no space", image.ErrNoSpace),
		"elsewhere/x:1":       fmt.Errorf("%w: elsewhere/x is not in r.example", image.ErrNotAllowed),
		"r.example/arm:1":     fmt.Errorf("pull: %w: the index has [linux/arm64]", image.ErrPlatform),
		fakeDigest + "-used":  fmt.Errorf("delete: %w by 1 sandboxes", image.ErrInUse),
	}}
}

// imageRouteCases are the route table's cases of images.
func imageRouteCases() []routeCase {
	checkImage := func(t *testing.T, _ *testServer, a answer) {
		var im Image
		if err := json.Unmarshal(a.body, &im); err != nil || im.Digest != fakeDigest || im.Size != 1<<20 {
			t.Fatalf("answer %s (%v)", a.body, err)
		}
	}
	return []routeCase{
		{name: "ErrCreateImageOff", method: "POST", path: "/v1/sandboxes", body: `{"image":"python:3"}`, wantStatus: 400, wantCode: "image_not_allowed", wantMsg: "--image-registry"},
		{name: "ListImagesOff", method: "GET", path: "/v1/images", wantStatus: 200},
		{name: "ErrPullImagesOff", method: "POST", path: "/v1/images", body: `{"image":"python:3"}`, wantStatus: 400, wantCode: "image_not_allowed"},
		{name: "ErrDeleteImageOff", method: "DELETE", path: "/v1/images/" + fakeDigest, wantStatus: 400, wantCode: "image_not_allowed"},
		{name: "CreateImage", method: "POST", path: "/v1/sandboxes", body: `{"image":"r.example/a:1"}`, mod: withImages, wantStatus: 201,
			check: func(t *testing.T, ts *testServer, a answer) {
				var sb Sandbox
				if err := json.Unmarshal(a.body, &sb); err != nil || sb.Image != "r.example/a:1" || sb.ImageDigest != fakeDigest {
					t.Fatalf("answer %s (%v)", a.body, err)
				}
				c := ts.fake.Created()
				if img := c[len(c)-1].Image; img == nil || img.Layers[0] != "/nonexistent" || img.Release == nil {
					t.Fatalf("the runtime got image %+v", img)
				}
			}},
		{name: "ErrCreateImageAndBrowser", method: "POST", path: "/v1/sandboxes", body: `{"image":"r.example/a:1","browser":true}`,
			mod: func(c *Config) { withImages(c); c.Browser = true }, wantStatus: 400, wantCode: "invalid_request", wantMsg: "not both"},
		{name: "ErrCreateImageNotAllowed", method: "POST", path: "/v1/sandboxes", body: `{"image":"elsewhere/x:1"}`, mod: withImages, wantStatus: 400, wantCode: "image_not_allowed", wantMsg: "not in r.example"},
		{name: "ErrCreateImageMissing", method: "POST", path: "/v1/sandboxes", body: `{"image":"r.example/missing:1"}`, mod: withImages, wantStatus: 404, wantCode: "image_not_found"},
		{name: "ErrCreateImagePlatform", method: "POST", path: "/v1/sandboxes", body: `{"image":"r.example/arm:1"}`, mod: withImages, wantStatus: 400, wantCode: "invalid_image", wantMsg: "linux/arm64"},
		{name: "PullImage", method: "POST", path: "/v1/images", body: `{"image":"r.example/a:1"}`, mod: withImages, wantStatus: 200, check: checkImage},
		{name: "ErrPullNoImage", method: "POST", path: "/v1/images", body: `{}`, mod: withImages, wantStatus: 400, wantCode: "invalid_request", wantMsg: "give image"},
		{name: "ErrPullUnauthorized", method: "POST", path: "/v1/images", body: `{"image":"r.example/private:1"}`, mod: withImages, wantStatus: 403, wantCode: "image_unauthorized"},
		{name: "ErrPullSilent", method: "POST", path: "/v1/images", body: `{"image":"r.example/silent:1"}`, mod: withImages, wantStatus: 502, wantCode: "registry_unavailable", wantMsg: "did not answer"},
		{name: "ErrPullCacheFull", method: "POST", path: "/v1/images", body: `{"image":"r.example/huge:1"}`, mod: withImages, wantStatus: 507, wantCode: "image_cache_full"},
		{name: "ErrPullDiskFull", method: "POST", path: "/v1/images", body: `{"image":"r.example/disk:1"}`, mod: withImages, wantStatus: 507, wantCode: "image_cache_full",
			check: func(t *testing.T, _ *testServer, a answer) {
				if e := a.errBody(t); strings.Contains(e.Message, "/secret/path") {
					t.Fatalf("the answer names the store's files: %q", e.Message)
				}
			}},
		{name: "ListImages", method: "GET", path: "/v1/images", mod: withImages, wantStatus: 200, check: func(t *testing.T, _ *testServer, a answer) {
			var l ImageList
			if err := json.Unmarshal(a.body, &l); err != nil || len(l.Items) != 1 || l.Items[0].Refs[0] != "r.example/a:1" {
				t.Fatalf("answer %s (%v)", a.body, err)
			}
		}},
		{name: "DeleteImage", method: "DELETE", path: "/v1/images/" + fakeDigest, mod: withImages, wantStatus: 200, check: checkImage},
		{name: "ErrDeleteImageInUse", method: "DELETE", path: "/v1/images/" + fakeDigest + "-used", mod: withImages, wantStatus: 409, wantCode: "image_in_use"},
	}
}
