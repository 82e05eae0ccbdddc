-- fencegate's SQL protocol, version 1, for MySQL 8 and MariaDB 10.6+:
-- stored procedures any client calls with CALL and reads as one result set
-- (docs/SQL.md, "MySQL / MariaDB"). The Go driver (sqlstore/mysql) calls
-- fencegate_raise for every fence check and fencegate_log_refusal for every
-- refusal's record: one rulebook.
--
-- Procedures, not functions: a stored function needs
-- log_bin_trust_function_creators under binary logging, and cannot return
-- a row. Names and holders arrive as LONGBLOB, so that a huge or invalid
-- UTF-8 name reaches the checks below (and is refused with SQLSTATE 22023)
-- instead of failing in the server's conversion of the argument.
--
-- MySQL commits every DDL statement on its own: each procedure is dropped
-- and created again, so a run cut short is finished by the next.

-- +goose NO TRANSACTION
-- +goose Up

DROP PROCEDURE IF EXISTS fencegate_protocol_version;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_protocol_version()
    COMMENT 'fencegate SQL protocol: the version this schema speaks'
BEGIN
    SELECT 1 AS version;
END
-- +goose StatementEnd

-- fencegate_valid_name refuses, with SQLSTATE 22023, a name that
-- fence.ValidateResource would: empty, longer than 256 bytes, not valid
-- UTF-8 (surrogates included), or holding a control character (C0, DEL,
-- C1). The message never quotes the name, which may not be text. The class
-- of control characters is built from CHAR(), not written with
-- backslashes, so that it means the same under NO_BACKSLASH_ESCAPES; NUL is
-- looked for apart, outside the pattern.
DROP PROCEDURE IF EXISTS fencegate_valid_name;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_valid_name(IN p_what VARCHAR(16), IN p_name LONGBLOB)
    COMMENT 'fencegate internal: refuses a name fence.ValidateResource refuses'
BEGIN
    DECLARE v_bad VARCHAR(64) DEFAULT NULL;
    DECLARE i INT DEFAULT 0;
    DECLARE v_msg VARCHAR(128);
    IF p_name IS NULL OR LENGTH(p_name) = 0 THEN
        SET v_bad = 'must not be empty';
    ELSEIF LENGTH(p_name) > 256 THEN
        SET v_bad = 'is longer than 256 bytes';
    ELSEIF CAST(CONVERT(p_name USING utf8mb4) AS BINARY) <> p_name THEN
        SET v_bad = 'is not valid UTF-8';
    ELSEIF LOCATE(X'00', p_name) > 0
        OR CONVERT(p_name USING utf8mb4) REGEXP CONCAT('[', CHAR(1 USING utf8mb4), '-', CHAR(31 USING utf8mb4),
                                                       CHAR(127 USING utf8mb4), '-', CONVERT(X'C29F' USING utf8mb4), ']') THEN
        SET v_bad = 'contains a control character';
    ELSEIF LOCATE(X'ED', p_name) > 0 THEN
        -- A surrogate (ED A0..ED BF), which MySQL's utf8mb4 lets through.
        WHILE v_bad IS NULL AND i < 32 DO
            IF LOCATE(CONCAT(X'ED', CHAR(160 + i USING binary)), p_name) > 0 THEN
                SET v_bad = 'is not valid UTF-8';
            END IF;
            SET i = i + 1;
        END WHILE;
    END IF;
    IF v_bad IS NOT NULL THEN
        SET v_msg = CONCAT('fencegate: ', p_what, ' ', v_bad);
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_msg;
    END IF;
END
-- +goose StatementEnd

-- fencegate_valid_args checks the arguments every procedure shares:
-- resource, holder, and a positive number (fence or ttl_ms, named by
-- p_what). With p_plain a path resource ("path:…") is refused too: its
-- claims and checks follow the path rule, which protocol 1 leaves to the Go
-- library. A ttl is at most a day (lease.CoordinatorOptions.MaxTTL's default), so that
-- a request's record outlives every lease it made (lease.Coordinator.Prune).
DROP PROCEDURE IF EXISTS fencegate_valid_args;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_valid_args(IN p_resource LONGBLOB, IN p_holder LONGBLOB,
                                      IN p_what VARCHAR(16), IN p_number BIGINT, IN p_plain BOOLEAN)
    COMMENT 'fencegate internal: refuses bad arguments with SQLSTATE 22023'
BEGIN
    DECLARE v_msg VARCHAR(128);
    CALL fencegate_valid_name('resource', p_resource);
    CALL fencegate_valid_name('holder', p_holder);
    IF p_number IS NULL OR p_number <= 0 THEN
        SET v_msg = CONCAT('fencegate: ', p_what, ' must be positive');
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_msg;
    END IF;
    IF p_what = 'ttl_ms' AND p_number > 86400000 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: ttl_ms is longer than a day (86400000)';
    END IF;
    IF p_plain AND LEFT(p_resource, 5) = 'path:' THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: path resources are claimed and checked through the Go library in protocol 1';
    END IF;
END
-- +goose StatementEnd

-- fencegate_valid_request checks a request id: 1 to 128 bytes of printable
-- ASCII without spaces (lease's rule).
DROP PROCEDURE IF EXISTS fencegate_valid_request;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_valid_request(IN p_request_id LONGBLOB)
    COMMENT 'fencegate internal: refuses a bad request id with SQLSTATE 22023'
BEGIN
    DECLARE i INT DEFAULT 1;
    DECLARE b INT;
    IF LENGTH(p_request_id) = 0 OR LENGTH(p_request_id) > 128 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: request_id must be 1 to 128 bytes';
    END IF;
    WHILE i <= LENGTH(p_request_id) DO
        SET b = ASCII(SUBSTRING(p_request_id, i, 1));
        IF b <= 32 OR b >= 127 THEN
            SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: request_id must be printable ASCII without spaces';
        END IF;
        SET i = i + 1;
    END WHILE;
END
-- +goose StatementEnd

-- fencegate_raise_floor is the fence check's one rule, which every check
-- below and the Go driver's share: raise the resource's floor to p_fence
-- unless it is above it already. The upsert locks the floor's record
-- whether or not it changes it, so an equal fence (every write of a lease
-- after its first) holds the lock a raise needs, and writers of a resource
-- queue on it; an equal fence of another holder takes the floor over.
-- With p_verify, only a fence issued by fencegate's coordinator (the
-- resource's lease row has this fence and holder) is raised: otherwise
-- nothing is written and p_issued is FALSE. Runs in the caller's
-- transaction.
DROP PROCEDURE IF EXISTS fencegate_raise_floor;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_raise_floor(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_fence BIGINT,
                                       IN p_verify BOOLEAN, OUT p_admitted BOOLEAN, OUT p_issued BOOLEAN,
                                       OUT p_floor BIGINT, OUT p_floor_holder VARBINARY(256))
    COMMENT 'fencegate internal: the floor raise every fence check runs'
BEGIN
    DECLARE v_n INT;
    SET p_admitted = FALSE, p_issued = FALSE, p_floor = NULL, p_floor_holder = NULL;
    IF p_verify THEN
        SELECT COUNT(*) INTO v_n FROM fencegate_lease
         WHERE resource = p_resource AND fence = p_fence AND holder = p_holder LOCK IN SHARE MODE;
    END IF;
    IF NOT p_verify OR v_n > 0 THEN
        INSERT INTO fencegate_floor (resource, floor, holder, updated_at)
        VALUES (p_resource, p_fence, p_holder, UTC_TIMESTAMP(6))
        ON DUPLICATE KEY UPDATE
          holder     = IF(p_fence >= fencegate_floor.floor, p_holder, fencegate_floor.holder),
          updated_at = IF(p_fence > fencegate_floor.floor, UTC_TIMESTAMP(6), fencegate_floor.updated_at),
          floor      = GREATEST(fencegate_floor.floor, p_fence);
        -- The upsert holds the record's lock: this never waits, and reads the
        -- newest row rather than a REPEATABLE READ snapshot.
        SELECT floor, holder INTO p_floor, p_floor_holder FROM fencegate_floor WHERE resource = p_resource FOR UPDATE;
        SET p_issued = TRUE, p_admitted = (p_floor = p_fence);
    END IF;
END
-- +goose StatementEnd

-- fencegate_raise is the fence check as the Go driver runs it
-- (sqlstore.Executor.FloorRaise): the verification is the caller's choice
-- (gate.Options.VerifyIssued), and a refusal is an answer. One row:
-- admitted, issued, floor, floor_holder (floor and floor_holder NULL when
-- the fence was not issued). In the caller's transaction.
DROP PROCEDURE IF EXISTS fencegate_raise;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_raise(IN p_resource LONGBLOB, IN p_holder LONGBLOB, IN p_fence BIGINT, IN p_verify BOOLEAN)
    COMMENT 'fencegate protocol 1: the Go driver''s fence check'
BEGIN
    DECLARE v_admitted, v_issued BOOLEAN;
    DECLARE v_floor BIGINT;
    DECLARE v_floor_holder VARBINARY(256);
    CALL fencegate_valid_args(p_resource, p_holder, 'fence', p_fence, FALSE);
    CALL fencegate_raise_floor(p_resource, p_holder, p_fence, COALESCE(p_verify, TRUE),
                               v_admitted, v_issued, v_floor, v_floor_holder);
    SELECT v_admitted AS admitted, v_issued AS issued, v_floor AS floor,
           CONVERT(v_floor_holder USING utf8mb4) AS floor_holder;
END
-- +goose StatementEnd

-- fencegate_refuse raises a check's refusal: SQLSTATE FG001 (stale: the
-- fence is below the floor) or FG002 (never issued), MESSAGE_TEXT a fixed
-- prefix and then a JSON object {"resource", "fence", "holder", "floor",
-- "floor_holder"}. MESSAGE_TEXT holds 512 bytes on MariaDB and 128
-- characters on MySQL: names that would not fit are shortened, and the
-- object then says "truncated": true (the whole record is the one
-- fencegate_log_refusal writes).
DROP PROCEDURE IF EXISTS fencegate_refuse;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_refuse(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_fence BIGINT,
                                  IN p_floor BIGINT, IN p_floor_holder VARBINARY(256))
    COMMENT 'fencegate internal: SIGNALs a fence check''s refusal'
BEGIN
    DECLARE v_state CHAR(5) DEFAULT IF(p_floor IS NOT NULL AND p_fence < p_floor, 'FG001', 'FG002');
    DECLARE v_limit INT DEFAULT IF(VERSION() LIKE '%MariaDB%', 500, 128);
    DECLARE v_keep INT DEFAULT 256;
    DECLARE v_msg TEXT CHARACTER SET utf8mb4;
    DECLARE v_resource, v_holder, v_floor_holder TEXT CHARACTER SET utf8mb4;
    IF v_state = 'FG002' THEN
        SET p_floor = NULL, p_floor_holder = NULL;
    END IF;
    SET v_resource = CONVERT(p_resource USING utf8mb4), v_holder = CONVERT(p_holder USING utf8mb4),
        v_floor_holder = CONVERT(p_floor_holder USING utf8mb4);
    -- (+ 0: MariaDB's JSON_OBJECT quotes a routine's BIGINT variables.)
    SET v_msg = CONCAT(IF(v_state = 'FG001', 'fencegate: stale fence: ', 'fencegate: fence never issued: '),
        JSON_OBJECT('resource', v_resource, 'fence', p_fence + 0, 'holder', v_holder,
                    'floor', p_floor + 0, 'floor_holder', v_floor_holder));
    WHILE CHAR_LENGTH(v_msg) > v_limit AND v_keep > 0 DO
        SET v_keep = v_keep DIV 2;
        SET v_msg = CONCAT(IF(v_state = 'FG001', 'fencegate: stale fence: ', 'fencegate: fence never issued: '),
            JSON_OBJECT('resource', LEFT(v_resource, v_keep), 'fence', p_fence + 0, 'holder', LEFT(v_holder, v_keep),
                        'floor', p_floor + 0, 'floor_holder', LEFT(v_floor_holder, v_keep),
                        'truncated', JSON_EXTRACT('[true]', '$[0]')));
    END WHILE;
    SET v_msg = LEFT(v_msg, v_limit);
    IF v_state = 'FG001' THEN
        SIGNAL SQLSTATE 'FG001' SET MESSAGE_TEXT = v_msg;
    END IF;
    SIGNAL SQLSTATE 'FG002' SET MESSAGE_TEXT = v_msg;
END
-- +goose StatementEnd

-- fencegate_check is the fence check for a write in any language: CALL it
-- inside the transaction of the write, before COMMIT. It raises the floor
-- to the fence of a lease fencegate issued, and answers the floor (the
-- fence); anything else is refused by SIGNAL (fencegate_refuse), and the
-- caller rolls back.
DROP PROCEDURE IF EXISTS fencegate_check;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_check(IN p_resource LONGBLOB, IN p_holder LONGBLOB, IN p_fence BIGINT)
    COMMENT 'fencegate protocol 1: the fence check, inside the caller''s write'
BEGIN
    DECLARE v_admitted, v_issued BOOLEAN;
    DECLARE v_floor BIGINT;
    DECLARE v_floor_holder VARBINARY(256);
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END; -- no row: the variable keeps its default
    CALL fencegate_valid_args(p_resource, p_holder, 'fence', p_fence, TRUE);
    CALL fencegate_raise_floor(p_resource, p_holder, p_fence, TRUE, v_admitted, v_issued, v_floor, v_floor_holder);
    IF NOT v_admitted THEN
        IF NOT v_issued THEN
            SELECT floor, holder INTO v_floor, v_floor_holder FROM fencegate_floor
             WHERE resource = p_resource LOCK IN SHARE MODE;
        END IF;
        CALL fencegate_refuse(p_resource, p_holder, p_fence, v_floor, v_floor_holder);
    END IF;
    SELECT v_floor AS floor;
END
-- +goose StatementEnd

-- fencegate_log_refusal records a refusal in fencegate_rejection after the
-- refused transaction rolled back: it reads the floor again and writes the
-- record only when the fence is below it, or was never issued (no lease row
-- of this resource holds this fence and holder), so that no caller can
-- forge evidence. One row: logged, and the record written (seq, floor,
-- floor_holder, not_issued; NULL when nothing was logged). Runs in a
-- transaction of its own: call it outside any.
DROP PROCEDURE IF EXISTS fencegate_log_refusal;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_log_refusal(IN p_resource LONGBLOB, IN p_holder LONGBLOB, IN p_fence BIGINT)
    COMMENT 'fencegate protocol 1: the refusal''s record, after the rollback'
BEGIN
    DECLARE v_floor BIGINT DEFAULT 0;
    DECLARE v_floor_holder VARBINARY(256) DEFAULT '';
    DECLARE v_issued INT;
    DECLARE v_seq BIGINT DEFAULT NULL;
    DECLARE v_not_issued BOOLEAN DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END; -- no row: the variable keeps its default
    CALL fencegate_valid_args(p_resource, p_holder, 'fence', p_fence, FALSE);
    BEGIN
        DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
        START TRANSACTION;
        SELECT floor, holder INTO v_floor, v_floor_holder FROM fencegate_floor
         WHERE resource = p_resource LOCK IN SHARE MODE;
        SELECT COUNT(*) INTO v_issued FROM fencegate_lease
         WHERE resource = p_resource AND fence = p_fence AND holder = p_holder LOCK IN SHARE MODE;
        IF p_fence < v_floor OR v_issued = 0 THEN
            SET v_not_issued = NOT (p_fence < v_floor);
            INSERT INTO fencegate_rejection (resource, fence, holder, floor, floor_holder, not_issued, at)
            VALUES (p_resource, p_fence, p_holder, v_floor, v_floor_holder, v_not_issued, UTC_TIMESTAMP(6));
            SET v_seq = LAST_INSERT_ID();
        END IF;
        COMMIT;
    END;
    SELECT v_seq IS NOT NULL AS logged, v_seq AS seq,
           IF(v_seq IS NULL, NULL, v_floor) AS floor,
           IF(v_seq IS NULL, NULL, CONVERT(v_floor_holder USING utf8mb4)) AS floor_holder,
           v_not_issued AS not_issued;
END
-- +goose StatementEnd

-- fencegate_admit raises the floor to an issued fence outside a write (a
-- holder announcing itself before its first write); a refusal is an
-- answer. One row: admitted, floor, floor_holder (the floor after it; NULL
-- when the resource has none). A transaction of its own.
DROP PROCEDURE IF EXISTS fencegate_admit;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_admit(IN p_resource LONGBLOB, IN p_holder LONGBLOB, IN p_fence BIGINT)
    COMMENT 'fencegate protocol 1: the fence check outside a write'
BEGIN
    DECLARE v_admitted, v_issued BOOLEAN;
    DECLARE v_floor BIGINT;
    DECLARE v_floor_holder VARBINARY(256);
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END; -- no row: the variable keeps its default
    CALL fencegate_valid_args(p_resource, p_holder, 'fence', p_fence, TRUE);
    BEGIN
        DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
        START TRANSACTION;
        CALL fencegate_raise_floor(p_resource, p_holder, p_fence, TRUE, v_admitted, v_issued, v_floor, v_floor_holder);
        IF NOT v_issued THEN
            SELECT floor, holder INTO v_floor, v_floor_holder FROM fencegate_floor
             WHERE resource = p_resource LOCK IN SHARE MODE;
        END IF;
        COMMIT;
    END;
    SELECT v_admitted AS admitted, v_floor AS floor, CONVERT(v_floor_holder USING utf8mb4) AS floor_holder;
END
-- +goose StatementEnd

-- fencegate_renew_rule is the renewal, which fencegate_renew and the Go
-- driver (fencegate_renew_lease) run: extend the live lease (resource,
-- holder, fence) to end no earlier than p_ttl_us from now. It never
-- shortens a term (a holder may have been given the later deadline
-- already), and a lease that expired, was released or superseded is not
-- renewed (p_expires NULL). One UPDATE, then a locking read of the lease
-- it kept live (an UPDATE that left a later expiry as it was changes no
-- row). In the caller's transaction.
DROP PROCEDURE IF EXISTS fencegate_renew_rule;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_renew_rule(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_fence BIGINT,
                                      IN p_ttl_us BIGINT, OUT p_now DATETIME(6), OUT p_expires DATETIME(6))
    COMMENT 'fencegate internal: the renewal rule'
BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET p_expires = NULL;
    SET p_now = UTC_TIMESTAMP(6), p_expires = NULL;
    UPDATE fencegate_lease SET expires_at = GREATEST(expires_at, p_now + INTERVAL p_ttl_us MICROSECOND)
     WHERE resource = p_resource AND holder = p_holder AND fence = p_fence AND NOT released AND expires_at > p_now;
    SELECT expires_at INTO p_expires FROM fencegate_lease
     WHERE resource = p_resource AND holder = p_holder AND fence = p_fence AND NOT released AND expires_at > p_now
       FOR UPDATE;
END
-- +goose StatementEnd

-- fencegate_renew_lease is the renewal as the Go driver runs it
-- (sqlstore.Executor.LeaseRenew): arguments checked by the caller, the
-- term in µs, and the renewed lease row (times in µs since the epoch, then
-- the renewal's clock), no row when not renewed. In the caller's
-- transaction.
DROP PROCEDURE IF EXISTS fencegate_renew_lease;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_renew_lease(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_fence BIGINT, IN p_ttl_us BIGINT)
    COMMENT 'fencegate internal: the Go driver''s renewal'
BEGIN
    DECLARE v_now, v_expires DATETIME(6);
    CALL fencegate_renew_rule(p_resource, p_holder, p_fence, p_ttl_us, v_now, v_expires);
    SELECT resource, holder, fence, request_id, TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', granted_at), TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', expires_at), released, TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', v_now)
      FROM fencegate_lease WHERE resource = p_resource AND v_expires IS NOT NULL;
END
-- +goose StatementEnd

-- fencegate_renew extends a live lease to at least ttl_ms from now, by
-- fencegate_renew_rule. One row: renewed, ttl_ms (the term left, rounded
-- down; NULL when not renewed). A transaction of its own.
DROP PROCEDURE IF EXISTS fencegate_renew;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_renew(IN p_resource LONGBLOB, IN p_holder LONGBLOB, IN p_fence BIGINT, IN p_ttl_ms BIGINT)
    COMMENT 'fencegate protocol 1: renew a live lease, never shortening it'
BEGIN
    DECLARE v_now, v_expires DATETIME(6);
    CALL fencegate_valid_args(p_resource, p_holder, 'fence', p_fence, FALSE);
    CALL fencegate_valid_args(p_resource, p_holder, 'ttl_ms', p_ttl_ms, FALSE);
    BEGIN
        DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
        START TRANSACTION;
        CALL fencegate_renew_rule(p_resource, p_holder, p_fence, p_ttl_ms * 1000, v_now, v_expires);
        COMMIT;
    END;
    SELECT v_expires IS NOT NULL AS renewed, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) DIV 1000 AS ttl_ms;
END
-- +goose StatementEnd

-- fencegate_release_rule is the release, which fencegate_release and the
-- Go driver (fencegate_release_lease) run: one UPDATE ends the live lease
-- (resource, holder, fence) now, atomic on its own; a stale release frees
-- nothing, and p_reason says why: already_released, expired, superseded
-- (the resource's lease has a later fence) or never_held (no lease, a lower
-- fence, or this fence with another holder). NULL when released.
DROP PROCEDURE IF EXISTS fencegate_release_rule;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_release_rule(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_fence BIGINT,
                                        OUT p_reason VARCHAR(16))
    COMMENT 'fencegate internal: the release rule'
BEGIN
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_found BOOLEAN DEFAULT TRUE;
    DECLARE v_holder VARBINARY(256);
    DECLARE v_fence BIGINT;
    DECLARE v_expires DATETIME(6);
    DECLARE v_released BOOLEAN;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = FALSE;
    SET p_reason = NULL;
    UPDATE fencegate_lease SET released = TRUE, expires_at = LEAST(expires_at, v_now)
     WHERE resource = p_resource AND holder = p_holder AND fence = p_fence AND NOT released AND expires_at > v_now;
    IF ROW_COUNT() = 0 THEN
        SELECT holder, fence, expires_at, released INTO v_holder, v_fence, v_expires, v_released
          FROM fencegate_lease WHERE resource = p_resource;
        SET p_reason = CASE
            WHEN NOT v_found OR v_fence < p_fence OR (v_fence = p_fence AND v_holder <> p_holder) THEN 'never_held'
            WHEN v_fence > p_fence THEN 'superseded'
            WHEN v_released THEN 'already_released'
            ELSE 'expired' END;
    END IF;
END
-- +goose StatementEnd

-- fencegate_release_lease is the release as the Go driver runs it
-- (sqlstore.Executor.LeaseRelease): arguments checked by the caller; one
-- row, released. In the caller's transaction, or on its own.
DROP PROCEDURE IF EXISTS fencegate_release_lease;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_release_lease(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_fence BIGINT)
    COMMENT 'fencegate internal: the Go driver''s release'
BEGIN
    DECLARE v_reason VARCHAR(16);
    CALL fencegate_release_rule(p_resource, p_holder, p_fence, v_reason);
    SELECT v_reason IS NULL AS released;
END
-- +goose StatementEnd

-- fencegate_release ends a live lease now, by fencegate_release_rule; a
-- stale release frees nothing. One row: released, reason (NULL when
-- released). A transaction of its own.
DROP PROCEDURE IF EXISTS fencegate_release;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_release(IN p_resource LONGBLOB, IN p_holder LONGBLOB, IN p_fence BIGINT)
    COMMENT 'fencegate protocol 1: release a live lease'
BEGIN
    DECLARE v_reason VARCHAR(16);
    CALL fencegate_valid_args(p_resource, p_holder, 'fence', p_fence, FALSE);
    BEGIN
        DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
        START TRANSACTION;
        CALL fencegate_release_rule(p_resource, p_holder, p_fence, v_reason);
        COMMIT;
    END;
    SELECT v_reason IS NULL AS released, v_reason AS reason;
END
-- +goose StatementEnd

-- fencegate_claim_one is one resource's acquisition, the one text of its
-- rule on MySQL: fencegate_claim runs it for clients in any language, and
-- the Go driver's acquisition of one resource (fencegate_acquire_lease).
-- The same rules as the Go library's shared steps
-- (sqlstore/internal/steps.Acquire), which SQLite and the Go driver's set
-- and path claims run. In the caller's transaction; the term in µs. It
-- answers through its OUT arguments: status granted, retried, held,
-- request_expired or floor_ahead (the grant is then written and must be
-- rolled back; p_holder_out and p_floor are the floor's), and the clock
-- it judged by (read after the lease row's lock).
DROP PROCEDURE IF EXISTS fencegate_claim_one;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_claim_one(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_ttl_us BIGINT,
                                     IN p_request_id VARBINARY(128), OUT p_status VARCHAR(16), OUT p_fence BIGINT,
                                     OUT p_holder_out VARBINARY(256), OUT p_ttl_left BIGINT, OUT p_now DATETIME(6),
                                     OUT p_floor BIGINT)
    COMMENT 'fencegate internal: one resource''s acquisition'
BEGIN
    DECLARE v_found BOOLEAN;
    DECLARE v_holder, v_floor_holder VARBINARY(256);
    DECLARE v_fence, v_request_fence, v_floor BIGINT;
    DECLARE v_request VARBINARY(128);
    DECLARE v_expires, v_now DATETIME(6);
    DECLARE v_released, v_live, v_admitted, v_issued BOOLEAN;
    DECLARE v_attempt INT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = FALSE;
    SET p_status = NULL, p_fence = NULL, p_holder_out = NULL, p_ttl_left = NULL, p_now = NULL, p_floor = NULL;
    attempts: WHILE v_attempt < 3 DO
        SET v_attempt = v_attempt + 1, v_found = TRUE, v_request_fence = NULL,
            v_holder = NULL, v_fence = NULL, v_request = NULL, v_expires = NULL, v_released = NULL;
        SELECT holder, fence, request_id, expires_at, released
          INTO v_holder, v_fence, v_request, v_expires, v_released
          FROM fencegate_lease WHERE resource = p_resource FOR UPDATE;
        SET v_now = UTC_TIMESTAMP(6), p_now = v_now; -- after the lock wait
        SET v_live = v_found AND NOT v_released AND v_expires > v_now;
        IF v_live AND v_holder = p_holder AND v_request = p_request_id THEN
            SET p_status = 'retried', p_fence = v_fence, p_holder_out = v_holder,
                p_ttl_left = TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) DIV 1000;
            LEAVE attempts;
        END IF;
        IF NOT v_live OR v_request <> p_request_id THEN
            BEGIN
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_request_fence = NULL;
                SELECT fence INTO v_request_fence FROM fencegate_request
                 WHERE resource = p_resource AND request_id = p_request_id;
            END;
            IF v_request_fence IS NOT NULL AND NOT v_found THEN
                ITERATE attempts; -- the request's grant committed after the read found no row
            END IF;
            IF v_request_fence IS NOT NULL THEN
                SET p_status = 'request_expired', p_fence = v_request_fence;
                LEAVE attempts;
            END IF;
        END IF;
        IF v_live THEN
            SET p_status = 'held', p_holder_out = v_holder, -- time until it frees, rounded up
                p_ttl_left = (TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) + 999) DIV 1000;
            LEAVE attempts;
        END IF;
        -- Free (never leased, expired or released): a new generation. The
        -- counter's lock is held until the claim ends, so fences are taken
        -- one at a time, in commit order.
        UPDATE fencegate_fence_seq SET last = last + 1 WHERE id = 1;
        SELECT last INTO p_fence FROM fencegate_fence_seq WHERE id = 1;
        IF v_fence IS NOT NULL THEN
            UPDATE fencegate_lease
               SET holder = p_holder, fence = p_fence, request_id = p_request_id, granted_at = v_now,
                   expires_at = v_now + INTERVAL p_ttl_us MICROSECOND, released = FALSE
             WHERE resource = p_resource;
        ELSE
            INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
            VALUES (p_resource, p_holder, p_fence, p_request_id, v_now, v_now + INTERVAL p_ttl_us MICROSECOND, FALSE)
            ON DUPLICATE KEY UPDATE resource = resource;
            SET v_found = TRUE;
            SELECT fence INTO v_fence FROM fencegate_lease WHERE resource = p_resource FOR UPDATE;
            IF NOT v_found OR v_fence <> p_fence THEN
                SET p_fence = NULL, v_fence = NULL;
                ITERATE attempts; -- a concurrent first claim created the row: read it
            END IF;
        END IF;
        INSERT INTO fencegate_request (resource, request_id, fence, made_at)
        VALUES (p_resource, p_request_id, p_fence, v_now)
        ON DUPLICATE KEY UPDATE resource = resource;
        -- Co-located: the gate's floor rises in the claim's transaction.
        CALL fencegate_raise_floor(p_resource, p_holder, p_fence, FALSE, v_admitted, v_issued, v_floor, v_floor_holder);
        IF NOT v_admitted THEN
            SET p_status = 'floor_ahead', p_holder_out = v_floor_holder, p_floor = v_floor;
            LEAVE attempts;
        END IF;
        SET p_status = 'granted', p_holder_out = p_holder, p_ttl_left = p_ttl_us DIV 1000;
        LEAVE attempts;
    END WHILE;
    IF p_status IS NULL THEN
        SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'fencegate: the lease row kept changing under a concurrent claim; try again';
    END IF;
END
-- +goose StatementEnd

-- fencegate_claim acquires a resource for a term of ttl_ms. One row:
-- status, fence, holder, ttl_ms, request_id (docs/SQL.md). A request id
-- makes a retry idempotent; NULL has the database make one. A transaction
-- of its own, rolled back unless a lease was granted.
DROP PROCEDURE IF EXISTS fencegate_claim;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_claim(IN p_resource LONGBLOB, IN p_holder LONGBLOB, IN p_ttl_ms BIGINT, IN p_request_id LONGBLOB)
    COMMENT 'fencegate protocol 1: claim a resource'
BEGIN
    DECLARE v_request VARBINARY(128);
    DECLARE v_status VARCHAR(16);
    DECLARE v_fence, v_ttl, v_floor BIGINT;
    DECLARE v_holder VARBINARY(256);
    DECLARE v_now DATETIME(6);
    CALL fencegate_valid_args(p_resource, p_holder, 'ttl_ms', p_ttl_ms, TRUE);
    IF p_request_id IS NULL THEN
        SET v_request = CONCAT('fg-', REPLACE(UUID(), '-', ''));
    ELSE
        CALL fencegate_valid_request(p_request_id);
        SET v_request = p_request_id;
    END IF;
    BEGIN
        DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
        START TRANSACTION;
        CALL fencegate_claim_one(p_resource, p_holder, p_ttl_ms * 1000, v_request, v_status, v_fence, v_holder, v_ttl,
                                 v_now, v_floor);
        IF v_status IN ('granted', 'retried') THEN
            COMMIT;
        ELSE
            ROLLBACK; -- nothing granted: a floor ahead's grant is undone
            SET v_fence = NULL;
        END IF;
    END;
    SELECT v_status AS status, v_fence AS fence, CONVERT(v_holder USING utf8mb4) AS holder,
           v_ttl AS ttl_ms, CONVERT(v_request USING utf8mb4) AS request_id;
END
-- +goose StatementEnd

-- fencegate_acquire_lease is the acquisition of one resource as the Go
-- driver runs it (sqlstore.Executor.LeaseAcquire): fencegate_claim_one,
-- arguments checked by the caller, the term in µs, in the caller's
-- transaction, which the caller rolls back (or back to a savepoint) on
-- floor_ahead. One row: status, fence (the new one, or the request's for
-- request_expired), floor and floor_holder (floor_ahead), then the lease
-- row (granted, retried, held: times in µs since the epoch; NULL
-- otherwise) and the clock the claim judged by.
DROP PROCEDURE IF EXISTS fencegate_acquire_lease;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_acquire_lease(IN p_resource VARBINARY(256), IN p_holder VARBINARY(256), IN p_ttl_us BIGINT,
                                         IN p_request_id VARBINARY(128))
    COMMENT 'fencegate internal: the Go driver''s acquisition of one resource'
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_fence, v_ttl, v_floor BIGINT;
    DECLARE v_holder VARBINARY(256);
    DECLARE v_now DATETIME(6);
    CALL fencegate_claim_one(p_resource, p_holder, p_ttl_us, p_request_id, v_status, v_fence, v_holder, v_ttl,
                             v_now, v_floor);
    IF v_status IN ('granted', 'retried', 'held') THEN
        -- A locking read: the row claim_one locked, as it is now, whatever
        -- the caller's isolation level and snapshot.
        SELECT v_status, v_fence, NULL, NULL, resource, holder, fence, request_id,
               TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', granted_at),
               TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', expires_at), released,
               TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', v_now)
          FROM fencegate_lease WHERE resource = p_resource FOR UPDATE;
    ELSE
        SELECT v_status, v_fence, v_floor, v_holder, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
               TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', v_now);
    END IF;
END
-- +goose StatementEnd

-- fencegate_claim_set acquires every resource of a JSON array of names
-- under one fence, all or none (lease.Coordinator.AcquireSet's rules for
-- plain names). One row per resource, in the array's order: status, fence,
-- holder, ttl_ms, request_id, resource. When any is held nothing is
-- granted: the held ones say held, the others not_taken. Needs JSON_TABLE
-- (MySQL 8.0.4+, MariaDB 10.6+). A transaction of its own.
DROP PROCEDURE IF EXISTS fencegate_claim_set;
-- +goose StatementBegin
CREATE PROCEDURE fencegate_claim_set(IN p_resources LONGBLOB, IN p_holder LONGBLOB, IN p_ttl_ms BIGINT, IN p_request_id LONGBLOB)
    COMMENT 'fencegate protocol 1: claim a set of resources, all or none'
BEGIN
    DECLARE v_json LONGTEXT CHARACTER SET utf8mb4;
    DECLARE v_request VARBINARY(128);
    DECLARE v_n, i, v_retried INT DEFAULT 0;
    DECLARE v_member VARBINARY(256);
    DECLARE v_prev VARBINARY(256) DEFAULT NULL;
    DECLARE v_ord INT;
    DECLARE v_done BOOLEAN DEFAULT FALSE;
    DECLARE v_found BOOLEAN;
    DECLARE v_holder, v_floor_holder VARBINARY(256);
    DECLARE v_fence, v_request_fence, v_new_fence, v_floor BIGINT;
    DECLARE v_req VARBINARY(128);
    DECLARE v_expires, v_now DATETIME(6);
    DECLARE v_released, v_live, v_admitted, v_issued BOOLEAN;
    DECLARE v_answer VARCHAR(16) DEFAULT NULL; -- request_expired, held, retried, floor_ahead or granted
    DECLARE v_answer_fence BIGINT DEFAULT NULL;
    DECLARE v_rows JSON DEFAULT JSON_ARRAY();   -- one object per member, in sorted order
    DECLARE v_out JSON DEFAULT JSON_ARRAY();
    DECLARE v_row JSON;
    DECLARE v_msg VARCHAR(128);
    DECLARE members CURSOR FOR
        SELECT jt.ord, CAST(jt.m AS BINARY) FROM JSON_TABLE(v_json, '$[*]' COLUMNS (ord FOR ORDINALITY, m VARCHAR(1024) PATH '$')) jt
         ORDER BY CAST(jt.m AS BINARY);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;

    -- Input: a JSON array of 1 to 64 distinct strings, each a valid name.
    CALL fencegate_valid_args('x', p_holder, 'ttl_ms', p_ttl_ms, FALSE);
    IF p_resources IS NULL OR CAST(CONVERT(p_resources USING utf8mb4) AS BINARY) <> p_resources
       OR NOT JSON_VALID(CONVERT(p_resources USING utf8mb4)) THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: resources must be a JSON array of names';
    END IF;
    SET v_json = CONVERT(p_resources USING utf8mb4);
    IF JSON_TYPE(v_json) <> 'ARRAY' OR JSON_LENGTH(v_json) = 0 OR JSON_LENGTH(v_json) > 64 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: resources must be a JSON array of 1 to 64 names';
    END IF;
    SET v_n = JSON_LENGTH(v_json);
    WHILE i < v_n DO
        IF JSON_TYPE(JSON_EXTRACT(v_json, CONCAT('$[', i, ']'))) <> 'STRING' THEN
            SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: resources must be a JSON array of names (strings)';
        END IF;
        SET v_member = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_json, CONCAT('$[', i, ']'))) AS BINARY);
        CALL fencegate_valid_args(v_member, p_holder, 'ttl_ms', p_ttl_ms, TRUE);
        SET i = i + 1;
    END WHILE;
    IF p_request_id IS NULL THEN
        SET v_request = CONCAT('fg-', REPLACE(UUID(), '-', ''));
    ELSE
        CALL fencegate_valid_request(p_request_id);
        SET v_request = p_request_id;
    END IF;

    BEGIN
        DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
        START TRANSACTION;
        -- 1. Every member's lease row, locked in byte order (overlapping
        --    claims queue instead of deadlocking), judged as one claim's.
        OPEN members;
        judge: LOOP
            SET v_done = FALSE;
            FETCH members INTO v_ord, v_member;
            IF v_done THEN LEAVE judge; END IF;
            IF v_member = v_prev THEN
                CLOSE members;
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencegate: resources name a resource twice';
            END IF;
            SET v_prev = v_member, v_found = TRUE, v_holder = NULL, v_fence = NULL, v_req = NULL, v_expires = NULL, v_released = NULL;
            BEGIN
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = FALSE;
                SELECT holder, fence, request_id, expires_at, released
                  INTO v_holder, v_fence, v_req, v_expires, v_released
                  FROM fencegate_lease WHERE resource = v_member FOR UPDATE;
                SET v_now = UTC_TIMESTAMP(6);
                SET v_live = v_found AND NOT v_released AND v_expires > v_now, v_request_fence = NULL;
            END;
            IF NOT (v_live AND v_holder = p_holder AND v_req = v_request) AND (NOT v_live OR v_req <> v_request) THEN
                BEGIN
                    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_request_fence = NULL;
                    SELECT fence INTO v_request_fence FROM fencegate_request
                     WHERE resource = v_member AND request_id = v_request;
                END;
            END IF;
            IF v_live AND v_holder = p_holder AND v_req = v_request THEN
                SET v_retried = v_retried + 1;
                SET v_row = JSON_OBJECT('i', v_ord, 'r', CONVERT(v_member USING utf8mb4), 'found', 1, 's', 'retried',
                    'f', v_fence, 'h', CONVERT(v_holder USING utf8mb4), 't', TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) DIV 1000);
            ELSEIF v_request_fence IS NOT NULL THEN
                IF NOT v_found THEN
                    CLOSE members;
                    SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'fencegate: a copy of this claim committed under it; try again';
                END IF;
                IF v_answer IS NULL THEN
                    SET v_answer = 'request_expired', v_answer_fence = v_request_fence;
                END IF;
                SET v_row = JSON_OBJECT('i', v_ord, 'r', CONVERT(v_member USING utf8mb4), 'found', IF(v_found, 1, 0), 's', 'request_expired');
            ELSEIF v_live THEN
                IF v_answer IS NULL THEN
                    SET v_answer = 'held';
                END IF;
                SET v_row = JSON_OBJECT('i', v_ord, 'r', CONVERT(v_member USING utf8mb4), 'found', 1, 's', 'held',
                    'h', CONVERT(v_holder USING utf8mb4), 't', (TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) + 999) DIV 1000);
            ELSE
                SET v_row = JSON_OBJECT('i', v_ord, 'r', CONVERT(v_member USING utf8mb4), 'found', IF(v_found, 1, 0), 's', 'not_taken');
            END IF;
            SET v_rows = JSON_ARRAY_APPEND(v_rows, '$', JSON_EXTRACT(v_row, '$'));
        END LOOP;
        CLOSE members;

        IF v_answer IS NULL AND v_retried = v_n THEN
            SET v_answer = 'retried';
        ELSEIF v_answer IS NULL AND v_retried > 0 THEN
            -- Part of this request's grant is over: never granted again.
            SET v_answer = 'request_expired';
        END IF;

        IF v_answer IS NULL THEN
            -- 2. One fence for the whole set; every member's lease, then
            --    every floor, in byte order.
            UPDATE fencegate_fence_seq SET last = last + 1 WHERE id = 1;
            SELECT last INTO v_new_fence FROM fencegate_fence_seq WHERE id = 1;
            SET v_now = UTC_TIMESTAMP(6), i = 0;
            WHILE i < v_n DO
                SET v_member = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_rows, CONCAT('$[', i, '].r'))) AS BINARY);
                IF JSON_EXTRACT(v_rows, CONCAT('$[', i, '].found')) = 1 THEN
                    UPDATE fencegate_lease
                       SET holder = p_holder, fence = v_new_fence, request_id = v_request, granted_at = v_now,
                           expires_at = v_now + INTERVAL p_ttl_ms * 1000 MICROSECOND, released = FALSE
                     WHERE resource = v_member;
                ELSE
                    INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
                    VALUES (v_member, p_holder, v_new_fence, v_request, v_now, v_now + INTERVAL p_ttl_ms * 1000 MICROSECOND, FALSE);
                    -- A concurrent first claim that created the row fails this
                    -- insert (duplicate key): the claim is rolled back whole.
                END IF;
                INSERT INTO fencegate_request (resource, request_id, fence, made_at)
                VALUES (v_member, v_request, v_new_fence, v_now)
                ON DUPLICATE KEY UPDATE resource = resource;
                SET i = i + 1;
            END WHILE;
            SET i = 0;
            WHILE i < v_n AND v_answer IS NULL DO
                SET v_member = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_rows, CONCAT('$[', i, '].r'))) AS BINARY);
                CALL fencegate_raise_floor(v_member, p_holder, v_new_fence, FALSE, v_admitted, v_issued, v_floor, v_floor_holder);
                IF NOT v_admitted THEN
                    SET v_answer = 'floor_ahead',
                        v_rows = JSON_SET(v_rows, CONCAT('$[', i, '].s'), 'floor_ahead', CONCAT('$[', i, '].h'), CONVERT(v_floor_holder USING utf8mb4));
                END IF;
                SET i = i + 1;
            END WHILE;
            IF v_answer IS NULL THEN
                SET v_answer = 'granted', i = 0;
                WHILE i < v_n DO
                    SET v_rows = JSON_SET(v_rows, CONCAT('$[', i, '].s'), 'granted', CONCAT('$[', i, '].f'), v_new_fence,
                                          CONCAT('$[', i, '].h'), CONVERT(p_holder USING utf8mb4), CONCAT('$[', i, '].t'), p_ttl_ms);
                    SET i = i + 1;
                END WHILE;
            END IF;
        END IF;

        IF v_answer IN ('granted', 'retried') THEN
            COMMIT;
        ELSE
            ROLLBACK;
        END IF;
    END;

    -- The answer, one row per member in the array's order.
    SET i = 0;
    WHILE i < v_n DO
        SET v_row = JSON_EXTRACT(v_rows, CONCAT('$[', i, ']'));
        -- Nothing granted: a member this request holds is not taken either;
        -- when part of its grant is over (a member released on its own, the
        -- request's record pruned), the members that are free say why.
        IF v_answer NOT IN ('granted', 'retried') AND JSON_UNQUOTE(JSON_EXTRACT(v_row, '$.s')) = 'retried' THEN
            SET v_row = JSON_SET(v_row, '$.s', 'not_taken', '$.f', NULL, '$.h', NULL, '$.t', NULL);
        ELSEIF v_answer = 'request_expired' AND v_answer_fence IS NULL AND JSON_UNQUOTE(JSON_EXTRACT(v_row, '$.s')) = 'not_taken' THEN
            SET v_row = JSON_SET(v_row, '$.s', 'request_expired');
        END IF;
        SET v_out = JSON_ARRAY_APPEND(v_out, '$', JSON_EXTRACT(v_row, '$'));
        SET i = i + 1;
    END WHILE;
    SELECT jt.status, jt.fence, jt.holder, jt.ttl_ms, CONVERT(v_request USING utf8mb4) AS request_id, jt.resource
      FROM JSON_TABLE(v_out, '$[*]' COLUMNS (
             ord      INT                                    PATH '$.i',
             status   VARCHAR(16)                            PATH '$.s',
             fence    BIGINT                                 PATH '$.f',
             holder   VARCHAR(256) CHARACTER SET utf8mb4     PATH '$.h',
             ttl_ms   BIGINT                                 PATH '$.t',
             resource VARCHAR(256) CHARACTER SET utf8mb4     PATH '$.r')) jt
     ORDER BY jt.ord;
END
-- +goose StatementEnd

-- +goose Down
DROP PROCEDURE IF EXISTS fencegate_claim_set;
DROP PROCEDURE IF EXISTS fencegate_claim;
DROP PROCEDURE IF EXISTS fencegate_acquire_lease;
DROP PROCEDURE IF EXISTS fencegate_claim_one;
DROP PROCEDURE IF EXISTS fencegate_release;
DROP PROCEDURE IF EXISTS fencegate_release_lease;
DROP PROCEDURE IF EXISTS fencegate_release_rule;
DROP PROCEDURE IF EXISTS fencegate_renew;
DROP PROCEDURE IF EXISTS fencegate_renew_lease;
DROP PROCEDURE IF EXISTS fencegate_renew_rule;
DROP PROCEDURE IF EXISTS fencegate_admit;
DROP PROCEDURE IF EXISTS fencegate_log_refusal;
DROP PROCEDURE IF EXISTS fencegate_check;
DROP PROCEDURE IF EXISTS fencegate_refuse;
DROP PROCEDURE IF EXISTS fencegate_raise;
DROP PROCEDURE IF EXISTS fencegate_raise_floor;
DROP PROCEDURE IF EXISTS fencegate_valid_request;
DROP PROCEDURE IF EXISTS fencegate_valid_args;
DROP PROCEDURE IF EXISTS fencegate_valid_name;
DROP PROCEDURE IF EXISTS fencegate_protocol_version;
