package gate

import (
	"cmp"
	"context"
	"iter"

	"github.com/fencegate/fencegate/sqlstore"
)

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
func (g *Gate[TTx]) AllRejections(ctx context.Context, q RejectionQuery) iter.Seq2[sqlstore.Rejection, error] {
	return func(yield func(sqlstore.Rejection, error) bool) {
		q.Newest = false
		q.Limit = cmp.Or(max(q.Limit, 0), 100)
		for {
			page, err := g.Rejections(ctx, q)
			if err != nil {
				yield(sqlstore.Rejection{}, err)
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
