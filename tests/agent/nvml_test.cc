// GPU discovery through NVML loaded at run time (issue 19), against the test double of
// libnvidia-ml.so.1 built beside this test (these machines have no GPU): the GPUs it reports,
// and the reason given when there is no NVML or it fails.
#include "agent/nvml.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace estuary {
namespace {

const std::string kLibrary = std::string(ESTUARY_TEST_NVML_DIR) + "/libnvidia-ml.so.1";

TEST(Nvml, ReportsTheGpusOfTheLibraryByIndexWithTheirModelUuidMinorAndMemory) {
  setenv("ESTUARY_TEST_NVML_GPUS", "4", 1);
  const auto gpus = DiscoverGpus(kLibrary);
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*gpus)[i].index, i);
    EXPECT_EQ((*gpus)[i].minor, i);
    EXPECT_EQ((*gpus)[i].model, "H800");  // "NVIDIA H800" as the service names models
    EXPECT_EQ((*gpus)[i].uuid, "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i));
    EXPECT_EQ((*gpus)[i].memory_mib, 80 * 1024);
  }
  setenv("ESTUARY_TEST_NVML_GPUS", "0", 1);
  EXPECT_TRUE(DiscoverGpus(kLibrary)->empty());
}

TEST(Nvml, WithoutTheLibraryOrWithAFailingDriverSaysWhy) {
  const auto none = DiscoverGpus("libnvidia-ml-estuary-absent.so.1");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "NVML: libnvidia-ml-estuary-absent.so.1: cannot open shared object file: No such file or directory");
  setenv("ESTUARY_TEST_NVML_FAIL", "1", 1);
  const auto failing = DiscoverGpus(kLibrary);
  unsetenv("ESTUARY_TEST_NVML_FAIL");
  ASSERT_FALSE(failing.ok());
  EXPECT_EQ(failing.status().message(), "NVML: nvmlInit_v2: Driver Not Loaded");
}

TEST(Nvml, TheNodeOffersWhatThisProcessMayUse) {
  const NodeResources r = DiscoverNode();
  EXPECT_GE(r.cpu_milli, 1000);
  EXPECT_GT(r.memory_mib, 0);
}

}  // namespace
}  // namespace estuary
