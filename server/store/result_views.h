// The SQL views over stored results (docs/sql-views.md): `results` (one row
// per trial with a result), `config_results` (aggregates over seeds per
// config) and `config_front` (feasibility and the place on the Pareto front
// on the experiment's goals), generated from the metric catalog
// (search_spaces/metric_catalog.h) for each dialect.
//
// The migrations that first created these views keep their text (history,
// in each store's kMigrations); the CURRENT views are these. Each store, after
// migrating, compares the stamp recorded with its views with ResultViewsStamp
// and runs ResultViewsSql when they differ, so a metric added to the catalog
// reaches every database at its next open. On PostgreSQL the views are
// replaced in place (CREATE OR REPLACE VIEW), which keeps views that users
// built on them but needs the columns to keep their names, order and types: a
// catalog change that alters existing columns (or adds one anywhere but at the
// end: `results` ends with finished_ms, config_front with its own three) needs
// a migration that drops the three views first, as PostgreSQL's migration 9
// did for the latency columns. SQLite drops and recreates them at every
// change: its views do not bind to the views they read, so a user's view on
// them keeps working.
#pragma once

#include <string>

namespace frontier {

enum class SqlDialect { kSqlite, kPostgres };

// Statements that create (PostgreSQL: create or replace) results,
// config_results and config_front, in that order, and record the stamp.
std::string ResultViewsSql(SqlDialect dialect);

// A text that changes whenever ResultViewsSql's text does; stores find it in
// their config_front view (SQLite: a comment in its text; PostgreSQL: the
// view's COMMENT).
std::string ResultViewsStamp(SqlDialect dialect);

// The config_front view as migration 4 created it, metrics of that time
// included. Frozen: it is history; ResultViewsSql generates the current view.
std::string Migration4ConfigFrontView(SqlDialect dialect);

}  // namespace frontier
