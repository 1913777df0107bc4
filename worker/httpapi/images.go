package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"openvibe.network/agentsandbox/image"
	"openvibe.network/agentsandbox/sandbox"
)

// Images is what the API needs of the image store; *image.Store implements
// it. Its errors are the image package's sentinels, which the API maps to
// codes.
type Images interface {
	Acquire(ctx context.Context, ref string) (*image.Image, error)
	Pull(ctx context.Context, ref string) (image.Info, error)
	List() []image.Info
	Delete(ref string) (image.Info, error)
}

var _ Images = (*image.Store)(nil)

func imageOf(in image.Info) Image {
	return Image{Digest: in.Digest, Refs: in.Refs, Size: in.Size, Layers: in.Layers, Platform: in.Platform,
		Pulled: in.Pulled.UTC(), LastUsed: in.LastUsed.UTC(), InUse: in.InUse}
}

// RootImage is what a sandbox of im runs on; the sandbox releases im when it
// is wiped.
func RootImage(im *image.Image) *sandbox.RootImage {
	return &sandbox.RootImage{Ref: im.Ref, Digest: im.Digest, Layers: im.Layers, Env: im.Config.Env,
		WorkingDir: im.Config.WorkingDir, UID: im.Config.UID, GID: im.Config.GID, User: im.Config.User, Release: im.Release}
}

// imagesOff is the answer to an image request on a worker without a store.
func imagesOff() *Error {
	return newError(CodeImageNotAllowed, "images are off on this worker (it has no --image-registry); create the sandbox without `image`, or use a worker that allows the registry")
}

// acquireImage holds ref for a sandbox being created.
func (s *Server) acquireImage(ctx context.Context, ref string) (*sandbox.RootImage, error) {
	if s.cfg.Images == nil {
		return nil, imagesOff()
	}
	im, err := s.cfg.Images.Acquire(ctx, ref)
	if err != nil {
		return nil, err
	}
	return RootImage(im), nil
}

// pullImage handles POST /v1/images: the image is pulled (a tag resolved
// again) and described.
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Images == nil {
		return imagesOff()
	}
	var req ImageRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Image == "" {
		return badRequest("give image, the reference to pull (e.g. registry.example/team/py:3.12)")
	}
	in, err := s.cfg.Images.Pull(r.Context(), req.Image)
	if err != nil {
		return err
	}
	addLog(r.Context(), slog.String("image", req.Image), slog.String("digest", in.Digest))
	writeJSON(w, http.StatusOK, imageOf(in))
	return nil
}

// listImages handles GET /v1/images.
func (s *Server) listImages(w http.ResponseWriter, _ *http.Request) error {
	out := ImageList{Items: []Image{}}
	if s.cfg.Images != nil {
		for _, in := range s.cfg.Images.List() {
			out.Items = append(out.Items, imageOf(in))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteImage handles DELETE /v1/images/{digest}: the image is evicted
// unless a sandbox runs on it.
func (s *Server) deleteImage(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Images == nil {
		return imagesOff()
	}
	in, err := s.cfg.Images.Delete(r.PathValue("digest"))
	if err != nil {
		return err
	}
	addLog(r.Context(), slog.String("digest", in.Digest))
	writeJSON(w, http.StatusOK, imageOf(in))
	return nil
}

// imageError maps the image store's errors (and the runtime's refusal of
// image sandboxes) to the API's; nil for any other error.
func imageError(err error) *Error {
	for _, m := range []struct {
		err  error
		code string
	}{
		{image.ErrNotAllowed, CodeImageNotAllowed},
		{image.ErrBadRef, CodeInvalidImage}, {image.ErrBadImage, CodeInvalidImage}, {image.ErrPlatform, CodeInvalidImage},
		{image.ErrNotFound, CodeImageNotFound}, {image.ErrUnknown, CodeImageNotFound},
		{image.ErrUnauthorized, CodeImageUnauthorized},
		{image.ErrUnavailable, CodeRegistryUnavailable}, {image.ErrRefused, CodeRegistryUnavailable},
		{image.ErrCacheFull, CodeImageCacheFull}, {image.ErrNoSpace, CodeImageCacheFull},
		{image.ErrInUse, CodeImageInUse},
		{sandbox.ErrNoImages, CodeImagesUnavailable},
	} {
		if !errors.Is(err, m.err) {
			continue
		}
		if m.err == image.ErrNoSpace { // its message names the store's files
			return newError(m.code, "the disk under this worker's image store is full; its operator must make room")
		}
		// The store's and the runtime's messages say what to fix and quote
		// no credential.
		return newError(m.code, "%s", err.Error())
	}
	return nil
}
