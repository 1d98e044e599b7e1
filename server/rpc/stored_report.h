// The report of a stored experiment: the one path from a Store to a
// rendered report, shared by the coordinator's GetReport and the CLI's reads
// without a server (`frontier report --db FILE`, `--store URL`). Reads only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/report/report.h"
#include "server/store/artifact_store.h"
#include "server/store/store.h"

namespace frontier {

struct ReportRequest {
  std::string experiment_id;
  std::string format = "json";       // json, table, csv or html
  bool front_only = false;           // only the baseline and the front
  bool wide = false;                 // table: every column, labels never cut
  std::vector<std::string> compare;  // two config names (FindConfig): their comparison, table or json
  // html: the trials' artifacts in this store are listed, linked under
  // artifacts_href (Report::artifacts_href); null: none listed.
  const ArtifactStore* artifacts = nullptr;
  std::string artifacts_href;
};

struct RenderedReport {
  std::string content;
  std::string content_type;  // MIME type
};

// The report of experiment `id` over its stored trials (each row read for
// what the report needs and released in turn); nullopt when there is no such
// experiment. The space comes from the stored file (its dimensions name the
// configs); a file this build no longer parses falls back to the stored goals.
// Throws StoreError.
std::optional<Report> StoredReport(Store& store, const std::string& id, bool front_only);

// The report (or comparison) in the requested format; nullopt when there is
// no such experiment. Throws std::invalid_argument for an unknown format, a
// comparison of other than two configs or a name that matches none or
// several; StoreError.
std::optional<RenderedReport> RenderStoredReport(Store& store, const ReportRequest& request);

}  // namespace frontier
