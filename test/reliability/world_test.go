package reliability

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

// world is the input of the example modules that a test writes, in
// namespaces of its own, and what the test last wrote to each object. The
// state rollout and mirror must bring the cluster to follows from it.
//
// Each object is written by one goroutine at a time, so "last written" is
// well defined; every write is retried until it succeeds (merge patches of
// absolute values are idempotent), so what the world records is what the API
// server holds.
type world struct {
	namespaces []string

	mu      sync.Mutex
	objects map[ref]*object

	writes atomic.Int64
}

// ref names an object of the world.
type ref struct {
	Kind      string // ConfigMap, Secret or Deployment
	Namespace string
	Name      string
}

func (r ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// object is what the test last wrote to one object.
type object struct {
	// Version is the ConfigMap's or Secret's data: {"v": Version}.
	Version int
	// Source is whether it is labelled mirror.SourceLabel=true.
	Source bool
	// Targets is its mirror.TargetsAnnotation; "" for none.
	Targets string
	// Reload is a Deployment's rollout.ReloadAnnotation; "" for none.
	Reload string
	// ConfigMaps and Secrets are those a Deployment's pod template uses.
	ConfigMaps, Secrets []string
	// Gone is whether the test deleted it.
	Gone bool
}

// layout is how many objects of each sort each namespace of a world holds.
type layout struct {
	// Configs is how many ConfigMaps (cfg-<k>) and Secrets (sec-<k>)
	// Deployments use.
	Configs int
	// Deployments is how many Deployments (web-<k>) there are; web-<k> uses
	// cfg-<k>, cfg-<k+1> and sec-<k> (modulo Configs), and three in four opt
	// in to rollout.
	Deployments int
	// Sources is how many ConfigMaps and how many Secrets (src-<ns>-<k>)
	// are mirrored, each to one or two of the world's other namespaces.
	Sources int
}

// newWorld plans a world of n namespaces named <name>-<i>, laid out as l. It
// writes nothing; create does.
func newWorld(name string, n int, l layout) *world {
	w := &world{objects: make(map[ref]*object)}
	for i := range n {
		w.namespaces = append(w.namespaces, fmt.Sprintf("%s-%d", name, i))
	}
	for i, ns := range w.namespaces {
		for k := range l.Configs {
			w.objects[ref{"ConfigMap", ns, fmt.Sprintf("cfg-%d", k)}] = &object{Version: 1}
			w.objects[ref{"Secret", ns, fmt.Sprintf("sec-%d", k)}] = &object{Version: 1}
		}
		for k := range l.Deployments {
			d := &object{
				ConfigMaps: []string{fmt.Sprintf("cfg-%d", k%l.Configs), fmt.Sprintf("cfg-%d", (k+1)%l.Configs)},
				Secrets:    []string{fmt.Sprintf("sec-%d", k%l.Configs)},
			}
			if k%4 != 3 {
				d.Reload = "true"
			}
			w.objects[ref{"Deployment", ns, fmt.Sprintf("web-%d", k)}] = d
		}
		for k := range l.Sources {
			for _, kind := range []string{"ConfigMap", "Secret"} {
				w.objects[ref{kind, ns, fmt.Sprintf("src-%d-%d", i, k)}] = &object{
					Version: 1, Source: true, Targets: w.someTargets(ns, 1+k%2),
				}
			}
		}
	}
	return w
}

// someTargets returns up to n of the world's namespaces other than own,
// comma-separated, picked at random.
func (w *world) someTargets(own string, n int) string {
	others := slices.DeleteFunc(slices.Clone(w.namespaces), func(ns string) bool { return ns == own })
	rand.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	return strings.Join(others[:min(n, len(others))], ",")
}

// refs returns the world's objects' names, sorted.
func (w *world) refs() []ref {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.SortedFunc(maps.Keys(w.objects), func(a, b ref) int { return strings.Compare(a.String(), b.String()) })
}

func (w *world) get(r ref) object {
	w.mu.Lock()
	defer w.mu.Unlock()
	return *w.objects[r]
}

func (w *world) set(r ref, o object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*w.objects[r] = o
}

// create creates the world's namespaces and objects through c, with workers
// goroutines.
func (w *world) create(ctx context.Context, c client.Client, workers int) error {
	for _, ns := range w.namespaces {
		if err := retry(ctx, func() error {
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			return err
		}
	}
	refs := w.refs()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, r := range refs {
		g.Go(func() error { return w.createObject(ctx, c, r, w.get(r)) })
	}
	return g.Wait()
}

func (w *world) createObject(ctx context.Context, c client.Client, r ref, o object) error {
	err := retry(ctx, func() error {
		err := c.Create(ctx, build(r, o))
		if apierrors.IsAlreadyExists(err) {
			// An earlier attempt got through.
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", r, err)
	}
	w.writes.Add(1)
	o.Gone = false
	w.set(r, o)
	return nil
}

// build returns the object o describes.
func build(r ref, o object) client.Object {
	meta := metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name}
	if o.Source {
		meta.Labels = map[string]string{mirror.SourceLabel: "true"}
	}
	if o.Targets != "" {
		meta.Annotations = map[string]string{mirror.TargetsAnnotation: o.Targets}
	}
	v := strconv.Itoa(o.Version)
	switch r.Kind {
	case "ConfigMap":
		return &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"v": v}}
	case "Secret":
		return &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"v": []byte(v)}}
	}
	if o.Reload != "" {
		meta.Annotations = map[string]string{rollout.ReloadAnnotation: o.Reload}
	}
	labels := map[string]string{"app": r.Name}
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}
	for _, cm := range o.ConfigMaps {
		pod.Containers[0].EnvFrom = append(pod.Containers[0].EnvFrom, corev1.EnvFromSource{
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}},
		})
	}
	for _, s := range o.Secrets {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: s, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: s},
		}})
	}
	return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
	}}
}

// isSourceName reports whether r names one of the world's mirror sources,
// labelled as a source or not.
func isSourceName(r ref) bool { return r.Kind != "Deployment" && strings.HasPrefix(r.Name, "src-") }

// newObject returns an empty object of r's kind, named as r.
func newObject(r ref) client.Object {
	var obj client.Object
	switch r.Kind {
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	case "Secret":
		obj = &corev1.Secret{}
	default:
		obj = &appsv1.Deployment{}
	}
	obj.SetNamespace(r.Namespace)
	obj.SetName(r.Name)
	return obj
}

// change makes one random change to r through c, as a user would: new data
// for a ConfigMap or Secret; for a mirror source, also new targets, the
// label off or on, or deleting or re-creating it; for a Deployment, opting in
// or out.
func (w *world) change(ctx context.Context, c client.Client, r ref) error {
	o := w.get(r)
	if o.Gone {
		o.Version++
		return w.createObject(ctx, c, r, o)
	}
	patch := map[string]any{}
	metaPatch := func(field, key string, value any) {
		m, _ := patch["metadata"].(map[string]any)
		if m == nil {
			m = map[string]any{}
			patch["metadata"] = m
		}
		m[field] = map[string]any{key: value}
	}
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	switch p := rand.IntN(100); {
	case r.Kind == "Deployment":
		o.Reload = []string{"true", "", "false", "true"}[rand.IntN(4)]
		metaPatch("annotations", rollout.ReloadAnnotation, orNull(o.Reload))
	case !isSourceName(r), p < 60:
		o.Version++
		v := strconv.Itoa(o.Version)
		if r.Kind == "Secret" {
			v = base64.StdEncoding.EncodeToString([]byte(v))
		}
		patch["data"] = map[string]any{"v": v}
	case p < 75:
		o.Targets = w.someTargets(r.Namespace, 1+rand.IntN(2))
		metaPatch("annotations", mirror.TargetsAnnotation, o.Targets)
	case p < 85:
		o.Source = !o.Source
		metaPatch("labels", mirror.SourceLabel, orNull(map[bool]string{true: "true"}[o.Source]))
	default:
		err := retry(ctx, func() error { return client.IgnoreNotFound(c.Delete(ctx, newObject(r))) })
		if err != nil {
			return fmt.Errorf("delete %s: %w", r, err)
		}
		w.writes.Add(1)
		o.Gone = true
		w.set(r, o)
		return nil
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := retry(ctx, func() error {
		return c.Patch(ctx, newObject(r), client.RawPatch(types.MergePatchType, body))
	}); err != nil {
		return fmt.Errorf("patch %s with %s: %w", r, body, err)
	}
	w.writes.Add(1)
	w.set(r, o)
	return nil
}

// changeSome makes n random changes, each to a different object picked at
// random, through c.
func (w *world) changeSome(ctx context.Context, c client.Client, n int) error {
	refs := w.refs()
	rand.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, r := range refs[:min(n, len(refs))] {
		g.Go(func() error { return w.change(ctx, c, r) })
	}
	return g.Wait()
}

// churn changes random objects through c with workers goroutines until ctx
// ends. Each worker owns its share of the objects, so no object is written
// by two at once.
func (w *world) churn(ctx context.Context, c client.Client, workers int) error {
	refs := w.refs()
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	for i := range workers {
		var mine []ref
		for j := i; j < len(refs); j += workers {
			mine = append(mine, refs[j])
		}
		g.Go(func() error {
			for ctx.Err() == nil && gctx.Err() == nil {
				if err := w.change(gctx, c, mine[rand.IntN(len(mine))]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// retry calls fn until it succeeds, for up to a minute: writes meet a
// restarting API server.
func retry(ctx context.Context, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cluster is what the API server holds in the world's namespaces.
type cluster struct {
	objects map[ref]client.Object
}

// read lists the world's namespaces through c.
func (w *world) read(ctx context.Context, c client.Client) (cluster, error) {
	cl := cluster{objects: make(map[ref]client.Object)}
	for _, ns := range w.namespaces {
		var (
			cms  corev1.ConfigMapList
			ss   corev1.SecretList
			deps appsv1.DeploymentList
		)
		for _, list := range []client.ObjectList{&cms, &ss, &deps} {
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return cl, err
			}
		}
		for i := range cms.Items {
			cl.objects[ref{"ConfigMap", ns, cms.Items[i].Name}] = &cms.Items[i]
		}
		for i := range ss.Items {
			cl.objects[ref{"Secret", ns, ss.Items[i].Name}] = &ss.Items[i]
		}
		for i := range deps.Items {
			cl.objects[ref{"Deployment", ns, deps.Items[i].Name}] = &deps.Items[i]
		}
	}
	return cl, nil
}

// version returns the data "v" of a ConfigMap or Secret, and whether it has
// one.
func version(obj client.Object) (int, bool) {
	var v string
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		v = o.Data["v"]
	case *corev1.Secret:
		v = string(o.Data["v"])
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// check compares cl with the world's writes, object by object: every object
// holds what the test last wrote to it, and the copies mirror made are
// exactly those the sources ask for, each with its source's data. It returns
// one problem for each object that differs.
func (w *world) check(cl cluster) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var problems []string
	copies := make(map[ref]string) // want: source's "namespace/name"
	for r, o := range w.objects {
		got, exists := cl.objects[r]
		switch {
		case o.Gone && exists:
			problems = append(problems, fmt.Sprintf("%s: deleted, but it exists", r))
			continue
		case o.Gone:
			continue
		case !exists:
			problems = append(problems, fmt.Sprintf("%s: missing", r))
			continue
		}
		if v, _ := version(got); r.Kind != "Deployment" && v != o.Version {
			problems = append(problems, fmt.Sprintf("%s: version %d, want %d", r, v, o.Version))
		}
		if got.GetAnnotations()[rollout.ReloadAnnotation] != o.Reload {
			problems = append(problems, fmt.Sprintf("%s: %s %q, want %q", r, rollout.ReloadAnnotation,
				got.GetAnnotations()[rollout.ReloadAnnotation], o.Reload))
		}
		if (got.GetLabels()[mirror.SourceLabel] == "true") != o.Source || got.GetAnnotations()[mirror.TargetsAnnotation] != o.Targets {
			problems = append(problems, fmt.Sprintf("%s: labels %v and annotations %v, want source %v to %q", r,
				got.GetLabels(), got.GetAnnotations(), o.Source, o.Targets))
		}
		if !o.Source {
			continue
		}
		for target := range strings.SplitSeq(o.Targets, ",") {
			if target != "" && target != r.Namespace && slices.Contains(w.namespaces, target) {
				copies[ref{r.Kind, target, r.Name}] = r.Namespace + "/" + r.Name
			}
		}
	}
	for r, obj := range cl.objects {
		_, written := w.objects[r]
		isCopy := obj.GetLabels()[mirror.CopyLabel] == "true"
		source, wanted := copies[r]
		switch {
		case written:
		case !isCopy:
			problems = append(problems, fmt.Sprintf("%s: neither written by the test nor a copy", r))
		case !wanted:
			problems = append(problems, fmt.Sprintf("%s: a copy of %s that no source asks for",
				r, obj.GetAnnotations()[mirror.CopyOfAnnotation]))
		default:
			src := w.objects[ref{r.Kind, strings.Split(source, "/")[0], r.Name}]
			if v, _ := version(obj); v != src.Version || obj.GetAnnotations()[mirror.CopyOfAnnotation] != source {
				problems = append(problems, fmt.Sprintf("%s: a copy of %s at version %d, want a copy of %s at version %d",
					r, obj.GetAnnotations()[mirror.CopyOfAnnotation], v, source, src.Version))
			}
		}
	}
	for r := range copies {
		if _, ok := cl.objects[r]; !ok {
			problems = append(problems, fmt.Sprintf("%s: the copy of %s is missing", r, copies[r]))
		}
	}
	slices.Sort(problems)
	return problems
}

// checkStores compares the app's stores with cl: each holds exactly the
// objects of the world's namespaces that the API server holds, at the same
// resource versions. It returns one problem for each object that differs.
func (w *world) checkStores(a *exampleApp, cl cluster) []string {
	inStores := make(map[ref]string)
	add := func(kind string, objs []client.Object) {
		for _, obj := range objs {
			if slices.Contains(w.namespaces, obj.GetNamespace()) {
				inStores[ref{kind, obj.GetNamespace(), obj.GetName()}] = obj.GetResourceVersion()
			}
		}
	}
	cms, err1 := a.ConfigMaps.List()
	ss, err2 := a.Secrets.List()
	ds, err3 := a.Deployments.List()
	if err := errors.Join(err1, err2, err3); err != nil {
		return []string{err.Error()}
	}
	add("ConfigMap", asObjects(cms))
	add("Secret", asObjects(ss))
	add("Deployment", asObjects(ds))
	var problems []string
	for r, obj := range cl.objects {
		switch rv, ok := inStores[r]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: not in the app's store", r))
		case rv != obj.GetResourceVersion():
			problems = append(problems, fmt.Sprintf("%s: resource version %s in the app's store, %s on the API server", r, rv, obj.GetResourceVersion()))
		}
	}
	for r := range inStores {
		if _, ok := cl.objects[r]; !ok {
			problems = append(problems, fmt.Sprintf("%s: in the app's store, gone from the API server", r))
		}
	}
	for _, ns := range w.namespaces {
		if _, err := a.Namespaces.Get("", ns); err != nil {
			problems = append(problems, fmt.Sprintf("namespace %s: %v", ns, err))
		}
	}
	slices.Sort(problems)
	return problems
}

func asObjects[T client.Object](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i, item := range items {
		out[i] = item
	}
	return out
}

// reconcileAgain reconciles, afresh, every Deployment of cl with rollout and
// every source the world ever had, and every source a copy names, with
// mirror: in memory (fxcontrollertest), on stores filled from cl alone. A
// reconcile that would change anything means the running app missed an
// update: it returns one problem for each object such a reconcile changes,
// and for each reconcile that fails.
func (w *world) reconcileAgain(t *testing.T, cl cluster) []string {
	var problems []string
	// A subtest, so that the in-memory app stops as soon as it is done.
	t.Run("reconcile again", func(t *testing.T) {
		objs := make([]client.Object, 0, len(cl.objects)+len(w.namespaces))
		for _, ns := range w.namespaces {
			objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
		for _, obj := range cl.objects {
			obj = obj.DeepCopyObject().(client.Object)
			// The fake sets every object's resource version to 999, and
			// raises it on each write.
			obj.SetResourceVersion("")
			obj.SetManagedFields(nil)
			objs = append(objs, obj)
		}
		app := fxcontrollertest.New(t, fx.Options(rollout.Module, mirror.Module), objs...)
		ctx := t.Context()
		sources := make(map[ref]bool)
		for r, obj := range cl.objects {
			if r.Kind == "Deployment" {
				if _, err := app.Reconcile(ctx, "rollout", client.ObjectKeyFromObject(obj)); err != nil {
					problems = append(problems, fmt.Sprintf("%s: reconcile again: %v", r, err))
				}
			}
			if src, ok := obj.GetAnnotations()[mirror.CopyOfAnnotation]; ok {
				ns, name, _ := strings.Cut(src, "/")
				sources[ref{r.Kind, ns, name}] = true
			}
		}
		for _, r := range w.refs() {
			if isSourceName(r) {
				sources[r] = true
			}
		}
		for r := range sources {
			controller := mirror.ConfigMapsController
			if r.Kind == "Secret" {
				controller = mirror.SecretsController
			}
			if _, err := app.Reconcile(ctx, controller, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}); err != nil {
				problems = append(problems, fmt.Sprintf("%s: reconcile again: %v", r, err))
			}
		}
		after, err := w.read(ctx, app.Client())
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		for r, obj := range after.objects {
			switch before, ok := cl.objects[r]; {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: reconciling again creates it", r))
			case obj.GetResourceVersion() != "999":
				problems = append(problems, fmt.Sprintf("%s: reconciling again changes it: %s", r, describeChange(before, obj)))
			}
		}
		for r := range cl.objects {
			if _, ok := after.objects[r]; !ok {
				problems = append(problems, fmt.Sprintf("%s: reconciling again deletes it", r))
			}
		}
	})
	slices.Sort(problems)
	return problems
}

// describeChange says what rollout or mirror changed from before to after.
func describeChange(before, after client.Object) string {
	if b, ok := before.(*appsv1.Deployment); ok {
		a := after.(*appsv1.Deployment)
		return fmt.Sprintf("%s %q -> %q", rollout.ConfigHashAnnotation,
			b.Spec.Template.Annotations[rollout.ConfigHashAnnotation], a.Spec.Template.Annotations[rollout.ConfigHashAnnotation])
	}
	vb, _ := version(before)
	va, _ := version(after)
	return fmt.Sprintf("version %d -> %d", vb, va)
}

// settle waits, up to timeout, until the cluster is as the world's writes
// call for and the app's stores hold what the API server holds (see check and
// checkStores), and returns the problems left.
func (w *world) settle(t *testing.T, c client.Client, a *exampleApp, timeout time.Duration) (cluster, []string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		cl, err := w.read(t.Context(), c)
		require.NoError(t, err)
		problems := append(w.check(cl), w.checkStores(a, cl)...)
		if len(problems) == 0 || time.Now().After(deadline) {
			return cl, problems
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// converge waits, up to timeout, until the cluster is as the world's writes
// call for, the app's stores hold what the API server holds, and a fresh
// reconcile of every object changes nothing (see check, checkStores and
// reconcileAgain). It fails the test with the problems left, and returns how
// many objects differ: 0 on success.
func (w *world) converge(t *testing.T, c client.Client, a *exampleApp, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var problems []string
	for {
		var cl cluster
		cl, problems = w.settle(t, c, a, time.Until(deadline))
		if len(problems) == 0 {
			// Only now, as it is slow.
			if problems = w.reconcileAgain(t, cl); len(problems) == 0 {
				return 0
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	t.Errorf("not converged within %s: %d problems:\n%s", timeout, len(problems), strings.Join(problems[:min(len(problems), 50)], "\n"))
	objects := make(map[string]bool)
	for _, p := range problems {
		objects[strings.SplitN(p, ":", 2)[0]] = true
	}
	return len(objects)
}
