// support::ThreadPool: results and exceptions through futures, parallel_for over every index,
// zero and one job, the lowest failing index's exception, and nested use that must not deadlock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/thread_pool.h"

using sabre::support::ThreadPool;

TEST(ThreadPool, SubmitReturnsResultsAndCarriesExceptions) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.size(), 2u);
  auto a = pool.submit([] { return 6 * 7; });
  auto b = pool.submit([]() -> int { throw std::runtime_error("task failed"); });
  auto c = pool.submit([] { return std::string("after the failure"); });
  EXPECT_EQ(a.get(), 42);
  try {
    b.get();
    FAIL() << "the task's exception was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "task failed");
  }
  EXPECT_EQ(c.get(), "after the failure") << "a failed task must not take the pool down";
}

TEST(ThreadPool, ZeroThreadsMeansOne) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool.submit([] { return 1; }).get(), 1);
}

TEST(ThreadPool, ParallelForRunsEveryIndexOnceIncludingZeroAndOneJob) {
  ThreadPool pool(3);
  int calls = 0;
  pool.parallel_for(0, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  pool.parallel_for(1, [&](size_t i) { calls += static_cast<int>(i) + 1; });
  EXPECT_EQ(calls, 1);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(hits.size(), [&](size_t i) { hits[i]++; });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

TEST(ThreadPool, ParallelForUsesWorkersAndHonoursMaxParallel) {
  ThreadPool pool(4);
  std::atomic<int> running{0}, peak{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  pool.parallel_for(
      16,
      [&](size_t) {
        const int now = ++running;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          threads.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        --running;
      },
      2);
  EXPECT_LE(peak.load(), 2);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u) << "the bodies run on the pool's workers";
}

TEST(ThreadPool, ParallelForRethrowsTheLowestFailingIndexAfterAllRan) {
  ThreadPool pool(4);
  std::atomic<int> ran{0};
  try {
    pool.parallel_for(64, [&](size_t i) {
      ++ran;
      if (i == 40 || i == 7) throw std::invalid_argument("index " + std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "index 7");
  }
  EXPECT_EQ(ran.load(), 64) << "the other indices still ran";
}

TEST(ThreadPool, NestedUseDoesNotDeadlock) {
  // Every worker waits for work it submitted to its own pool: it must run on the caller.
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(8, [&](size_t) {
    pool.parallel_for(4, [&](size_t) { ++inner; });
    EXPECT_EQ(pool.submit([] { return 5; }).get(), 5);
  });
  EXPECT_EQ(inner.load(), 32);
  auto outer = pool.submit([&] { return pool.submit([] { return 9; }).get(); });
  ASSERT_EQ(outer.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "nested submit deadlocked";
  EXPECT_EQ(outer.get(), 9);
}

TEST(ThreadPool, DestructorRunsWhatIsQueued) {
  std::atomic<int> done{0};
  {
    ThreadPool pool(1);
    for (int i = 0; i < 20; ++i) pool.submit([&] { ++done; });
  }
  EXPECT_EQ(done.load(), 20);
}

TEST(ThreadPool, SharedPoolIsOneAndHasAWorkerPerCore) {
  ThreadPool& a = ThreadPool::shared();
  EXPECT_EQ(&a, &ThreadPool::shared());
  EXPECT_GE(a.size(), 1u);
  EXPECT_FALSE(a.on_worker());
  EXPECT_TRUE(a.submit([&] { return a.on_worker(); }).get());
}
