#include "server/store/result_views.h"

#include <cstdint>
#include <cstdio>
#include <vector>

#include "search_spaces/metric_catalog.h"
#include "search_spaces/search_space.h"

namespace frontier {
namespace {

// The goals of each experiment, per dialect: CTEs `objective` (experiment_id,
// metric, sign: +1 maximize, -1 minimize) and `bound` (experiment_id, metric,
// low, high) read from experiments.goals_json.
constexpr const char* kSqliteGoals = R"sql(WITH objective AS (
  SELECT e.id AS experiment_id, json_extract(o.value, '$.metric') AS metric,
         CASE json_extract(o.value, '$.goal') WHEN 'minimize' THEN -1.0 ELSE 1.0 END AS sign
  FROM experiments e, json_each(e.goals_json, '$.objectives') o),
bound AS (
  SELECT e.id AS experiment_id, json_extract(k.value, '$.metric') AS metric,
         json_extract(k.value, '$.min') AS low, json_extract(k.value, '$.max') AS high
  FROM experiments e, json_each(e.goals_json, '$.constraints') k),
)sql";
constexpr const char* kPostgresGoals = R"sql(WITH objective AS (
  SELECT e.id AS experiment_id, o ->> 'metric' AS metric,
         CASE o ->> 'goal' WHEN 'minimize' THEN -1.0 ELSE 1.0 END AS sign
  FROM experiments e, jsonb_array_elements(COALESCE(e.goals_json::jsonb -> 'objectives', '[]'::jsonb)) o),
bound AS (
  SELECT e.id AS experiment_id, k ->> 'metric' AS metric, (k ->> 'min')::float8 AS low, (k ->> 'max')::float8 AS high
  FROM experiments e, jsonb_array_elements(COALESCE(e.goals_json::jsonb -> 'constraints', '[]'::jsonb)) k),
)sql";

// config_front after the goals, dialect-neutral: a config's value of a metric
// named by an objective or a constraint (the CASE between kFrontValued and
// kFrontScored), feasibility, candidates and pairwise dominance.
constexpr const char* kFrontValued = R"sql(
-- Dialect-neutral: a config's value of a metric named by an objective or a
-- constraint, feasibility, candidates and pairwise dominance.
valued AS (
  SELECT c.experiment_id, c.config_json, c.seeds_completed, g.metric, g.sign, g.low, g.high,
    CASE g.metric
)sql";
constexpr const char* kFrontScored = R"sql(    END AS value
  FROM config_results c
  JOIN (SELECT experiment_id, metric, sign, NULL AS low, NULL AS high FROM objective
        UNION ALL SELECT experiment_id, metric, NULL, low, high FROM bound) g ON g.experiment_id = c.experiment_id
  WHERE c.seeds_completed > 0),
score AS (
  SELECT experiment_id, config_json, metric, sign * value AS score FROM valued WHERE sign IS NOT NULL),
infeasible AS (
  SELECT DISTINCT experiment_id, config_json FROM valued
  WHERE sign IS NULL AND (value IS NULL OR value < low OR value > high)),
candidate AS (
  SELECT s.experiment_id, s.config_json FROM score s
  WHERE NOT EXISTS (SELECT 1 FROM infeasible i WHERE i.experiment_id = s.experiment_id AND i.config_json = s.config_json)
  GROUP BY s.experiment_id, s.config_json HAVING COUNT(s.score) = COUNT(*)),
candidate_score AS (
  SELECT s.* FROM score s JOIN candidate USING (experiment_id, config_json)),
dominance AS (
  SELECT a.experiment_id, a.config_json, b.config_json AS other
  FROM candidate_score a JOIN candidate_score b
    ON b.experiment_id = a.experiment_id AND b.metric = a.metric AND b.config_json <> a.config_json
  GROUP BY a.experiment_id, a.config_json, b.config_json
)sql";
constexpr const char* kFrontRanked = R"sql(dominated AS (
  SELECT experiment_id, config_json, COUNT(*) AS dominated_by FROM dominance GROUP BY experiment_id, config_json)
SELECT c.*,
       c.seeds_completed > 0 AND i.config_json IS NULL AS feasible,
       k.config_json IS NOT NULL AND d.config_json IS NULL AS on_front,
       CASE WHEN k.config_json IS NULL THEN NULL ELSE COALESCE(d.dominated_by, 0) END AS dominated_by
FROM config_results c
LEFT JOIN infeasible i ON i.experiment_id = c.experiment_id AND i.config_json = c.config_json
LEFT JOIN candidate k ON k.experiment_id = c.experiment_id AND k.config_json = c.config_json
LEFT JOIN dominated d ON d.experiment_id = c.experiment_id AND d.config_json = c.config_json;
)sql";

// Migration 4's CASE: the metrics config_results had then. Frozen.
constexpr const char* kMigration4Case = R"sql(      WHEN 'val_accuracy' THEN c.val_accuracy
      WHEN 'test_accuracy' THEN c.test_accuracy
      WHEN 'val_loss' THEN c.val_loss
      WHEN 'val_iou' THEN c.val_iou
      WHEN 'test_iou' THEN c.test_iou
      WHEN 'test_loss' THEN c.test_loss
      WHEN 'step_time_ms' THEN c.median_step_time_ms
      WHEN 'median_step_time_ms' THEN c.median_step_time_ms
      WHEN 'throughput' THEN c.throughput
      WHEN 'mfu' THEN c.mfu
      WHEN 'peak_memory_mb' THEN c.peak_memory_mb
      WHEN 'params' THEN c.params
)sql";

// Pareto dominance of config b over config a on the scores (sign * value:
// higher is better) of their shared objectives, grouped per (a, b): at least
// as good in every objective, better in one. The rule of Dominates
// (server/analysis/pareto.h) in SQL; tests/server/config_views.h checks that
// both fronts agree.
std::string DominancePredicate() {
  return "  HAVING MIN(CASE WHEN b.score >= a.score THEN 1 ELSE 0 END) = 1 AND "
         "MAX(CASE WHEN b.score > a.score THEN 1 ELSE 0 END) = 1),\n";
}

std::string Goals(SqlDialect dialect) {
  return dialect == SqlDialect::kSqlite ? kSqliteGoals : kPostgresGoals;
}

// The CASE that maps a metric name to its config_results column: every
// aggregated catalog metric by name, and by its column where that differs.
std::string ValueCase() {
  std::string out;
  for (const MetricInfo* m : SqlMetrics()) {
    if (!m->sql_aggregated) continue;
    const std::string column(m->sql_column);
    out += "      WHEN '" + std::string(m->name) + "' THEN c." + column + "\n";
    if (column != m->name) out += "      WHEN '" + column + "' THEN c." + column + "\n";
  }
  return out;
}

// The expression that reads a metric from trials.result_json.
std::string Extract(SqlDialect dialect, const MetricInfo& m) {
  const std::vector<std::string> path = MetricPath(std::string(m.name));
  if (dialect == SqlDialect::kSqlite)
    return "json_extract(result_json, '$." + std::string(m.result_path) + "')";
  std::string out = "(result_json::jsonb";
  for (size_t i = 0; i < path.size(); ++i) out += (i + 1 < path.size() ? " -> '" : " ->> '") + path[i] + "'";
  switch (m.sql_type) {
    case SqlType::kReal:
      return out + ")::float8";
    case SqlType::kInteger:
      return out + ")::int";
    case SqlType::kBigInteger:
      return out + ")::bigint";
  }
  return out + ")";
}

// Sample standard deviation of r.<column> over a group.
std::string Spread(SqlDialect dialect, const std::string& column) {
  if (dialect == SqlDialect::kPostgres) return "stddev_samp(r." + column + ")";
  const std::string x = "r." + column;
  return "sqrt(max(0.0, (SUM(" + x + " * " + x + ") - SUM(" + x + ") * SUM(" + x + ") / COUNT(" + x +
         ")) / (COUNT(" + x + ") - 1)))";
}

std::string Create(SqlDialect dialect, const char* view) {
  return std::string(dialect == SqlDialect::kSqlite ? "CREATE VIEW " : "CREATE OR REPLACE VIEW ") + view +
         " AS";
}

std::string ResultsView(SqlDialect dialect) {
  std::string sql =
      Create(dialect, "results") +
      "\nSELECT id AS trial_id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, "
      "worker_id,\n";
  for (const MetricInfo* m : SqlMetrics())
    sql += "       " + Extract(dialect, *m) + " AS " + std::string(m->sql_column) + ",\n";
  // Profile runs (`frontier profile`) are re-runs of stored trials, never results of their own;
  // screening trials (docs/strategies.md#screening) are timings, never results.
  return sql + "       finished_ms\nFROM trials WHERE result_json <> '' AND profile_of = '' AND proposer <> '" +
         kScreenProposer + "';\n";
}

std::string ConfigResultsView(SqlDialect dialect) {
  std::string sql = Create(dialect, "config_results") + "\nSELECT t.experiment_id, t.config_json, ";
  sql += dialect == SqlDialect::kSqlite
             ? "MAX(t.is_baseline) AS is_baseline, COUNT(*) AS trials,\n"
               "       SUM(t.state = 'completed') AS seeds_completed,\n"
               "       SUM(t.state IN ('failed', 'diverged')) AS trials_failed"
             : "bool_or(t.is_baseline) AS is_baseline, COUNT(*) AS trials,\n"
               "       COUNT(*) FILTER (WHERE t.state = 'completed') AS seeds_completed,\n"
               "       COUNT(*) FILTER (WHERE t.state IN ('failed', 'diverged')) AS trials_failed";
  for (const MetricInfo* m : SqlMetrics()) {
    if (!m->sql_aggregated) continue;
    const std::string column(m->sql_column);
    sql += ",\n       AVG(r." + column + ") AS " + column;
    if (m->sql_spread) sql += ", " + Spread(dialect, column) + " AS " + column + "_std";
  }
  return sql +
         "\nFROM trials t LEFT JOIN results r ON r.trial_id = t.id AND t.state = 'completed'\n"
         "WHERE t.profile_of = '' AND t.proposer <> '" + kScreenProposer + "'\n"
         "GROUP BY t.experiment_id, t.config_json;\n";
}

std::string ConfigFrontView(SqlDialect dialect, const std::string& stamp) {
  std::string sql = Create(dialect, "config_front");
  if (dialect == SqlDialect::kSqlite) sql += " -- " + stamp;
  sql +=
      "\n" + Goals(dialect) + kFrontValued + ValueCase() + kFrontScored + DominancePredicate() + kFrontRanked;
  if (dialect == SqlDialect::kPostgres) sql += "COMMENT ON VIEW config_front IS '" + stamp + "';\n";
  return sql;
}

// FNV-1a, 64 bits: stable across builds and platforms.
uint64_t Fingerprint(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

std::string ResultViewsStamp(SqlDialect dialect) {
  const std::string unstamped =
      ResultsView(dialect) + ConfigResultsView(dialect) + ConfigFrontView(dialect, "");
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "frontier result views %016llx",
                static_cast<unsigned long long>(Fingerprint(unstamped)));
  return stamp;
}

std::string ResultViewsSql(SqlDialect dialect) {
  return ResultsView(dialect) + ConfigResultsView(dialect) +
         ConfigFrontView(dialect, ResultViewsStamp(dialect));
}

std::string Migration4ConfigFrontView(SqlDialect dialect) {
  return "CREATE VIEW config_front AS\n" + Goals(dialect) + kFrontValued + kMigration4Case + kFrontScored +
         DominancePredicate() + kFrontRanked;
}

}  // namespace frontier
