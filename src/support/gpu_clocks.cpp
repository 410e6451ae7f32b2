#include "support/gpu_clocks.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <type_traits>
#include <utility>

namespace sabre::support {
namespace {

// NVML's C API as nvml.h declares it (the header is not needed: these are its stable signatures).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

// The clocks event reasons that mean the clock was held under what the load asked for, with the
// words the report uses (nvml.h: nvmlClocksEventReason*). Idle (0x1) and sync boost (0x10) are not.
constexpr std::pair<unsigned long long, const char*> kHeldDown[] = {
    {0x4, "power cap"},          {0x8, "hardware slowdown"}, {0x20, "software thermal"},
    {0x40, "hardware thermal"},  {0x80, "power brake"},      {0x2, "application clocks setting"},
    {0x100, "display clock setting"}};

unsigned median(std::vector<unsigned> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

struct ClockMonitor::Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  bool initialized = false;

  std::string err(const char* what, nvmlReturn_t r) const {
    return std::string(what) + ": " + (error_string ? error_string(r) : "error " + std::to_string(r));
  }
};

std::string summarize_clocks(const std::vector<ClockSample>& samples, unsigned max_sm_mhz, unsigned limit_mw) {
  if (samples.empty()) return "not read (no sample was taken)";
  std::vector<unsigned> clk, pw;
  for (const auto& s : samples) clk.push_back(s.sm_mhz), pw.push_back(s.power_mw);
  char buf[256];
  std::snprintf(buf, sizeof buf, "SM median %u MHz, min %u, max %u (of %u); power median %u W, max %u (limit %u)",
                median(clk), *std::min_element(clk.begin(), clk.end()), *std::max_element(clk.begin(), clk.end()),
                max_sm_mhz, median(pw) / 1000, *std::max_element(pw.begin(), pw.end()) / 1000, limit_mw / 1000);
  std::string out = buf;
  std::string held;
  for (const auto& [bit, name] : kHeldDown) {
    size_t n = 0;
    for (const auto& s : samples) n += (s.reasons & bit) != 0;
    if (n) held += (held.empty() ? "" : ", ") + std::string(name) + " in " + std::to_string(n);
  }
  const std::string of = " of " + std::to_string(samples.size()) + " samples";
  return out + "; " + (held.empty() ? "clock not held down in any" + of : "held down by " + held + of);
}

ClockMonitor::ClockMonitor(const std::string& pci_bus_id, int period_ms) {
  nvml_ = std::make_unique<Nvml>();
  Nvml& n = *nvml_;
  n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) {
    why_ = "libnvidia-ml.so.1 could not be loaded";
    return;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(n.lib, name));
    return fn != nullptr;
  };
  sym(n.error_string, "nvmlErrorString");
  if (!sym(n.reasons, "nvmlDeviceGetCurrentClocksEventReasons")) sym(n.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!sym(n.init, "nvmlInit_v2") || !sym(n.shutdown, "nvmlShutdown") ||
      !sym(n.by_pci, "nvmlDeviceGetHandleByPciBusId_v2") || !sym(n.clock, "nvmlDeviceGetClockInfo") ||
      !sym(n.max_clock, "nvmlDeviceGetMaxClockInfo") || !sym(n.power, "nvmlDeviceGetPowerUsage") ||
      !sym(n.limit, "nvmlDeviceGetEnforcedPowerLimit") || !n.reasons) {
    why_ = "libnvidia-ml.so.1 lacks an entry point sabre reads";
    return;
  }
  if (nvmlReturn_t r = n.init(); r != kNvmlSuccess) {
    why_ = n.err("nvmlInit", r);
    return;
  }
  n.initialized = true;
  if (nvmlReturn_t r = n.by_pci(pci_bus_id.c_str(), &device_); r != kNvmlSuccess) {
    why_ = n.err(("no NVML device at PCI bus id " + pci_bus_id).c_str(), r);
    return;
  }
  if (nvmlReturn_t r = n.max_clock(device_, kNvmlClockSm, &max_sm_mhz_); r != kNvmlSuccess) {
    why_ = n.err("reading the maximum SM clock", r);
    return;
  }
  if (nvmlReturn_t r = n.limit(device_, &limit_mw_); r != kNvmlSuccess) {
    why_ = n.err("reading the power limit", r);
    return;
  }
  thread_ = std::thread([this, period_ms] { sample_loop(period_ms); });
}

void ClockMonitor::sample_loop(int period_ms) {
  const Nvml& n = *nvml_;
  // One sample at the start, then one a period until stop(), and one more at the end.
  for (bool last = false; !last;) {
    last = stopping_.load();
    ClockSample s;
    nvmlReturn_t r = n.clock(device_, kNvmlClockSm, &s.sm_mhz);
    if (r == kNvmlSuccess) r = n.power(device_, &s.power_mw);
    if (r == kNvmlSuccess) r = n.reasons(device_, &s.reasons);
    if (r != kNvmlSuccess) {
      why_ = n.err("reading the clock, power or clock event reasons", r);
      return;
    }
    samples_.push_back(s);
    if (!last) std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
  }
}

std::string ClockMonitor::stop() {
  if (stopped_) return report_;
  stopped_ = true;
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (samples_.empty()) report_ = "not read (" + (why_.empty() ? std::string("no sample was taken") : why_) + ")";
  else report_ = summarize_clocks(samples_, max_sm_mhz_, limit_mw_) + (why_.empty() ? "" : "; sampling stopped: " + why_);
  return report_;
}

ClockMonitor::~ClockMonitor() {
  stop();
  if (nvml_->initialized) nvml_->shutdown();  // its status has nothing left to tell
  if (nvml_->lib) dlclose(nvml_->lib);
}

}  // namespace sabre::support
