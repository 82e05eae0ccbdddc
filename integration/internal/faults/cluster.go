package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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
	uid     int      // the cluster's owner (with runAs), else -1
	gid     int      // its group, else -1
	opts    string   // server options passed to pg_ctl -o
	logf    string
	data    string
	stopped bool
	disk    *Disk // the data directory's own filesystem (StartClusterOnDisk), or nil
	pmPID   int   // with disk: the running postmaster's pid
}

// StartCluster makes and starts a cluster. It needs initdb and pg_ctl (on
// PATH, or under /usr/lib/postgresql/*/bin). initdb refuses to run as root,
// so as root the cluster belongs to the "postgres" OS user and commands run
// through runuser (or su).
func StartCluster(ctx context.Context) (*Cluster, error) {
	c, err := initCluster(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// initCluster makes a cluster's directory and data, not yet started.
func initCluster(ctx context.Context) (*Cluster, error) {
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	if out, err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		c.remove()
		return nil, fmt.Errorf("faults: initdb: %w\n%s%s", err, out, reachHint("postgres", c.Dir, c.uid, c.gid))
	}
	return c, nil
}

// newCluster finds the binaries and the OS user and makes the directory.
func newCluster() (*Cluster, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, uid: -1, gid: -1}
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
	c.uid, c.gid = uid, gid
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
	return c, nil
}

// start starts the server on a free loopback port.
func (c *Cluster) start(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		var err error
		c.Port, err = freePort()
		if err != nil {
			return err
		}
		// wal_level=logical: the checker reads the commit order from a
		// logical replication slot (package observe).
		c.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200"+
			" -c wal_level=logical -c max_replication_slots=16 -c max_wal_senders=16", c.Port, c.Dir)
		out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-l", c.logf, "-o", c.opts, "-w", "-t", "30", "start")
		if err == nil {
			return nil
		}
		if attempt == 2 {
			return fmt.Errorf("faults: pg_ctl start: %w\n%s\n%s", err, out, c.LogTail(20))
		}
	}
}

// StartReplicated makes a primary and a streaming standby of it (initdb,
// then pg_basebackup -R), each a throwaway cluster like StartCluster's.
// With synchronous set, the primary acknowledges a commit only once the
// standby has flushed it (synchronous_standby_names = '*',
// synchronous_commit = on); otherwise replication is asynchronous and a
// failover may lose what was acknowledged. It returns once the standby
// streams (and, when synchronous, is the primary's synchronous standby).
func StartReplicated(ctx context.Context, synchronous bool) (primary, standby *Cluster, err error) {
	p, err := initCluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A primary whose WAL sender the harness kills (SIGKILL, a crash of a
	// child) must go down whole, not restart by itself: restarted, it
	// would serve, until it is killed, commits its standby never received
	// (a grant a synchronous commit was still waiting to replicate), and
	// the clients would see a history that the failover then loses.
	conf := []string{"synchronous_standby_names = ''", "synchronous_commit = on", "restart_after_crash = off"}
	if synchronous {
		conf[0] = "synchronous_standby_names = '*'"
	}
	if err := p.appendConf(conf...); err != nil {
		p.remove()
		return nil, nil, err
	}
	if err := p.start(ctx); err != nil {
		p.remove()
		return nil, nil, err
	}
	s, err := newCluster()
	if err != nil {
		_ = p.Stop()
		return nil, nil, err
	}
	fail := func(err error) (*Cluster, *Cluster, error) {
		_ = s.Stop()
		_ = p.Stop()
		return nil, nil, err
	}
	if out, err := s.run(ctx, "pg_basebackup", "-D", s.data, "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port),
		"-U", "postgres", "-X", "stream", "-R", "--no-sync"); err != nil {
		return fail(fmt.Errorf("faults: pg_basebackup: %w\n%s", err, out))
	}
	// Promoted, the standby must not wait for a standby of its own.
	if err := s.appendConf("synchronous_standby_names = ''"); err != nil {
		return fail(err)
	}
	if err := s.start(ctx); err != nil {
		return fail(err)
	}
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		return fail(err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND (sync_state = 'sync' OR NOT $1)`, synchronous).Scan(&n)
		if err != nil {
			return fail(err)
		}
		if n > 0 {
			return p, s, nil
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("faults: the standby never streamed (synchronous: %v): %w", synchronous, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WALSenderPID returns the process id of the primary's WAL sender, the
// process that streams to the standby: once it is stopped (SIGSTOP) the
// standby falls behind, and once it is killed what it had not sent is never
// sent.
func (c *Cluster) WALSenderPID(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_replication LIMIT 1`).Scan(&pid); err != nil {
		return 0, fmt.Errorf("faults: no WAL sender: %w", err)
	}
	return pid, nil
}

// appendConf adds settings at the end of postgresql.conf, where they win.
func (c *Cluster) appendConf(lines ...string) error {
	path := filepath.Join(c.data, "postgresql.conf")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n" + strings.Join(lines, "\n") + "\n")
	return errors.Join(err, f.Close())
}

// Kill stops the server the way a crash would (immediate shutdown), and
// leaves it down.
func (c *Cluster) Kill(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
	if err != nil {
		if _, serr := os.Stat(filepath.Join(c.data, "postmaster.pid")); errors.Is(serr, os.ErrNotExist) {
			return nil // down already: a crash it does not restart from (restart_after_crash off)
		}
		return fmt.Errorf("faults: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// Start starts a server that Kill stopped, on its old port, as a primary
// (a killed primary stays one).
func (c *Cluster) Start(ctx context.Context) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-l", c.logf, "-o", c.opts, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("faults: pg_ctl start: %w\n%s\n%s", err, out, c.LogTail(20))
	}
	return nil
}

// Promote makes a standby the primary and waits until it accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("faults: pg_ctl promote: %w\n%s\n%s", err, out, c.LogTail(20))
	}
	return nil
}

// SwitchPoint is the LSN at which a promoted standby's timeline left the
// old primary's: everything the old primary wrote before it is in the new
// primary, nothing after it is.
func (c *Cluster) SwitchPoint() (string, error) {
	files, _ := filepath.Glob(filepath.Join(c.data, "pg_wal", "*.history"))
	if len(files) == 0 {
		return "", errors.New("faults: no timeline history: the cluster was never promoted")
	}
	sort.Strings(files) // timeline ids are fixed-width hex
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) < 2 {
		return "", fmt.Errorf("faults: %s: no switch point in %q", files[len(files)-1], b)
	}
	return fields[1], nil
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

func (c *Cluster) remove() {
	if c.disk != nil {
		_ = c.disk.Close()
	}
	_ = os.RemoveAll(c.Dir)
}

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

// CanReplicate reports why StartReplicated cannot run here, or nil.
func CanReplicate() error {
	bin, err := findBin()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(bin, "pg_basebackup")); err != nil {
		return fmt.Errorf("faults: no pg_basebackup next to initdb: %w", err)
	}
	return nil
}

// findBin finds the directory that holds initdb and pg_ctl.
func findBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // the installation's own directory holds all its tools
		}
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

// freePort is a loopback port nothing listens on, for a server another
// process starts (Postgres, Patroni's REST API, etcd, MariaDB, PgBouncer).
// It is taken below the kernel's ephemeral range: a port from inside it
// (":0") can be taken between this check and the server's bind by the
// source port of any outgoing connection, which CI saw happen to a Patroni
// node's REST API under the suite's load. A port handed out once is not
// handed out again by this process, though its server may not have bound
// it yet.
func freePort() (int, error) {
	lo := ephemeralLow()
	for range 1000 {
		port := minFreePort + rand.IntN(lo-minFreePort)
		handedMu.Lock()
		taken := handed[port]
		handedMu.Unlock()
		if taken {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		_ = ln.Close()
		handedMu.Lock()
		handed[port] = true
		handedMu.Unlock()
		return port, nil
	}
	return 0, fmt.Errorf("faults: no free loopback port in [%d, %d)", minFreePort, lo)
}

// minFreePort is the lowest port freePort hands out: above the well-known
// and most registered servers' ports.
const minFreePort = 10000

var (
	handedMu sync.Mutex
	handed   = map[int]bool{} // ports freePort handed out
)

// ephemeralLow is the bottom of the kernel's ephemeral port range
// (Linux's default 32768 where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if lo, err := strconv.Atoi(f[0]); err == nil && lo > minFreePort+1000 {
			return lo
		}
	}
	return 32768
}
