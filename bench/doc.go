// Package bench measures fencegate side by side with Postgres advisory
// locks, MariaDB's GET_LOCK and the unfenced baseline; cmd/fgbench runs every scenario and writes
// RESULTS.md and chart.svg.
package bench
