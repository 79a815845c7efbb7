package fxstore

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	objectsDesc = prometheus.NewDesc("fxkube_store_objects",
		"Objects held by the store.", []string{"store"}, nil)
	bytesDesc = prometheus.NewDesc("fxkube_store_bytes",
		"Estimated heap bytes the store's objects take, parts shared with its other objects counted once; 0 for a view, whose objects are its parent's.", []string{"store"}, nil)
	receivedDesc = prometheus.NewDesc("fxkube_store_received_total",
		"Objects received by the store from list and watch.", []string{"store"}, nil)
	errorsDesc = prometheus.NewDesc("fxkube_store_list_watch_errors_total",
		"Failed lists and dropped watches of the store.", []string{"store"}, nil)
	syncedDesc = prometheus.NewDesc("fxkube_store_synced",
		"1 when the store has finished its initial sync, else 0.", []string{"store"}, nil)
	syncDurationDesc = prometheus.NewDesc("fxkube_store_sync_duration_seconds",
		"Time from start until the store finished its initial sync.", []string{"store"}, nil)
	consumersDesc = prometheus.NewDesc("fxkube_store_consumers",
		"Requests sharing the store.", []string{"store"}, nil)
	viewDesc = prometheus.NewDesc("fxkube_store_view",
		"1 for a store served as a view of the store view_of (no informer of its own), else 0.", []string{"store", "view_of"}, nil)
	outsideShardDesc = prometheus.NewDesc("fxkube_store_shard_filtered_on_client_total",
		"Objects a sharded store received outside its shard and dropped: above 0, the API server does not apply shard selectors (ShardedListAndWatch off).", []string{"store"}, nil)
	shardOnClientDesc = prometheus.NewDesc("fxkube_store_shard_on_client",
		"1 for a sharded store whose shard is selected on the client, as the API server does not apply shard selectors (ShardedListAndWatch off): a view of the store of its whole spec, or dropping what arrives outside its shard; else 0.", []string{"store"}, nil)
	failingDesc = prometheus.NewDesc("fxkube_store_failing",
		"1 while the store's list/watch fails (it serves what it held, growing stale), else 0.", []string{"store"}, nil)
	staleDesc = prometheus.NewDesc("fxkube_store_stale_seconds",
		"How long the store's list/watch has failed: its objects are at least this old. 0 while it works.", []string{"store"}, nil)
	startedDesc = prometheus.NewDesc("fxkube_stores_started_total",
		"Stores started, with an informer of their own or as views.", nil, nil)
	releasedDesc = prometheus.NewDesc("fxkube_stores_released_total",
		"Stores released once no request held them: their informers stopped and their watches closed.", nil, nil)
	movedDesc = prometheus.NewDesc("fxkube_stores_moved_total",
		"Views moved, with no gap, off a parent whose last request went: to another parent, or to an informer of their own.", nil, nil)
	lateDesc = prometheus.NewDesc("fxkube_store_started_late",
		"1 when the store was started after every store had synced, on a first read of its kind, else 0.", []string{"store", "requested_by"}, nil)
)

// Describe implements prometheus.Collector; the registry reports its stores'
// metrics, labelled by store key, when registered with a Prometheus registry.
func (r *Registry) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{startedDesc, releasedDesc, movedDesc, objectsDesc, bytesDesc, receivedDesc, errorsDesc, syncedDesc, syncDurationDesc, consumersDesc, viewDesc, lateDesc, outsideShardDesc, shardOnClientDesc, failingDesc, staleDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (r *Registry) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(startedDesc, prometheus.CounterValue, float64(r.startedStores.Load()))
	ch <- prometheus.MustNewConstMetric(releasedDesc, prometheus.CounterValue, float64(r.released.Load()))
	ch <- prometheus.MustNewConstMetric(movedDesc, prometheus.CounterValue, float64(r.moved.Load()))
	r.mu.Lock()
	entries := append([]*entry(nil), r.order...)
	r.mu.Unlock()
	for _, e := range entries {
		info := e.info()
		info.Objects, info.Bytes = e.held()
		store := e.key.String()
		synced := 0.0
		if info.Status.Synced {
			synced = 1
		}
		e.mu.Lock()
		fails := e.watchFails
		e.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(objectsDesc, prometheus.GaugeValue, float64(info.Objects), store)
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(info.Bytes), store)
		ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(e.received.Load()), store)
		ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(fails), store)
		ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, synced, store)
		ch <- prometheus.MustNewConstMetric(syncDurationDesc, prometheus.GaugeValue, info.Status.SyncDuration.Seconds(), store)
		failing, stale := 0.0, 0.0
		if since := info.Status.FailingSince; !since.IsZero() {
			failing, stale = 1, time.Since(since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(failingDesc, prometheus.GaugeValue, failing, store)
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, stale, store)
		ch <- prometheus.MustNewConstMetric(consumersDesc, prometheus.GaugeValue, float64(len(info.Consumers)), store)
		view, viewOf := 0.0, ""
		if info.ViewOf != nil {
			view, viewOf = 1, info.ViewOf.String()
		}
		ch <- prometheus.MustNewConstMetric(viewDesc, prometheus.GaugeValue, view, store, viewOf)
		late, requestedBy := 0.0, ""
		if info.Late {
			late, requestedBy = 1, strings.Join(info.Consumers[:1], "")
		}
		ch <- prometheus.MustNewConstMetric(lateDesc, prometheus.GaugeValue, late, store, requestedBy)
		if e.key.Shard != "" {
			ch <- prometheus.MustNewConstMetric(outsideShardDesc, prometheus.CounterValue, float64(info.Status.OutsideShard), store)
			onClient := 0.0
			if info.Status.ShardOnClient {
				onClient = 1
			}
			ch <- prometheus.MustNewConstMetric(shardOnClientDesc, prometheus.GaugeValue, onClient, store)
		}
	}
}
