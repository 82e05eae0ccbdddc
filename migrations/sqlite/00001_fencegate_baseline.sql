-- fencegate schema for SQLite. Times are integer microseconds since the Unix
-- epoch, on the coordinator's clock (fencegate_clock). Names are prefixed so
-- they never clash with the host application's tables.

-- +goose Up
-- SQLite has no sequences: a one-row counter holding the last fence issued,
-- bumped inside the acquiring transaction.
CREATE TABLE fencegate_fence_seq (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL CHECK (last >= 0)
);
INSERT INTO fencegate_fence_seq (id, last) VALUES (1, 0);

-- The coordinator's clock never runs backwards. SQLite's clock is the
-- host's wall clock, which an operator or NTP can step back; a lease judged
-- expired would then look live again and could be renewed. fencegate keeps
-- the highest time it has judged by (hw): every statement that grants,
-- renews, releases or judges expiry first raises it to the wall clock and
-- then reads it, and every other time fencegate stamps is at least hw.
-- After a backward step the clock stands still until the wall clock
-- catches up: leases last that much longer in real time, and none comes
-- back to life.
CREATE TABLE fencegate_clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    hw INTEGER NOT NULL
);
INSERT INTO fencegate_clock (id, hw) VALUES (1, CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER) * 1000);

-- One row per guarded resource.
CREATE TABLE fencegate_floor (
    resource   TEXT    PRIMARY KEY,
    floor      INTEGER NOT NULL CHECK (floor > 0),
    holder     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

-- The coordinator's current generation per resource.
CREATE TABLE fencegate_lease (
    resource   TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    fence      INTEGER NOT NULL CHECK (fence > 0),
    request_id TEXT    NOT NULL,
    granted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    released   INTEGER NOT NULL DEFAULT 0
);

-- Every refusal: the evidence that two holders overlapped.
CREATE TABLE fencegate_rejection (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    resource     TEXT    NOT NULL,
    fence        INTEGER NOT NULL,
    holder       TEXT    NOT NULL,
    floor        INTEGER NOT NULL,
    floor_holder TEXT    NOT NULL,
    not_issued   INTEGER NOT NULL DEFAULT 0,
    at           INTEGER NOT NULL
);
CREATE INDEX fencegate_rejection_resource_seq ON fencegate_rejection (resource, seq);

-- Every acquisition request that made a generation, so that a retry of it
-- arriving after that lease expired or was released is never granted again
-- (it would lock the resource for a holder that gave up on the request).
-- One row per grant. made_at is when the request made its lease, so that
-- lease.Coordinator.Prune can delete the rows no retry can need any more
-- (older than the longest term a request could ask for: package lease's
-- doc, "Bounded tables"); the insert dates each row.
CREATE TABLE fencegate_request (
    resource   TEXT    NOT NULL,
    request_id TEXT    NOT NULL,
    fence      INTEGER NOT NULL CHECK (fence > 0),
    made_at    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (resource, request_id)
) WITHOUT ROWID;

-- fencegate_waiter is the queue of acquisitions waiting for a lease
-- (lease.Coordinator.AcquireWait): a waiter is granted only when it is the
-- first live one of its resource, so waiters in any number of processes are
-- served in the order they queued. A waiter keeps its row live by touching
-- it; one whose process died leaves the queue when its time runs out.
--
-- A waiter that accepts a hand-over (handover.Do) says so in its row:
-- request_id, the acquisition request the hand-over's grant records and
-- answers, and term_us, the term it asked for. touched_at is the clock at
-- the row's last touch (or insert): a handed-over term is dated from it
-- (package lease's doc, "Hand-over"). A row without them is not handed
-- over.
CREATE TABLE fencegate_waiter (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    resource   TEXT    NOT NULL,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    request_id TEXT,
    term_us    INTEGER,
    touched_at INTEGER
);
CREATE INDEX fencegate_waiter_resource ON fencegate_waiter (resource, seq);

-- fencegate_semaphore stores each semaphore's number of permits
-- (semaphore.Semaphore): every participant reads it before it grants a permit,
-- so lowering it (Semaphore.SetPermits) takes effect for all of them at
-- once, whatever N each was built with. Lowering it revokes no live
-- permit: the semaphore grants nothing until fewer than the new N are live.
-- The bound is semaphore.MaxPermits.
CREATE TABLE fencegate_semaphore (
    name    TEXT    PRIMARY KEY,
    permits INTEGER NOT NULL CHECK (permits BETWEEN 1 AND 1024)
);

-- +goose Down
DROP TABLE fencegate_semaphore;
DROP TABLE fencegate_waiter;
DROP TABLE fencegate_request;
DROP TABLE fencegate_rejection;
DROP TABLE fencegate_lease;
DROP TABLE fencegate_floor;
DROP TABLE fencegate_clock;
DROP TABLE fencegate_fence_seq;
