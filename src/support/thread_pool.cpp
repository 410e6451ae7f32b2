#include "support/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>

namespace sabre::support {

namespace {
thread_local const ThreadPool* t_worker_of = nullptr;  // the pool whose worker this thread is
}  // namespace

ThreadPool::ThreadPool(size_t threads) {
  const size_t n = std::max<size_t>(1, threads);
  workers_.reserve(n);
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::shared() {
  // Never destroyed: a worker still running at exit must not meet a destroyed pool.
  static ThreadPool* pool = new ThreadPool(std::max(1u, std::thread::hardware_concurrency()));
  return *pool;
}

bool ThreadPool::on_worker() const { return t_worker_of == this; }

void ThreadPool::enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ThreadPool::work() {
  t_worker_of = this;
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();  // a packaged_task: what it throws goes to its future
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t)>& body, size_t max_parallel) {
  if (n == 0) return;
  size_t lanes = std::min(n, size());
  if (max_parallel > 0) lanes = std::min(lanes, max_parallel);
  std::vector<std::exception_ptr> errors(n);
  auto run = [&](size_t i) {
    try {
      body(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (lanes <= 1 || on_worker()) {
    for (size_t i = 0; i < n; ++i) run(i);
  } else {
    std::atomic<size_t> next{0};
    std::vector<std::future<void>> done;
    done.reserve(lanes);
    for (size_t l = 0; l < lanes; ++l)
      done.push_back(submit([&] {
        for (size_t i; (i = next.fetch_add(1)) < n;) run(i);
      }));
    for (auto& f : done) f.get();  // run() catches everything, so these only wait
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace sabre::support
