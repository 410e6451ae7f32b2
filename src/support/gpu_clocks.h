// The GPU's SM clock and power while a benchmark runs, read through NVML (libnvidia-ml.so.1, the
// driver's library, loaded at run time: nothing links against it, and a machine without a driver
// only loses the report). Why: under sustained load a data-center GPU runs at its power limit with
// the SM clock well under its maximum (bench/results/graph_gap_*), so a benchmark's number depends
// on how hot and how long it ran; sabre bench prints what the clock did beside the latencies.
// Tests: tests/unit/gpu_clocks_test.cpp.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace sabre::support {

struct ClockSample {
  unsigned sm_mhz = 0;
  unsigned power_mw = 0;
  unsigned long long reasons = 0;  // NVML's clocks event reasons (bit 0x4: software power cap, ...)
};

// One line: the SM clock's median, min and max (of max_sm_mhz), power's median and max (against
// limit_mw), and how many samples had the clock held down, by reason ("power cap", "thermal", ...).
// Idle and sync-boost bits are not counted as holding the clock down.
std::string summarize_clocks(const std::vector<ClockSample>& samples, unsigned max_sm_mhz, unsigned limit_mw);

// Samples the GPU with the given PCI bus id (as cudaDeviceGetPCIBusId writes it) every period_ms
// from construction until stop(), on its own thread. Never throws: where NVML cannot be loaded or
// read, stop() returns "not read (why)", and unavailable() says why (read it after stop(): a read
// can fail on the sampling thread).
class ClockMonitor {
 public:
  explicit ClockMonitor(const std::string& pci_bus_id, int period_ms = 10);
  ~ClockMonitor();
  ClockMonitor(const ClockMonitor&) = delete;
  ClockMonitor& operator=(const ClockMonitor&) = delete;

  // Ends sampling (once) and returns summarize_clocks of what was read, or "not read (why)".
  std::string stop();
  const std::string& unavailable() const { return why_; }

 private:
  void sample_loop(int period_ms);

  struct Nvml;  // the loaded library's entry points
  std::unique_ptr<Nvml> nvml_;
  void* device_ = nullptr;
  std::string why_;
  unsigned max_sm_mhz_ = 0, limit_mw_ = 0;
  std::vector<ClockSample> samples_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  bool stopped_ = false;
  std::string report_;
};

}  // namespace sabre::support
