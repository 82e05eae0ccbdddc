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
	"sort"
	"strconv"
	"strings"
	"time"
)

// Cluster is a throwaway Postgres cluster in a temporary directory, on a free
// loopback port, made with initdb and run with pg_ctl, so that the harness
// can crash it (pg_ctl restart -m immediate) without touching anyone else's
// server.
type Cluster struct {
	Dir  string // the temporary directory: data, socket, log
	Port int

	bin     string   // directory of initdb and pg_ctl
	runAs   []string // prefix that runs a command as the cluster's owner, or nil
	opts    string   // server options passed to pg_ctl -o
	logf    string
	data    string
	stopped bool
}

// StartCluster makes and starts a cluster. It needs initdb and pg_ctl (on
// PATH, or under /usr/lib/postgresql/*/bin). initdb refuses to run as root,
// so as root the cluster belongs to the "postgres" OS user and commands run
// through runuser (or su).
func StartCluster(ctx context.Context) (*Cluster, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("faults: running as root needs the postgres OS user: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if p, err := exec.LookPath("runuser"); err == nil {
			c.runAs = []string{p, "-u", "postgres", "--"}
		} else if p, err := exec.LookPath("su"); err == nil {
			c.runAs = []string{p, "postgres", "-s", "/bin/sh", "-c", `exec "$0" "$@"`}
		} else {
			return nil, errors.New("faults: running as root needs runuser or su to become postgres")
		}
	}
	c.Dir, err = os.MkdirTemp("", "fencegate-pg-")
	if err != nil {
		return nil, err
	}
	if uid >= 0 {
		if err := os.Chown(c.Dir, uid, gid); err != nil {
			c.remove()
			return nil, err
		}
	}
	c.data = filepath.Join(c.Dir, "data")
	c.logf = filepath.Join(c.Dir, "postgres.log")
	if out, err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		c.remove()
		return nil, fmt.Errorf("faults: initdb: %w\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		c.Port, err = freePort()
		if err != nil {
			c.remove()
			return nil, err
		}
		// wal_level=logical: the checker reads the commit order from a
		// logical replication slot (package observe).
		c.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200"+
			" -c wal_level=logical -c max_replication_slots=16 -c max_wal_senders=16", c.Port, c.Dir)
		out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-l", c.logf, "-o", c.opts, "-w", "-t", "30", "start")
		if err == nil {
			return c, nil
		}
		if attempt == 2 {
			c.remove()
			return nil, fmt.Errorf("faults: pg_ctl start: %w\n%s\n%s", err, out, c.LogTail(20))
		}
	}
}

// URL returns a connection URL for database db on the cluster, over TCP.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Addr is the server's TCP address.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)) }

// Restart crashes the server (immediate shutdown: no checkpoint, every
// backend killed, crash recovery on start, like a power cut of the process)
// and starts it again.
func (c *Cluster) Restart(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-l", c.logf, "-o", c.opts, "-m", "immediate", "-w", "-t", "60", "restart")
	if err != nil {
		return fmt.Errorf("faults: pg_ctl restart: %w\n%s\n%s", err, out, c.LogTail(20))
	}
	return nil
}

// Stop shuts the server down and removes the directory.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.run(ctx, "pg_ctl", "-D", c.data, "-m", "fast", "-w", "stop")
	if err != nil {
		_, err = c.run(ctx, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
	}
	c.remove()
	return err
}

// LogTail returns the last n lines of the server's log.
func (c *Cluster) LogTail(n int) string {
	b, _ := os.ReadFile(c.logf)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *Cluster) remove() { _ = os.RemoveAll(c.Dir) }

func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, c.runAs...), filepath.Join(c.bin, name)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = os.TempDir()
	// pg_ctl start leaves the server running with its output in the log
	// file; don't hand it our pipes, or Output would wait for the server.
	f, err := os.CreateTemp("", "fencegate-pgctl-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	out, _ := os.ReadFile(f.Name())
	return out, err
}

// findBin finds the directory that holds initdb and pg_ctl.
func findBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("faults: initdb and pg_ctl not found (PATH, /usr/lib/postgresql/*/bin)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
