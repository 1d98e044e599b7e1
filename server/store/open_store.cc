#include "server/store/open_store.h"

#include <stdexcept>

#include "server/store/postgres_store.h"
#include "server/store/sqlite_store.h"

namespace frontier {

std::unique_ptr<Store> OpenStore(const std::string& url, OpenMode mode) {
  const std::string sqlite_prefix = "sqlite:";
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
    return std::make_unique<PostgresStore>(url, PostgresStore::kDefaultPoolSize, mode);
  }
  if (url.rfind(sqlite_prefix, 0) == 0) return std::make_unique<SqliteStore>(url.substr(sqlite_prefix.size()), mode);
  if (url.find("://") != std::string::npos) {
    throw std::invalid_argument("store '" + url +
                                "': unknown scheme; expected postgresql://USER@HOST:PORT/DB, a SQLite path or sqlite:PATH");
  }
  return std::make_unique<SqliteStore>(url, mode);
}

}  // namespace frontier
