#include "worker/trial/data/dataset.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "worker/trial/data/bev_scene.h"

namespace frontier {
namespace {

constexpr int64_t kFashionTrainSize = 60000;
constexpr int64_t kFashionTestSize = 10000;
// Pixel statistics of bev-synthetic, measured over 256 training samples of the default task.
constexpr float kBevMean = 0.45f;
constexpr float kBevStd = 0.25f;
// Per-pixel mean and standard deviation of the Fashion-MNIST training set.
constexpr float kFashionMean = 0.2860f;
constexpr float kFashionStd = 0.3530f;

std::string ImagesPath(const std::string& dir, const std::string& prefix) {
  return dir + "/" + prefix + "-images-idx3-ubyte.gz";
}
std::string LabelsPath(const std::string& dir, const std::string& prefix) {
  return dir + "/" + prefix + "-labels-idx1-ubyte.gz";
}

Split ReadSplit(const std::string& dir, const std::string& prefix, int64_t expected) {
  const std::string images_path = ImagesPath(dir, prefix);
  const std::string labels_path = LabelsPath(dir, prefix);
  const std::shared_ptr<const IdxArray> images = ReadIdxFile(images_path, 3);
  const std::shared_ptr<const IdxArray> labels = ReadIdxFile(labels_path, 1);
  if (images->dims[0] != expected || images->dims[1] != 28 || images->dims[2] != 28) {
    throw DataError(images_path + ": expected " + std::to_string(expected) + " images of 28x28");
  }
  if (labels->dims[0] != expected) {
    throw DataError(labels_path + ": expected " + std::to_string(expected) + " labels");
  }
  for (uint8_t l : labels->data) {
    if (l > 9) throw DataError(labels_path + ": label " + std::to_string(l) + " out of range 0..9");
  }
  Split s;
  // The images are read in place, never written (batches are gathered copies): the tensor holds the
  // array, which a warm slot's trial shares with its server (idx.h) rather than copying 47 MB.
  s.images = torch::from_blob(const_cast<uint8_t*>(images->data.data()), {expected, 1, 28, 28},
                              [images](void*) {}, torch::kUInt8);
  s.labels = torch::from_blob(const_cast<uint8_t*>(labels->data.data()), {expected}, torch::kUInt8).to(torch::kLong);
  return s;
}

}  // namespace

int64_t Dataset::bytes() const {
  int64_t b = 0;
  for (const Split* s : {&train, &val, &test}) {
    b += s->images.numel() * s->images.element_size() + s->labels.numel() * s->labels.element_size();
    if (s->depth.defined()) b += s->depth.numel() * s->depth.element_size();
  }
  return b;
}

Dataset LoadFashionMnist(const std::string& dir, int val_size, int test_size) {
  Split full = ReadSplit(dir, "train", kFashionTrainSize);
  Dataset d;
  const int64_t n_train = kFashionTrainSize - val_size;
  d.train = {full.images.slice(0, 0, n_train), full.labels.slice(0, 0, n_train), {}};  // views, not copies
  d.val = {full.images.slice(0, n_train), full.labels.slice(0, n_train), {}};
  Split test = ReadSplit(dir, "t10k", kFashionTestSize);
  if (test_size < kFashionTestSize) test = {test.images.slice(0, 0, test_size), test.labels.slice(0, 0, test_size), {}};
  d.test = std::move(test);
  d.shape = InputShape{1, 28, 28, 10};
  d.mean = kFashionMean;
  d.std = kFashionStd;
  return d;
}

Dataset MakeSynthetic(const InputShape& shape, int64_t train_size, int64_t eval_size, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto make = [&](int64_t n) {
    Split s;
    s.images = torch::randint(0, 256, {n, shape.channels, shape.height, shape.width}, gen, torch::kUInt8);
    s.labels = torch::randint(0, shape.classes, {n}, gen, torch::kLong);
    return s;
  };
  Dataset d;
  d.train = make(train_size);
  d.val = make(eval_size);
  d.test = make(eval_size);
  d.shape = shape;
  return d;
}

Dataset MakeBevSynthetic(const BevTaskSpec& spec, int depth_height, int depth_width) {
  const auto start = std::chrono::steady_clock::now();
  const bev::Rig rig = bev::MakeRig(spec);
  const int64_t image_bytes = int64_t{3} * spec.height * spec.width;
  auto make = [&](int split, int64_t n) {
    Split s;
    s.images = torch::empty({n, 3 * spec.cameras, spec.height, spec.width}, torch::kUInt8);
    s.labels = torch::empty({n, spec.grid, spec.grid}, torch::kUInt8);
    uint8_t* images = s.images.data_ptr<uint8_t>();
    uint8_t* labels = s.labels.data_ptr<uint8_t>();
    const bool with_depth = depth_height > 0 && depth_width > 0;
    float* depth = nullptr;
    if (with_depth) {
      s.depth = torch::empty({n, spec.cameras, depth_height, depth_width}, torch::kFloat);
      depth = s.depth.data_ptr<float>();
    }
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> pixel_depth(with_depth ? spec.height * spec.width : 0);
      for (int64_t i = begin; i < end; ++i) {
        const bev::Scene scene = bev::MakeScene(spec, bev::SampleSeed(spec.data_seed, split, i));
        for (int c = 0; c < spec.cameras; ++c) {
          bev::Render(scene, rig, c, spec.noise, images + (i * spec.cameras + c) * image_bytes,
                      with_depth ? pixel_depth.data() : nullptr);
          if (!with_depth) continue;
          // Nearest surface in each patch (BEVDepth's min-pooling of the depth map).
          float* out = depth + (i * spec.cameras + c) * depth_height * depth_width;
          for (int a = 0; a < depth_height; ++a) {
            const int r0 = a * spec.height / depth_height, r1 = std::max(r0 + 1, (a + 1) * spec.height / depth_height);
            for (int b = 0; b < depth_width; ++b) {
              const int c0 = b * spec.width / depth_width, c1 = std::max(c0 + 1, (b + 1) * spec.width / depth_width);
              float nearest = std::numeric_limits<float>::infinity();
              for (int r = r0; r < r1; ++r) {
                for (int q = c0; q < c1; ++q) nearest = std::min(nearest, pixel_depth[r * spec.width + q]);
              }
              out[a * depth_width + b] = nearest;
            }
          }
        }
        bev::Rasterize(scene, rig, labels + i * spec.grid * spec.grid);
      }
    });
    return s;
  };
  Dataset d;
  d.train = make(0, spec.train_samples);
  d.val = make(1, spec.val_samples);
  d.test = make(2, spec.test_samples);
  d.shape = InputShape{3 * spec.cameras, spec.height, spec.width, 1};
  d.mean = kBevMean;
  d.std = kBevStd;
  d.generate_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return d;
}

Dataset LoadTaskDataset(const TaskSpec& task, uint64_t seed, int depth_height, int depth_width) {
  if (task.dataset == "bev-synthetic") return MakeBevSynthetic(task.bev, depth_height, depth_width);
  if (task.dataset == "fashion-mnist") {
    return LoadFashionMnist(task.data_dir.empty() ? kFashionMnistDir : task.data_dir, task.val_size,
                            task.test_size);
  }
  // A pool of a few batches is enough to measure throughput; labels are noise.
  return MakeSynthetic(task.input, 4 * int64_t{task.batch_size}, task.batch_size, seed);
}

void KeepTaskDatasetFiles(const TaskSpec& task) {
  if (task.dataset != "fashion-mnist") return;
  const std::string dir = task.data_dir.empty() ? kFashionMnistDir : task.data_dir;
  for (const char* prefix : {"train", "t10k"}) {
    KeepIdxFile(ImagesPath(dir, prefix), 3);
    KeepIdxFile(LabelsPath(dir, prefix), 1);
  }
}

torch::Tensor Normalize(const Dataset& data, const torch::Tensor& images, const torch::Device& device,
                        at::MemoryFormat format) {
  torch::Tensor x = images.to(device, /*non_blocking=*/true).to(torch::kFloat);
  x = x.mul_(1.0f / (255.0f * data.std)).sub_(data.mean / data.std);
  return x.contiguous(format);
}

BatchSampler::BatchSampler(const Dataset& data, int batch_size, AugmentSpec augment, uint64_t seed)
    : split_(data.train), batch_size_(batch_size), augment_(augment), rng_(seed) {
  if (split_.size() < batch_size) {
    throw DataError("the training split has " + std::to_string(split_.size()) + " samples, fewer than batch size " +
                    std::to_string(batch_size));
  }
  order_.resize(split_.size());
  Shuffle();
}

void BatchSampler::Shuffle() {
  std::iota(order_.begin(), order_.end(), 0);
  std::shuffle(order_.begin(), order_.end(), rng_);
  cursor_ = 0;
}

std::pair<torch::Tensor, torch::Tensor> BatchSampler::Next() {
  if (cursor_ + batch_size_ > order_.size()) Shuffle();  // drop the ragged tail of each epoch
  torch::Tensor idx = torch::from_blob(order_.data() + cursor_, {batch_size_}, torch::kLong).clone();
  cursor_ += batch_size_;
  last_ = idx;
  torch::Tensor images = split_.images.index_select(0, idx);
  torch::Tensor labels = split_.labels.index_select(0, idx);
  if (augment_.flip || augment_.crop_padding > 0) images = Augment(images);
  return {images, labels};
}

torch::Tensor BatchSampler::Augment(torch::Tensor images) {
  const int64_t n = images.size(0), h = images.size(2), w = images.size(3);
  const int pad = augment_.crop_padding;
  torch::Tensor padded = pad > 0 ? torch::constant_pad_nd(images, {pad, pad, pad, pad}, 0) : images;
  torch::Tensor out = torch::empty_like(images);
  std::uniform_int_distribution<int> shift(0, 2 * pad);
  std::bernoulli_distribution coin(0.5);
  for (int64_t i = 0; i < n; ++i) {
    const int dy = pad > 0 ? shift(rng_) : 0, dx = pad > 0 ? shift(rng_) : 0;
    torch::Tensor crop = padded[i].narrow(1, dy, h).narrow(2, dx, w);
    if (augment_.flip && coin(rng_)) crop = crop.flip({2});
    out[i].copy_(crop);
  }
  return out;
}

}  // namespace frontier
