// Package integration tests fencegate the way trusted systems are tested:
// randomized histories against real Postgres, real MariaDB and real SQLite
// files, under kills, crashes and cut connections, checked after the fact.
//
// # What runs
//
// Each history starts several worker processes (cmd/fgworker, built by the
// test), each running several agents. An agent loops: acquire a lease on one
// of a handful of hot resources, write under its fence (gate.Commit and an
// INSERT in one transaction) one to four times, renew when half the term is
// gone, then release or walk away. Now and then it stalls for longer than
// the ttl after checking its lease and before writing: the wedged holder the
// gate exists for. Every operation is recorded by the agent before it is
// sent and after it returns (ok, denied, expired, refused, failed, or, with
// no return, unknown).
//
// One cycle in five waits its turn in the queue (AcquireWait, or Hold with
// Wait); lost answers to renewals and releases are retried, and a lease
// walked away from is released late. Holder names are the agents', stable
// across restarts.
//
// During the run the harness kills workers with SIGKILL and starts them
// again, cuts every connection through a TCP proxy it sits between the
// workers and Postgres (and cuts connections right after a COMMIT went
// through, so the commit lands and its answer is lost, and delays what the
// clients send, so renewals and releases land late), and crashes Postgres
// (pg_ctl restart -m immediate on a throwaway cluster it made with initdb).
// MariaDB histories run on a throwaway mariadbd (made with
// mariadb-install-db), crashed with SIGKILL and started again on its data
// directory, behind the same proxy reading the MySQL protocol.
// One history runs on a primary and a synchronous standby and fails over
// mid-run: the primary is killed, the standby promoted, the proxy
// re-pointed.
// Two histories (patroni_test.go) run on three Postgres nodes under Patroni
// with etcd, reached by multi-host DSN, through Patroni's own failovers.
// SQLite histories end with every worker killed in the middle of its writes;
// the file is then reopened.
// TestOSCrash (root only, and opt-in with FENCEGATE_MACHINE_FAULTS=1, which
// .ci/run sets: it attaches a loop device, runs mkfs.ext4 and mounts it)
// puts the database on an ext4 filesystem of its own and shuts it down
// without flushing (EXT4_IOC_SHUTDOWN) right after a grant, a write, a
// renewal and a refusal are acknowledged,
// as an OS crash or a power cut would: only what was fsynced survives.
//
// # What is checked
//
// The checker (internal/check) compares what the clients saw with what the
// database kept: fences in commit order (on Postgres, the order a logical
// replication slot observed, which does not trust fencegate's locks; on
// MariaDB, id order under a counter row's lock, which does not either), no
// write after a higher grant, nothing acknowledged lost, every refusal logged, fences unique per grant,
// holders' windows disjoint, and the operations on each resource
// linearizable as a lease register (github.com/anishathalye/porcupine). A
// control history writes with the gate bypassed, guarded only by the
// holder's own expiry check, and must make the checker report violations.
//
// The claims' histories (claims_test.go, workload.Claims) add agents that
// claim two or three resources under one fence, or paths of a small tree
// where a directory overlaps the files below it and siblings do not, and
// write under them (gate.Commit, gate.CommitFile) to fg_file_writes, whose
// rows are numbered per file in commit order by the workload's own primary
// key. check.Claims judges per file: no two overlapping claims live at once
// in the database's clock, each file's writes in fence order, no write
// committed under a fence below a claim of its file granted before it was
// invoked, each fence's lease versions exactly one claim's members (on
// Postgres, in one transaction). Their own control, with the gate
// bypassed, must make it report stale or out-of-order file writes.
//
// # Running it
//
//	go test -race ./integration/...                      # CI size, a few minutes
//	FENCEGATE_SOAK=30m go test -timeout 0 ./integration  # soak: histories for 30 minutes
//	go test ./integration -run Reliability -v -soak=2h    # the same, as a flag
//	FENCEGATE_MUTANTS=1 go test -timeout 25m -run TestMutants ./integration  # every mutant
//
// The mutants (mutants/, see its README) are deliberate bugs, each run as a
// short history that the checker must report; .ci/run runs a subset.
//
// Postgres histories use a throwaway cluster when initdb and pg_ctl are
// installed; otherwise FENCEGATE_TEST_DATABASE_URL (or a testcontainers
// Postgres when Docker answers), and the restart fault is skipped with a
// loud message. docs/RELIABILITY.md records what is tested and the latest
// figures.
package integration
