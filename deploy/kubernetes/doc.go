// Package kubernetes holds the tests of the Helm chart in agentsandbox/ and
// of the manifests rendered from it in manifests/: every object decodes
// strictly into the Kubernetes API's types, and the worker's DaemonSet
// runs with exactly the least privilege the podman test proved
// (agentsandbox/files/security.json). It is a module of its own so that the
// Kubernetes API's modules stay out of the project's go.mod.
package kubernetes
