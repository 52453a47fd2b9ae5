// Command validate checks every object of a rendered Kubernetes manifest stream (the output of
// `helm template`) strictly against the API types: each document is decoded into the Go type of its
// apiVersion and kind from k8s.io/api, failing on a field the type does not have, a field given twice,
// a value of the wrong type, or a kind this program does not know. KEDA's custom resources are checked
// against the field sets of their documented specs (keda.go), and a temporal trigger's metadata keys
// against the scaler's documented parameters.
//
// Usage: validate < rendered.yaml   (exit 0: every object valid; 1: the problems, one a line, on stderr)
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// newObject returns an empty value of the type of apiVersion/kind, or nil when it is not known here.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/Pod":
		return &corev1.Pod{}
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "batch/v1/Job":
		return &batchv1.Job{}
	case "batch/v1/CronJob":
		return &batchv1.CronJob{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "networking.k8s.io/v1/Ingress":
		return &networkingv1.Ingress{}
	case "rbac.authorization.k8s.io/v1/Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		return &rbacv1.RoleBinding{}
	case "keda.sh/v1alpha1/ScaledObject":
		return &ScaledObject{}
	case "keda.sh/v1alpha1/TriggerAuthentication":
		return &TriggerAuthentication{}
	}
	return nil
}

// splitDocuments splits a YAML stream at its `---` lines, dropping empty documents and comments-only ones.
func splitDocuments(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if strings.TrimSpace(stripComments(cur.String())) != "" {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "---" || strings.HasPrefix(line, "--- ") {
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs, sc.Err()
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// sourceOf names the template a document came from (helm's `# Source:` line), for the messages.
func sourceOf(doc []byte) string {
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "# Source: ") {
			return strings.TrimPrefix(l, "# Source: ")
		}
	}
	return "(no source line)"
}

// validateDocument decodes one document strictly into its type; it returns "kind/name" when valid.
func validateDocument(doc []byte) (string, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return "", fmt.Errorf("not YAML: %w", err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &head); err != nil {
		return "", fmt.Errorf("no apiVersion/kind: %w", err)
	}
	if head.Metadata.Name == "" {
		return "", fmt.Errorf("%s %s has no metadata.name", head.APIVersion, head.Kind)
	}
	id := head.Kind + "/" + head.Metadata.Name
	obj := newObject(head.APIVersion, head.Kind)
	if obj == nil {
		return id, fmt.Errorf("%s: apiVersion %q kind %q is not a type this check knows", id, head.APIVersion, head.Kind)
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return id, fmt.Errorf("%s: %w", id, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return id, fmt.Errorf("%s: %s", id, strings.Join(msgs, "; "))
	}
	if v, ok := obj.(interface{ check() error }); ok {
		if err := v.check(); err != nil {
			return id, fmt.Errorf("%s: %w", id, err)
		}
	}
	return id, nil
}

func run(in io.Reader, out, errOut io.Writer) int {
	docs, err := splitDocuments(in)
	if err != nil {
		fmt.Fprintln(errOut, "validate:", err)
		return 1
	}
	if len(docs) == 0 {
		fmt.Fprintln(errOut, "validate: no objects in the input")
		return 1
	}
	var problems []error
	for _, doc := range docs {
		id, err := validateDocument(doc)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", sourceOf(doc), err))
			continue
		}
		fmt.Fprintln(out, "ok", id)
	}
	if len(problems) > 0 {
		fmt.Fprintln(errOut, errors.Join(problems...))
		return 1
	}
	fmt.Fprintf(out, "validate: %d objects valid\n", len(docs))
	return 0
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}
