#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tune/watchdog.h"

using namespace std::chrono_literals;
using sabre::tune::ChildResult;
using sabre::tune::run_in_child;

TEST(Watchdog, OkCandidateReportsItsPayload) {
  auto r = run_in_child(
      [](const auto& report) {
        report("first");
        report("time_us=12.5");
        return true;
      },
      5s);
  EXPECT_EQ(r.outcome, ChildResult::Outcome::ok);
  EXPECT_EQ(r.payload, "time_us=12.5");
}

TEST(Watchdog, FailedCandidateKeepsItsReason) {
  auto r = run_in_child([](const auto&) -> bool { throw std::runtime_error("can_implement said no"); }, 5s);
  EXPECT_EQ(r.outcome, ChildResult::Outcome::failed);
  EXPECT_NE(r.detail.find("can_implement said no"), std::string::npos) << r.detail;
}

TEST(Watchdog, HangingCandidateIsKilledAtTheDeadline) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_in_child(
      [](const auto& report) {
        report("started");
        for (;;) std::this_thread::sleep_for(1s);  // a kernel that never returns
        return true;
      },
      300ms);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.outcome, ChildResult::Outcome::hung);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(r.payload, "started");
}

TEST(Watchdog, CrashingCandidateIsRecordedAsCrashed) {
  auto r = run_in_child(
      [](const auto&) {
        raise(SIGSEGV);  // what an illegal address does to a real kernel's process
        return true;
      },
      5s);
  EXPECT_EQ(r.outcome, ChildResult::Outcome::crashed);
  EXPECT_NE(r.detail.find("signal"), std::string::npos) << r.detail;
}

TEST(Watchdog, ParentGoesOnAfterManyChildren) {
  for (int i = 0; i < 20; ++i) {
    auto r = run_in_child([i](const auto& report) {
      report(std::to_string(i));
      return i % 2 == 0;
    }, 5s);
    EXPECT_EQ(r.outcome, i % 2 == 0 ? ChildResult::Outcome::ok : ChildResult::Outcome::failed);
    EXPECT_EQ(r.payload, std::to_string(i));
  }
}
