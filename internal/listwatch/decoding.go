package listwatch

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/decode"
)

// Decoding lists and watches a store's objects of a built-in kind as
// protobuf, through a REST client of its own on the connection's HTTP
// client. Once told a decoder (DecodeWith), it decodes through it; until
// then, as controller-runtime's client does.
type Decoding struct {
	rest       rest.Interface
	serializer *decode.Serializer
	key        fxstore.Key
	resource   string
	namespaced bool
	newList    func() client.ObjectList
}

var _ decode.Target = (*Decoding)(nil)

// NewDecoding returns a ListerWatcher of the objects key selects, of
// resource (namespaced or not), through cfg and hc, with scheme's types.
func NewDecoding(cfg *rest.Config, hc *http.Client, scheme *k8sruntime.Scheme, key fxstore.Key, resource string, namespaced bool) (*Decoding, error) {
	newList, err := Lists(scheme, key)
	if err != nil {
		return nil, err
	}
	gv := key.Kind.GroupVersion()
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.ContentType = k8sruntime.ContentTypeProtobuf
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	s := decode.NewSerializer(scheme, key.Kind)
	c.NegotiatedSerializer = s
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	return &Decoding{rest: rc, serializer: s, key: key, resource: resource, namespaced: namespaced, newList: newList}, nil
}

// DecodeWith implements decode.Target.
func (l *Decoding) DecodeWith(d *decode.Decoder) { l.serializer.Use(d) }

func (l *Decoding) options(o metav1.ListOptions) *metav1.ListOptions {
	o.LabelSelector, o.FieldSelector, o.ShardSelector = l.key.LabelSelector, l.key.FieldSelector, l.key.Shard
	return &o
}

func (l *Decoding) request(o metav1.ListOptions) *rest.Request {
	ns := ""
	if l.namespaced {
		ns = l.key.Namespace
	}
	return l.rest.Get().Namespace(ns).Resource(l.resource).VersionedParams(l.options(o), metav1.ParameterCodec)
}

// ListWithContext implements cache.ListerWatcherWithContext.
func (l *Decoding) ListWithContext(ctx context.Context, o metav1.ListOptions) (k8sruntime.Object, error) {
	list := l.newList()
	if err := l.request(o).Do(ctx).Into(list); err != nil {
		return nil, err
	}
	return list, nil
}

// WatchWithContext implements cache.ListerWatcherWithContext.
func (l *Decoding) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return l.request(o).Watch(ctx)
}

// List implements cache.Lister.
func (l *Decoding) List(o metav1.ListOptions) (k8sruntime.Object, error) {
	return l.ListWithContext(context.Background(), o)
}

// Watch implements cache.Watcher.
func (l *Decoding) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}
