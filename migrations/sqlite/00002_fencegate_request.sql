-- Every acquisition request that made a generation, so that a retry of it
-- arriving after that lease expired or was released is never granted again
-- (it would lock the resource for a holder that gave up on the request).
-- One row per grant; fencegate never deletes them.

-- +goose Up
CREATE TABLE fencegate_request (
    resource   TEXT    NOT NULL,
    request_id TEXT    NOT NULL,
    fence      INTEGER NOT NULL CHECK (fence > 0),
    PRIMARY KEY (resource, request_id)
) WITHOUT ROWID;
INSERT INTO fencegate_request (resource, request_id, fence)
SELECT resource, request_id, fence FROM fencegate_lease;

-- +goose Down
DROP TABLE fencegate_request;
