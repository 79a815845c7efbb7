package fxshard

import "context"

// Handler starts and stops the work of buckets as the Coordinator acquires
// and gives them up. For each bucket the calls alternate, Acquired, then
// Releasing, then perhaps Acquired again, each after the previous one
// returned; calls for different buckets may run at the same time.
type Handler interface {
	// Acquired is called once this replica holds bucket; Owns(bucket) is
	// true from then on. It must not block: it starts the bucket's work
	// and returns, as the Coordinator renews its Leases between calls.
	Acquired(bucket int)

	// Releasing is called when this replica gives bucket up or may have
	// lost it; Owns(bucket) is false from before the call. It returns only
	// once nothing of the bucket runs any more: no work starts, and work
	// in flight has finished. ctx ends when another replica may take the
	// bucket over, at least LeaseDuration − RenewDeadline after the call;
	// work still running then must be cancelled, and Releasing return.
	Releasing(ctx context.Context, bucket int)
}

// HandlerFuncs is a Handler made of functions; a nil one does nothing.
type HandlerFuncs struct {
	AcquiredFunc  func(bucket int)
	ReleasingFunc func(ctx context.Context, bucket int)
}

var _ Handler = HandlerFuncs{}

// Acquired calls AcquiredFunc, if not nil.
func (h HandlerFuncs) Acquired(bucket int) {
	if h.AcquiredFunc != nil {
		h.AcquiredFunc(bucket)
	}
}

// Releasing calls ReleasingFunc, if not nil.
func (h HandlerFuncs) Releasing(ctx context.Context, bucket int) {
	if h.ReleasingFunc != nil {
		h.ReleasingFunc(ctx, bucket)
	}
}
