//go:build unix

package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PgBouncer is a throwaway PgBouncer in transaction pooling mode on a free
// loopback port, in front of one database of an existing Postgres server:
// the pooler users put between many clients and few server connections.
type PgBouncer struct {
	Dir  string // the temporary directory: config, log, pid file
	Port int

	cmd *exec.Cmd
}

// FindPgBouncer returns the pgbouncer binary, or an error naming where it
// looked.
func FindPgBouncer() (string, error) {
	for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("faults: pgbouncer not found (PATH, /usr/sbin); apt-get install pgbouncer")
}

// StartPgBouncer starts PgBouncer with pool_mode=transaction and
// serverConns server connections, serving database db of the Postgres at
// host:port (trust authentication) under the same name. PgBouncer refuses to
// run as root, so as root it runs as the "postgres" OS user.
// Unix only (it runs as another user through syscall.Credential).
func StartPgBouncer(ctx context.Context, host string, port int, db string, serverConns int) (*PgBouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("faults: running pgbouncer as root needs the postgres OS user: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	b := &PgBouncer{}
	if b.Dir, err = os.MkdirTemp("", "fencegate-pgbouncer-"); err != nil {
		return nil, err
	}
	if b.Port, err = freePort(); err != nil {
		b.remove()
		return nil, err
	}
	users := filepath.Join(b.Dir, "users.txt")
	ini := filepath.Join(b.Dir, "pgbouncer.ini")
	config := fmt.Sprintf(`[databases]
%[1]s = host=%[2]s port=%[3]d dbname=%[1]s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %[4]d
unix_socket_dir =
auth_type = trust
auth_file = %[5]s
pool_mode = transaction
default_pool_size = %[6]d
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
logfile = %[7]s
`, db, host, port, b.Port, users, serverConns, filepath.Join(b.Dir, "pgbouncer.log"))
	if err := os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o600); err != nil {
		b.remove()
		return nil, err
	}
	if err := os.WriteFile(ini, []byte(config), 0o600); err != nil {
		b.remove()
		return nil, err
	}
	if uid >= 0 {
		for _, p := range []string{b.Dir, users, ini} {
			if err := os.Chown(p, uid, gid); err != nil {
				b.remove()
				return nil, err
			}
		}
	}
	b.cmd = exec.Command(bin, ini)
	if uid >= 0 {
		b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	if err := b.cmd.Start(); err != nil {
		b.remove()
		return nil, fmt.Errorf("faults: start pgbouncer: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	// Ready once it accepts connections; a poll, since PgBouncer tells
	// nobody when it is listening.
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			b.remove()
			return nil, fmt.Errorf("faults: pgbouncer exited: %v\n%s", err, b.LogTail(20))
		default:
		}
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", b.Addr())
		if err == nil {
			conn.Close()
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Stop()
			return nil, fmt.Errorf("faults: pgbouncer did not listen on %s: %w\n%s", b.Addr(), err, b.LogTail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is PgBouncer's TCP address.
func (b *PgBouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port)) }

// URL returns a connection URL for database db through PgBouncer, with
// extra query parameters (for example "default_query_exec_mode=exec").
func (b *PgBouncer) URL(db, params string) string {
	u := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", b.Addr(), db)
	if params != "" {
		u += "&" + params
	}
	return u
}

// Stop ends PgBouncer and removes its directory.
func (b *PgBouncer) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
	}
	b.remove()
}

// LogTail returns the last n lines of PgBouncer's log.
func (b *PgBouncer) LogTail(n int) string {
	data, _ := os.ReadFile(filepath.Join(b.Dir, "pgbouncer.log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (b *PgBouncer) remove() { _ = os.RemoveAll(b.Dir) }
