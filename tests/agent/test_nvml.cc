// A test double of NVML (libnvidia-ml.so.1) for machines without a GPU (issue 19): it implements
// the part of NVML's C interface the agent loads (agent/nvml.cc) and reports
// $ESTUARY_TEST_NVML_GPUS GPUs (default 0) named "NVIDIA H800", with UUIDs
// GPU-00000000-0000-0000-0000-00000000000N, minors N and 80 GiB each. It stands in for the driver
// only; nothing else of the agent is doubled.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

struct NvmlMemory {
  unsigned long long total, free, used;
};

static unsigned int Gpus() {
  const char* v = std::getenv("ESTUARY_TEST_NVML_GPUS");
  return v == nullptr ? 0 : static_cast<unsigned int>(std::atoi(v));
}

int nvmlInit_v2() { return std::getenv("ESTUARY_TEST_NVML_FAIL") != nullptr ? 9 : 0; }  // 9: NVML_ERROR_DRIVER_NOT_LOADED
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) { return rc == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = Gpus();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** device) {
  if (i >= Gpus()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1));
  return 0;
}
static unsigned int Index(void* device) { return static_cast<unsigned int>(reinterpret_cast<uintptr_t>(device) - 1); }
int nvmlDeviceGetName(void*, char* name, unsigned int length) {
  std::snprintf(name, length, "NVIDIA H800");
  return 0;
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  std::snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012u", Index(device));
  return 0;
}
int nvmlDeviceGetMinorNumber(void* device, unsigned int* minor) {
  *minor = Index(device);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, NvmlMemory* m) {
  m->total = 80ull << 30;
  m->free = m->total;
  m->used = 0;
  return 0;
}
}
