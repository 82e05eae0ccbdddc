package gate

import (
	"cmp"
	"context"
	"iter"
)

// NewToken builds the token of a lock granted outside fencegate (etcd,
// Consul, ZooKeeper, a Kubernetes Lease): resource names the guarded thing,
// holder who was granted it, and fence the lock service's number for that
// grant, which must be strictly greater for every later grant of resource
// and never reused (see "Fences from outside" in the package doc). It checks
// what Token.Validate checks and returns an error matching ErrInvalidInput
// for a bad name or a fence below 1; nothing is written either way.
//
// A token from NewToken is admitted at once with Admit, before the holder
// reads anything its writes depend on.
func NewToken(resource, holder string, fence int64) (Token, error) {
	t := Token{Resource: resource, Holder: holder, Fence: fence}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// AllRejections reads the rejection log from q.AfterSeq on, oldest first,
// a page of q.Limit records (100 when 0) at a time, each page after the
// last record's Seq, until a page comes back short: every record logged
// before the last page was read, once, in order. q.Newest is ignored.
// Counting is ranging:
//
//	n := 0
//	for _, err := range g.AllRejections(ctx, gate.RejectionQuery{Resource: "orders/42"}) {
//		if err != nil {
//			return err
//		}
//		n++
//	}
//
// A failed read is yielded as the error, and the iteration stops.
func (g *Gate[TTx]) AllRejections(ctx context.Context, q RejectionQuery) iter.Seq2[Rejection, error] {
	return func(yield func(Rejection, error) bool) {
		q.Newest = false
		q.Limit = cmp.Or(max(q.Limit, 0), 100)
		for {
			page, err := g.Rejections(ctx, q)
			if err != nil {
				yield(Rejection{}, err)
				return
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
			}
			if len(page) < q.Limit {
				return
			}
			q.AfterSeq = page[len(page)-1].Seq
		}
	}
}
