package fence

import (
	"errors"
	"fmt"
)

// ErrInvalidInput is matched (errors.Is) by every error fencegate returns for
// input it refuses before touching the database: a bad name, a non-positive
// fence, malformed token text. Nothing is written when it is returned. The
// concrete type is *InvalidInputError.
var ErrInvalidInput = errors.New("fencegate: invalid input")

// InvalidInputError describes refused input. It matches ErrInvalidInput.
type InvalidInputError struct {
	Field  string // which input: "resource", "holder", "fence", "token", ...
	Reason string // what is wrong with it, in words
}

// Error says which input was refused and why.
func (e *InvalidInputError) Error() string {
	return fmt.Sprintf("fencegate: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InvalidInputError) Is(target error) bool { return target == ErrInvalidInput }

func invalidf(field, format string, args ...any) error {
	return &InvalidInputError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
