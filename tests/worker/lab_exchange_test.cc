// The files a sandboxed candidate's runner writes for the kernel lab's judge
// (worker/trial/lab_exchange.h): read back exactly, and every hostile file
// refused with the bound it breaks, never a crash or a huge allocation.
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "worker/trial/lab_exchange.h"

namespace frontier {
namespace {

namespace fs = std::filesystem;

class LabExchangeTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lab_exchange_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& bytes) const {
    std::ofstream(Path(name), std::ios::binary) << bytes;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::string Refusal(const std::string& name, int64_t max_bytes, size_t count) const {
    try {
      lab::ReadTensors(Path(name), max_bytes, count);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(LabExchangeTest, TensorsRoundTripExactly) {
  const std::vector<torch::Tensor> tensors = {torch::randn({2, 3, 4}), torch::Tensor(),
                                              torch::randn({5}).to(torch::kBFloat16), torch::arange(6).reshape({2, 3}),
                                              torch::empty({0, 3}), torch::randn({3, 4}).t()};  // non-contiguous
  lab::WriteTensors(Path("ok.bin"), tensors);
  const std::vector<torch::Tensor> back = lab::ReadTensors(Path("ok.bin"), 1 << 20, tensors.size());
  ASSERT_EQ(back.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    ASSERT_EQ(back[i].defined(), tensors[i].defined()) << i;
    if (!tensors[i].defined()) continue;
    EXPECT_EQ(back[i].scalar_type(), tensors[i].scalar_type()) << i;
    EXPECT_TRUE(torch::equal(back[i], tensors[i])) << i;
  }
}

TEST_F(LabExchangeTest, HostileFilesAreRefusedNamingTheBound) {
  lab::WriteTensors(Path("ok.bin"), {torch::ones({4, 4})});
  const std::string good = Read("ok.bin");
  EXPECT_NE(Refusal("ok.bin", 1 << 20, 2).find("holds 1 tensors, 2 expected"), std::string::npos);
  EXPECT_NE(Refusal("ok.bin", 16, 1).find("larger than"), std::string::npos);  // the file's bound
  Write("short.bin", good.substr(0, good.size() - 3));
  EXPECT_NE(Refusal("short.bin", 1 << 20, 1).find("ends early"), std::string::npos);
  Write("long.bin", good + "x");
  EXPECT_NE(Refusal("long.bin", 1 << 20, 1).find("bytes after its last tensor"), std::string::npos);
  Write("magic.bin", "NOPE" + good.substr(4));
  EXPECT_NE(Refusal("magic.bin", 1 << 20, 1).find("not a tensor file"), std::string::npos);
  std::string dtype = good;
  dtype[9] = 99;  // magic (4), count (4), defined (1), then the dtype code
  Write("dtype.bin", dtype);
  EXPECT_NE(Refusal("dtype.bin", 1 << 20, 1).find("unknown dtype"), std::string::npos);
  std::string dims = good;
  dims[10] = 60;
  Write("dims.bin", dims);
  EXPECT_NE(Refusal("dims.bin", 1 << 20, 1).find("too many dims"), std::string::npos);
  // A size that claims terabytes is refused before anything is allocated.
  std::string huge = good;
  const int64_t size = int64_t{1} << 40;
  std::memcpy(&huge[11], &size, sizeof size);
  Write("huge.bin", huge);
  EXPECT_NE(Refusal("huge.bin", 1 << 20, 1).find("larger than the file's bound"), std::string::npos);
  EXPECT_NE(Refusal("missing.bin", 1 << 20, 1).find("cannot be read"), std::string::npos);
}

TEST_F(LabExchangeTest, ABoundedFileIsReadUpToItsBound) {
  Write("text", std::string(100, 'a'));
  EXPECT_EQ(lab::ReadBoundedFile(Path("text"), 100).size(), 100u);
  EXPECT_THROW(lab::ReadBoundedFile(Path("text"), 99), std::runtime_error);
}

// What a sandboxed runner leaves where the judge reads: a link is not followed, a FIFO not waited on.
TEST_F(LabExchangeTest, ALinkOrAFifoIsRefusedAtOnce) {
  lab::WriteTensors(Path("ok.bin"), {torch::ones({2})});
  fs::create_symlink(Path("ok.bin"), Path("link.bin"));
  ASSERT_EQ(::mkfifo(Path("fifo.bin").c_str(), 0600), 0);
  for (const char* name : {"link.bin", "fifo.bin"}) {
    EXPECT_NE(Refusal(name, 1 << 20, 1).find("not a regular file"), std::string::npos) << name;
    EXPECT_THROW(lab::ReadBoundedFile(Path(name), 1 << 20), std::runtime_error) << name;
  }
  EXPECT_EQ(lab::ReadTensors(Path("ok.bin"), 1 << 20, 1).size(), 1u);
}

}  // namespace
}  // namespace frontier
