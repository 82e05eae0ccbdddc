package guard

import (
	"context"
	"fmt"
)

// MySQL and MariaDB have no guard yet (the package doc says why): every
// call but List fails with ErrUnsupported, and List finds none.
var errMySQL = fmt.Errorf("%w: MySQL/MariaDB: no sound per-transaction proof is available to a trigger (see the guard package doc)", ErrUnsupported)

func (a *Admin) mysqlInstall(context.Context, Spec) (Guard, error) { return Guard{}, errMySQL }
func (a *Admin) mysqlSQL(context.Context, Spec) (Migration, error) { return Migration{}, errMySQL }
func (a *Admin) mysqlRemove(context.Context, string) error         { return errMySQL }
func (a *Admin) mysqlList(context.Context) ([]Guard, error)        { return nil, nil }
