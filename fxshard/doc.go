// Package fxshard shares the keys of a controller out among its replicas:
// the hash space of a shard key is cut into buckets, and each bucket is
// owned by one replica at a time through a Kubernetes Lease, with fencing,
// so that no two replicas ever run one bucket's work at once.
//
// # Buckets
//
// A shard key is an object's uid or its namespace (fxstore.ShardByUID, fxstore.ShardByNamespace),
// hashed with FNV-1a 64-bit as the API server hashes it for a
// shardSelector (KEP-5866, k8s.io/apimachinery/pkg/sharding). Buckets cuts
// [0, 2^64) into n equal ranges (16 by default): Of gives an object's
// bucket, and Selector the sharding.Selector of a set of buckets, one
// shardRange per run of contiguous buckets, for the list and watch of a
// replica's share, evaluated on the client where the server does not.
//
// # Sharded stores and controllers
//
// Module gives an app its *Shards: the replica's Coordinator and what it
// hands buckets to. A module asks for a sharded store with For, by a spec
// and a shard key, and builds its controller with fxcontroller.New, as for
// any store:
//
//	func newController(shards *fxshard.Shards, c client.Client) (*fxcontroller.Controller, error) {
//		configMaps, err := fxshard.For[*corev1.ConfigMap](shards, fxstore.Spec{LabelSelector: "app=x"}, fxstore.ShardByUID)
//		if err != nil {
//			return nil, err
//		}
//		return fxcontroller.New("x", configMaps, &reconciler{configMaps: configMaps, client: c})
//	}
//
// A sharded store is one fxstore store per bucket held (fxstore.Spec.Shard:
// the API server sends each only its bucket's objects), asked for when the
// bucket is acquired and dropped when it is given up: one store per
// bucket, rather than one of all the buckets held, so that a bucket moves
// without the replica listing its other buckets again. Where the API
// server does not apply shard selectors (Shards.Run asks it first), each
// bucket's store is a view of one store of the whole spec instead: every
// object received once and held, rather than received once per bucket. The
// sharded store is an fxstore.Store whose reads and informer are the union
// of the buckets' stores; its Key is the whole spec's. A sharded controller runs
// on every replica; it drops requests for keys of buckets it does not
// hold, requeues those of a bucket whose store has not synced, and, when
// the replica gives a bucket up, lets no reconcile of its keys start and
// waits for those running (Handler.Releasing) before the Lease is given
// back. The secondary stores of a sharded controller are ordinary stores,
// whole on every replica: their objects may map to keys of any bucket.
//
// # Coordinator
//
// A Coordinator runs one replica's part. Its group, Config.Name in
// Config.Namespace, has a Lease per bucket, <name>-bucket-<i>, and one per
// live replica, <name>-member-<identity>; all carry the label
// LeaseLabel=<name>, by which each replica watches them. The timings are
// those of controller-runtime's leader election, LeaseDuration 15s,
// RenewDeadline 10s, RetryPeriod 2s, and the rules those of client-go's:
//
//   - Renewal. Every RetryPeriod (2s) a replica writes, at once, its member
//     Lease and each bucket Lease it holds.
//   - Observation. A replica times the others' Leases on its own clock,
//     from the moment it saw a record change, never by comparing their
//     renewTime with its clock, so that clock skew does not matter. A
//     Lease whose record has not changed for LeaseDuration (15s) from there
//     has expired. (The wait is the longer of this replica's LeaseDuration
//     and the one the holder wrote in the Lease, in whole seconds rounded
//     up.)
//   - Membership. The live members are those whose member Lease is not
//     expired, this replica included; a replica deletes its member Lease
//     when it stops, and the member Leases of crashed replicas are deleted
//     by the others once expired.
//   - Fair share. With R live members sorted by identity and B buckets,
//     member k's share is B/R, plus one for the first B%R members: 6, 5
//     and 5 of 16 for three members. A replica above its share gives back
//     the surplus: it calls Handler.Releasing, and once that returned
//     clears the Lease's holder, as client-go releases a Lease, so that
//     another replica takes it at once. A replica below its share takes
//     free buckets: those with no Lease, no holder, or an expired one (or
//     itself as holder: one it drained but could not release). It reads
//     the Lease afresh and writes itself into it with the Lease's
//     resourceVersion, so that of two replicas only one gets it.
//   - Fencing. A holder counts a bucket as held until RenewDeadline (10s)
//     after the start of its last successful renewal. Past it (renewals
//     failed, say from a network partition), or as soon as a renewal
//     finds another holder or the Lease deleted, Owns turns false,
//     Releasing is called and the holder stops renewing. The others wait
//     LeaseDuration (15s) from when they saw that renewal, which came after
//     its start: they take the bucket no sooner than LeaseDuration after
//     that start, at least LeaseDuration − RenewDeadline (5s) after the
//     holder called Releasing. Releasing's context ends then. A holder
//     clears a Lease's holder only after Releasing returned. A bucket Lease
//     seen deleted counts as changed then, so that those who saw it go
//     wait LeaseDuration while its holder finds out at its next renewal.
//
// What this gives, with the defaults (and LeaseDuration 3s, RenewDeadline
// 2s, RetryPeriod 250ms, as the tests run, in brackets):
//
//   - A clean hand-over, to even out the shares or when a replica stops,
//     takes the drain plus a few round trips: the others see the cleared
//     Lease through their watch and take it at once.
//   - A new replica gets its share within a RetryPeriod or two of joining,
//     plus the drains of what the others give back.
//   - A replica that crashes or is cut off keeps its buckets stopped from
//     RenewDeadline (10s [2s]) after its last renewal; the others take
//     them over LeaseDuration (15s [3s]) after they saw that renewal, plus
//     up to a RetryPeriod (2s [250ms]) until they look again: about 17s [3.3s].
//   - A stopping replica (Run's context ended) drains and releases every
//     bucket, deletes its member Lease, and returns once every Releasing
//     has returned: within LeaseDuration (15s [3s]), plus a request's
//     timeout, when Releasing keeps to its context.
//
// In use, a Handler starts a bucket's work and drains it, and the work
// checks Owns, an atomic load, before each piece:
//
//	c, err := fxshard.New(kube, fxshard.HandlerFuncs{
//		AcquiredFunc:  func(bucket int) { /* start the bucket's work */ },
//		ReleasingFunc: func(ctx context.Context, bucket int) { /* stop it; wait for what is in flight */ },
//	}, fxshard.Config{Namespace: "operators", Name: "rollout"})
//	...
//	go c.Run(ctx)
//	...
//	bucket, _ := c.Buckets().Of(obj, fxstore.ShardByUID)
//	if !c.Owns(bucket) {
//		return // another replica's
//	}
//
// Identities must be unique among the running replicas: a replica takes
// back at once a bucket whose Lease names its identity.
//
// Every replica of a group must use the same Buckets: changing it means a
// new Name. A replica sends (held buckets + 1) writes every RetryPeriod,
// and keeps one watch: with the defaults, 16 buckets and any number of
// replicas cost the API server about 8 writes a second, plus one per
// replica every 2s; the client's rate limit (rest.Config.QPS, 5 by
// default in client-go) must leave room for them.
//
// ReadGroup reads a group from its Leases, as the API server has them:
// each bucket's holder and its transitions, and the members with the
// buckets they hold. The app's `describe --cluster` prints it, with the
// objects of each bucket.
package fxshard
