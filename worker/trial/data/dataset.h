// Training data held once in memory as uint8 images, served as normalized
// float batches. Fashion-MNIST comes from the Debian package
// dataset-fashion-mnist; `synthetic` is random pixels and labels of any shape,
// for throughput-only trials; `bev-synthetic` is the procedural multi-camera
// scene generator of worker/bev_scene.h (docs/bev.md).
#pragma once

#include <random>
#include <string>

#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/data/idx.h"

namespace frontier {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct Split {
  torch::Tensor images;  // uint8 (N, C, H, W); bev-synthetic: C = 3 x cameras (RGB planes per camera)
  torch::Tensor labels;  // int64 (N); bev-synthetic: uint8 (N, grid, grid) occupancy
  // bev-synthetic with depth targets only: float (N, cameras, h, w), the
  // nearest ray-cast depth (metres) in each of the h x w image patches, +inf
  // where the patch sees only sky. Undefined otherwise.
  torch::Tensor depth;
  int64_t size() const { return labels.size(0); }
};

struct Dataset {
  Split train, val, test;
  InputShape shape;
  float mean = 0.5f, std = 0.5f;  // pixel normalization, in [0, 1] units
  double generate_s = 0;          // wall time spent generating (bev-synthetic)
  int64_t bytes() const;          // memory held by all splits
};

// Train/validation split of the 60k training file is deterministic: the last
// `val_size` samples are validation. The first `test_size` samples of the
// 10k test file are the test split.
Dataset LoadFashionMnist(const std::string& dir, int val_size, int test_size = 10000);

// Random uint8 pixels and labels drawn from `seed`: `train_size` training
// samples and one batch each of validation and test.
Dataset MakeSynthetic(const InputShape& shape, int64_t train_size, int64_t eval_size, uint64_t seed);

// The bev-synthetic dataset: train/val/test scenes drawn from spec.data_seed
// (independent streams per split), rendered in parallel over samples with the
// current intra-op thread count. Deterministic for any thread count.
// With depth_height, depth_width > 0 every split also gets `depth` targets
// at that (feature map) resolution.
Dataset MakeBevSynthetic(const BevTaskSpec& spec, int depth_height = 0, int depth_width = 0);

// Dataset named by the task (fashion-mnist, synthetic or bev-synthetic).
// depth_height / depth_width: bev-synthetic depth targets (0 = none).
Dataset LoadTaskDataset(const TaskSpec& task, uint64_t seed, int depth_height = 0, int depth_width = 0);

// The files of `task`'s dataset read into this process (KeepIdxFile), for the
// warm slot's server to fork trials that find them in memory: Fashion-MNIST's
// four IDX files; the generated datasets have none. Tensor-free: the server
// runs no LibTorch op before it forks.
void KeepTaskDatasetFiles(const TaskSpec& task);

// uint8 images -> normalized float on `device`, in the given memory format.
torch::Tensor Normalize(const Dataset& data, const torch::Tensor& images, const torch::Device& device,
                        at::MemoryFormat format);

// Serves shuffled training batches, reshuffling every epoch; the order is
// fully determined by the seed. Optional augmentation: random crop after zero
// padding, random horizontal flip.
class BatchSampler {
 public:
  BatchSampler(const Dataset& data, int batch_size, AugmentSpec augment, uint64_t seed);
  // Images (uint8, on CPU) and labels of the next batch.
  std::pair<torch::Tensor, torch::Tensor> Next();
  // Training-split indices of the batch Next() returned last (int64).
  torch::Tensor LastIndices() const { return last_; }

 private:
  void Shuffle();
  torch::Tensor Augment(torch::Tensor images);

  const Split& split_;
  int batch_size_;
  AugmentSpec augment_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;
  torch::Tensor last_;
};

}  // namespace frontier
