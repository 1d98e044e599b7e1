// Replays files through a harness's LLVMFuzzerTestOneInput without libFuzzer:
// each argument is a file or a folder of files (regressions/<target>/, the
// seeds). Prints how many it fed; any crash fails the ctest that runs it.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_entry.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    if (fs::is_directory(arg)) {
      for (const auto& entry : fs::recursive_directory_iterator(arg)) {
        if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
      }
    } else if (fs::exists(arg)) {
      files.push_back(arg);
    } else {
      std::cerr << "no such file or folder: " << arg << "\n";
      return 2;
    }
  }
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  }
  std::cout << "replayed " << files.size() << " inputs\n";
  return files.empty() ? 1 : 0;
}
