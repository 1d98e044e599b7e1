#include "worker/trial/prepared_model.h"

#include "worker/trial/plugin.h"

namespace frontier {

at::MemoryFormat MemoryFormatOf(const RuntimeSpec& runtime) {
  return runtime.memory_format == MemoryFormat::kChannelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

DeviceInfo PrepareDevice(const TrialSpec& spec) {
  torch::manual_seed(spec.seed);
  const DeviceInfo dev = SelectDevice(spec.runtime.device);
  if (dev.is_cuda()) torch::cuda::manual_seed_all(spec.seed);
  return dev;
}

torch::Tensor PreparedModel::TrainImages(int64_t begin, int64_t end) const {
  return Normalize(data, data.train.images.slice(0, begin, end), dev.device, format);
}

torch::Tensor PreparedModel::InferenceInput(int batch) const {
  const torch::Tensor& images = data.train.images;
  const torch::Tensor index = torch::arange(batch, torch::kLong) % images.size(0);
  return Normalize(data, images.index_select(0, index), dev.device, format);
}

PreparedModel PrepareModel(const TrialSpec& spec, const DeviceInfo& dev, PhaseTimes* phases) {
  PhaseTimes ignored;
  PhaseTimes& times = phases ? *phases : ignored;
  PreparedModel m;
  m.dev = dev;
  m.format = MemoryFormatOf(spec.runtime);
  auto since = Monotonic::now();
  LoadPlugins(spec.runtime.plugins);
  const ResolvedArch arch = ResolveArch(spec.arch, spec.task);
  m.task = MakeTask(spec.task);
  since = times.AddSince("model", since);
  m.data = m.task->LoadData(spec, arch);
  since = times.AddSince("data", since);
  m.net = m.task->BuildNetwork(arch, spec.task);
  m.net->to(dev.device);
  model::SetMemoryFormat(*m.net, m.format);
  times.AddSince("model", since);
  return m;
}

}  // namespace frontier
