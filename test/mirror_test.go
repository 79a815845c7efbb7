package test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap/zaptest"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/mirror"
)

// mirrorCopyState is what `kubectl get` prints for a ConfigMap or Secret: its
// data, type, and the label and annotation of a copy; "" when it is absent.
func mirrorCopyState(kind, namespace, name string) []string {
	return []string{"get", kind, name, "--namespace", namespace, "--ignore-not-found", "--output",
		`jsonpath={.type}{.data}|{.metadata.labels.fxkube\.io/mirrored}|{.metadata.annotations.fxkube\.io/mirror-of}`}
}

// mirrorNamespaces creates namespaces named mirror-<role>-<suffix>, one per
// role, and returns their names.
func mirrorNamespaces(k kubectl, roles ...string) map[string]string {
	suffix := fmt.Sprintf("%05d", rand.IntN(100000))
	names := make(map[string]string, len(roles))
	for _, role := range roles {
		names[role] = "mirror-" + role + "-" + suffix
		k.run("", "create", "namespace", names[role])
	}
	return names
}

func mirrorSourceYAML(kind, namespace, targets, data string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: %s
metadata:
  name: settings
  namespace: %s
  labels:
    fxkube.io/mirror: "true"
  annotations:
    fxkube.io/mirror-to: %q
%s
`, kind, namespace, targets, data)
}

func startMirror(t *testing.T) func() {
	t.Helper()
	app := testenv.App(t, testenv.Config(t), lifecycle.Config{}, zaptest.NewLogger(t), fxcontroller.Module, mirror.Module)
	app.RequireStart()
	return app.RequireStop
}

// TestMirror drives mirror with kubectl as a user would: copies appear,
// follow the source, go when the source stops asking for them, and objects
// mirror did not make are left alone.
func TestMirror(t *testing.T) {
	k := newKubectl(t)
	ns := mirrorNamespaces(k, "src", "a", "b", "c")
	k.run(fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %s
data:
  owner: c
`, ns["c"]), "apply", "-f", "-")
	foreign := `{"owner":"c"}||`

	defer startMirror(t)()

	k.run(mirrorSourceYAML("ConfigMap", ns["src"], ns["a"]+","+ns["b"], "data:\n  color: blue"), "apply", "-f", "-")
	copied := func(data string) string { return data + "|true|" + ns["src"] + "/settings" }
	k.eventually(copied(`{"color":"blue"}`), mirrorCopyState("configmap", ns["a"], "settings")...)
	k.eventually(copied(`{"color":"blue"}`), mirrorCopyState("configmap", ns["b"], "settings")...)

	// Updates propagate.
	k.run(mirrorSourceYAML("ConfigMap", ns["src"], ns["a"]+","+ns["b"], "data:\n  color: red"), "apply", "-f", "-")
	k.eventually(copied(`{"color":"red"}`), mirrorCopyState("configmap", ns["a"], "settings")...)
	k.eventually(copied(`{"color":"red"}`), mirrorCopyState("configmap", ns["b"], "settings")...)

	// A namespace off the list loses its copy; one holding an object of
	// its own keeps it, and the conflict is reported on the source.
	k.run("", "annotate", "--overwrite", "configmap", "settings", "--namespace", ns["src"],
		mirror.TargetsAnnotation+"="+ns["a"]+","+ns["c"])
	k.eventually("", mirrorCopyState("configmap", ns["b"], "settings")...)
	k.eventually("CopyConflict", "get", "events.events.k8s.io", "--namespace", ns["src"],
		"--field-selector", "reason=CopyConflict", "--output", "jsonpath={.items[*].reason}")
	assert.Equal(t, foreign, k.run("", mirrorCopyState("configmap", ns["c"], "settings")...))
	assert.Equal(t, copied(`{"color":"red"}`), k.run("", mirrorCopyState("configmap", ns["a"], "settings")...))

	// Removing the label removes the copies; restoring it restores them.
	k.run("", "label", "configmap", "settings", "--namespace", ns["src"], mirror.SourceLabel+"-")
	k.eventually("", mirrorCopyState("configmap", ns["a"], "settings")...)
	k.run("", "label", "configmap", "settings", "--namespace", ns["src"], mirror.SourceLabel+"=true")
	k.eventually(copied(`{"color":"red"}`), mirrorCopyState("configmap", ns["a"], "settings")...)

	// Deleting the source deletes its copies, and only them.
	k.run("", "delete", "configmap", "settings", "--namespace", ns["src"])
	k.eventually("", mirrorCopyState("configmap", ns["a"], "settings")...)
	assert.Equal(t, foreign, k.run("", mirrorCopyState("configmap", ns["c"], "settings")...))

	// Secrets keep their type.
	k.run(mirrorSourceYAML("Secret", ns["src"], ns["b"], "type: kubernetes.io/basic-auth\nstringData:\n  username: admin"), "apply", "-f", "-")
	k.eventually(copied(`kubernetes.io/basic-auth{"username":"YWRtaW4="}`), mirrorCopyState("secret", ns["b"], "settings")...)
	k.run("", "delete", "secret", "settings", "--namespace", ns["src"])
	k.eventually("", mirrorCopyState("secret", ns["b"], "settings")...)
}

// A source deleted while the app is down loses its copies when the app
// starts again, and a target namespace created late gets its copy.
func TestMirrorCatchesUpAfterDowntime(t *testing.T) {
	k := newKubectl(t)
	ns := mirrorNamespaces(k, "src", "a")
	late := strings.Replace(ns["a"], "-a-", "-late-", 1)
	k.run(mirrorSourceYAML("ConfigMap", ns["src"], ns["a"]+","+late, "data:\n  color: blue"), "apply", "-f", "-")
	k.run(strings.Replace(mirrorSourceYAML("ConfigMap", ns["src"], ns["a"], "data:\n  color: green"), "name: settings", "name: gone", 1), "apply", "-f", "-")

	stop := startMirror(t)
	k.eventually(`{"color":"blue"}|true|`+ns["src"]+"/settings", mirrorCopyState("configmap", ns["a"], "settings")...)
	k.eventually(`{"color":"green"}|true|`+ns["src"]+"/gone", mirrorCopyState("configmap", ns["a"], "gone")...)
	k.eventually("NamespaceNotFound", "get", "events.events.k8s.io", "--namespace", ns["src"],
		"--field-selector", "reason=NamespaceNotFound", "--output", "jsonpath={.items[0].reason}")
	stop()

	k.run("", "delete", "configmap", "gone", "--namespace", ns["src"])
	defer startMirror(t)()
	k.eventually("", mirrorCopyState("configmap", ns["a"], "gone")...)
	assert.Equal(t, `{"color":"blue"}|true|`+ns["src"]+"/settings", k.run("", mirrorCopyState("configmap", ns["a"], "settings")...))

	k.run("", "create", "namespace", late)
	k.eventually(`{"color":"blue"}|true|`+ns["src"]+"/settings", mirrorCopyState("configmap", late, "settings")...)
}
