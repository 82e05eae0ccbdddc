// Package history records what agents observed, one JSON line per event, and
// reads the records back as operations for the checker.
//
// An operation is written twice: an invocation line before the call, and a
// return line after it. Each line goes to the file in a single write(2), so a
// process killed with SIGKILL leaves every line it wrote whole, and an
// invocation without a return is an operation whose outcome is unknown: it
// may or may not have taken effect. Nothing is fsynced: the records must
// survive the death of the process, not of the machine.
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Operation types.
const (
	Acquire = "acquire"
	Renew   = "renew"
	Release = "release"
	Write   = "write"
	Admit   = "admit" // gate.Admit of a fence from outside the coordinator
	// HandOver is handover.Do (or handover.CommitBatch): a
	// write under Fence (its row carries this operation's id), the release
	// of the lease, and the grant of Resource to its first live waiter, in
	// one transaction. Its return says what it did: Freed (the lease was
	// live, and is released or handed over), To and Granted (the waiter
	// handed the resource and its fence; "" and 0 for none).
	HandOver = "handover"
	// Permit is semaphore.Semaphore.Acquire on the semaphore Resource of
	// Permits permits; it returns the slot granted (Slot) and its fence.
	Permit = "permit"
	// Observe is one leader elect.Elector.Observe reported on the election
	// Resource (Granted, HeldBy), invoked and returned at its receipt.
	Observe = "observe"
	// Claim is Coordinator.Acquire of a claim of several resources, or of
	// paths (Members), under one fence; it returns the token's members
	// (Covered) and Granted. ClaimWrite is a write under such a claim to
	// one file or member (Target), through gate.CommitFile or gate.Commit;
	// ClaimRelease is its release. They have types of their own so that the
	// single-resource checks never mistake them for their own.
	Claim        = "claim"
	ClaimWrite   = "claim-write"
	ClaimRelease = "claim-release"
	// Abandon is Executor.LeaseAbandon of the acquisition request Request
	// on Resource, as the coordinator spends a request whose outcome its
	// sender never learned: once it returned OK, no sending of the request
	// may be granted.
	Abandon = "abandon"
)

// Outcome is what the agent observed when an operation returned.
type Outcome string

// Outcomes. Unknown is also the outcome of an operation with no return line.
const (
	OK      Outcome = "ok"      // done: granted, renewed, released, committed
	Denied  Outcome = "denied"  // acquire: someone holds a live lease
	Expired Outcome = "expired" // renew: the lease is no longer current
	Noop    Outcome = "noop"    // release: the lease was not live (nothing freed)
	Refused Outcome = "refused" // write, admit: the gate refused the fence
	Fail    Outcome = "fail"    // certainly no effect (error before COMMIT, or the server said no)
	Unknown Outcome = "unknown" // may or may not have taken effect
)

// Record is one line of a history file.
type Record struct {
	Op    string `json:"op"` // unique operation id
	Phase string `json:"ph"` // "inv" or "ret"
	Time  int64  `json:"t"`  // wall clock, Unix nanoseconds

	// Invocation fields.
	Type     string   `json:"type,omitempty"`
	Proc     string   `json:"proc,omitempty"`  // worker process and incarnation, "p1.2"
	Agent    string   `json:"agent,omitempty"` // the agent, stable across incarnations, "p1/a3"
	Holder   string   `json:"holder,omitempty"`
	Resource string   `json:"res,omitempty"`
	Fence    int64    `json:"fence,omitempty"`   // the token's fence (renew, release, write)
	Request  string   `json:"req,omitempty"`     // acquire, abandon: the request id (kept across retries)
	Hold     bool     `json:"hold,omitempty"`    // acquire, write, release inside lease.Hold (renewals unseen)
	Via      string   `json:"via,omitempty"`     // write: "commit" (gate.Commit), "do" (gate.Do), "batch" (pgxgate.CommitBatch), "begin" (pgxgate.BeginFenced) or "bypass"
	Late     bool     `json:"late,omitempty"`    // renew: sent after the holder's own deadline had passed
	Wait     bool     `json:"wait,omitempty"`    // acquire: waited its turn in the queue (AcquireWait, lease.Wait)
	Elect    bool     `json:"elect,omitempty"`   // acquire, release: a term of the election Resource (elect.Elector's Campaign, Resign)
	Permits  int      `json:"permits,omitempty"` // permit: the semaphore's N
	Members  []string `json:"members,omitempty"` // claim, claim-write, claim-release: the resources claimed, sorted
	Target   string   `json:"target,omitempty"`  // claim-write: the file (path resource) or member written

	// Return fields.
	Outcome   Outcome  `json:"out,omitempty"`
	Granted   int64    `json:"granted,omitempty"`    // acquire ok: the fence granted
	TTL       int64    `json:"ttl,omitempty"`        // acquire/renew ok: Grant.TTL in nanoseconds
	Until     int64    `json:"until,omitempty"`      // acquire/renew ok: the holder's own deadline, wall clock Unix nanoseconds (its send instant may be read after the invocation)
	Expires   int64    `json:"expires,omitempty"`    // acquire/renew ok: the coordinator's expiry (Grant.CoordinatorExpiresAt), database clock Unix nanoseconds
	HeldBy    string   `json:"held_by,omitempty"`    // acquire denied
	HeldFence int64    `json:"held_fence,omitempty"` // acquire denied
	RejSeq    int64    `json:"rej_seq,omitempty"`    // write refused: the rejection log's seq
	Floor     int64    `json:"floor,omitempty"`      // write refused: the floor reported
	FloorBy   string   `json:"floor_by,omitempty"`   // write refused: who raised the floor to it
	LogFailed bool     `json:"log_failed,omitempty"` // write refused, but the refusal could not be logged
	Attempts  int      `json:"attempts,omitempty"`   // acquire: attempts with the same request id
	Err       string   `json:"err,omitempty"`
	Code      string   `json:"code,omitempty"`    // the SQLSTATE the error carried, when the server sent one
	Cause     string   `json:"cause,omitempty"`   // fail: what the agent took the failure for (see the Cause constants)
	Slot      string   `json:"slot,omitempty"`    // permit ok: the slot's resource, "name#i"
	Covered   []string `json:"covered,omitempty"` // claim ok: the granted token's Members()
	To        string   `json:"to,omitempty"`      // handover ok: the waiter handed the resource (Granted its fence); "" for none
	Freed     bool     `json:"freed,omitempty"`   // handover ok: the lease was live and is released or handed over
}

// Causes of a failed operation, as the agent read its error. CauseOther is
// an error that names neither the database nor the connection: from a
// healthy database the only failure of a stale write is its refusal, so a
// stale write that failed that way was a refusal nobody recognised.
const (
	CauseConn   = "conn"   // unreachable, lost, timed out, cancelled
	CauseBusy   = "busy"   // a lock or serialization conflict to retry
	CauseServer = "server" // the server (or SQLite) answered with an error of its own
	CauseOther  = "other"
	// CauseAbort is a failure the workload made itself: a hand-over whose
	// write returned an error of its own after its INSERT, so that the
	// transaction rolled back with the hand-over's statement not run.
	CauseAbort = "abort"
)

// Recorder appends records to a file. It is safe for concurrent use.
type Recorder struct {
	mu sync.Mutex
	f  *os.File
}

// Create opens path for appending records, creating it.
func Create(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f}, nil
}

// Write appends r as one line, in one write call.
func (rec *Recorder) Write(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	rec.mu.Lock()
	defer rec.mu.Unlock()
	_, err = rec.f.Write(b)
	return err
}

// Close closes the file.
func (rec *Recorder) Close() error { return rec.f.Close() }

// Now is the clock records are stamped with: the wall clock, shared by every
// process on the machine (and by the database on it).
func Now() int64 { return time.Now().UnixNano() }

// Op is an operation: an invocation and, if the agent lived to see it, its
// return.
type Op struct {
	Record        // the invocation's fields, with the return's merged in
	Call   int64  // invocation time
	Return int64  // return time; 0 when there was no return
	File   string // the history file it came from
}

// Returned reports whether the operation has a return line.
func (o Op) Returned() bool { return o.Return != 0 }

// Load reads every *.jsonl file in dir and returns the operations, ordered by
// invocation time. A torn last line (there should be none) is skipped.
func Load(dir string) ([]Op, error) {
	byID := map[string]*Op{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		return loadFile(path, byID)
	})
	if err != nil {
		return nil, err
	}
	ops := make([]Op, 0, len(byID))
	for _, o := range byID {
		if o.Call == 0 {
			return nil, fmt.Errorf("history: operation %s has a return but no invocation", o.Op)
		}
		if !o.Returned() {
			o.Outcome = Unknown
		}
		ops = append(ops, *o)
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Call != ops[j].Call {
			return ops[i].Call < ops[j].Call
		}
		return ops[i].Op < ops[j].Op
	})
	return ops, nil
}

func loadFile(path string, byID map[string]*Op) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && bytes.HasSuffix(b, line) {
				continue // a torn last line
			}
			return fmt.Errorf("history: %s: %w", path, err)
		}
		o := byID[r.Op]
		if o == nil {
			o = &Op{File: filepath.Base(path)}
			byID[r.Op] = o
		}
		switch r.Phase {
		case "inv":
			if o.Call != 0 {
				return fmt.Errorf("history: %s: operation %s invoked twice", path, r.Op)
			}
			ret := o.Record
			o.Record = r
			o.Call = r.Time
			if o.Return != 0 {
				mergeReturn(o, ret)
			}
		case "ret":
			if o.Return != 0 {
				return fmt.Errorf("history: %s: operation %s returned twice", path, r.Op)
			}
			o.Return = r.Time
			if o.Call != 0 {
				mergeReturn(o, r)
			} else {
				o.Record = r
			}
		default:
			return fmt.Errorf("history: %s: unknown phase %q", path, r.Phase)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("history: %s: %w", path, err)
	}
	return nil
}

func mergeReturn(o *Op, r Record) {
	o.Outcome = r.Outcome
	o.Granted = r.Granted
	o.TTL = r.TTL
	o.Until = r.Until
	o.Expires = r.Expires
	o.HeldBy = r.HeldBy
	o.HeldFence = r.HeldFence
	o.RejSeq = r.RejSeq
	o.Floor, o.FloorBy = r.Floor, r.FloorBy
	o.LogFailed = r.LogFailed
	o.Attempts = r.Attempts
	o.Err = r.Err
	o.Code = r.Code
	o.Cause = r.Cause
	o.Slot = r.Slot
	o.Covered = r.Covered
	o.To = r.To
	o.Freed = r.Freed
}
