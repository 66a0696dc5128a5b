// Package helm tests the condense Helm chart with a real helm binary (built from Go modules by
// hack/install-k8s-tools.sh): lint, golden renders for default and full values, and rejection
// of bad values by values.schema.json.
package helm

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/condense-dev/condense/internal/testutil/needs"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const chartDir = "../../charts/condense"

func helmBin(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("CONDENSE_TOOLS_BIN"); d != "" {
		if p := filepath.Join(d, "helm"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	needs.Missing(t, "helm not found: run hack/install-k8s-tools.sh helm and set CONDENSE_TOOLS_BIN (make test does both)")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if len(args) > 0 && args[0] == "template" {
		// helm built from modules reports an old default cluster version; render for the one we test on.
		args = append(args, "--kube-version", "1.37.2")
	}
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

func TestHelmLint(t *testing.T) {
	for _, values := range []string{"", "testdata/full-values.yaml"} {
		args := []string{"lint", "--strict", chartDir}
		if values != "" {
			args = append(args, "-f", values)
		}
		if out, err := runHelm(t, args...); err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
	}
}

func TestHelmTemplateGolden(t *testing.T) {
	cases := map[string]string{"default": "", "full": "testdata/full-values.yaml"}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", "condense", chartDir, "--namespace", "condense-system"}
			if values != "" {
				args = append(args, "-f", values)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			checkCRDsMatchConfig(t, out)
			// CRDs are compared with config/crd/bases above; the golden file holds everything else,
			// so an API change does not churn it.
			got := withoutCRDs(out)
			golden := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./test/helm -update)", err)
			}
			if string(want) != got {
				t.Fatalf("helm template output differs from %s; rerun with -update and review the diff", golden)
			}
			checkRendered(t, name, out)
		})
	}
}

// withoutCRDs drops the CustomResourceDefinition documents of a render.
func withoutCRDs(out string) string {
	docs := strings.Split(out, "\n---")
	kept := docs[:0]
	for _, d := range docs {
		if !strings.Contains(d, "\nkind: CustomResourceDefinition\n") {
			kept = append(kept, d)
		}
	}
	return strings.Join(kept, "\n---")
}

// checkCRDsMatchConfig asserts that the chart renders exactly the CRDs in config/crd/bases
// (apart from the labels and keep annotation the chart adds).
func checkCRDsMatchConfig(t *testing.T, out string) {
	t.Helper()
	type crd struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	rendered := map[string]any{}
	for _, d := range strings.Split(out, "\n---") {
		if !strings.Contains(d, "\nkind: CustomResourceDefinition\n") {
			continue
		}
		var c crd
		if err := yaml.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		rendered[c.Metadata.Name] = c.Spec
	}
	files, _ := filepath.Glob("../../config/crd/bases/*.yaml")
	if len(files) == 0 || len(files) != len(rendered) {
		t.Fatalf("chart renders %d CRDs, config/crd/bases has %d (run make manifests)", len(rendered), len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c crd
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(c.Spec)
		gotJSON, _ := json.Marshal(rendered[c.Metadata.Name])
		if string(wantJSON) != string(gotJSON) {
			t.Errorf("chart CRD %s differs from %s (run make manifests)", c.Metadata.Name, f)
		}
	}
}

// checkRendered asserts structural properties of a render beyond byte equality.
func checkRendered(t *testing.T, name, out string) {
	t.Helper()
	kinds := map[string]int{}
	for _, doc := range strings.Split(out, "\n---") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered document is not YAML: %v\n%s", err, doc)
		}
		if obj.Kind == "" {
			continue
		}
		kinds[obj.Kind]++
		if obj.Kind == "CustomResourceDefinition" && obj.Metadata.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not kept on uninstall by default", obj.Metadata.Name)
		}
	}
	for _, k := range []string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service", "CustomResourceDefinition"} {
		if kinds[k] == 0 {
			t.Errorf("%s render lacks a %s (kinds: %v)", name, k, kinds)
		}
	}
	if name == "full" && (kinds["ServiceMonitor"] == 0 || kinds["PruningPolicy"] == 0) {
		t.Errorf("full render lacks the ServiceMonitor or the sample PruningPolicy (kinds: %v)", kinds)
	}
}

func TestHelmCRDsToggle(t *testing.T) {
	out, err := runHelm(t, "template", "condense", chartDir, "--set", "crds.enabled=false")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "kind: CustomResourceDefinition") {
		t.Fatal("crds.enabled=false still renders CRDs")
	}
	out, err = runHelm(t, "template", "condense", chartDir, "--set", "crds.keep=false")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "helm.sh/resource-policy") {
		t.Fatal("crds.keep=false still marks CRDs as kept")
	}
}

func TestHelmSchemaRejectsBadValues(t *testing.T) {
	bad := map[string][]string{
		"unknown top-level key":    {"--set", "replicas=2"},
		"negative replicas":        {"--set", "replicaCount=-1"},
		"bad pull policy":          {"--set", "image.pullPolicy=Sometimes"},
		"debug is a boolean":       {"--set-string", "manager.debug=loud"},
		"port out of range":        {"--set", "metrics.port=70000"},
		"bad interval":             {"--set", "serviceMonitor.interval=soon"},
		"typo under crds":          {"--set", "crds.keepp=true"},
		"bad sample name":          {"--set", "samplePolicy.name=Not_A_Name"},
		"sample name not DNS-1035": {"--set", "samplePolicy.name=7days"},
		"sample name over 46":      {"--set", "samplePolicy.name=" + strings.Repeat("a", 47)},
		"bad name override":        {"--set", "nameOverride=Not_A_Name"},
	}
	names := make([]string, 0, len(bad))
	for k := range bad {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		args := append([]string{"template", "condense", chartDir}, bad[name]...)
		out, err := runHelm(t, args...)
		if err == nil {
			t.Errorf("%s: helm accepted %v", name, bad[name])
			continue
		}
		if !strings.Contains(out, "schema") && !strings.Contains(out, "values don't meet") {
			t.Errorf("%s: rejected, but not by the schema: %s", name, out)
		}
	}
}

// TestSchemaCoversValues keeps values.schema.json in sync with values.yaml: every key set in
// values.yaml must be declared in the schema.
func TestSchemaCoversValues(t *testing.T) {
	vb, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	sb, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(sb, &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any, s map[string]any)
	walk = func(path string, v any, s map[string]any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			return // free-form object (resources, affinity, …)
		}
		for k, child := range m {
			cs, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml key %s%s is not declared in values.schema.json", path, k)
				continue
			}
			walk(path+k+".", child, cs)
		}
	}
	walk("", values, schema)
}

// TestSamplePolicyIsInstallOnly: the sample PruningPolicy is a post-install hook only. As a
// post-upgrade hook Helm would delete and re-create it on every upgrade (the default
// before-hook-creation delete policy), resetting edits and its sessions.
func TestSamplePolicyIsInstallOnly(t *testing.T) {
	out, err := runHelm(t, "template", "condense", chartDir, "--set", "samplePolicy.enabled=true")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, doc := range strings.Split(out, "\n---") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj.Kind != "PruningPolicy" {
			continue
		}
		found = true
		if hook := obj.Metadata.Annotations["helm.sh/hook"]; hook != "post-install" {
			t.Errorf("sample policy hook %q, want post-install only", hook)
		}
	}
	if !found {
		t.Fatal("samplePolicy.enabled=true renders no PruningPolicy")
	}
}

// TestHelmNameOverride: nameOverride, which the chart's helpers read, is an accepted value and
// names the operator's labels.
func TestHelmNameOverride(t *testing.T) {
	out, err := runHelm(t, "template", "condense", chartDir, "--set", "nameOverride=pruning")
	if err != nil {
		t.Fatalf("nameOverride rejected: %v\n%s", err, out)
	}
	if !strings.Contains(out, "app.kubernetes.io/name: pruning\n") {
		t.Fatal("nameOverride does not name the app.kubernetes.io/name label")
	}
}
