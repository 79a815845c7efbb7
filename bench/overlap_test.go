package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.uber.org/fx"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
)

// The overlap workload: many modules, each asking for a few watch specs on
// several kinds, that overlap as the specs of independently written modules
// do: the same spec asked for again (sometimes spelt differently), narrower
// specs that a broader one covers (a namespace, a label selector implying
// another by every operator, a metadata.name or metadata.namespace field
// selector, metadata-only of a typed store's objects), and specs that no
// other covers (other label keys, a field selector only the API server can
// evaluate, a namespace with another selector, a metadata-only store no
// typed store covers).
//
// The specs come in families, written out below: a family is one broadest
// spec and narrower members that it covers, and no family's broadest spec
// covers another's, by the rules of DESIGN.md's "Views" (with a typed store
// covering metadata-only requests of its kind). So by construction, not by
// asking fxkube's planner, an app of the workload needs one informer per
// family, and its pre-flight checks access once per distinct (resource,
// namespace) of the families' broadest specs. Module f mod M (of M) asks
// for family f's broadest spec; then every module asks for one spec of
// each kind, picked by a fixed hash of (module, kind), spelt one of the
// ways the spec lists.
//
// Variants: 50 or 5 modules (many requests or few, over the same broadest
// specs and resources) on 5 kinds, or on 8 (three more kinds: more
// distinct resources). The 5 kinds hold n objects each (ConfigMaps, Secrets
// and Deployments are the shared workload's; ServiceAccounts and headless
// Services are made for this one); the three more (Roles, RoleBindings,
// PersistentVolumeClaims) hold none, as they are there for what the
// pre-flight asks.
//
// Its systems: fxkube (an app of the modules, as the suite's), and plain
// client-go informers of just the broadest specs, one informer each,
// started together: the sync any app needs for these specs, with nothing
// of fxkube's around it.

// overlapSize is the number of objects of each populated kind.
const overlapSize = 1_000

// overlapVariant is one shape of the overlap workload.
type overlapVariant struct {
	Modules int `json:"modules"`
	Kinds   int `json:"kinds"` // the first Kinds of overlapKinds
}

// overlapVariants are the variants benchmarked, in table order; the first
// is the one the targets are for.
var overlapVariants = []overlapVariant{{Modules: 50, Kinds: 5}, {Modules: 5, Kinds: 5}, {Modules: 50, Kinds: 8}, {Modules: 5, Kinds: 8}}

func (v overlapVariant) String() string {
	return fmt.Sprintf("modules=%d/kinds=%d", v.Modules, v.Kinds)
}

// overlapName is what a run of variant v on sys is recorded as.
func overlapName(v overlapVariant, sys string) string { return "overlap/" + v.String() + "/" + sys }

// overlapKind is a kind of the overlap workload.
type overlapKind struct {
	gvr schema.GroupVersionResource
	gvk schema.GroupVersionKind
	// typed asks a registry for a store of the kind's Go type.
	typed func(r *fxstore.Registry, spec fxstore.Spec, opts ...fxstore.Option) (store, error)
	// populated kinds hold n objects, the others none.
	populated bool
}

var (
	configMapsKind = overlapKind{
		gvr:   corev1.SchemeGroupVersion.WithResource("configmaps"),
		gvk:   corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		typed: storeOf[*corev1.ConfigMap], populated: true,
	}
	secretsKind = overlapKind{
		gvr:   corev1.SchemeGroupVersion.WithResource("secrets"),
		gvk:   corev1.SchemeGroupVersion.WithKind("Secret"),
		typed: storeOf[*corev1.Secret], populated: true,
	}
	deploymentsKind = overlapKind{
		gvr:   appsv1.SchemeGroupVersion.WithResource("deployments"),
		gvk:   appsv1.SchemeGroupVersion.WithKind("Deployment"),
		typed: storeOf[*appsv1.Deployment], populated: true,
	}
	serviceAccountsKind = overlapKind{
		gvr:   corev1.SchemeGroupVersion.WithResource("serviceaccounts"),
		gvk:   corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
		typed: storeOf[*corev1.ServiceAccount], populated: true,
	}
	servicesKind = overlapKind{
		gvr:   corev1.SchemeGroupVersion.WithResource("services"),
		gvk:   corev1.SchemeGroupVersion.WithKind("Service"),
		typed: storeOf[*corev1.Service], populated: true,
	}
	rolesKind = overlapKind{
		gvr:   rbacv1.SchemeGroupVersion.WithResource("roles"),
		gvk:   rbacv1.SchemeGroupVersion.WithKind("Role"),
		typed: storeOf[*rbacv1.Role],
	}
	roleBindingsKind = overlapKind{
		gvr:   rbacv1.SchemeGroupVersion.WithResource("rolebindings"),
		gvk:   rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
		typed: storeOf[*rbacv1.RoleBinding],
	}
	claimsKind = overlapKind{
		gvr:   corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
		gvk:   corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
		typed: storeOf[*corev1.PersistentVolumeClaim],
	}

	overlapKinds = []*overlapKind{
		&configMapsKind, &secretsKind, &deploymentsKind, &serviceAccountsKind, &servicesKind,
		&rolesKind, &roleBindingsKind, &claimsKind,
	}
)

// storeOf is fxstore.For, returning what the harness needs of the store.
func storeOf[T client.Object](r *fxstore.Registry, spec fxstore.Spec, opts ...fxstore.Option) (store, error) {
	s, err := fxstore.For[T](r, spec, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// The labels of the ServiceAccounts and Services, besides appLabel: a team
// and a numeric shard, for the set and the Gt/Lt operators.
var teams = []string{"a", "b", "c"}

func teamOf(i int) string { return teams[i%len(teams)] }
func shardOf(i int) int   { return (i / namespaces) % 10 }

func overlapLabels(i int) map[string]string {
	return map[string]string{"team": teamOf(i), "shard": strconv.Itoa(shardOf(i))}
}

func newServiceAccount(i int) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: objectMeta(i, overlapLabels(i))}
}

// newHeadlessService makes a Service with no cluster IP, so that any number
// of them fit the test control plane's service range.
func newHeadlessService(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(i, overlapLabels(i)),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{appLabel: appValue, "name": nameOf(i)},
		},
	}
}

// overlapExtras are the objects of the kinds only the overlap workload
// has.
var overlapExtras = population{kinds: []objectKind{
	objectKindOf(func(kube kubernetes.Interface, ns string) typedcorev1.ServiceAccountInterface {
		return kube.CoreV1().ServiceAccounts(ns)
	}, newServiceAccount),
	objectKindOf(func(kube kubernetes.Interface, ns string) typedcorev1.ServiceInterface {
		return kube.CoreV1().Services(ns)
	}, newHeadlessService),
}}

// overlapSpec is one watch spec of the workload, with which of its kind's
// objects it selects, worked out from how they are made rather than by
// evaluating the selector.
type overlapSpec struct {
	kind      *overlapKind
	namespace string
	// labels are equivalent spellings of the label selector; each module
	// asking for the spec picks one.
	labels   []string
	fields   string
	metadata bool // a metadata-only store
	has      func(i int) bool
}

// name identifies the spec in the workload.
func (s overlapSpec) name() string {
	name := s.kind.gvr.Resource
	if s.metadata {
		name += " metadata-only"
	}
	if s.namespace != "" {
		name += " in " + s.namespace
	}
	name += " labels " + strconv.Quote(s.labels[0])
	if s.fields != "" {
		name += " fields " + strconv.Quote(s.fields)
	}
	return name
}

// count returns how many objects the spec selects when each populated kind
// holds n.
func (s overlapSpec) count(n int) int {
	if !s.kind.populated {
		return 0
	}
	c := 0
	for i := range n {
		if s.has(i) {
			c++
		}
	}
	return c
}

// register asks r for the spec's store, with the label selector spelt as
// labels.
func (s overlapSpec) register(r *fxstore.Registry, labels string, opts ...fxstore.Option) (store, error) {
	spec := fxstore.Spec{Namespace: s.namespace, LabelSelector: labels, FieldSelector: s.fields}
	if s.metadata {
		spec.Kind = s.kind.gvk
		return storeOf[*metav1.PartialObjectMetadata](r, spec, opts...)
	}
	return s.kind.typed(r, spec, opts...)
}

// family is a broadest spec and the narrower specs it covers.
type family struct {
	broadest overlapSpec
	members  []overlapSpec
}

// overlapFamilies are the workload's specs, by kind in overlapKinds order.
var overlapFamilies = func() []family {
	const app = appLabel + "=" + appValue
	// Which objects, by index.
	every := func(int) bool { return true }
	none := func(int) bool { return false }
	not := func(a func(int) bool) func(int) bool { return func(i int) bool { return !a(i) } }
	and := func(a, b func(int) bool) func(int) bool { return func(i int) bool { return a(i) && b(i) } }
	index := func(j int) func(int) bool { return func(i int) bool { return i == j } }
	inNamespace := func(ns int) func(int) bool { return func(i int) bool { return i%namespaces == ns } }
	inTeam := func(t string) func(int) bool { return func(i int) bool { return teamOf(i) == t } }
	shardAbove := func(s int) func(int) bool { return func(i int) bool { return shardOf(i) > s } }
	ns := namespaceOf
	on := func(k *overlapKind, has func(int) bool, labels ...string) overlapSpec {
		return overlapSpec{kind: k, labels: labels, has: has}
	}
	in := func(namespace int, s overlapSpec) overlapSpec {
		s.namespace, s.has = ns(namespace), and(inNamespace(namespace), s.has)
		return s
	}
	where := func(fields string, has func(int) bool, s overlapSpec) overlapSpec {
		s.fields, s.has = fields, and(has, s.has)
		return s
	}
	metadataOnly := func(s overlapSpec) overlapSpec { s.metadata = true; return s }
	cm, secret, deploy := &configMapsKind, &secretsKind, &deploymentsKind
	sa, svc := &serviceAccountsKind, &servicesKind
	front := isFront
	return []family{
		// ConfigMaps: every one of the workload, with every label operator
		// narrowing it, and metadata-only requests (a typed store covers
		// them); and those with a tier, another key.
		{on(cm, every, app, "app==fxkube-bench", "app in (fxkube-bench)"), []overlapSpec{
			on(cm, front, app+",tier=front", "tier=front,"+app),
			on(cm, not(front), app+",tier=back"),
			on(cm, every, app+",tier in (front,back)", "tier in (back,front),"+app),
			on(cm, not(front), app+",tier!=front"),
			on(cm, every, app+",tier notin (canary)"),
			on(cm, every, app+",!canary"),
			in(3, on(cm, every, app)),
			in(3, on(cm, front, app+",tier=front")),
			where("metadata.name="+nameOf(42), index(42), on(cm, every, app)),
			where("metadata.namespace="+ns(7), inNamespace(7), on(cm, every, app)),
			metadataOnly(on(cm, every, app)),
			metadataOnly(on(cm, not(front), app+",tier=back")),
			metadataOnly(in(1, on(cm, every, app))),
		}},
		{on(cm, every, "tier"), []overlapSpec{
			on(cm, front, "tier=front", "tier in (front)"),
			on(cm, not(front), "tier in (back,canary)"),
			metadataOnly(on(cm, front, "tier=front")),
		}},
		// Secrets: a set selector covering the workload's (a chain: a
		// namespace of app=fxkube-bench, of app in (...)), and a field
		// the API server selects on that the client cannot.
		{on(secret, every, "app in (fxkube-bench,fxkube-other)", "app in (fxkube-other,fxkube-bench)"), []overlapSpec{
			on(secret, every, app),
			in(2, on(secret, every, app)),
			where("metadata.name!="+nameOf(0), not(index(0)), on(secret, every, app)),
			on(secret, none, "app=fxkube-other"),
		}},
		{where("type=Opaque", every, on(secret, every, app)), []overlapSpec{
			in(2, where("type=Opaque", every, on(secret, every, app))),
			where("metadata.name="+nameOf(7)+",type=Opaque", index(7), on(secret, every, app)),
		}},
		// Deployments: every one, and one namespace by another key (its
		// members are covered by both).
		{on(deploy, every, app), []overlapSpec{
			in(4, on(deploy, every, app)),
			where("metadata.namespace!="+ns(0), not(inNamespace(0)), on(deploy, every, app)),
		}},
		{in(5, on(deploy, every, "!tier")), []overlapSpec{
			in(5, on(deploy, every, "!tier,"+app)),
			in(5, where("metadata.name="+nameOf(5), index(5), on(deploy, every, "!tier"))),
		}},
		// ServiceAccounts: numeric and set operators, another key, and
		// metadata-only by a third, which no typed store covers.
		{on(sa, every, app), []overlapSpec{
			on(sa, shardAbove(4), app+",shard>4"),
			on(sa, not(shardAbove(1)), app+",shard<2"),
			on(sa, not(inTeam("c")), app+",team in (a,b)"),
			on(sa, every, app+",team"),
		}},
		{on(sa, inTeam("a"), "team=a"), []overlapSpec{
			on(sa, and(inTeam("a"), shardAbove(7)), "team=a,shard>7"),
			on(sa, inTeam("a"), "shard,team=a"),
		}},
		{metadataOnly(on(sa, every, "shard")), []overlapSpec{
			metadataOnly(on(sa, shardAbove(4), "shard>4")),
			metadataOnly(on(sa, not(shardAbove(1)), "shard in (0,1)")),
		}},
		// Services: every one, and a numeric range by another key.
		{on(svc, every, app), []overlapSpec{
			in(6, on(svc, every, app)),
			on(svc, inTeam("b"), app+",team=b"),
		}},
		{on(svc, shardAbove(4), "shard>4"), []overlapSpec{
			on(svc, shardAbove(6), "shard>6"),
			on(svc, and(shardAbove(6), not(shardAbove(8))), "shard in (7,8)"),
			on(svc, shardAbove(5), app+",shard>5"),
		}},
		// The kinds only the wider variants watch.
		{on(&rolesKind, every, app), []overlapSpec{in(1, on(&rolesKind, every, app))}},
		{on(&roleBindingsKind, every, app), []overlapSpec{on(&roleBindingsKind, inTeam("a"), app+",team=a")}},
		{on(&claimsKind, every, app), []overlapSpec{where("metadata.name="+nameOf(1), index(1), on(&claimsKind, every, app))}},
	}
}()

// overlapRequest is one module's request: a spec, spelt one way.
type overlapRequest struct {
	spec   overlapSpec
	labels string
}

// overlapPlan is what the modules of a variant ask for.
type overlapPlan struct {
	families []family // whose broadest specs are requested
	modules  [][]overlapRequest
}

func (v overlapVariant) plan() overlapPlan {
	kinds := overlapKinds[:v.Kinds]
	var p overlapPlan
	pools := make([][]overlapSpec, len(kinds)) // every spec of each kind
	for _, f := range overlapFamilies {
		k := slices.Index(kinds, f.broadest.kind)
		if k < 0 {
			continue
		}
		p.families = append(p.families, f)
		pools[k] = append(append(pools[k], f.broadest), f.members...)
	}
	p.modules = make([][]overlapRequest, v.Modules)
	for f, fam := range p.families {
		m := f % v.Modules
		p.modules[m] = append(p.modules[m], overlapRequest{fam.broadest, fam.broadest.labels[0]})
	}
	for m := range p.modules {
		for k, pool := range pools {
			h := mix(uint64(m)<<32 | uint64(k))
			s := pool[h%uint64(len(pool))]
			p.modules[m] = append(p.modules[m], overlapRequest{s, s.labels[(h>>32)%uint64(len(s.labels))]})
		}
	}
	return p
}

// mix is splitmix64's finaliser: a fixed, well-spread hash.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func overlapModuleName(m int) string { return fmt.Sprintf("module%02d", m) }

// requests returns how many store requests the modules make.
func (p overlapPlan) requests() int {
	n := 0
	for _, reqs := range p.modules {
		n += len(reqs)
	}
	return n
}

// specs returns the distinct specs requested, in request order.
func (p overlapPlan) specs() []overlapSpec {
	var out []overlapSpec
	seen := make(map[string]bool)
	for _, reqs := range p.modules {
		for _, q := range reqs {
			if name := q.spec.name(); !seen[name] {
				seen[name] = true
				out = append(out, q.spec)
			}
		}
	}
	return out
}

// broadest returns the families' broadest specs: one informer each.
func (p overlapPlan) broadest() []overlapSpec {
	out := make([]overlapSpec, len(p.families))
	for i, f := range p.families {
		out[i] = f.broadest
	}
	return out
}

// resources returns the resources the workload watches.
func (p overlapPlan) resources() []string {
	var out []string
	for _, f := range p.families {
		if r := f.broadest.kind.gvr.Resource; !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// accessTargets returns how many distinct (resource, namespace) the
// broadest specs list and watch.
func (p overlapPlan) accessTargets() int {
	type target struct{ resource, namespace string }
	seen := make(map[target]bool)
	for _, f := range p.families {
		seen[target{f.broadest.kind.gvr.Resource, f.broadest.namespace}] = true
	}
	return len(seen)
}

// reviewTargets returns how many (resource, namespace) a pre-flight of the
// broadest specs' informers checks access to: the access targets, but for
// a namespace of a resource that a broadest spec also watches in every
// namespace, which that one's review answers.
func (p overlapPlan) reviewTargets() int {
	everywhere := make(map[string]bool)
	for _, f := range p.families {
		if f.broadest.namespace == "" {
			everywhere[f.broadest.kind.gvr.Resource] = true
		}
	}
	type target struct{ resource, namespace string }
	seen := make(map[target]bool)
	for _, f := range p.families {
		if r, ns := f.broadest.kind.gvr.Resource, f.broadest.namespace; ns == "" || !everywhere[r] {
			seen[target{r, ns}] = true
		}
	}
	return len(seen)
}

// workload is the variant as sys runs it: fxkube holds a store for every
// spec requested, the plain informers one for each broadest spec.
func (v overlapVariant) workload(sys string) workload {
	p := v.plan()
	specs := p.specs()
	if sys != fxkube {
		specs = p.broadest()
	}
	return workload{
		stores: func(n int) map[string]int {
			want := make(map[string]int, len(specs))
			for _, s := range specs {
				want[s.name()] = s.count(n)
			}
			return want
		},
		systems: map[string]func(*rest.Config, *harness) (system, error){
			fxkube:         p.newFxkube,
			plainInformers: p.newInformers,
		},
		resources: p.resources(),
	}
}

// newFxkube is the workload as an fxkube app: one fx module per module of
// the plan, asking for its stores as it is built.
func (p overlapPlan) newFxkube(cfg *rest.Config, _ *harness) (system, error) {
	return newFxkubeApp(cfg, func(stores map[string]store) []fx.Option {
		opts := make([]fx.Option, len(p.modules))
		for m, reqs := range p.modules {
			name := overlapModuleName(m)
			opts[m] = fx.Module(name, fx.Invoke(func(r *fxstore.Registry) error {
				for _, q := range reqs {
					s, err := q.spec.register(r, q.labels, fxstore.WithConsumer(name))
					if err != nil {
						return err
					}
					if _, ok := stores[q.spec.name()]; !ok {
						stores[q.spec.name()] = s
					}
				}
				return nil
			}))
		}
		return opts
	})
}

// broadestInformers is one plain client-go informer per broadest spec of
// the plan, each from a factory of its own (a factory has one selector),
// holding what fxkube's informers hold (managedFields stripped), over
// protobuf: the sync of these specs, with no modules, pre-flight or views.
type broadestInformers struct {
	factories []interface{ Shutdown() }
	starts    []func(stop <-chan struct{})
	stores    map[string]cache.SharedIndexInformer // by spec name
	cancel    context.CancelFunc
}

func (p overlapPlan) newInformers(cfg *rest.Config, _ *harness) (system, error) {
	kube, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &broadestInformers{stores: make(map[string]cache.SharedIndexInformer)}
	for _, spec := range p.broadest() {
		tweak := func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = spec.labels[0], spec.fields }
		var inf cache.SharedIndexInformer
		if spec.metadata {
			f := metadatainformer.NewFilteredSharedInformerFactory(meta, 0, spec.namespace, tweak)
			inf = f.ForResource(spec.kind.gvr).Informer()
			s.factories, s.starts = append(s.factories, f), append(s.starts, f.Start)
		} else {
			f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(spec.namespace), informers.WithTweakListOptions(tweak))
			gi, err := f.ForResource(spec.kind.gvr)
			if err != nil {
				return nil, err
			}
			inf = gi.Informer()
			s.factories, s.starts = append(s.factories, f), append(s.starts, f.Start)
		}
		if err := inf.SetTransform(crcache.TransformStripManagedFields()); err != nil {
			return nil, err
		}
		s.stores[spec.name()] = inf
	}
	return s, nil
}

func (s *broadestInformers) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	for _, start := range s.starts {
		start(ctx.Done())
	}
}

func (s *broadestInformers) synced() (bool, error) { return allSynced(maps.Values(s.stores)), nil }

func (s *broadestInformers) counts() (map[string]int, error) { return countsOf(s.stores), nil }

func (s *broadestInformers) informers() int { return len(s.stores) }

func (s *broadestInformers) details(context.Context) (map[string]time.Duration, error) {
	return nil, nil
}

func (s *broadestInformers) stop(ctx context.Context) error {
	if s.cancel != nil {
		s.cancel()
	}
	return shutDownWithin(ctx, func() {
		for _, f := range s.factories {
			f.Shutdown()
		}
	})
}
