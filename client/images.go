package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"openvibe.network/agentsandbox/workerapi"
)

// Image describes an image of the worker's store.
type Image = workerapi.Image

// PullImage pulls ref into the worker's store ahead of the creates that
// use it (a tag is resolved again) and describes it. It fails with
// ErrImageNotAllowed, ErrImageNotFound, ErrImageUnavailable or
// ErrInvalidRequest (a bad reference, no variant for the worker's
// platform), each with the worker's message.
func (w *Worker) PullImage(ctx context.Context, ref string) (Image, error) {
	var im Image
	if err := w.doJSON(ctx, http.MethodPost, "/v1/images", workerapi.ImageRequest{Image: ref}, &im, http.StatusOK); err != nil {
		return Image{}, fmt.Errorf("pull image %s: %w", ref, err)
	}
	return im, nil
}

// Images lists the images of the worker's store, most recently used first.
func (w *Worker) Images(ctx context.Context) ([]Image, error) {
	var out workerapi.ImageList
	if err := w.doJSON(ctx, http.MethodGet, "/v1/images", nil, &out, http.StatusOK); err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return out.Items, nil
}

// DeleteImage evicts the image digest (or a reference it was pulled by)
// from the worker's store. It fails with ErrImageNotFound for an image the
// store does not hold and a 409 *APIError (image_in_use) while a sandbox
// runs on it.
func (w *Worker) DeleteImage(ctx context.Context, digest string) (Image, error) {
	var im Image
	if err := w.doJSON(ctx, http.MethodDelete, "/v1/images/"+url.PathEscape(digest), nil, &im, http.StatusOK); err != nil {
		return Image{}, fmt.Errorf("delete image %s: %w", digest, err)
	}
	return im, nil
}
