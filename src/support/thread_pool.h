// One small fixed pool of worker threads for sabre's parallel work (kernel compiles, the CPU
// reference's row loops): submit() returns a future that carries the task's result or exception,
// parallel_for() runs an index loop and rethrows what a body threw. Nested use cannot deadlock:
// from one of the pool's own workers, submit() and parallel_for() run on the calling thread.
// Tests: tests/unit/thread_pool_test.cpp
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace sabre::support {

class ThreadPool {
 public:
  // `threads` workers, at least one.
  explicit ThreadPool(size_t threads);
  // Runs what is still queued, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, one worker per hardware thread, made on first use.
  static ThreadPool& shared();

  size_t size() const { return workers_.size(); }
  // Whether the calling thread is one of this pool's workers.
  bool on_worker() const;

  // Runs f() on a worker (on the calling thread when that is one of this pool's workers, so a
  // task that waits for a task it submitted cannot starve the pool).
  template <class F>
  std::future<std::invoke_result_t<std::decay_t<F>>> submit(F&& f) {
    using R = std::invoke_result_t<std::decay_t<F>>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    std::future<R> result = task->get_future();
    if (on_worker())
      (*task)();
    else
      enqueue([task] { (*task)(); });
    return result;
  }

  // body(i) for every i in [0, n), on at most max_parallel workers at a time (0: the pool's size).
  // Returns when every call has returned; then rethrows the exception of the lowest index that
  // threw (the other indices still ran). On one of this pool's workers, or with one lane, the
  // loop runs on the calling thread.
  void parallel_for(size_t n, const std::function<void(size_t)>& body, size_t max_parallel = 0);

 private:
  void enqueue(std::function<void()> job);
  void work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace sabre::support
