package kubeconfig_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.WithControlPlane(m))
}

// waitFor bounds every wait for the provider: generous, as the machine
// is shared; a pass takes well under a second per step.
const waitFor = 30 * time.Second

// engagement is one call of Engage.
type engagement struct {
	ctx  context.Context
	name fxcluster.ClusterName
	cfg  *rest.Config
}

// recorder is an fxcluster.Aware that records each Engage, and refuses
// the names in refuse.
type recorder struct {
	engaged chan engagement
	refuse  map[fxcluster.ClusterName]bool
}

func (r *recorder) Engage(ctx context.Context, name fxcluster.ClusterName, cfg *rest.Config) error {
	if r.refuse[name] {
		return fmt.Errorf("cluster name %q is taken by another provider", name)
	}
	r.engaged <- engagement{ctx: ctx, name: name, cfg: cfg}
	return nil
}

// next returns the next engagement, which must be of name.
func (r *recorder) next(t *testing.T, name fxcluster.ClusterName) engagement {
	t.Helper()
	select {
	case e := <-r.engaged:
		require.Equal(t, name, e.name, "the next cluster engaged")
		return e
	case <-time.After(waitFor):
		t.Fatalf("cluster %s not engaged within %s", name, waitFor)
		return engagement{}
	}
}

func requireLeft(t *testing.T, e engagement) {
	t.Helper()
	select {
	case <-e.ctx.Done():
	case <-time.After(waitFor):
		t.Fatalf("cluster %s has not left within %s", e.name, waitFor)
	}
}

func requireEngaged(t *testing.T, e engagement) {
	t.Helper()
	require.NoError(t, e.ctx.Err(), "cluster %s left", e.name)
}

// secretFixture is a running SecretProvider in a namespace of its own.
type secretFixture struct {
	t     *testing.T
	kube  kubernetes.Interface
	ns    string
	aware *recorder
	logs  *observer.ObservedLogs
}

// startSecrets starts an app with ProvideSecrets(opts) in a new namespace,
// and the provider it provides, until the test ends.
func startSecrets(t *testing.T, opts kubeconfig.SecretOptions, refuse ...fxcluster.ClusterName) *secretFixture {
	t.Helper()
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	f := &secretFixture{t: t, kube: kube, ns: testenv.Namespace(t, kube, "kubeconfig"),
		aware: &recorder{engaged: make(chan engagement, 100), refuse: map[fxcluster.ClusterName]bool{}}}
	for _, name := range refuse {
		f.aware.refuse[name] = true
	}
	core, logs := observer.New(zap.InfoLevel)
	f.logs = logs
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
	opts.Namespace = f.ns
	var providers []fxcluster.Provider
	app := testenv.App(t, testenv.Config(t), lifecycle.Config{}, log,
		kubeconfig.ProvideSecrets(opts),
		fx.Invoke(fx.Annotate(func(ps []fxcluster.Provider) { providers = ps }, fx.ParamTags(`group:"fxkube.cluster-providers"`))))
	app.RequireStart()
	require.Len(t, providers, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- providers[0].Start(ctx, f.aware) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		app.RequireStop()
	})
	return f
}

// put creates or replaces the Secret name with data under "kubeconfig",
// the provider's label, and annotations.
func (f *secretFixture) put(name string, data []byte, annotations map[string]string) {
	f.t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Annotations: annotations,
			Labels: map[string]string{kubeconfig.DefaultSecretLabel: "true"}},
		Data: map[string][]byte{"kubeconfig": data},
	}
	secrets := f.kube.CoreV1().Secrets(f.ns)
	old, err := secrets.Get(f.t.Context(), name, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = old.ResourceVersion
		_, err = secrets.Update(f.t.Context(), s, metav1.UpdateOptions{})
	} else {
		_, err = secrets.Create(f.t.Context(), s, metav1.CreateOptions{})
	}
	require.NoError(f.t, err)
}

func (f *secretFixture) patch(name, patch string) {
	f.t.Helper()
	_, err := f.kube.CoreV1().Secrets(f.ns).Patch(f.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(f.t, err)
}

func (f *secretFixture) delete(name string) {
	f.t.Helper()
	require.NoError(f.t, f.kube.CoreV1().Secrets(f.ns).Delete(f.t.Context(), name, metav1.DeleteOptions{}))
}

// logged returns the messages and errors logged of the Secret name, as
// "message: error".
func (f *secretFixture) logged(name string) []string {
	var out []string
	ref := f.ns + "/" + name
	for _, e := range f.logs.All() {
		fields := e.ContextMap()
		secret, _ := fields["secret"].(string)
		if !strings.Contains(secret, ref) {
			continue
		}
		line := e.Message
		if msg, ok := fields["error"].(string); ok {
			line += ": " + msg
		}
		out = append(out, line)
	}
	return out
}

// TestSecretProvider follows kubeconfig Secrets on a real API server: they
// engage, reconnect and let go of clusters, and bad ones are refused,
// once each, while the others keep working.
func TestSecretProvider(t *testing.T) {
	f := startSecrets(t, kubeconfig.SecretOptions{})
	admin := testenv.Config(t)
	adminKubeconfig := testenv.Kubeconfig(t, admin)

	f.put("alpha", adminKubeconfig, nil)
	alpha := f.aware.next(t, "alpha")
	require.Equal(t, admin.Host, alpha.cfg.Host)
	require.Equal(t, admin.CertData, alpha.cfg.CertData)

	// New credentials reconnect the cluster.
	bob := testenv.User(t, "bob")
	f.put("alpha", testenv.Kubeconfig(t, bob), nil)
	requireLeft(t, alpha)
	alpha = f.aware.next(t, "alpha")
	require.Equal(t, bob.CertData, alpha.cfg.CertData)

	// Bad Secrets are refused; "beta", engaged after them, shows they
	// were seen, as the provider takes Secrets in turn.
	f.put("exec", kubeconfigOf(t, execPlugin), nil)
	f.put("garbage", []byte("{not: [a kubeconfig"), nil)
	f.put("garbage", []byte("{still: [not one"), nil) // the same problem
	f.put("garbage", []byte("kind: Secret"), nil)
	f.put("nodata", nil, nil)
	f.put("beta", adminKubeconfig, nil)
	beta := f.aware.next(t, "beta")
	requireEngaged(t, alpha)
	require.Equal(t, []string{`kubeconfig Secret refused: Secret ` + f.ns + `/exec, data key "kubeconfig": kubeconfig context "a": ` +
		`user "token" runs the exec credential plugin "aws"; ` + kubeconfig.ErrCredentialPlugin.Error()}, f.logged("exec"))
	garbage := f.logged("garbage")
	require.Len(t, garbage, 2, "each problem is logged once: %q", garbage)
	require.Contains(t, garbage[0], `kubeconfig Secret refused: Secret `+f.ns+`/garbage, data key "kubeconfig": parse kubeconfig: `)
	require.Equal(t, []string{`kubeconfig Secret refused: Secret ` + f.ns + `/nodata has no kubeconfig: ` +
		`its data key "kubeconfig" is missing or empty; put the kubeconfig there`}, f.logged("nodata"))

	// A change that leaves the kubeconfig as it was keeps the cluster, and
	// a problem already logged is not logged again.
	f.patch("alpha", `{"metadata":{"annotations":{"touched":"yes"}}}`)
	f.patch("nodata", `{"metadata":{"annotations":{"touched":"yes"}}}`)
	f.put("gamma", adminKubeconfig, nil)
	gamma := f.aware.next(t, "gamma")
	requireEngaged(t, alpha)
	require.Len(t, f.logged("nodata"), 1)

	// A deleted Secret lets its cluster go.
	f.delete("alpha")
	requireLeft(t, alpha)

	// A Secret that turns bad lets its cluster go, and says why once.
	f.put("beta", kubeconfigOf(t, execPlugin), nil)
	requireLeft(t, beta)

	// A Secret mended engages its cluster.
	f.put("exec", adminKubeconfig, nil)
	mended := f.aware.next(t, "exec")

	// A Secret that loses the label is no kubeconfig Secret.
	f.patch("gamma", `{"metadata":{"labels":{"`+kubeconfig.DefaultSecretLabel+`":null}}}`)
	requireLeft(t, gamma)

	require.Equal(t, []string{
		"member cluster engaged",
		"member cluster left: its kubeconfig Secret is refused: Secret " + f.ns + `/beta, data key "kubeconfig": kubeconfig context "a": ` +
			`user "token" runs the exec credential plugin "aws"; ` + kubeconfig.ErrCredentialPlugin.Error(),
	}, f.logged("beta"))
	require.Equal(t, []string{"member cluster engaged", "member cluster reconnected with new credentials",
		"member cluster left: its kubeconfig Secret is gone"}, f.logged("alpha"))
	requireEngaged(t, mended)
}

// TestSecretProviderNames names clusters by an annotation: two Secrets
// claiming one name engage neither, with an error naming both, and the
// name returns to the one left.
func TestSecretProviderNames(t *testing.T) {
	const annotation = "example.com/cluster-name"
	f := startSecrets(t, kubeconfig.SecretOptions{NameAnnotation: annotation}, "taken")
	kc := testenv.Kubeconfig(t, testenv.Config(t))

	f.put("one", kc, map[string]string{annotation: "shared"})
	shared := f.aware.next(t, "shared")

	f.put("two", kc, map[string]string{annotation: "shared"})
	requireLeft(t, shared)
	f.put("unnamed", kc, nil) // named by its Secret's name
	f.aware.next(t, "unnamed")
	conflict := fmt.Sprintf(`kubeconfig Secret refused: cluster "shared" is claimed by 2 kubeconfig Secrets; `+
		`engaging none until one does: delete the others, or change their annotation %s`, annotation)
	require.Equal(t, []string{"member cluster engaged", "member cluster left: its kubeconfig Secret is refused: " +
		conflict[len("kubeconfig Secret refused: "):]}, f.logged("one"))
	for _, e := range f.logs.FilterMessageSnippet("refused").All() {
		require.Equal(t, f.ns+"/one, "+f.ns+"/two", e.ContextMap()["secret"])
	}

	f.delete("two")
	shared = f.aware.next(t, "shared")

	// A cluster moves with its annotation.
	f.patch("one", `{"metadata":{"annotations":{"`+annotation+`":"moved"}}}`)
	requireLeft(t, shared)
	f.aware.next(t, "moved")

	f.put("bad", kc, map[string]string{annotation: "Not_A_Name"})
	f.put("refused", kc, map[string]string{annotation: "taken"})
	f.put("after", kc, nil)
	f.aware.next(t, "after")
	bad := f.logged("bad")
	require.Len(t, bad, 1)
	require.Contains(t, bad[0], fmt.Sprintf(`kubeconfig Secret refused: Secret %s/bad: annotation %s="Not_A_Name" is not a cluster name: `, f.ns, annotation))
	require.Equal(t, []string{`member cluster refused: cluster name "taken" is taken by another provider`}, f.logged("refused"))
}

func TestSecretOptions(t *testing.T) {
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	tests := []struct {
		name    string
		give    kubeconfig.SecretOptions
		wantErr string
	}{
		{name: "defaults", give: kubeconfig.SecretOptions{Namespace: "fleet"}},
		{name: "no namespace", give: kubeconfig.SecretOptions{},
			wantErr: "kubeconfig SecretOptions.Namespace is empty; name the namespace that holds the kubeconfig Secrets"},
		{name: "bad namespace", give: kubeconfig.SecretOptions{Namespace: "Fleet"},
			wantErr: `kubeconfig SecretOptions.Namespace "Fleet" is not a namespace name: `},
		{name: "bad label", give: kubeconfig.SecretOptions{Namespace: "fleet", Label: "a b"},
			wantErr: `kubeconfig SecretOptions.Label "a b" is not a label or annotation key: `},
		{name: "bad annotation", give: kubeconfig.SecretOptions{Namespace: "fleet", NameAnnotation: "/x"},
			wantErr: `kubeconfig SecretOptions.NameAnnotation "/x" is not a label or annotation key: `},
		{name: "bad key", give: kubeconfig.SecretOptions{Namespace: "fleet", Key: "a/b"},
			wantErr: `kubeconfig SecretOptions.Key "a/b" is not a Secret data key: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := kubeconfig.NewSecretProvider(fxstore.NewRegistry(scheme), tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "kubeconfig Secrets sigs.k8s.io/multicluster-runtime-kubeconfig=true in namespace fleet", p.String())
		})
	}
}

// TestSecretProviderStartsOnce: a second Start is an error, not a second
// set of clusters.
func TestSecretProviderStartsOnce(t *testing.T) {
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	p, err := kubeconfig.NewSecretProvider(fxstore.NewRegistry(scheme), kubeconfig.SecretOptions{Namespace: "fleet"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = p.Start(ctx, &recorder{}) })
	}
	wg.Wait()
	require.ErrorContains(t, errors.Join(errs...), "kubeconfig Secrets sigs.k8s.io/multicluster-runtime-kubeconfig=true in namespace fleet: started twice")
}

// TestSecretProviderRBAC: the Secrets' store is a request of the app, so
// rbac grants reading them in their namespace only, once the app takes
// its cluster providers.
func TestSecretProviderRBAC(t *testing.T) {
	cmd := app.Command("fleet",
		kubeconfig.ProvideSecrets(kubeconfig.SecretOptions{Namespace: "fleet"}),
		fx.Invoke(fx.Annotate(func([]fxcluster.Provider) {}, fx.ParamTags(`group:"fxkube.cluster-providers"`))))
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"rbac"})
	require.NoError(t, cmd.Execute())
	require.Contains(t, out.String(), `kind: Role
metadata:
  name: fleet
  namespace: fleet
rules:
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
`)
	require.Contains(t, out.String(), "kind: ClusterRole\nmetadata:\n  name: fleet\nrules: []\n")
}
