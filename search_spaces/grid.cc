#include "search_spaces/search_space.h"

#include <limits>

namespace frontier {

using nlohmann::json;

size_t GridSize(const SearchSpace& space) {
  size_t size = 1;
  for (const Dimension& dim : space.dimensions) {
    if (dim.choices.empty()) return 0;
    if (size > std::numeric_limits<size_t>::max() / dim.choices.size()) {
      return std::numeric_limits<size_t>::max();
    }
    size *= dim.choices.size();
  }
  return size;
}

std::string GridCountText(size_t grid_size) {
  return grid_size == std::numeric_limits<size_t>::max() ? "at least 2^64" : std::to_string(grid_size);
}

std::string GridSizeText(size_t grid_size) { return "the grid has " + GridCountText(grid_size) + " configurations"; }

std::vector<Config> EnumerateGrid(const SearchSpace& space, size_t limit) {
  size_t size = GridSize(space);
  if (size > limit) {
    throw SpaceError(space.source, 0, "space",
                     GridSizeText(size) + ", more than the limit of " + std::to_string(limit));
  }
  std::vector<Config> grid;
  grid.reserve(size);
  std::vector<size_t> digits(space.dimensions.size(), 0);
  for (size_t n = 0; n < size; ++n) {
    Config config = json::object();
    for (size_t d = 0; d < digits.size(); ++d) {
      config[space.dimensions[d].name] = space.dimensions[d].choices[digits[d]];
    }
    grid.push_back(std::move(config));
    for (size_t d = digits.size(); d-- > 0;) {  // the last dimension varies fastest
      if (++digits[d] < space.dimensions[d].choices.size()) break;
      digits[d] = 0;
    }
  }
  return grid;
}

std::string ConfigKey(const Config& config) { return config.dump(); }

}  // namespace frontier
