// GPU-index choices shared by the GPU selectors and score plugins.
#pragma once

#include "model/cluster_state.h"

namespace estuary {

// The first `count` wholly free GPUs of the node, by index. REQUIRES: node.full_free_gpus >= count.
GpuIndices FirstFullyFreeGpus(const Node& node, int count);
// The GPU with the least free milli that still holds `milli` (lowest index on ties), or -1.
int LeastFreeGpuThatFits(const Node& node, MilliGpu milli);
// Whole-GPU tasks take the first wholly free GPUs; a shared task takes LeastFreeGpuThatFits.
GpuIndices BestFitGpus(const Task& task, const Node& node);

}  // namespace estuary
