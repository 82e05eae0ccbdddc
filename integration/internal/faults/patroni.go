//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PatroniOptions configures StartPatroni.
type PatroniOptions struct {
	Nodes       int  // Postgres nodes, 3 when 0
	EtcdMembers int  // etcd members, 1 when 0
	Synchronous bool // Patroni's synchronous_mode (and synchronous_mode_strict)
	// Callback is a program Patroni runs on every role change and start
	// (postgresql.callbacks on_role_change and on_start), with the
	// arguments action, role, cluster; "{port}" in it is the node's
	// Postgres port, "{bin}" the directory of its binaries (psql).
	Callback string
}

// Patroni is a throwaway high-availability Postgres: Nodes Postgres
// servers, each managed by a patroni process, with a throwaway etcd as
// their DCS, all on loopback ports in temporary directories. Each patroni
// reaches each etcd member through a Gate of its own, so that a node can be
// cut from etcd alone. Patroni and Postgres run as the cluster's OS user
// (postgres, as root), like Cluster's servers.
type Patroni struct {
	Dir   string
	Nodes []*PatroniNode
	Etcd  []*EtcdMember

	opts PatroniOptions
	mu   sync.Mutex
}

// PatroniNode is one Postgres server and its patroni.
type PatroniNode struct {
	Name     string
	Port     int // Postgres
	RestPort int // Patroni's REST API
	Gates    []*Gate
	pg       *Cluster // its directory, binaries and OS user; patroni runs the server
	config   string
	log      string
	cmd      *exec.Cmd
	done     chan struct{}
}

// EtcdMember is one etcd server.
type EtcdMember struct {
	Name       string
	ClientPort int
	PeerPort   int
	args       []string
	dir        string
	log        string
	cmd        *exec.Cmd
	done       chan struct{}
}

// CanPatroni reports why StartPatroni cannot run here, or nil.
func CanPatroni() error {
	if err := CanReplicate(); err != nil {
		return err
	}
	for _, p := range []string{"patroni", "patronictl", "etcd"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("faults: no %s on PATH (Debian: apt-get install patroni etcd-server): %w", p, err)
		}
	}
	return nil
}

// StartPatroni starts etcd, then the patroni nodes, and returns once one of
// them leads and every other one replicates from it (and, when
// synchronous, one is its synchronous standby). On error everything it
// started is stopped.
func StartPatroni(ctx context.Context, o PatroniOptions) (_ *Patroni, err error) {
	o.Nodes, o.EtcdMembers = cmpOr(o.Nodes, 3), cmpOr(o.EtcdMembers, 1)
	p := &Patroni{opts: o}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	if p.Dir, err = os.MkdirTemp("", "fencegate-patroni-"); err != nil {
		return nil, err
	}
	if err := p.startEtcd(ctx); err != nil {
		return nil, err
	}
	for i := range o.Nodes {
		if err := p.addNode(i); err != nil {
			return nil, err
		}
	}
	for _, n := range p.Nodes {
		if err := n.Start(); err != nil {
			return nil, err
		}
	}
	if _, err := p.WaitHealthy(ctx, ""); err != nil {
		return nil, err
	}
	return p, nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func (p *Patroni) startEtcd(ctx context.Context) error {
	var initial []string
	for i := range p.opts.EtcdMembers {
		cp, err := freePort()
		if err != nil {
			return err
		}
		pp, err := freePort()
		if err != nil {
			return err
		}
		m := &EtcdMember{Name: fmt.Sprintf("etcd%d", i), ClientPort: cp, PeerPort: pp}
		m.dir = filepath.Join(p.Dir, m.Name)
		m.log = m.dir + ".log"
		initial = append(initial, fmt.Sprintf("%s=http://127.0.0.1:%d", m.Name, pp))
		p.Etcd = append(p.Etcd, m)
	}
	for _, m := range p.Etcd {
		client := fmt.Sprintf("http://127.0.0.1:%d", m.ClientPort)
		peer := fmt.Sprintf("http://127.0.0.1:%d", m.PeerPort)
		// Timeouts for a loaded machine: a slow heartbeat must not make
		// the members elect a new leader all the time.
		m.args = []string{"--name", m.Name, "--data-dir", m.dir,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "fencegate", "--heartbeat-interval", "200", "--election-timeout", "2000",
			"--logger", "zap", "--log-outputs", m.log}
		if err := m.Start(); err != nil {
			return err
		}
	}
	for _, m := range p.Etcd {
		if err := waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", m.ClientPort), `"true"`); err != nil {
			return fmt.Errorf("faults: etcd %s never became healthy: %w\n%s", m.Name, err, tail(m.log, 20))
		}
	}
	return nil
}

// Start starts a member that Kill stopped, on its old data directory.
func (m *EtcdMember) Start() error {
	m.cmd = exec.Command("etcd", m.args...)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return start(m.cmd, &m.done)
}

// Kill stops the member with SIGKILL and waits until it is gone.
func (m *EtcdMember) Kill() { kill(m.cmd, m.done) }

func start(cmd *exec.Cmd, done *chan struct{}) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("faults: starting %s: %w", cmd.Path, err)
	}
	ch := make(chan struct{})
	*done = ch
	go func() {
		_ = cmd.Wait()
		close(ch)
	}()
	return nil
}

func kill(cmd *exec.Cmd, done chan struct{}) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

func (p *Patroni) addNode(i int) error {
	pg, err := newCluster()
	if err != nil {
		return err
	}
	n := &PatroniNode{Name: fmt.Sprintf("pg%d", i), pg: pg}
	p.Nodes = append(p.Nodes, n)
	if n.Port, err = freePort(); err != nil {
		return err
	}
	pg.Port = n.Port
	if n.RestPort, err = freePort(); err != nil {
		return err
	}
	var hosts []string
	for _, m := range p.Etcd {
		g, err := NewGate(fmt.Sprintf("127.0.0.1:%d", m.ClientPort))
		if err != nil {
			return err
		}
		n.Gates = append(n.Gates, g)
		hosts = append(hosts, g.Addr())
	}
	n.config = filepath.Join(pg.Dir, "patroni.yml")
	n.log = filepath.Join(pg.Dir, "patroni.log")
	if err := os.WriteFile(n.config, []byte(p.nodeConfig(n, hosts)), 0o644); err != nil {
		return err
	}
	return nil
}

// nodeConfig is a node's patroni.yml (JSON is YAML). Short timeouts, so
// that a history sees failovers within seconds: the leader key lives 10 s,
// Patroni looks every second, and gives up on etcd after 3 s.
func (p *Patroni) nodeConfig(n *PatroniNode, hosts []string) string {
	callbacks := map[string]string{}
	if p.opts.Callback != "" {
		cb := strings.NewReplacer("{port}", strconv.Itoa(n.Port), "{bin}", n.pg.bin).Replace(p.opts.Callback)
		callbacks["on_role_change"], callbacks["on_start"] = cb, cb
	}
	params := map[string]any{
		"wal_level": "logical", "max_connections": 200, "max_replication_slots": 16,
		"max_wal_senders": 16, "wal_log_hints": "on", "hot_standby": "on", "synchronous_commit": "on",
	}

	hba := []string{"local all all trust", "host all all 127.0.0.1/32 trust", "host replication all 127.0.0.1/32 trust"}
	cfg := map[string]any{
		"scope":   "fencegate",
		"name":    n.Name,
		"log":     map[string]any{"dir": filepath.Dir(n.log), "file_num": 1, "level": "INFO"},
		"restapi": map[string]any{"listen": fmt.Sprintf("127.0.0.1:%d", n.RestPort), "connect_address": fmt.Sprintf("127.0.0.1:%d", n.RestPort)},
		"etcd3":   map[string]any{"hosts": hosts, "use_proxies": true, "protocol": "http"},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl": 10, "loop_wait": 1, "retry_timeout": 3,
				"maximum_lag_on_failover": 1 << 30,
				"synchronous_mode":        p.opts.Synchronous,
				"synchronous_mode_strict": p.opts.Synchronous,
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"parameters":    params,
				},
			},
			"initdb": []any{map[string]string{"encoding": "UTF8"}, map[string]string{"auth": "trust"}, "no-sync"},
		},
		"postgresql": map[string]any{
			"listen":          fmt.Sprintf("127.0.0.1:%d", n.Port),
			"connect_address": fmt.Sprintf("127.0.0.1:%d", n.Port),
			"data_dir":        n.pg.data,
			"bin_dir":         n.pg.bin,
			"pgpass":          filepath.Join(n.pg.Dir, "pgpass"),
			"pg_hba":          hba,
			"remove_data_directory_on_rewind_failure":     true,
			"remove_data_directory_on_diverged_timelines": true,
			"authentication": map[string]any{
				"superuser":   map[string]string{"username": "postgres"},
				"replication": map[string]string{"username": "postgres"},
				"rewind":      map[string]string{"username": "postgres"},
			},
			"parameters": map[string]any{"unix_socket_directories": n.pg.Dir},
			"callbacks":  callbacks,
		},
		"tags": map[string]any{},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return string(b)
}

// Start starts the node's patroni (which starts its Postgres).
func (n *PatroniNode) Start() error {
	n.cmd = exec.Command("patroni", n.config)
	n.cmd.Dir = n.pg.Dir
	// Patroni's Postgres detaches from patroni (it survives patroni's
	// death, as in production); the patroni process itself is killed with
	// the test.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if n.pg.uid >= 0 {
		n.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(n.pg.uid), Gid: uint32(n.pg.gid)}
		n.cmd.Env = append(os.Environ(), "HOME="+n.pg.Dir)
	}
	f, err := os.OpenFile(n.log+".out", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	n.cmd.Stdout, n.cmd.Stderr = f, f
	return start(n.cmd, &n.done)
}

// KillPatroni stops the node's patroni with SIGKILL, leaving its Postgres
// running (as a crashed HA agent does).
func (n *PatroniNode) KillPatroni() { kill(n.cmd, n.done) }

// KillPostgres stops the node's postmaster with SIGKILL (its backends go
// with it: they exit when the postmaster is gone) and waits (a minute at
// most) until patroni, still running, has started another one.
func (n *PatroniNode) KillPostgres(ctx context.Context) error {
	pid, err := n.postmasterPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if now, err := n.postmasterPID(); err == nil && now != pid {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("faults: patroni never started %s's Postgres again: %w\n%s", n.Name, ctx.Err(), n.LogTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StopWALSenders stops (SIGSTOP) the node's WAL senders, so that its
// replicas fall behind while it goes on acknowledging commits (with
// asynchronous replication), and returns their pids.
func (n *PatroniNode) StopWALSenders(ctx context.Context) ([]int, error) {
	conn, err := pgx.Connect(ctx, n.URL("postgres"))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_replication`)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("faults: %s has no WAL sender", n.Name)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil, err
		}
	}
	return pids, nil
}

// Crash kills the node whole: its patroni (SIGKILL), the given processes
// (SIGKILL: WAL senders StopWALSenders stopped, so that what they had not
// sent is never sent) and its Postgres (immediate shutdown). Start brings
// it back, and patroni makes it a replica of whoever leads then.
func (n *PatroniNode) Crash(ctx context.Context, also []int) error {
	n.KillPatroni()
	for _, pid := range also {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := n.pg.run(ctx, "pg_ctl", "-D", n.pg.data, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("faults: pg_ctl stop -m immediate on %s: %w\n%s", n.Name, err, out)
	}
	return nil
}

func (n *PatroniNode) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.pg.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("faults: %s has no running postmaster: %w", n.Name, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// CutFromEtcd makes every gate between the node and etcd refuse and cut
// connections (cut true), or let them through again.
func (n *PatroniNode) CutFromEtcd(cut bool) {
	for _, g := range n.Gates {
		g.Block(cut)
	}
}

// BinDir is the directory of the node's Postgres binaries.
func (n *PatroniNode) BinDir() string { return n.pg.bin }

// URL is a connection URL for database db on this node alone.
func (n *PatroniNode) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.Port, db)
}

// LogTail returns the last lines of the node's patroni and Postgres logs.
func (n *PatroniNode) LogTail(lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s patroni:\n%s\n%s\n", n.Name, tail(n.log+".out", lines), tail(filepath.Join(filepath.Dir(n.log), "patroni.log"), lines))
	logs, _ := filepath.Glob(filepath.Join(n.pg.data, "log", "*"))
	for _, l := range logs {
		fmt.Fprintf(&b, "--- %s %s:\n%s\n", n.Name, filepath.Base(l), tail(l, lines))
	}
	return b.String()
}

// URL is a multi-host connection URL for database db naming every node,
// with target_session_attrs=read-write: a client connects to whichever
// node is the primary now. It is the URL form of the keyword/value DSN
// KeywordDSN returns.
func (p *Patroni) URL(db string) string {
	var hosts []string
	for _, n := range p.Nodes {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", n.Port))
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2", strings.Join(hosts, ","), db)
}

// KeywordDSN is URL's DSN in keyword/value form.
func (p *Patroni) KeywordDSN(db string) string {
	var hosts, ports []string
	for _, n := range p.Nodes {
		hosts, ports = append(hosts, "127.0.0.1"), append(ports, strconv.Itoa(n.Port))
	}
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=2",
		strings.Join(hosts, ","), strings.Join(ports, ","), db)
}

// Member is one node as Patroni's REST API /cluster reports it.
type Member struct {
	Name     string `json:"name"`
	Role     string `json:"role"` // leader, sync_standby, replica
	State    string `json:"state"`
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"`
}

// Members asks the nodes' REST APIs (the first that answers) for the
// cluster's members.
func (p *Patroni) Members(ctx context.Context) ([]Member, error) {
	var last error
	for _, n := range p.Nodes {
		var c struct {
			Members []Member `json:"members"`
		}
		if last = getJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/cluster", n.RestPort), &c); last == nil {
			return c.Members, nil
		}
	}
	return nil, last
}

// Leader returns the node that leads now, or nil.
func (p *Patroni) Leader(ctx context.Context) *PatroniNode {
	ms, err := p.Members(ctx)
	if err != nil {
		return nil
	}
	for _, m := range ms {
		if m.Role == "leader" && m.State == "running" {
			return p.Node(m.Name)
		}
	}
	return nil
}

// Candidate returns a node a switchover from the leader may go to: in
// synchronous mode the synchronous standby (Patroni refuses any other).
func (p *Patroni) Candidate(ctx context.Context) (*PatroniNode, error) {
	ms, err := p.Members(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.Role == "sync_standby" || m.Role == "replica" && !p.opts.Synchronous {
			return p.Node(m.Name), nil
		}
	}
	return nil, fmt.Errorf("faults: no switchover candidate among %v", ms)
}

// Node returns the node called name, or nil.
func (p *Patroni) Node(name string) *PatroniNode {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitHealthy waits (at most two minutes, or ctx) until a node other than
// notLeader ("" for any) leads, runs, and every other node replicates
// (with one synchronous standby in synchronous mode), and returns the
// leader.
func (p *Patroni) WaitHealthy(ctx context.Context, notLeader string) (*PatroniNode, error) {
	return p.waitHealthy(ctx, notLeader, false)
}

// WaitHealthyWithout is WaitHealthy for the cluster without node name (cut
// off, say): another node leads, and the others replicate from it.
func (p *Patroni) WaitHealthyWithout(ctx context.Context, name string) (*PatroniNode, error) {
	return p.waitHealthy(ctx, name, true)
}

func (p *Patroni) waitHealthy(ctx context.Context, notLeader string, without bool) (*PatroniNode, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	for {
		ms, err := p.Members(ctx)
		if err == nil {
			b, _ := json.Marshal(ms)
			last = string(b)
			if n := p.healthy(ms, notLeader, without); n != nil && p.apisAnswer(ctx, notLeader, without) {
				return n, nil
			}
		} else if last == "" {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			var logs strings.Builder
			for _, n := range p.Nodes {
				logs.WriteString(n.LogTail(15))
			}
			return nil, fmt.Errorf("faults: the Patroni cluster never became healthy (leader not %q): %w\nlast seen: %s\n%s", notLeader, ctx.Err(), last, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// apisAnswer reports whether every node's REST API answers (but
// notLeader's, when without): a patroni started again is not up before.
func (p *Patroni) apisAnswer(ctx context.Context, notLeader string, without bool) bool {
	for _, n := range p.Nodes {
		if without && n.Name == notLeader {
			continue
		}
		var v map[string]any
		if getJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/patroni", n.RestPort), &v) != nil {
			return false
		}
	}
	return true
}

func (p *Patroni) healthy(ms []Member, notLeader string, without bool) *PatroniNode {
	if without {
		kept := ms[:0:0]
		for _, m := range ms {
			if m.Name != notLeader {
				kept = append(kept, m)
			}
		}
		if len(kept) != len(p.Nodes)-1 {
			return nil
		}
		ms = kept
	} else if len(ms) != len(p.Nodes) {
		return nil
	}
	var leader *PatroniNode
	sync := false
	tl := 0
	for _, m := range ms {
		if m.State != "running" && m.State != "streaming" {
			return nil
		}
		switch m.Role {
		case "leader":
			leader, tl = p.Node(m.Name), m.Timeline
		case "sync_standby":
			sync = true
		}
	}
	if leader == nil || leader.Name == notLeader || p.opts.Synchronous && !sync {
		return nil
	}
	for _, m := range ms {
		if m.Timeline != tl { // a replica still on an old timeline is not yet following
			return nil
		}
	}
	return leader
}

// Switchover runs patronictl switchover from the leader to candidate, and
// waits until the cluster is healthy under the candidate.
func (p *Patroni) Switchover(ctx context.Context, leader, candidate string) error {
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx2, "patronictl", "-c", p.Nodes[0].config, "switchover", "--leader", leader, "--candidate", candidate, "--force")
	out, err := cmd.CombinedOutput()
	if err == nil && !strings.Contains(string(out), "Successfully switched over") {
		err = errors.New("no success reported") // patronictl exits 0 on some refusals
	}
	if err != nil {
		return fmt.Errorf("faults: patronictl switchover: %w\n%s", err, out)
	}
	n, err := p.WaitHealthy(ctx, leader)
	if err != nil {
		return err
	}
	if n.Name != candidate {
		return fmt.Errorf("faults: switchover to %s: %s leads", candidate, n.Name)
	}
	return nil
}

// Stop kills every patroni and etcd, stops every Postgres (immediate
// shutdown) and removes the directories. It is bounded in time: each
// pg_ctl gets 30 seconds.
func (p *Patroni) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.Nodes {
		n.KillPatroni()
		for _, g := range n.Gates {
			g.Close()
		}
	}
	for _, n := range p.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if pid, err := n.postmasterPID(); err == nil {
			if _, err := n.pg.run(ctx, "pg_ctl", "-D", n.pg.data, "-m", "immediate", "-w", "stop"); err != nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		cancel()
		n.pg.remove()
	}
	for _, m := range p.Etcd {
		m.Kill()
	}
	if p.Dir != "" {
		_ = os.RemoveAll(p.Dir)
	}
}

// Gate forwards TCP connections from a loopback port to upstream, and can
// be closed to traffic: the network between one client and one server.
type Gate struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// NewGate listens on a free loopback port and forwards to upstream.
func NewGate(upstream string) (*Gate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &Gate{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	g.wg.Add(1)
	go g.accept()
	return g, nil
}

// Addr is the gate's listening address.
func (g *Gate) Addr() string { return g.ln.Addr().String() }

// Block closes the gate (cutting every connection through it, and every
// new one at once) or opens it.
func (g *Gate) Block(blocked bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked = blocked
	if blocked {
		for c := range g.conns {
			_ = c.Close()
		}
	}
}

// Close stops the gate and waits for its goroutines.
func (g *Gate) Close() {
	_ = g.ln.Close()
	g.Block(true)
	g.wg.Wait()
}

func (g *Gate) accept() {
	defer g.wg.Done()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.wg.Add(1)
		go g.serve(c)
	}
}

func (g *Gate) serve(c net.Conn) {
	defer g.wg.Done()
	up, err := net.DialTimeout("tcp", g.upstream, 2*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	g.mu.Lock()
	if g.blocked {
		g.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	g.conns[c], g.conns[up] = true, true
	g.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	g.mu.Lock()
	delete(g.conns, c)
	delete(g.conns, up)
	g.mu.Unlock()
}

func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("faults: GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// waitHTTP waits until url answers 200 with a body containing want.
func waitHTTP(ctx context.Context, url, want string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), want) {
				rcancel()
				return nil
			}
			err = fmt.Errorf("%s: %s", resp.Status, b)
		}
		rcancel()
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
