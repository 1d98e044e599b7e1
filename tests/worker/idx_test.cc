#include "worker/trial/data/idx.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "worker/trial/data/dataset.h"

namespace frontier {
namespace {

namespace fs = std::filesystem;
const std::string kDir = kFashionMnistDir;

std::string TempPath(const std::string& name) { return (fs::temp_directory_path() / ("frontier_idx_" + name)).string(); }

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string ErrorOf(const std::string& path, int rank) {
  try {
    ReadIdxFile(path, rank);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(IdxReaderTest, ReadsTheRealFiles) {
  const auto labels = ReadIdxFile(kDir + "/t10k-labels-idx1-ubyte.gz", 1);
  ASSERT_EQ(labels->dims, (std::vector<int64_t>{10000}));
  std::vector<int> counts(10);
  for (uint8_t l : labels->data) counts.at(l)++;
  for (int c : counts) EXPECT_EQ(c, 1000);  // the test set is balanced
  const auto images = ReadIdxFile(kDir + "/train-images-idx3-ubyte.gz", 3);
  EXPECT_EQ(images->dims, (std::vector<int64_t>{60000, 28, 28}));
  EXPECT_EQ(images->data.size(), 60000u * 28 * 28);
}

// A kept file (the warm slot's server keeps its trials' dataset) is read from memory while it is the
// same file, and anew once it changed; a FIFO is never opened.
TEST(IdxReaderTest, AKeptFileIsReadFromMemoryUntilItChanges) {
  const std::string path = TempPath("kept");
  WriteBytes(path, {0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9});
  ASSERT_TRUE(KeepIdxFile(path, 1));
  struct stat before {};
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  {  // the same inode, size and modification time, other bytes: the kept copy answers
    std::fstream same(path, std::ios::binary | std::ios::in | std::ios::out);
    same.seekp(8);
    same.write("\x01\x02\x03", 3);
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  EXPECT_EQ(ReadIdxFile(path, 1)->data, (std::vector<uint8_t>{7, 8, 9}));
  EXPECT_EQ(ReadIdxFile(path, 1), ReadIdxFile(path, 1)) << "the kept array itself, not a copy";
  const std::string replacement = TempPath("kept_new");
  WriteBytes(replacement, {0, 0, 8, 1, 0, 0, 0, 2, 4, 5});
  fs::rename(replacement, path);  // another file at that path
  EXPECT_EQ(ReadIdxFile(path, 1)->data, (std::vector<uint8_t>{4, 5}));
  fs::remove(path);
  EXPECT_NE(ErrorOf(path, 1), "(accepted)") << "a removed file is not read from memory";

  const std::string fifo = TempPath("fifo");
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(KeepIdxFile(fifo, 1));
  fs::remove(fifo);
}

// What a warm server keeps is bounded: a file whose header promises more data than the bound is not
// read (the trial reads it itself), one within it is kept.
TEST(IdxReaderTest, AFileOverTheKeptBoundIsNotKept) {
  const std::string path = TempPath("bound");
  WriteBytes(path, {0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9});
  EXPECT_FALSE(KeepIdxFile(path, 1, /*max_bytes=*/2));
  const std::shared_ptr<const IdxArray> read = ReadIdxFile(path, 1);
  EXPECT_EQ(read->data, (std::vector<uint8_t>{7, 8, 9}));
  EXPECT_NE(ReadIdxFile(path, 1), read) << "read anew: nothing was kept";
  EXPECT_TRUE(KeepIdxFile(path, 1, /*max_bytes=*/3));
  EXPECT_EQ(ReadIdxFile(path, 1), ReadIdxFile(path, 1)) << "kept";
  fs::remove(path);
}

TEST(IdxReaderTest, RawFilesToo) {
  const std::string path = TempPath("raw");
  WriteBytes(path, {0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9});
  const auto a = ReadIdxFile(path, 1);
  EXPECT_EQ(a->dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(a->data, (std::vector<uint8_t>{7, 8, 9}));
  fs::remove(path);
}

TEST(IdxReaderTest, WrongMagic) {
  const std::string path = TempPath("magic");
  WriteBytes(path, {0, 0, 9, 1, 0, 0, 0, 1, 5});  // type 0x09 (signed byte)
  EXPECT_NE(ErrorOf(path, 1).find("wrong magic number 0x00000901, expected 0x00000801"), std::string::npos)
      << ErrorOf(path, 1);
  // A label file read as images: rank 1 where 3 is expected.
  EXPECT_NE(ErrorOf(kDir + "/t10k-labels-idx1-ubyte.gz", 3).find("wrong magic"), std::string::npos);
  fs::remove(path);
}

TEST(IdxReaderTest, TruncatedPayload) {
  const std::string path = TempPath("short");
  WriteBytes(path, {0, 0, 8, 1, 0, 0, 0, 10, 1, 2, 3, 4, 5});
  EXPECT_NE(ErrorOf(path, 1).find("truncated: header promises 10 bytes of data, file has 5"), std::string::npos)
      << ErrorOf(path, 1);
  WriteBytes(path, {0, 0, 8});
  EXPECT_NE(ErrorOf(path, 1).find("truncated before the IDX header"), std::string::npos);
  fs::remove(path);
}

TEST(IdxReaderTest, TruncatedGzipOfARealFile) {
  std::ifstream in(kDir + "/t10k-labels-idx1-ubyte.gz", std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  bytes.resize(bytes.size() / 2);
  const std::string path = TempPath("cut.gz");
  WriteBytes(path, bytes);
  const std::string error = ErrorOf(path, 1);
  EXPECT_TRUE(error.find("truncated") != std::string::npos || error.find("corrupt gzip") != std::string::npos)
      << error;
  EXPECT_NE(error.find(path), std::string::npos) << "the message names the file";
  fs::remove(path);
}

TEST(IdxReaderTest, MissingFileNamesIt) {
  EXPECT_NE(ErrorOf("/nonexistent/train-images-idx3-ubyte.gz", 3).find("/nonexistent/train-images"),
            std::string::npos);
}

TEST(DatasetTest, FashionMnistSplitsAreDeterministicAndDisjoint) {
  Dataset d = LoadFashionMnist(kDir, 5000);
  EXPECT_EQ(d.train.size(), 55000);
  EXPECT_EQ(d.val.size(), 5000);
  EXPECT_EQ(d.test.size(), 10000);
  // Validation is the tail of the training file, in file order.
  const auto labels = ReadIdxFile(kDir + "/train-labels-idx1-ubyte.gz", 1);
  EXPECT_EQ(d.val.labels[0].item<int64_t>(), labels->data[55000]);
  EXPECT_EQ(d.train.labels[54999].item<int64_t>(), labels->data[54999]);
}

// A warm slot's trial views the images its server kept, in place: the training and validation splits
// are views of the kept array (no 47 MB copies in every trial).
TEST(DatasetTest, FashionMnistImagesAreViewsOfTheKeptArray) {
  const std::string path = kDir + "/train-images-idx3-ubyte.gz";
  ASSERT_TRUE(KeepIdxFile(path, 3));
  const uint8_t* kept = ReadIdxFile(path, 3)->data.data();
  Dataset d = LoadFashionMnist(kDir, 5000);
  EXPECT_EQ(d.train.images.data_ptr<uint8_t>(), kept);
  EXPECT_EQ(d.val.images.data_ptr<uint8_t>(), kept + 55000 * 28 * 28);
}

TEST(DatasetTest, SamplerIsSeededAndNormalizes) {
  Dataset d = MakeSynthetic(InputShape{1, 8, 8, 3}, 64, 8, 7);
  BatchSampler a(d, 16, AugmentSpec{true, 2}, 42), b(d, 16, AugmentSpec{true, 2}, 42), c(d, 16, AugmentSpec{}, 43);
  for (int i = 0; i < 6; ++i) {  // crosses epoch boundaries
    auto [xa, ya] = a.Next();
    auto [xb, yb] = b.Next();
    EXPECT_TRUE(xa.equal(xb));
    EXPECT_TRUE(ya.equal(yb));
  }
  EXPECT_FALSE(a.Next().second.equal(c.Next().second));
  torch::Tensor x = Normalize(d, d.train.images, torch::kCPU, at::MemoryFormat::Contiguous);
  EXPECT_NEAR(x.mean().item<double>(), 0.0, 0.1);  // uniform pixels around the 0.5 mean
}

}  // namespace
}  // namespace frontier
