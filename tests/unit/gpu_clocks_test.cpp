// support/gpu_clocks.h: the clock report sabre bench prints, and the monitor's behaviour where NVML
// cannot give it (no driver, or a PCI bus id no GPU has).
#include <gtest/gtest.h>

#include "support/gpu_clocks.h"

using sabre::support::ClockMonitor;
using sabre::support::ClockSample;
using sabre::support::summarize_clocks;

TEST(GpuClocks, ReportsMedianRangePowerAndThePowerCap) {
  // As on the H200 under BERT-base at batch 32: the clock under its maximum while power sits at the limit.
  const std::vector<ClockSample> s = {{1980, 310000, 0x0}, {1815, 688000, 0x4}, {1575, 699500, 0x4 | 0x1}};
  const std::string r = summarize_clocks(s, 1980, 700000);
  EXPECT_NE(r.find("SM median 1815 MHz, min 1575, max 1980 (of 1980)"), std::string::npos) << r;
  EXPECT_NE(r.find("power median 688 W, max 699 (limit 700)"), std::string::npos) << r;
  EXPECT_NE(r.find("held down by power cap in 2 of 3 samples"), std::string::npos) << r;
}

TEST(GpuClocks, NamesEachReasonAndIgnoresIdleAndSyncBoost) {
  const std::vector<ClockSample> s = {{1400, 500000, 0x40}, {1500, 500000, 0x4 | 0x40}, {1980, 100000, 0x1 | 0x10}};
  const std::string r = summarize_clocks(s, 1980, 700000);
  EXPECT_NE(r.find("held down by power cap in 1, hardware thermal in 2 of 3 samples"), std::string::npos) << r;
}

TEST(GpuClocks, SaysWhenNothingHeldTheClockDown) {
  const std::string r = summarize_clocks({{1980, 400000, 0x1}, {1980, 420000, 0x0}}, 1980, 700000);
  EXPECT_NE(r.find("clock not held down in any of 2 samples"), std::string::npos) << r;
  EXPECT_EQ(summarize_clocks({}, 1980, 700000), "not read (no sample was taken)");
}

TEST(GpuClocks, MonitorWithoutAGpuThereSaysWhyAndStopsTwice) {
  // Without a driver the library does not load; with one, no GPU has this bus id. Either way: no
  // samples, a reason, and stop() the same each time.
  ClockMonitor m("ffff:ff:1f.7", 1);
  const std::string r = m.stop();
  EXPECT_EQ(r.rfind("not read (", 0), 0u) << r;
  EXPECT_FALSE(m.unavailable().empty());
  EXPECT_EQ(m.stop(), r);
}
