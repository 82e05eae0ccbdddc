package guard

import (
	"context"
	"fmt"
)

const myBypassList = `
SELECT seq, table_name, op, resource, role_name FROM fencegate_guard_bypass WHERE seq > ? ORDER BY seq`

func isMySQLRefused(err error) bool { return false }

func (a *Admin) mysqlInstall(ctx context.Context, s Spec) (Guard, error) {
	return Guard{}, fmt.Errorf("%w: MySQL/MariaDB guards are not built yet", ErrUnsupported)
}

func (a *Admin) mysqlSQL(ctx context.Context, s Spec) (Migration, error) {
	return Migration{}, fmt.Errorf("%w: MySQL/MariaDB guards are not built yet", ErrUnsupported)
}

func (a *Admin) mysqlRemove(ctx context.Context, table string) error {
	return fmt.Errorf("%w: MySQL/MariaDB guards are not built yet", ErrUnsupported)
}

func (a *Admin) mysqlList(ctx context.Context) ([]Guard, error) { return nil, nil }
