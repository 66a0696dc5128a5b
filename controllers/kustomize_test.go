package controllers

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/testutil/needs"
)

// kustomizeBuild renders a kustomize directory with the kustomize binary built by
// hack/install-k8s-tools.sh (CONDENSE_TOOLS_BIN), skipping when it is absent.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin := filepath.Join(os.Getenv("CONDENSE_TOOLS_BIN"), "kustomize")
	if os.Getenv("CONDENSE_TOOLS_BIN") == "" {
		if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
			bin = filepath.Join(d, "kustomize")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		needs.Missing(t, "kustomize not found (%s): run hack/test.sh or set CONDENSE_TOOLS_BIN", bin)
	}
	out, err := exec.Command(bin, "build", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, out)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// TestKustomizeDefaultOverlay renders config/default: both CRDs, the operator Deployment
// running `condense manager --leader-elect` in condense-system, and bindings whose role
// references resolve to roles in the same output.
func TestKustomizeDefaultOverlay(t *testing.T) {
	objs := kustomizeBuild(t, filepath.Join("..", "config", "default"))
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	crds := map[string]bool{}
	for _, o := range byKind["CustomResourceDefinition"] {
		crds[o.GetName()] = true
	}
	if !crds["pruningpolicies.condense.dev"] || !crds["agentsessions.condense.dev"] {
		t.Fatalf("CRDs: %v", crds)
	}
	if len(byKind["Deployment"]) != 1 {
		t.Fatalf("want one operator Deployment, got %d", len(byKind["Deployment"]))
	}
	dep := byKind["Deployment"][0]
	if dep.GetNamespace() != "condense-system" {
		t.Fatalf("operator namespace %q", dep.GetNamespace())
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if len(args) < 2 || args[0] != "manager" || args[1] != "--leader-elect" {
		t.Fatalf("operator args %v", args)
	}
	// The managed Redis's NetworkPolicy admits the operator's pods by this label, in the
	// namespace the operator learns from POD_NAMESPACE.
	if l, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "metadata", "labels", specs.LabelOperator); l != "operator" {
		t.Fatalf("operator pods lack the label %s=operator", specs.LabelOperator)
	}
	env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
	if !slices.ContainsFunc(env, func(e any) bool { return e.(map[string]any)["name"] == "POD_NAMESPACE" }) {
		t.Fatalf("operator container lacks POD_NAMESPACE: %v", env)
	}
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	names := map[string]bool{}
	for _, k := range []string{"ClusterRole", "Role", "ServiceAccount"} {
		for _, o := range byKind[k] {
			names[k+"/"+o.GetName()] = true
		}
	}
	if !names["ServiceAccount/"+sa] {
		t.Fatalf("Deployment service account %q not in the output (%v)", sa, names)
	}
	for _, k := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range byKind[k] {
			kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
			if !names[kind+"/"+name] {
				t.Errorf("%s %s references %s/%s, not in the output (%v)", k, b.GetName(), kind, name, names)
			}
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			for _, s := range subjects {
				if n := s.(map[string]any)["name"]; n != sa {
					t.Errorf("%s %s binds %v, want the operator's service account %s", k, b.GetName(), n, sa)
				}
			}
		}
	}
	if len(byKind["ClusterRoleBinding"]) != 1 || len(byKind["RoleBinding"]) != 1 {
		t.Fatalf("bindings: %d cluster, %d namespaced", len(byKind["ClusterRoleBinding"]), len(byKind["RoleBinding"]))
	}
}

// TestKustomizeSamples renders config/samples: every sample is listed in its kustomization.
func TestKustomizeSamples(t *testing.T) {
	objs := kustomizeBuild(t, filepath.Join("..", "config", "samples"))
	files, _ := filepath.Glob(filepath.Join("..", "config", "samples", "condense_*.yaml"))
	if len(objs) != len(files) || len(objs) < 4 {
		t.Fatalf("kustomization renders %d objects for %d sample files", len(objs), len(files))
	}
}

// TestRBACLeastPrivilege checks the rendered RBAC of config/default: Leases only through the
// namespaced leader-election Role (which also lets leader election record its core/v1
// events), and no verbs the operator does not use on PruningPolicies.
func TestRBACLeastPrivilege(t *testing.T) {
	objs := kustomizeBuild(t, filepath.Join("..", "config", "default"))
	type rule struct {
		APIGroups []string `json:"apiGroups"`
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	}
	rulesOf := func(kind string) []rule {
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			raw, _, _ := unstructured.NestedSlice(o.Object, "rules")
			var out []rule
			for _, r := range raw {
				var ru rule
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.(map[string]any), &ru); err != nil {
					t.Fatal(err)
				}
				out = append(out, ru)
			}
			return out
		}
		t.Fatalf("no %s rendered", kind)
		return nil
	}
	grants := func(rules []rule, group, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	cluster, ns := rulesOf("ClusterRole"), rulesOf("Role")
	for _, verb := range []string{"get", "create", "update", "delete", "list", "watch", "patch"} {
		if grants(cluster, "coordination.k8s.io", "leases", verb) {
			t.Errorf("the ClusterRole grants %s on Leases in every namespace; leader election needs only the namespaced Role", verb)
		}
	}
	for _, verb := range []string{"update", "patch", "create", "delete"} {
		if grants(cluster, "condense.dev", "pruningpolicies", verb) {
			t.Errorf("the ClusterRole grants %s on PruningPolicies, which the operator never writes (status aside)", verb)
		}
	}
	for _, want := range []struct{ group, resource, verb string }{
		{"coordination.k8s.io", "leases", "get"}, {"coordination.k8s.io", "leases", "create"}, {"coordination.k8s.io", "leases", "update"},
		{"", "events", "create"}, {"", "events", "patch"},
	} {
		if !grants(ns, want.group, want.resource, want.verb) {
			t.Errorf("the leader-election Role lacks %s on %q %s", want.verb, want.group, want.resource)
		}
	}
}

// TestKustomizeManagerImage: the operator gives proxy and pruner pods its own image
// (CONDENSE_IMAGE), so the two never skew — also when an overlay sets the image with
// kustomize's `images:`.
func TestKustomizeManagerImage(t *testing.T) {
	base, err := filepath.Abs(filepath.Join("..", "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, base) // kustomize refuses absolute resource paths
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte("resources:\n- "+rel+
		"\nimages:\n- name: ghcr.io/condense-dev/condense\n  newName: registry.example/condense\n  newTag: 9.9.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{base: "", overlay: "registry.example/condense:9.9.9"} {
		var dep *unstructured.Unstructured
		for _, o := range kustomizeBuild(t, dir) {
			if o.GetKind() == "Deployment" {
				dep = o
			}
		}
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		image, _ := c["image"].(string)
		env, _, _ := unstructured.NestedSlice(c, "env")
		got := ""
		for _, e := range env {
			if e := e.(map[string]any); e["name"] == "CONDENSE_IMAGE" {
				got, _ = e["value"].(string)
			}
		}
		if got == "" || got != image || (want != "" && image != want) {
			t.Errorf("%s: manager image %q, CONDENSE_IMAGE %q (want both %q)", dir, image, got, want)
		}
	}
}
