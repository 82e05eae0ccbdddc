package pg

// DurabilitySQL lists, one row of text each, the settings under which this
// Postgres can lose a commit it acknowledged: synchronous_commit off in the
// session's settings (the role's and database's defaults included), and
// every standby that replicates asynchronously (pg_stat_replication's
// sync_state async, or potential: not waited for now). A role without
// pg_read_all_stats sees no sync_state, so no standby warnings.
const DurabilitySQL = `
SELECT 'synchronous_commit is off: a grant acknowledged just before a crash can be lost and its fence issued again'
 WHERE current_setting('synchronous_commit') = 'off'
UNION ALL
SELECT format('standby %s replicates asynchronously (sync_state %s): a failover to it can lose acknowledged grants and writes; after promoting it, run fencegate fence advance before letting clients in',
              coalesce(nullif(application_name, ''), client_addr::text, 'pid ' || pid), sync_state)
  FROM pg_stat_replication
 WHERE sync_state IN ('async', 'potential')`
