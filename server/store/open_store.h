// The store a URL names: the one place that maps store URLs to Store
// implementations (frontier-server --store, frontier run --db, benchmarks).
#pragma once

#include <memory>
#include <string>

#include "server/store/store.h"

namespace frontier {

// postgresql://USER@HOST:PORT/DB (or postgres://) opens PostgreSQL; a path,
// sqlite:PATH or ":memory:" opens SQLite. kMigrate: the store is migrated on
// open; kReadOnly: it is only read, and must have this build's schema
// (store.h OpenMode). Throws StoreError, or std::invalid_argument for an
// unknown scheme.
std::unique_ptr<Store> OpenStore(const std::string& url, OpenMode mode = OpenMode::kMigrate);

}  // namespace frontier
