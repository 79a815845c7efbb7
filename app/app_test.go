package app_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/checksum"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var nop = reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })

// Two modules: "deploys" reconciles Deployments and watches all ConfigMaps;
// "secrets" reconciles Secrets in one namespace and asks for all ConfigMaps
// too, so one informer serves two requests.
var (
	deploys = fx.Module("deploys", fxcontroller.Provide(newDeploys))
	secrets = fx.Module("secrets", fxcontroller.Provide(newSecrets))
)

func newDeploys(r *fxstore.Registry) (*fxcontroller.Controller, error) {
	ds, err := fxstore.For[*appsv1.Deployment](r, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	cms, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	toNothing := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return nil })
	return fxcontroller.New("deploys", ds, nop,
		fxcontroller.Watches(cms, toNothing),
		fxcontroller.Writes(appsv1.Resource("deployments"), "patch"))
}

func newSecrets(r *fxstore.Registry) (*fxcontroller.Controller, error) {
	ss, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: "team", LabelSelector: "b=2, a=1"})
	if err != nil {
		return nil, err
	}
	if _, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}); err != nil {
		return nil, err
	}
	return fxcontroller.New("secrets", ss, nop, fxcontroller.Writes(corev1.Resource("secrets"), "update"))
}

func execute(t *testing.T, modules []fx.Option, args ...string) (string, error) {
	t.Helper()
	cmd := app.Command("demo", modules...)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// A module asking for front ConfigMaps next to one asking for all of them
// gets a view: describe says so, and counts one informer for both.
func TestDescribeShowsViews(t *testing.T) {
	front := fx.Invoke(func(r *fxstore.Registry) error {
		_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=front"})
		return err
	})
	out, err := execute(t, []fx.Option{deploys, front}, "describe")
	require.NoError(t, err)
	assert.Contains(t, out, "3 store requests → 3 specs → 2 informers")
	assert.Contains(t, out, `  ConfigMap/v1 (all namespaces, labels "tier=front") → view of ConfigMap/v1 (all namespaces)`)

	out, err = execute(t, []fx.Option{deploys, front}, "describe", "-o", "json")
	require.NoError(t, err)
	var g app.Graph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	assert.Equal(t, 3, g.Specs)
	assert.Equal(t, 2, g.Informers)
	require.Len(t, g.Stores, 3)
	assert.Equal(t, "ConfigMap/v1 (all namespaces)", g.Stores[2].ViewOf)
}

// describe names the sharded stores, what shards them and their Leases.
func TestDescribeShowsSharding(t *testing.T) {
	out, err := execute(t, []fx.Option{shardedWidgets}, "describe", "--shard-namespace", "ops")
	require.NoError(t, err)
	assert.Contains(t, out, "Sharded stores (16 buckets, Leases ops/demo-bucket-<i>; a store per bucket held):\n"+
		`  Secret/v1 (namespace "team") sharded by object.metadata.uid`+"\n    controllers: sharded\n")

	out, err = execute(t, []fx.Option{shardedWidgets}, "describe", "-o", "json", "--shard-buckets", "4", "--shard-namespace", "ops")
	require.NoError(t, err)
	var g app.Graph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	require.NotNil(t, g.Sharding)
	assert.Equal(t, app.Sharding{Group: "ops/demo", Buckets: 4, Stores: []app.ShardedStore{
		{Key: `Secret/v1 (namespace "team")`, ShardKey: "object.metadata.uid", Controllers: []string{"sharded"}},
	}}, *g.Sharding)

	// Outside a cluster, the Leases go where run puts them: the
	// kubeconfig context's namespace, else "default".
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	out, err = execute(t, []fx.Option{shardedWidgets}, "describe")
	require.NoError(t, err)
	assert.Contains(t, out, "Sharded stores (16 buckets, Leases default/demo-bucket-<i>; a store per bucket held):")
}

func TestDescribe(t *testing.T) {
	out, err := execute(t, []fx.Option{deploys, secrets}, "describe")
	require.NoError(t, err)
	assert.Contains(t, out, "4 store requests → 3 specs → 3 informers")
	assert.Contains(t, out, "ConfigMap/v1 (all namespaces)\n    consumers: app_test.newDeploys, app_test.newSecrets\n    controllers: deploys\n")
	assert.Contains(t, out, `Secret/v1 (namespace "team", labels "a=1,b=2")`)
	assert.Contains(t, out, "  deploys (declared by app_test.newDeploys)\n    primary: Deployment.apps/v1 (all namespaces)\n    watches: ConfigMap/v1 (all namespaces)\n    writes:  deployments.apps (patch)\n")

	out, err = execute(t, []fx.Option{deploys, secrets}, "describe", "-o", "json")
	require.NoError(t, err)
	var g app.Graph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	assert.Equal(t, 4, g.Requests)
	assert.Equal(t, 3, g.Informers)
	require.Len(t, g.Stores, 3)
	require.Len(t, g.Controllers, 2)
	assert.Equal(t, "deploys", g.Controllers[0].Name)
	assert.Equal(t, "team", g.Stores[2].Namespace)
	assert.Equal(t, "a=1,b=2", g.Stores[2].LabelSelector)

	_, err = execute(t, []fx.Option{deploys}, "describe", "-o", "yaml")
	require.ErrorContains(t, err, `unknown --output "yaml"; use text, json or mermaid`)
}

func TestDescribeReportsBadModules(t *testing.T) {
	bad := fx.Module("bad", fx.Invoke(func(r *fxstore.Registry) error {
		_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "a=("})
		return err
	}))
	_, err := execute(t, []fx.Option{bad}, "describe")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `store ConfigMap/v1 (all namespaces, labels "a=(")`)
	assert.Contains(t, err.Error(), "invalid label selector")
}

func TestRBAC(t *testing.T) {
	out, err := execute(t, []fx.Option{deploys, secrets}, "rbac", "--service-account", "ops/demo", "--leader-elect", "--leader-election-namespace", "ops")
	require.NoError(t, err)
	docs := strings.Split(out, "---\n")
	require.Len(t, docs, 6, out)

	var cr rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &cr))
	assert.Equal(t, "ClusterRole", cr.Kind)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"update"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "patch", "watch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}, cr.Rules)

	var crb rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &crb))
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "ops", Name: "demo"}}, crb.Subjects)

	var ops, team rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &ops))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[4]), &team))
	assert.Equal(t, "ops", ops.Namespace)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "update"}}}, ops.Rules)
	assert.Equal(t, "team", team.Namespace)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}, team.Rules,
		"every Secret store is in team, so a Role there grants reading them")

	_, err = execute(t, nil, "rbac", "--service-account", "nope")
	require.ErrorContains(t, err, `--service-account "nope": want namespace/name`)
}

// octopusKind is a custom kind whose plural is irregular.
var octopusKind = schema.GroupVersionKind{Group: "sea.example.com", Version: "v1", Kind: "Octopus"}

const octopusCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: octopodes.sea.example.com
spec:
  group: sea.example.com
  names: {kind: Octopus, listKind: OctopusList, plural: octopodes, singular: octopus}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// tentacles is a controller-runtime operator, hosted: it reconciles
// Octopuses and owns ConfigMaps, as its SetupWithManager says.
var tentacles = fxcontroller.SetupWithManager(func(mgr manager.Manager) error {
	octopus := &unstructured.Unstructured{}
	octopus.SetGroupVersionKind(octopusKind)
	return ctrl.NewControllerManagedBy(mgr).For(octopus).Owns(&corev1.ConfigMap{}).Named("tentacles").Complete(nop)
}, fxcontroller.WithName("sea-operator"), fxcontroller.Writes(corev1.Resource("configmaps"), "create", "delete"))

func TestDescribeHostedOperators(t *testing.T) {
	out, err := execute(t, []fx.Option{deploys, tentacles}, "describe")
	require.NoError(t, err)
	t.Log(out)
	assert.Contains(t, out, "ConfigMap/v1 (all namespaces)\n    consumers: app_test.newDeploys, sea-operator\n",
		"the hosted operator's kinds are declared without a cluster, and share stores")
	assert.Contains(t, out, "Octopus.sea.example.com/v1 (all namespaces, unstructured)\n    consumers: sea-operator\n")
	assert.Contains(t, out, "Hosted controller-runtime operators (their stores name them as consumers):\n  sea-operator (set up by app_test.init.func")
	assert.Contains(t, out, "    controllers: tentacles\n    writes:  configmaps (create,delete)\n")
}

// podDefaulter defaults and validates Pods, as jobset and
// LeaderWorkerSet each do.
type podDefaulter struct{}

func (podDefaulter) Default(context.Context, *corev1.Pod) error { return nil }
func (podDefaulter) ValidateCreate(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}
func (podDefaulter) ValidateUpdate(context.Context, *corev1.Pod, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}
func (podDefaulter) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

func podWebhooks(mgr manager.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).WithDefaulter(podDefaulter{}).WithValidator(podDefaulter{}).Complete()
}

// describe lists each webhook path, its type and kind, and the operators
// serving it, in the order their handlers run.
func TestDescribeWebhooks(t *testing.T) {
	modules := []fx.Option{
		fxcontroller.SetupWithManager(podWebhooks, fxcontroller.WithName("jobset")),
		fxcontroller.SetupWithManager(podWebhooks, fxcontroller.WithName("lws")),
		fx.Invoke(func(w *lifecycle.Webhooks) { w.Register("/hello", http.NotFoundHandler()) }),
	}
	out, err := execute(t, modules, "describe")
	require.NoError(t, err)
	t.Log(out)
	assert.Contains(t, out, "\nWebhooks (operations are the webhook configurations'):\n"+
		"  /mutate--v1-pod (mutating, Pod/v1)\n    served by: jobset, lws, in this order\n"+
		"  /validate--v1-pod (validating, Pod/v1)\n    served by: jobset, lws, in this order\n"+
		"  /hello (http)\n    served by: (modules)\n")

	out, err = execute(t, modules, "describe", "-o", "json")
	require.NoError(t, err)
	var g app.Graph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	assert.Equal(t, []app.Webhook{
		{Path: "/mutate--v1-pod", Type: "mutating", Kind: "Pod/v1", ServedBy: []string{"jobset", "lws"}},
		{Path: "/validate--v1-pod", Type: "validating", Kind: "Pod/v1", ServedBy: []string{"jobset", "lws"}},
		{Path: "/hello", Type: "http", ServedBy: []string{"(modules)"}},
	}, g.Webhooks)
}

func TestRBACNamesResourcesThroughMappings(t *testing.T) {
	_, err := execute(t, []fx.Option{tentacles}, "rbac")
	require.ErrorContains(t, err, "pass the CRDs of custom kinds with --crds, or ask the cluster with --discover")
	assert.ErrorContains(t, err, `store Octopus.sea.example.com/v1 (all namespaces, unstructured)`)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sea.example.com_octopodes.yaml"), []byte(octopusCRD), 0o600))
	out, err := execute(t, []fx.Option{tentacles}, "rbac", "--crds", dir)
	require.NoError(t, err)
	var cr rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict([]byte(strings.Split(out, "---\n")[0]), &cr))
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "delete", "get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"sea.example.com"}, Resources: []string{"octopodes"}, Verbs: []string{"get", "list", "watch"}},
	}, cr.Rules, "the CRD's own plural, not a guess")
}

// describe -o mermaid draws what the text output says: a node for each
// store (its key as the text prints it), a "view of" edge for each view,
// "reconciles" and "watches" edges for each controller, and "asks for"
// edges from each consumer.
func TestDescribeMermaid(t *testing.T) {
	front := fx.Invoke(func(r *fxstore.Registry) error {
		_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=front"})
		return err
	})
	modules := []fx.Option{deploys, secrets, front, shardedWidgets}
	text, err := execute(t, modules, "describe", "--shard-namespace", "ops")
	require.NoError(t, err)
	out, err := execute(t, modules, "describe", "-o", "json", "--shard-namespace", "ops")
	require.NoError(t, err)
	var g app.Graph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	out, err = execute(t, modules, "describe", "-o", "mermaid", "--shard-namespace", "ops")
	require.NoError(t, err)
	t.Log("\n" + out)

	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, "flowchart LR", lines[0])
	node := regexp.MustCompile(`^  (\w+)(?:\[/|\[|\(|\{\{|>)"(.*)"(?:/\]|\]|\)|\}\})$`)
	edge := regexp.MustCompile(`^  (\w+) (?:-- (.+) -->|-\. (.+) \.->) (\w+)$`)
	labels := map[string]string{} // node id → label
	ids := map[string]string{}    // label → node id
	edges := map[string]bool{}    // "from label|text|to label"
	for _, l := range lines[1:] {
		if m := node.FindStringSubmatch(l); m != nil {
			label := strings.ReplaceAll(m[2], "#quot;", `"`)
			labels[m[1]], ids[label] = label, m[1]
			continue
		}
		m := edge.FindStringSubmatch(l)
		require.NotNil(t, m, "neither a node nor an edge: %q", l)
		edges[labels[m[1]]+"|"+m[2]+m[3]+"|"+labels[m[4]]] = true
	}

	for _, s := range g.Stores {
		assert.Contains(t, text, "\n  "+s.Key, "the text prints the store")
		assert.Contains(t, ids, s.Key, "a node for store %s", s.Key)
		if s.ViewOf != "" {
			assert.Contains(t, text, "  "+s.Key+" → view of "+s.ViewOf)
			assert.True(t, edges[s.Key+"|view of|"+s.ViewOf], "view edge of %s", s.Key)
		}
		for _, c := range s.Consumers {
			assert.True(t, edges[c+"|asks for|"+s.Key], "%s asks for %s", c, s.Key)
		}
	}
	require.NotNil(t, g.Sharding)
	label := map[string]string{} // a sharded store's key → its node's label
	for _, s := range g.Sharding.Stores {
		label[s.Key] = s.Key + " sharded by " + s.ShardKey
	}
	for _, c := range g.Controllers {
		assert.Contains(t, text, "  "+c.Name+" (declared by "+c.DeclaredBy+")\n    primary: "+c.Primary)
		primary := cmp.Or(label[c.Primary], c.Primary)
		assert.True(t, edges["controller "+c.Name+"|reconciles|"+primary], "controller %s reconciles %s", c.Name, primary)
		for _, s := range c.Secondary {
			assert.True(t, edges["controller "+c.Name+"|watches|"+s], "controller %s watches %s", c.Name, s)
		}
	}
	for _, s := range g.Sharding.Stores {
		assert.Contains(t, text, "  "+s.Key+" sharded by "+s.ShardKey)
		assert.Contains(t, ids, s.Key+" sharded by "+s.ShardKey)
	}
	assert.Contains(t, out, `#quot;tier=front#quot;`, "quotes in keys are escaped")
}

// --controllers=*,-mirror leaves the example app's mirror module out: its
// controllers do not run, the store only it asked for is not started, and
// describe and rbac leave both out. An unknown name fails, listing the
// known ones.
func TestControllersFlagLeavesControllersOut(t *testing.T) {
	modules := []fx.Option{rollout.Module, mirror.Module, checksum.Module}
	graphOf := func(args ...string) app.Graph {
		t.Helper()
		out, err := execute(t, modules, append([]string{"describe", "-o", "json"}, args...)...)
		require.NoError(t, err, out)
		var g app.Graph
		require.NoError(t, json.Unmarshal([]byte(out), &g), out)
		return g
	}
	controllers := func(g app.Graph) []string {
		var names []string
		for _, c := range g.Controllers {
			names = append(names, c.Name)
		}
		return names
	}
	stores := func(g app.Graph) []string {
		var keys []string
		for _, s := range g.Stores {
			keys = append(keys, s.Key)
		}
		return keys
	}
	namespaces := `Namespace/v1 (all namespaces, metadata-only)`

	all := graphOf()
	assert.Equal(t, []string{"checksum", "mirror-configmaps", "mirror-secrets", "rollout"}, controllers(all))
	assert.Contains(t, stores(all), namespaces)
	without := graphOf("--controllers=*,-mirror")
	assert.Equal(t, []string{"checksum", "rollout"}, controllers(without))
	assert.NotContains(t, stores(without), namespaces, "only mirror asked for Namespaces")
	for _, s := range without.Stores {
		assert.NotContains(t, s.Consumers, "mirror-configmaps", s.Key)
	}
	assert.Equal(t, []string{"rollout"}, controllers(graphOf("--controllers=rollout")))

	verbs := func(args ...string) map[string][]string {
		t.Helper()
		out, err := execute(t, modules, append([]string{"rbac"}, args...)...)
		require.NoError(t, err)
		_, docs := rbacObjects(t, out)
		var role rbacv1.ClusterRole
		require.NoError(t, yaml.Unmarshal([]byte(docs[0]), &role))
		byResource := map[string][]string{}
		for _, rule := range role.Rules {
			for _, r := range rule.Resources {
				byResource[r] = append(byResource[r], rule.Verbs...)
			}
		}
		return byResource
	}
	full, selected := verbs(), verbs("--controllers=*,-mirror")
	assert.Contains(t, full, "namespaces")
	assert.NotContains(t, selected, "namespaces", "no rule for mirror's Namespaces")
	for _, r := range []string{"configmaps", "secrets"} {
		assert.Subset(t, full[r], []string{"create", "update", "delete"}, "mirror writes %s", r)
		for _, v := range []string{"create", "update", "delete"} {
			assert.NotContains(t, selected[r], v, "%s: only mirror %ss them", r, v)
		}
	}
	assert.Equal(t, full["deployments"], selected["deployments"], "rollout's rules stay")

	_, err := execute(t, modules, "describe", "--controllers=*,-mirrors")
	require.ErrorContains(t, err, `--controllers names ["mirrors"], which the app does not have; its controllers, their modules' packages and its hosted operators are ["checksum" "mirror" "mirror-configmaps" "mirror-secrets" "rollout"]`)
}

// fxkube's errors of fx.New reach the user as the module's own message,
// not inside dig's account of the graph.
func TestBuildErrorsAreOneMessage(t *testing.T) {
	pods := func(mgr manager.Manager) error {
		return ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Complete(nop)
	}
	modules := []fx.Option{
		fxcontroller.SetupWithManager(pods, fxcontroller.WithName("jobset")),
		fxcontroller.SetupWithManager(pods, fxcontroller.WithName("lws")),
	}
	for _, cmd := range []string{"describe", "rbac"} {
		_, err := execute(t, modules, cmd)
		require.Error(t, err, cmd)
		assert.Equal(t, `controller name "pod" is used by both hosted operator "jobset" and hosted operator "lws"; give each controller of the app its own name: host the operator with fxcontroller.WithControllerPrefix("lws") to name it "lws/pod"`,
			err.Error(), cmd)
	}
}
