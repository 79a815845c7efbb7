package test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/rollout"
)

// rolloutObjects are what a user applies: a ConfigMap and a Secret, an
// opted-in Deployment that uses both, one that uses them without opting in,
// and one whose opt-in annotation is not a boolean.
const rolloutObjects = `
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: app-secret}
stringData: {password: s3cret}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {fxkube.io/reload: "true"}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        envFrom: [{configMapRef: {name: app-config}}]
        volumeMounts: [{name: secret, mountPath: /etc/secret}]
      volumes:
      - name: secret
        secret: {secretName: app-secret}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: plain
spec:
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
    spec:
      containers:
      - name: plain
        image: nginx
        envFrom: [{configMapRef: {name: app-config}}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: bad
  annotations: {fxkube.io/reload: "yes please"}
spec:
  selector: {matchLabels: {app: bad}}
  template:
    metadata: {labels: {app: bad}}
    spec:
      containers:
      - name: bad
        image: nginx
        envFrom: [{configMapRef: {name: app-config}}]
`

// The rollout module, on the real API server, driven by kubectl as a user
// would: an opted-in Deployment gets the config hash on its pod template, a
// change to a ConfigMap or Secret it uses changes the hash, other changes do
// not, and Deployments that did not opt in are never written. (Without a
// kube-controller-manager no pods start; the pod template is what counts.)
func TestRollout(t *testing.T) {
	k := newKubectl(t)
	run, kubectl := k.try, k.run

	// A namespace of its own, named rollout-test-<random>; without a
	// kube-controller-manager a deleted namespace never goes away.
	ns := kubectl(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": "rollout-test-"}}`,
		"create", "-f", "-", "-o", "jsonpath={.metadata.name}")
	t.Cleanup(func() {
		_, _ = k.try("", "delete", "namespace", ns, "--wait=false")
	})
	get := func(deployment, jsonpath string) (string, error) {
		return run("", "get", "deployment", deployment, "-n", ns, "-o", "jsonpath="+jsonpath)
	}
	const hashPath = `{.spec.template.metadata.annotations.fxkube\.io/config-hash}`
	hashOf := func(deployment string) string {
		out, err := get(deployment, hashPath)
		if err != nil {
			t.Log(err)
		}
		return out
	}

	app := testenv.App(t, testenv.Config(t), lifecycle.Config{}, zaptest.NewLogger(t), fxcontroller.Module, rollout.Module)
	app.RequireStart()
	defer app.RequireStop()

	kubectl(rolloutObjects, "apply", "-n", ns, "-f", "-")
	plainVersion := kubectl("", "get", "deployment", "plain", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}")

	const wait, tick = 30 * time.Second, 100 * time.Millisecond
	require.Eventually(t, func() bool { return len(hashOf("web")) == 64 }, wait, tick,
		"the opted-in Deployment gets the config hash")
	first := hashOf("web")

	kubectl("", "patch", "configmap", "app-config", "-n", ns, "--type=merge", "-p", `{"data":{"greeting":"hi"}}`)
	require.Eventually(t, func() bool { h := hashOf("web"); return h != first && len(h) == 64 }, wait, tick,
		"a change to a ConfigMap it uses changes the hash")
	second := hashOf("web")

	kubectl("", "patch", "secret", "app-secret", "-n", ns, "--type=merge", "-p", `{"stringData":{"password":"rotated"}}`)
	require.Eventually(t, func() bool { h := hashOf("web"); return h != second && len(h) == 64 }, wait, tick,
		"a change to a Secret it uses changes the hash")
	third := hashOf("web")

	webVersion := kubectl("", "get", "deployment", "web", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}")
	kubectl("", "create", "configmap", "unrelated", "-n", ns, "--from-literal=greeting=hello")
	kubectl("", "create", "secret", "generic", "unrelated", "-n", ns, "--from-literal=password=s3cret")
	assert.Never(t, func() bool {
		v, err := get("web", "{.metadata.resourceVersion}")
		return err == nil && v != webVersion
	}, 2*time.Second, 200*time.Millisecond, "changes to objects it does not use leave the Deployment alone")
	assert.Equal(t, third, hashOf("web"))

	// Deployments that did not opt in, or whose annotation is not a
	// boolean, were never written.
	for _, d := range []string{"plain", "bad"} {
		assert.Empty(t, hashOf(d), d)
	}
	assert.Equal(t, plainVersion, kubectl("", "get", "deployment", "plain", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}"),
		"the Deployment that did not opt in is untouched")

	// The invalid annotation is reported with an Event on the Deployment.
	require.Eventually(t, func() bool {
		out, err := run("", "get", "events", "-n", ns, "--field-selector", "reason=InvalidAnnotation",
			"-o", "jsonpath={.items[*].involvedObject.name}")
		return err == nil && strings.TrimSpace(out) == "bad"
	}, wait, tick, "an InvalidAnnotation Event on the Deployment with the invalid annotation, and on no other")
	assert.Eventually(t, func() bool {
		out, err := run("", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=web",
			"-o", "jsonpath={.items[*].reason}")
		return err == nil && strings.Contains(out, "ConfigHashSet") && strings.Contains(out, "ConfigChanged")
	}, wait, tick, "Events on the rolled out Deployment")
}
