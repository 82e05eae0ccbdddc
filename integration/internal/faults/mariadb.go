package faults

import (
	"context"
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

	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// MariaDB is a throwaway mariadbd in a temporary directory, on a free
// loopback port, its data directory made with mariadb-install-db, so that
// the harness can crash it (SIGKILL, then a start on the same data
// directory: InnoDB crash recovery) without touching anyone else's server.
// root connects from 127.0.0.1 without a password.
type MariaDB struct {
	Dir  string // the temporary directory: data, socket, log
	Port int

	bin  string // mariadbd
	args []string
	logf string
	cmd  *exec.Cmd
	done chan struct{}
}

// CanMariaDB reports why a throwaway MariaDB cannot be made here (nil when
// it can): mariadbd or mariadb-install-db missing.
func CanMariaDB() error {
	_, _, err := mariaBins()
	return err
}

func mariaBins() (server, install string, err error) {
	find := func(name string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"} {
			if p := filepath.Join(dir, name); isExec(p) {
				return p, nil
			}
		}
		return "", fmt.Errorf("faults: a throwaway MariaDB needs %s, not found on PATH or in /usr/sbin", name)
	}
	if server, err = find("mariadbd"); err != nil {
		return "", "", err
	}
	install, err = find("mariadb-install-db")
	return server, install, err
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// StartMariaDB makes a data directory and starts a server on it. mariadbd
// refuses to run as root, so as root the data belongs to the "mysql" OS user
// (mariadbd --user=mysql drops to it).
func StartMariaDB(ctx context.Context) (*MariaDB, error) {
	server, install, err := mariaBins()
	if err != nil {
		return nil, err
	}
	m := &MariaDB{bin: server}
	if m.Dir, err = os.MkdirTemp("", "fencegate-mariadb-"); err != nil {
		return nil, err
	}
	var asUser []string
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			m.remove()
			return nil, fmt.Errorf("faults: running as root needs the mysql OS user: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chown(m.Dir, uid, gid); err != nil {
			m.remove()
			return nil, err
		}
		asUser = []string{"--user=mysql"}
	}
	data := filepath.Join(m.Dir, "data")
	m.logf = filepath.Join(m.Dir, "mariadbd.log")
	// A small redo log and buffer pool: a history writes little, and
	// install-db creates the log files at their full size.
	small := []string{"--innodb-log-file-size=16M", "--innodb-buffer-pool-size=32M"}
	// Its temporary files in its own directory, not TMPDIR, which the
	// mysql user may not be allowed to write ("Errcode: 13").
	small = append(small, "--tmpdir="+m.Dir)
	iargs := append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}, asUser...)
	cmd := exec.CommandContext(ctx, install, append(iargs, small...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		m.remove()
		return nil, fmt.Errorf("faults: mariadb-install-db: %w\n%s%s", err, errorLines(out), reachHint("mysql", m.Dir, uid, gid))
	}
	m.args = append([]string{"--no-defaults", "--datadir=" + data, "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(m.Dir, "sock"), "--pid-file=" + filepath.Join(m.Dir, "pid"),
		"--log-error=" + m.logf, "--max-connections=300",
		// Durable commits, as a production server should have them: what
		// was acknowledged must survive the crash.
		"--innodb-flush-log-at-trx-commit=1"}, append(asUser, small...)...)
	for attempt := 0; ; attempt++ {
		if m.Port, err = freePort(); err != nil {
			m.remove()
			return nil, err
		}
		if err = m.start(ctx); err == nil {
			return m, nil
		}
		if attempt == 2 {
			m.remove()
			return nil, err
		}
	}
}

// start runs mariadbd on m's port and waits until it answers.
func (m *MariaDB) start(ctx context.Context) error {
	m.cmd = exec.Command(m.bin, append(m.args, "--port="+strconv.Itoa(m.Port))...)
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("faults: mariadbd: %w", err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(m.cmd, m.done)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		err := m.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("faults: mariadbd exited: %v\n%s", err, m.LogTail(20))
		case <-ctx.Done():
			m.kill()
			return fmt.Errorf("faults: mariadbd did not answer: %v\n%s", err, m.LogTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *MariaDB) ping(ctx context.Context) error {
	d, err := mysql.Open(ctx, m.URL("mysql"))
	if err != nil {
		return err
	}
	return d.Close()
}

// URL is a mysql:// URL for database db as root.
func (m *MariaDB) URL(db string) string {
	return fmt.Sprintf("mysql://root@%s/%s", m.Addr(), db)
}

// Addr is the server's host:port.
func (m *MariaDB) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Port)) }

// CreateDatabase creates database name and returns its URL.
func (m *MariaDB) CreateDatabase(ctx context.Context, name string) (string, error) {
	d, err := mysql.Open(ctx, m.URL("mysql"))
	if err != nil {
		return "", err
	}
	defer d.Close()
	if _, err := d.DB().ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return m.URL(name), nil
}

// Crash kills mariadbd with SIGKILL (no shutdown, no flush) and starts it
// again on the same data directory and port, waiting until InnoDB has
// recovered and the server answers.
func (m *MariaDB) Crash(ctx context.Context) error {
	m.kill()
	return m.start(ctx)
}

func (m *MariaDB) kill() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// Stop kills the server and removes its directory.
func (m *MariaDB) Stop() error {
	m.kill()
	m.remove()
	return nil
}

// LogTail returns the last n lines of the server's error log.
func (m *MariaDB) LogTail(n int) string {
	b, err := os.ReadFile(m.logf)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (m *MariaDB) remove() { _ = os.RemoveAll(m.Dir) }

// errorLines keeps the [ERROR] lines of mariadb-install-db's output, which
// say what went wrong; the rest is advice for another setting. All of it
// when there is none.
func errorLines(out []byte) string {
	var keep []string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "[ERROR]") {
			keep = append(keep, line)
		}
	}
	if len(keep) == 0 {
		return string(out)
	}
	return strings.Join(keep, "")
}
