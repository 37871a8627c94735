// The CUDA device as the rest of fplab sees it: whether there is one, what it is, and whether its
// arithmetic is the IEEE arithmetic the emulation assumes. No CUDA types leak out of this header.
#pragma once

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace fplab::sim::gpu {

// A failed CUDA call: what() names the call and CUDA's error string.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// True if a CUDA device can run our kernels (sm_90 code); otherwise `why` says what is missing
// ("no CUDA device", a driver error, a device too old).
bool device_available(std::string* why = nullptr);

struct DeviceInfo {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;   // CUDA driver API version, e.g. 13000
  int runtime_version = 0;  // CUDA runtime linked in
  size_t global_memory = 0;
  int l2_bytes = 0;
  std::string describe() const;  // "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB, driver CUDA 13.0, runtime 13.0"
};
DeviceInfo device_info();

// How many CUDA devices there are (0 where none, or no driver).
int device_count();

// Makes device `index` the one this thread's later kernels run on (cudaSetDevice): fplab's
// runtime keeps its own current device, apart from a host program's (PyTorch's) runtime.
void use_device(int index);
// The device this thread's kernels run on now (use_device's last, else 0).
int current_device();
// Its streaming multiprocessors (at least 1), asked once per device and process: kernels' grid
// choices read it on every call, and fplab.torch may drive several devices. Thread-safe.
int current_sm_count();

// A kernel's check before its first use on a device (tensor_core_gemm_why_not,
// seeded_gemm_why_not): `probe` ("" or why the kernel is not to be used) runs once per device and
// process, on the current device; later calls there give its answer again. Thread-safe.
class CheckPerDevice {
 public:
  explicit CheckPerDevice(std::string (*probe)()) : probe_(probe) {}
  std::string operator()();

 private:
  std::string (*probe_)();
  std::mutex lock_;
  std::map<int, std::string> answers_;  // by device
};

// Waits until every kernel and copy fplab enqueued on the current device has finished.
void synchronize_device();

// What the device's fp32 arithmetic does with subnormals, measured on values only known at run
// time (no constant folding): each is true when the subnormal result survives.
struct SubnormalProbe {
  bool add = false;                   // 0x1.8p-126 - 0x1p-126 == 0x1p-127 through FADD
  bool fma = false;                   // fmaf(0x1p-70, 0x1p-70, -0) == 0x1p-140
  bool mul = false;                   // 0x1p-70 * 0x1p-70 == 0x1p-140 through FMUL
  bool shuffle = false;               // a subnormal passes __shfl_down_sync unchanged
  bool atomic_input = false;          // atomicAdd(&x (= -0), 0x1p-140) leaves x == 0x1p-140
  bool atomic_result = false;         // atomicAdd(&x (= 0x1p-126), -0x1p-127) leaves x == 0x1p-127
  bool atomic_negative_zero = false;  // atomicAdd(&x (= -0), -0) leaves x == -0, as IEEE addition does
};
SubnormalProbe probe_subnormals();

}  // namespace fplab::sim::gpu
