package etcdfence

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencegate/fencegate/fence"
)

// The bounds of a fence's parts: fence = epoch<<RevisionBits | revision.
const (
	RevisionBits = 40
	MaxRevision  = 1<<RevisionBits - 1
	MaxEpoch     = 1<<(63-RevisionBits) - 1
)

// ErrFenceOverflow is matched (errors.Is) by the error Fence and Lock return
// when a revision or an epoch is out of its bounds (MaxRevision, MaxEpoch):
// the fence would not fit, and wrapping it would hand out a lower one.
// Nothing is admitted.
var ErrFenceOverflow = errors.New("etcdfence: fence out of bounds")

// ErrWrongCluster is matched by the error Lock returns when Options.ClusterID
// is set and the etcd cluster that granted the lock is another one: the
// epoch was configured for a different cluster. Nothing is admitted and the
// lock is released.
var ErrWrongCluster = errors.New("etcdfence: the lock was granted by another etcd cluster than Options.ClusterID")

// Fence composes the fence of a lock granted at revision in epoch:
// epoch<<RevisionBits | revision. It returns an error matching
// ErrFenceOverflow unless 0 <= epoch <= MaxEpoch and 1 <= revision <=
// MaxRevision.
func Fence(epoch, revision int64) (int64, error) {
	if epoch < 0 || epoch > MaxEpoch {
		return 0, fmt.Errorf("%w: epoch %d is outside 0..%d", ErrFenceOverflow, epoch, int64(MaxEpoch))
	}
	if revision < 1 || revision > MaxRevision {
		return 0, fmt.Errorf("%w: revision %d is outside 1..%d; bump the epoch and rebuild the cluster", ErrFenceOverflow, revision, int64(MaxRevision))
	}
	return epoch<<RevisionBits | revision, nil
}

// Admitter is what a Locker needs from the gate: *gate.Gate[TTx] of any
// transaction type is one.
type Admitter interface {
	Admit(ctx context.Context, token fence.Token) error
}

// Options configure a Locker. A nil *Options means all defaults.
type Options struct {
	// Epoch is the operator's number for the etcd cluster, bumped when the
	// cluster is rebuilt and its revisions restart (see the package doc).
	// 0 to MaxEpoch; defaults to 0.
	Epoch int64
	// ClusterID, when not 0, is the etcd cluster Epoch belongs to
	// (ResponseHeader.ClusterId, `etcdctl endpoint status`): a lock
	// granted by another cluster is released and refused with
	// ErrWrongCluster. Defaults to 0, no check.
	ClusterID uint64
	// Prefix starts the etcd key prefix of every lock: a resource's lock
	// lives under Prefix+resource. Defaults to "/fencegate/lock/".
	Prefix string
	// CleanupTimeout bounds the release of a lock that Lock failed to admit,
	// which runs even when Lock's ctx is cancelled. Defaults to 5s.
	CleanupTimeout time.Duration
}

// Locker grants etcd locks on one session, each admitted by the gate as it
// is granted. It is safe for concurrent use, but one session holds a
// resource's lock once: two Locks of one resource on one session are the
// same lock (the same key and fence), as with concurrency.Mutex.
type Locker struct {
	session *concurrency.Session
	gate    Admitter
	opts    Options
}

// New returns a Locker over session, admitting through g. It checks
// opts.Epoch.
func New(session *concurrency.Session, g Admitter, opts *Options) (*Locker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if session == nil || g == nil {
		return nil, errors.New("etcdfence: New needs a session and a gate")
	}
	if _, err := Fence(o.Epoch, 1); err != nil {
		return nil, err
	}
	if o.Prefix == "" {
		o.Prefix = "/fencegate/lock/"
	}
	if o.CleanupTimeout <= 0 {
		o.CleanupTimeout = 5 * time.Second
	}
	return &Locker{session: session, gate: g, opts: o}, nil
}

// Lock waits for the lock of resource (until ctx ends), then admits its
// token with the gate before returning it, so that every write under a lower
// fence is refused from now on, whatever its holder read. holder names this
// holder in the floor and the rejection log.
//
// If anything fails once the lock is granted (the fence does not fit, the
// cluster is the wrong one, the session has already expired, the gate
// refuses the token or cannot be reached), the lock is released (bounded by
// Options.CleanupTimeout) and the error returned: a *gate.StaleFenceError
// when a later grant of the resource was admitted first. Errors of bad names
// match fence.ErrInvalidInput, and nothing is locked.
func (l *Locker) Lock(ctx context.Context, resource, holder string) (*Lock, error) {
	if _, err := fence.NewToken(resource, holder, 1); err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(l.session, l.opts.Prefix+resource)
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("etcdfence: lock %s: %w", resource, err)
	}
	lock := &Lock{mutex: m, session: l.session}
	token, err := l.admit(ctx, m, resource, holder)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.CleanupTimeout)
		defer cancel()
		if uerr := lock.Unlock(cctx); uerr != nil {
			err = errors.Join(err, fmt.Errorf("etcdfence: the lock may not have been released (it ends with the session): %w", uerr))
		}
		return nil, err
	}
	lock.token = token
	return lock, nil
}

// admit composes the granted lock's token and admits it.
func (l *Locker) admit(ctx context.Context, m *concurrency.Mutex, resource, holder string) (fence.Token, error) {
	if id := m.Header().GetClusterId(); l.opts.ClusterID != 0 && id != l.opts.ClusterID {
		return fence.Token{}, fmt.Errorf("%w: got %x, want %x", ErrWrongCluster, id, l.opts.ClusterID)
	}
	n, err := Fence(l.opts.Epoch, createRevision(m))
	if err != nil {
		return fence.Token{}, err
	}
	token, err := fence.NewToken(resource, holder, n)
	if err != nil {
		return fence.Token{}, err
	}
	select {
	case <-l.session.Done():
		// The lease may be gone and a successor granted; admitting now
		// would be harmless, but the holder would hold nothing.
		return fence.Token{}, fmt.Errorf("etcdfence: lock %s: %w", resource, concurrency.ErrSessionExpired)
	default:
	}
	if err := l.gate.Admit(ctx, token); err != nil {
		return fence.Token{}, err
	}
	return token, nil
}

// createRevision is the CreateRevision of m's key, which m compares to tell
// its ownership (Mutex.IsOwner): the fence, read without a round trip.
func createRevision(m *concurrency.Mutex) int64 {
	cmp := m.IsOwner()
	if cr, ok := cmp.GetCompare().GetTargetUnion().(*pb.Compare_CreateRevision); ok {
		return cr.CreateRevision
	}
	return 0 // Fence refuses it
}

// Lock is a granted, admitted etcd lock. Its zero value is not usable; Lock
// values come from Locker.Lock.
type Lock struct {
	mutex   *concurrency.Mutex
	session *concurrency.Session
	token   fence.Token
}

// Token is the lock's fencegate token, already admitted: pass it to
// gate.Commit (or Do, or pgxgate.CommitBatch) with every write.
func (l *Lock) Token() fence.Token { return l.token }

// Key is the lock's etcd key.
func (l *Lock) Key() string { return l.mutex.Key() }

// Done is closed when the session behind the lock stops being kept alive
// (its lease expired, was revoked, or the session was closed or orphaned):
// the lock may then be granted to another holder, whose admitted fence
// refuses this one's writes. The holder should stop.
func (l *Lock) Done() <-chan struct{} { return l.session.Done() }

// Unlock releases the lock (deletes its key) within ctx. Writes under its
// token stay admitted until a later grant is admitted; a holder that must
// not write any more after Unlock simply does not. Unlocking twice returns
// concurrency.ErrLockReleased.
func (l *Lock) Unlock(ctx context.Context) error {
	key := l.mutex.Key()
	if err := l.mutex.Unlock(ctx); err != nil {
		return fmt.Errorf("etcdfence: unlock %q: %w", key, err)
	}
	return nil
}
