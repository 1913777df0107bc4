package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The committed manifests, the values they are rendered with, and the
// chart's least privilege.
const (
	chartDir      = "agentsandbox"
	manifestsFile = "manifests/agentsandbox.yaml"
	exampleValues = "values-example.yaml"
	securityFile  = "agentsandbox/files/security.json"
	releaseName   = "agentsandbox"
	namespace     = "agentsandbox"
)

// security is files/security.json (podmantest reads the same file).
type security struct {
	Description              string   `json:"description"`
	RunAsUser                int64    `json:"runAsUser"`
	Privileged               bool     `json:"privileged"`
	AllowPrivilegeEscalation bool     `json:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   bool     `json:"readOnlyRootFilesystem"`
	Capabilities             []string `json:"capabilities"`
	SeccompProfile           string   `json:"seccompProfile"`
	AppArmorProfile          string   `json:"appArmorProfile"`
	ProcMount                string   `json:"procMount"`
	CgroupNamespace          string   `json:"cgroupNamespace"`
	WritableDirs             []string `json:"writableDirs"`
}

func readSecurity(t *testing.T) security {
	t.Helper()
	b, err := os.ReadFile(securityFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s security
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s: %v", securityFile, err)
	}
	return s
}

// serviceMonitor is the Prometheus operator's ServiceMonitor, as far as
// the chart writes one (it has no type in k8s.io/api).
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// objects are a rendering's objects, decoded strictly, by kind.
type objects struct {
	configMaps      []corev1.ConfigMap
	services        []corev1.Service
	daemonSets      []appsv1.DaemonSet
	deployments     []appsv1.Deployment
	budgets         []policyv1.PodDisruptionBudget
	serviceMonitors []serviceMonitor
	kinds           []string
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits a multi-document YAML rendering and decodes each object
// strictly (an unknown or repeated field, or a wrong type, fails) into the
// Kubernetes API type of its apiVersion and kind.
func decode(t *testing.T, rendering []byte) objects {
	t.Helper()
	var out objects
	for i, doc := range docSeparator.Split(string(rendering), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		gvk := tm.APIVersion + "/" + tm.Kind
		var target any
		switch gvk {
		case "v1/ConfigMap":
			out.configMaps = append(out.configMaps, corev1.ConfigMap{})
			target = &out.configMaps[len(out.configMaps)-1]
		case "v1/Service":
			out.services = append(out.services, corev1.Service{})
			target = &out.services[len(out.services)-1]
		case "apps/v1/DaemonSet":
			out.daemonSets = append(out.daemonSets, appsv1.DaemonSet{})
			target = &out.daemonSets[len(out.daemonSets)-1]
		case "apps/v1/Deployment":
			out.deployments = append(out.deployments, appsv1.Deployment{})
			target = &out.deployments[len(out.deployments)-1]
		case "policy/v1/PodDisruptionBudget":
			out.budgets = append(out.budgets, policyv1.PodDisruptionBudget{})
			target = &out.budgets[len(out.budgets)-1]
		case "monitoring.coreos.com/v1/ServiceMonitor":
			out.serviceMonitors = append(out.serviceMonitors, serviceMonitor{})
			target = &out.serviceMonitors[len(out.serviceMonitors)-1]
		default:
			t.Fatalf("document %d: an object of %s, which the chart is not known to write", i, gvk)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("document %d (%s): %v", i, gvk, err)
		}
		out.kinds = append(out.kinds, tm.Kind)
	}
	return out
}

// stripComments drops the comment lines of a YAML document (helm template
// heads each with "# Source: …").
func stripComments(doc string) string {
	var keep []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestManifests: the committed manifests hold the worker's ConfigMap,
// DaemonSet and headless Service and Live's Deployment, Service and
// PodDisruptionBudget, each decoded strictly, and they say what the chart
// promises (checkManifests).
func TestManifests(t *testing.T) {
	b, err := os.ReadFile(manifestsFile)
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, b)
	want := []string{"ConfigMap", "DaemonSet", "Deployment", "PodDisruptionBudget", "Service", "Service"}
	got := slices.Clone(objs.kinds)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("kinds (-want +got):\n%s", diff)
	}
	checkManifests(t, objs, readSecurity(t))
}

// checkManifests checks a rendering with a worker and Live.
func checkManifests(t *testing.T, objs objects, sec security) {
	t.Helper()
	ds := objs.daemonSets[0]
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("the DaemonSet has %d containers, want the worker alone", len(pod.Containers))
	}
	worker := pod.Containers[0]
	if diff := cmp.Diff(securityContext(sec, "agentsandbox/codes-sandbox.json"), worker.SecurityContext); diff != "" {
		t.Errorf("the worker's security context is not files/security.json's (-want +got):\n%s", diff)
	}
	if pod.SecurityContext != nil && (pod.SecurityContext.SeccompProfile != nil || pod.SecurityContext.AppArmorProfile != nil) {
		t.Errorf("the pod's security context sets a profile the container's does not: %+v", pod.SecurityContext)
	}
	var mounts []string
	for _, m := range worker.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	for _, d := range sec.WritableDirs {
		if !slices.Contains(mounts, d) {
			t.Errorf("the worker's %s is not writable (no volume at it; mounts %v)", d, mounts)
		}
	}
	for _, p := range []*corev1.Probe{worker.ReadinessProbe, worker.LivenessProbe} {
		if p == nil || p.Exec == nil || !slices.Contains(p.Exec.Command, "probe") {
			t.Errorf("a probe of the worker is not codes-sandbox probe: %+v", p)
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("the worker's termination grace period is %v s: too short to wipe its sandboxes", g)
	}
	if ann := ds.Spec.Template.Annotations; ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9464" {
		t.Errorf("the worker's pods are not annotated for scraping: %v", ann)
	}
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].SecurityContext == nil ||
		pod.InitContainers[0].SecurityContext.AllowPrivilegeEscalation == nil || *pod.InitContainers[0].SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("the seccomp profile's installer: %+v", pod.InitContainers)
	}

	var cfg map[string]any
	if err := json.Unmarshal([]byte(objs.configMaps[0].Data["config.json"]), &cfg); err != nil {
		t.Fatalf("the worker's config.json: %v", err)
	}
	for _, key := range []string{"listen", "api_token_file", "capacity", "state_dir", "metrics_listen", "check_ins"} {
		if _, ok := cfg[key]; !ok {
			t.Errorf("the worker's config.json has no %s: %v", key, cfg)
		}
	}

	dep := objs.deployments[0]
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("Live's Deployment has %v replicas, want several", dep.Spec.Replicas)
	}
	live := dep.Spec.Template.Spec.Containers[0]
	var dsn *corev1.EnvVar
	for i, e := range live.Env {
		if e.Name == "OVLIVE_DB" {
			dsn = &live.Env[i]
		}
	}
	if dsn == nil || dsn.Value != "" || dsn.ValueFrom == nil || dsn.ValueFrom.SecretKeyRef == nil {
		t.Errorf("Live's DSN is not from a Secret: %+v", dsn)
	}
	if sc := dep.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("Live's pods may run as root: %+v", sc)
	}
	pdb := objs.budgets[0]
	if diff := cmp.Diff(dep.Spec.Selector, pdb.Spec.Selector); diff != "" {
		t.Errorf("the PodDisruptionBudget does not select Live's pods (-deployment +budget):\n%s", diff)
	}
}

// securityContext is the container security context files/security.json
// means on Kubernetes, with the seccomp profile at localhostProfile on the
// node.
func securityContext(s security, localhostProfile string) *corev1.SecurityContext {
	caps := make([]corev1.Capability, len(s.Capabilities))
	for i, c := range s.Capabilities {
		caps[i] = corev1.Capability(c)
	}
	procMount := corev1.ProcMountType(s.ProcMount)
	return &corev1.SecurityContext{
		RunAsUser:                &s.RunAsUser,
		RunAsNonRoot:             new(false),
		Privileged:               &s.Privileged,
		AllowPrivilegeEscalation: &s.AllowPrivilegeEscalation,
		ReadOnlyRootFilesystem:   &s.ReadOnlyRootFilesystem,
		ProcMount:                &procMount,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &localhostProfile},
		AppArmorProfile:          &corev1.AppArmorProfile{Type: corev1.AppArmorProfileType(s.AppArmorProfile)},
	}
}

// TestSecurityFile: files/security.json is what Kubernetes can give: no
// privileged container, privilege escalation allowed (the API requires it
// with CAP_SYS_ADMIN), a cgroup namespace of the container's own (what
// nodes on cgroup v2 give), and its seccomp profile beside it.
func TestSecurityFile(t *testing.T) {
	s := readSecurity(t)
	if s.Privileged || !s.AllowPrivilegeEscalation || s.CgroupNamespace != "private" || s.ProcMount != "Default" {
		t.Errorf("files/security.json: %+v", s)
	}
	if _, err := os.Stat(chartDir + "/files/" + s.SeccompProfile); err != nil {
		t.Errorf("its seccomp profile: %v", err)
	}
	if !slices.Contains(s.Capabilities, "SYS_ADMIN") || slices.Contains(s.Capabilities, "ALL") {
		t.Errorf("capabilities %v", s.Capabilities)
	}
}

// helm returns the helm command (HELM, as scripts/helm.sh builds it), or
// skips the test; under CI it fails instead.
func helm(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set, so this test must run, but HELM is not: run it with make k8s-check (scripts/helm.sh builds helm)")
		}
		t.Skip("skipping: HELM is not set (make k8s-check sets it)")
	}
	return h
}

// render runs helm template on the chart with args and returns its output,
// or its error with what helm said.
func render(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm(t), append([]string{"template", releaseName, chartDir, "--namespace", namespace, "--kube-version", "1.33.0"}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// TestHelmTemplate: the chart renders the committed manifests from
// values-example.yaml (so they are never stale), and every other setting
// renders objects that decode strictly: a ServiceMonitor only where its
// CRD exists, no installer with installOnNode off, TLS, a Live CA, a
// pool, each side alone; missing Secrets are refused with what to give.
func TestHelmTemplate(t *testing.T) {
	got, err := render(t, "--values", exampleValues)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(manifestsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run make k8s-manifests (diff -want +got):\n%s", manifestsFile, cmp.Diff(string(want), string(got)))
	}
	sec := readSecurity(t)
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, o objects)
	}{
		{"ServiceMonitorWithItsCRD", []string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}, func(t *testing.T, o objects) {
			if len(o.serviceMonitors) != 1 || o.serviceMonitors[0].Spec.Endpoints[0].Port != "metrics" {
				t.Errorf("service monitors %+v", o.serviceMonitors)
			}
			checkManifests(t, o, sec)
		}},
		{"NoInstaller", []string{"--set", "worker.seccomp.installOnNode=false", "--set", "worker.runtimeClassName=sandboxes"}, func(t *testing.T, o objects) {
			pod := o.daemonSets[0].Spec.Template.Spec
			if len(pod.InitContainers) != 0 || *pod.RuntimeClassName != "sandboxes" || len(o.serviceMonitors) != 0 {
				t.Errorf("init containers %v, runtime class %v, service monitors %d", pod.InitContainers, pod.RuntimeClassName, len(o.serviceMonitors))
			}
		}},
		{"TLSAndLiveCAAndPool", []string{"--set", "worker.tls.secretName=worker-tls", "--set", "worker.liveCA.configMap=live-ca", "--set", "worker.pool=2"},
			func(t *testing.T, o objects) {
				cfg := o.configMaps[0].Data["config.json"]
				for _, w := range []string{`"tls_cert_file": "/etc/codes-sandbox/tls/tls.crt"`, `"live_ca_file": "/etc/codes-sandbox/live-ca/ca.pem"`} {
					if !strings.Contains(cfg, w) {
						t.Errorf("config.json has no %s:\n%s", w, cfg)
					}
				}
				if args := o.daemonSets[0].Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--pool=2") {
					t.Errorf("args %v", args)
				}
				checkManifests(t, o, sec)
			}},
		{"BrowserPool", []string{"--set", "worker.browser=on", "--set", "worker.poolBrowser=2"}, func(t *testing.T, o objects) {
			if args := o.daemonSets[0].Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--pool-browser=2") {
				t.Errorf("args %v", args)
			}
			checkManifests(t, o, sec)
		}},
		{"WorkerAlone", []string{"--set", "live.enabled=false"}, func(t *testing.T, o objects) {
			if len(o.deployments)+len(o.budgets) != 0 || len(o.daemonSets) != 1 {
				t.Errorf("kinds %v", o.kinds)
			}
		}},
		{"LiveAlone", []string{"--set", "worker.enabled=false", "--set", "live.replicas=1"}, func(t *testing.T, o objects) {
			if len(o.daemonSets)+len(o.configMaps)+len(o.budgets) != 0 || len(o.deployments) != 1 {
				t.Errorf("kinds %v (one replica: no disruption budget)", o.kinds)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, append([]string{"--values", exampleValues}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, decode(t, out))
		})
	}
	for _, tc := range []struct{ name, unset, want string }{
		{"NoAPIToken", "worker.apiTokenSecret=", "worker.apiTokenSecret is required"},
		{"NoDSN", "live.databaseSecret=", "live.databaseSecret is required"},
		{"NoServiceToken", "worker.serviceTokenSecret=", "worker.checkIns need worker.serviceTokenSecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, "--values", exampleValues, "--set", tc.unset)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template with %s: %v, want it refused saying %q", tc.unset, err, tc.want)
			}
		})
	}
}
