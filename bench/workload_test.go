package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	typedappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The workload: three modules (web, api, audit), each asking for the same
// five watch specs, so every spec has three consumers:
//
//   - ConfigMaps in three label-selector variants (front, back, all), the
//     objects in front and back being disjoint halves of all;
//   - Secrets and Deployments, all of them.
//
// Each module runs one controller, whose primary objects are one ConfigMap
// variant (web: front, api: back, audit: all) and which reads the Secret and
// Deployment of the same name. Every object carries appLabel, so no spec sees
// anything else in the cluster.
const (
	appLabel      = "app"
	appValue      = "fxkube-bench"
	namespaces    = 10
	versionKey    = "v" // the ConfigMap data key the burst updates
	objectPrefix  = "obj-"
	namespaceBase = "fxkube-bench-"
)

// variant is one label selector on ConfigMaps.
type variant struct {
	name     string
	selector string
	// has reports whether the ConfigMap with index i matches.
	has func(i int) bool
}

// Objects go round the namespaces by index; each namespace's ConfigMaps
// alternate between the front and back tiers in runs of one.
func isFront(i int) bool { return (i/namespaces)%2 == 0 }

var (
	front = variant{"front", appLabel + "=" + appValue + ",tier=front", isFront}
	back  = variant{"back", appLabel + "=" + appValue + ",tier=back", func(i int) bool { return !isFront(i) }}
	all   = variant{"all", appLabel + "=" + appValue, func(int) bool { return true }}

	variants = []variant{front, back, all}

	// everything selects every Secret and Deployment of the workload.
	everything = appLabel + "=" + appValue
)

// module is one consumer of every spec, running one controller.
type module struct {
	name    string
	primary variant
}

var modules = []module{{"web", front}, {"api", back}, {"audit", all}}

const (
	// distinctSpecs is what the modules ask for: three ConfigMap variants,
	// Secrets, Deployments.
	distinctSpecs = 5
	// broadestSpecs is the specs no other covers (all ConfigMaps, Secrets,
	// Deployments): on fxkube the front and back ConfigMaps are views.
	broadestSpecs = 3
	// consumersPerSpec is how many modules ask for each spec.
	consumersPerSpec = 3
)

// workload is what a child's system runs and is checked against: the
// controllers the harness follows, what each store must hold once synced,
// the systems that run it and the resources they watch.
type workload struct {
	controllers []module
	stores      func(n int) map[string]int // objects by spec, given n of each kind
	systems     map[string]func(*rest.Config, *harness) (system, error)
	resources   []string // what the stores list and watch, as the API server's metrics name them
}

// shared is the workload above, on the three systems.
var shared = workload{controllers: modules, stores: sharedStores, systems: newSystem, resources: workloadResources}

func sharedStores(n int) map[string]int {
	want := map[string]int{"secrets": n, "deployments": n}
	for _, v := range variants {
		want["configmaps/"+v.name] = v.count(n)
	}
	return want
}

// count returns how many of n objects of each kind v selects.
func (v variant) count(n int) int {
	c := 0
	for i := range n {
		if v.has(i) {
			c++
		}
	}
	return c
}

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

func namespaceOf(i int) string { return namespaceBase + strconv.Itoa(i%namespaces) }
func nameOf(i int) string      { return fmt.Sprintf("%s%05d", objectPrefix, i) }

// indexOf returns the index in an object's name, or -1.
func indexOf(name string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, objectPrefix))
	if err != nil || !strings.HasPrefix(name, objectPrefix) {
		return -1
	}
	return i
}

// versionAnnotation carries the version a burst sets on objects other
// than the suite's ConfigMaps, which carry theirs in their data.
const versionAnnotation = "bench.fxkube.io/version"

// versionOf returns the version an object carries, or -1: a ConfigMap
// in its data, a Pod in its restarts (podVersion), any other object in
// versionAnnotation.
func versionOf(obj client.Object) int32 {
	if pod, ok := obj.(*corev1.Pod); ok {
		return podVersion(pod)
	}
	s := obj.GetAnnotations()[versionAnnotation]
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		s = cm.Data[versionKey]
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return int32(v)
}

// dataVersion returns a merge patch setting a ConfigMap's version.
func dataVersion(version int32) []byte {
	return fmt.Appendf(nil, `{"data":{%q:"%d"}}`, versionKey, version)
}

func objectMeta(i int, extra map[string]string) metav1.ObjectMeta {
	l := map[string]string{appLabel: appValue}
	for k, v := range extra {
		l[k] = v
	}
	return metav1.ObjectMeta{Name: nameOf(i), Namespace: namespaceOf(i), Labels: l}
}

// The objects are modest and typical: a ConfigMap with a small config file,
// a Secret with a token, a one-container Deployment.
func newConfigMap(i int) *corev1.ConfigMap {
	tier := "back"
	if front.has(i) {
		tier = "front"
	}
	return &corev1.ConfigMap{
		ObjectMeta: objectMeta(i, map[string]string{"tier": tier}),
		Data: map[string]string{
			versionKey: "1",
			"config.yaml": fmt.Sprintf("server:\n  port: %d\n  name: %s\nlog:\n  level: info\n  format: json\nfeatures: [a, b, c]\n",
				8000+i%1000, nameOf(i)),
		},
	}
}

func newSecret(i int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: objectMeta(i, nil),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"token": fmt.Appendf(nil, "%064x", i*7919)},
	}
}

func newDeployment(i int) *appsv1.Deployment {
	podLabels := map[string]string{appLabel: appValue, "name": nameOf(i)}
	return &appsv1.Deployment{
		ObjectMeta: objectMeta(i, nil),
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: "registry.k8s.io/pause:3.10",
					Args:  []string{"--config", "/etc/app/config.yaml"},
					Env:   []corev1.EnvVar{{Name: "NAME", Value: nameOf(i)}, {Name: "TIER", Value: "bench"}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					}},
				}}},
			},
		},
	}
}

// population keeps objects of some kinds in the cluster: n of each.
type population struct {
	kinds   []objectKind
	mu      sync.Mutex
	created int
}

// objectKind makes and removes the objects of one kind, by index.
type objectKind struct{ create, delete objectOp }

// objectOp makes or removes the object with index i.
type objectOp func(ctx context.Context, kube kubernetes.Interface, i int) error

// createDeleter is what objectKindOf needs of a typed client-go client.
type createDeleter[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// objectKindOf is the kind whose object i is newObject(i), written through
// client's client for its namespace; creating what exists and deleting what
// does not are no errors.
func objectKindOf[T any, C createDeleter[T]](client func(kube kubernetes.Interface, namespace string) C, newObject func(int) T) objectKind {
	return objectKind{
		create: func(ctx context.Context, kube kubernetes.Interface, i int) error {
			_, err := client(kube, namespaceOf(i)).Create(ctx, newObject(i), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		},
		delete: func(ctx context.Context, kube kubernetes.Interface, i int) error {
			err := client(kube, namespaceOf(i)).Delete(ctx, nameOf(i), metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		},
	}
}

// workloadKinds are the kinds of the shared workload.
var workloadKinds = []objectKind{
	objectKindOf(func(kube kubernetes.Interface, ns string) typedcorev1.ConfigMapInterface {
		return kube.CoreV1().ConfigMaps(ns)
	}, newConfigMap),
	objectKindOf(func(kube kubernetes.Interface, ns string) typedcorev1.SecretInterface {
		return kube.CoreV1().Secrets(ns)
	}, newSecret),
	objectKindOf(func(kube kubernetes.Interface, ns string) typedappsv1.DeploymentInterface {
		return kube.AppsV1().Deployments(ns)
	}, newDeployment),
}

// createWorkers is how many goroutines create objects; enough to keep the
// API server busy on a small machine.
const createWorkers = 16

// ensure creates or deletes objects so that the cluster holds exactly n of
// each kind.
func (p *population) ensure(ctx context.Context, kube kubernetes.Interface, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.created == 0 {
		for ns := range namespaces {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceOf(ns)}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create namespace: %w", err)
			}
		}
	}
	from, to, op := p.created, n, func(k objectKind) objectOp { return k.create }
	if n < p.created {
		from, to, op = n, p.created, func(k objectKind) objectOp { return k.delete }
	}
	err := parallel(ctx, from, to, createWorkers, func(ctx context.Context, i int) error {
		errs := make([]error, len(p.kinds))
		for k, kind := range p.kinds {
			errs[k] = op(kind)(ctx, kube, i)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("make %d objects of each kind, from %d: %w", n, p.created, err)
	}
	p.created = n
	return nil
}

// parallel calls fn for every i in [from, to) on workers goroutines and
// returns the first error.
func parallel(ctx context.Context, from, to, workers int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// readKeys are the objects Get benchmarks read in turn, spread over every
// namespace so reads do not hit one hot object.
func readKeys(n int) []client.ObjectKey {
	keys := make([]client.ObjectKey, 1024)
	for k := range keys {
		i := (k * 7919) % n
		keys[k] = client.ObjectKey{Namespace: namespaceOf(i), Name: nameOf(i)}
	}
	return keys
}
