package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
)

// Event reasons, on the source. Events about a copy, or a target namespace,
// relate it, which also keeps the Events of different targets apart: the
// API server counts repeats of an Event as one series, regardless of its note.
const (
	reasonCreated          = "CopyCreated"
	reasonUpdated          = "CopyUpdated"
	reasonDeleted          = "CopyDeleted"
	reasonConflict         = "CopyConflict"
	reasonInvalidTargets   = "InvalidTargets"
	reasonNoTargets        = "NoTargets"
	reasonNamespaceMissing = "NamespaceNotFound"

	action = "Mirror"
)

// reconciler mirrors the source a request names: it makes the copies the
// source asks for and deletes the copies of it that it no longer asks for, or
// all of them when it is gone.
type reconciler[T client.Object] struct {
	kind       kind[T]
	objects    *fxstore.Store[T]
	namespaces *fxstore.Store[*metav1.PartialObjectMetadata]
	client     client.Client
	events     events.EventRecorder
}

func (r *reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	source, err := r.objects.Get(req.Namespace, req.Name)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	var targets []string
	if exists && isSource(source) {
		targets = r.targets(ctx, source)
	}

	copies, err := r.objects.ByIndex(copiesIndex, req.String())
	if err != nil {
		return reconcile.Result{}, err
	}
	var errs []error
	for _, c := range copies {
		if c.GetName() == req.Name && (c.GetNamespace() == req.Namespace || slices.Contains(targets, c.GetNamespace())) {
			// Wanted, or the source itself, marked as a copy of itself.
			continue
		}
		if err := r.delete(ctx, c); err != nil {
			errs = append(errs, err)
		} else if exists {
			r.events.Eventf(source, c, corev1.EventTypeNormal, reasonDeleted, action, "deleted the copy in namespace %s", c.GetNamespace())
		}
	}
	for _, ns := range targets {
		if err := r.mirror(ctx, source, ns); err != nil {
			errs = append(errs, err)
		}
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// targets returns the namespaces source is to be mirrored to, and reports
// what of its annotation it ignores.
func (r *reconciler[T]) targets(ctx context.Context, source T) []string {
	value := source.GetAnnotations()[TargetsAnnotation]
	targets, problems := parseTargets(value, source.GetNamespace())
	log := fxcontroller.LoggerFrom(ctx)
	switch {
	case len(problems) > 0:
		log.Warn("ignoring entries of "+TargetsAnnotation, zap.String("value", abbreviate(value)), zap.Strings("problems", problems))
		r.events.Eventf(source, nil, corev1.EventTypeWarning, reasonInvalidTargets, action,
			"ignoring entries of %s: %s", TargetsAnnotation, summarize(problems))
	case len(targets) == 0:
		log.Warn("source names no target namespace", zap.String("annotation", TargetsAnnotation))
		r.events.Eventf(source, nil, corev1.EventTypeWarning, reasonNoTargets, action,
			"labelled %s=true but %s names no namespace; list them, as in %s: ns-a,ns-b", SourceLabel, TargetsAnnotation, TargetsAnnotation)
	}
	return targets
}

// summarize joins problems, keeping an Event's note short.
func summarize(problems []string) string {
	const shown = 3
	if len(problems) <= shown {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(problems[:shown], "; "), len(problems)-shown)
}

// mirror makes the object of source's name in namespace ns a copy of source,
// unless the object is there and not a copy of it.
func (r *reconciler[T]) mirror(ctx context.Context, source T, ns string) error {
	log := fxcontroller.LoggerFrom(ctx).With(zap.String("target", ns))
	if !r.namespaceExists(ns) {
		log.Warn("target namespace does not exist; copying once it does")
		r.events.Eventf(source, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, corev1.EventTypeWarning, reasonNamespaceMissing, action,
			"namespace %s does not exist or is being deleted; the copy will be made once it exists", ns)
		return nil
	}
	existing, err := r.objects.Get(ns, source.GetName())
	switch {
	case apierrors.IsNotFound(err):
		return r.create(ctx, source, ns)
	case err != nil:
		return err
	case !isCopyOf(existing, sourceKey(source)):
		log.Warn("target holds an object that is not a copy of the source; leaving it alone")
		r.events.Eventf(source, existing, corev1.EventTypeWarning, reasonConflict, action,
			"namespace %s already holds a %s named %s that is not a copy of this one; leaving it alone",
			ns, r.kind.name, source.GetName())
		return nil
	case r.kind.sameContent(existing, source):
		return nil
	case !r.kind.updatable(existing, source):
		if err := r.delete(ctx, existing); err != nil {
			return err
		}
		return r.create(ctx, source, ns)
	}
	c := existing.DeepCopyObject().(T)
	r.kind.copyContent(c, source)
	if err := r.client.Update(ctx, c); err != nil {
		return fmt.Errorf("update copy in namespace %s: %w", ns, err)
	}
	log.Info("updated copy")
	r.events.Eventf(source, c, corev1.EventTypeNormal, reasonUpdated, action, "updated the copy in namespace %s", ns)
	return nil
}

func (r *reconciler[T]) create(ctx context.Context, source T, ns string) error {
	c := r.kind.newObject()
	c.SetNamespace(ns)
	c.SetName(source.GetName())
	c.SetLabels(map[string]string{CopyLabel: "true"})
	c.SetAnnotations(map[string]string{CopyOfAnnotation: sourceKey(source)})
	r.kind.copyContent(c, source)
	switch err := r.client.Create(ctx, c); {
	case apierrors.IsAlreadyExists(err):
		// The store has yet to see it; its event reconciles the source again
		// (see sourcesOfObject).
		return nil
	case err != nil:
		return fmt.Errorf("create copy in namespace %s: %w", ns, err)
	}
	fxcontroller.LoggerFrom(ctx).Info("created copy", zap.String("target", ns))
	r.events.Eventf(source, c, corev1.EventTypeNormal, reasonCreated, action, "created a copy in namespace %s", ns)
	return nil
}

// delete deletes the copy c, unless it has changed since it was read.
func (r *reconciler[T]) delete(ctx context.Context, c T) error {
	// c is the store's: give the client an object of its own.
	obj := r.kind.newObject()
	obj.SetNamespace(c.GetNamespace())
	obj.SetName(c.GetName())
	uid, version := c.GetUID(), c.GetResourceVersion()
	err := r.client.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &version})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete copy in namespace %s: %w", c.GetNamespace(), err)
	}
	fxcontroller.LoggerFrom(ctx).Info("deleted copy", zap.String("target", c.GetNamespace()))
	return nil
}

func (r *reconciler[T]) namespaceExists(name string) bool {
	ns, err := r.namespaces.Get("", name)
	return err == nil && ns.DeletionTimestamp == nil
}

// sourcesOfObject maps an object to the sources it matters to: the source it
// is a copy of, and the sources that want a copy where it is.
func (r *reconciler[T]) sourcesOfObject(_ context.Context, obj client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	if src := sourceOfCopy(obj); len(src) > 0 {
		if ns, name, ok := strings.Cut(src[0], "/"); ok {
			reqs = append(reqs, request(ns, name))
		}
	}
	sources, _ := r.objects.ByIndex(targetsIndex, obj.GetNamespace())
	for _, s := range sources {
		if s.GetName() == obj.GetName() {
			reqs = append(reqs, request(s.GetNamespace(), s.GetName()))
		}
	}
	return reqs
}

// sourcesOfNamespace maps a namespace to the sources that want a copy in it.
func (r *reconciler[T]) sourcesOfNamespace(_ context.Context, ns client.Object) []reconcile.Request {
	sources, _ := r.objects.ByIndex(targetsIndex, ns.GetName())
	reqs := make([]reconcile.Request, len(sources))
	for i, s := range sources {
		reqs[i] = request(s.GetNamespace(), s.GetName())
	}
	return reqs
}

func request(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}}
}

func sourceKey(obj client.Object) string { return client.ObjectKeyFromObject(obj).String() }

func isSource(obj client.Object) bool {
	return obj.GetLabels()[SourceLabel] == "true" && obj.GetDeletionTimestamp() == nil
}

func isCopyOf(obj client.Object, source string) bool {
	return obj.GetLabels()[CopyLabel] == "true" && obj.GetAnnotations()[CopyOfAnnotation] == source
}

// sourceOfCopy is the copiesIndex: the source a copy is of.
func sourceOfCopy[T client.Object](obj T) []string {
	if src, ok := obj.GetAnnotations()[CopyOfAnnotation]; ok && obj.GetLabels()[CopyLabel] == "true" {
		return []string{src}
	}
	return nil
}

// targetsOfSource is the targetsIndex: the namespaces a source is mirrored
// to.
func targetsOfSource[T client.Object](obj T) []string {
	if !isSource(obj) {
		return nil
	}
	targets, _ := parseTargets(obj.GetAnnotations()[TargetsAnnotation], obj.GetNamespace())
	return targets
}

// sourcePredicate passes the events of objects that are, or were, sources
// (or are meant to be), so only they are reconciled as sources; copies and
// other objects lead to sources through Watches.
var sourcePredicate = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return mentionsMirror(e.Object) },
	UpdateFunc:  func(e event.UpdateEvent) bool { return mentionsMirror(e.ObjectOld) || mentionsMirror(e.ObjectNew) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return mentionsMirror(e.Object) },
	GenericFunc: func(e event.GenericEvent) bool { return mentionsMirror(e.Object) },
}

func mentionsMirror(obj client.Object) bool {
	_, labelled := obj.GetLabels()[SourceLabel]
	_, annotated := obj.GetAnnotations()[TargetsAnnotation]
	return labelled || annotated
}
