package gate

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
