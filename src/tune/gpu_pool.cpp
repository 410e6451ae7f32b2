#include "tune/gpu_pool.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <stdexcept>

#include "support/subprocess.h"

namespace sabre::tune {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 6 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

constexpr uint64_t kStop = UINT64_MAX;

// Whole writes and reads on a socket; MSG_NOSIGNAL: a worker that died is an EPIPE, not our SIGPIPE.
bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= size_t(w);
  }
  return true;
}

bool recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= size_t(r);
  }
  return true;
}

// The worker's side: take (item, payload) frames until kStop or EOF; answer each with its item.
[[noreturn]] void worker_main(int fd, size_t worker, const PoolWorkFn& work) {
  for (;;) {
    uint64_t item = 0, len = 0;
    if (!recv_all(fd, &item, 8) || item == kStop || !recv_all(fd, &len, 8)) _exit(0);
    std::string payload(len, '\0');
    if (len && !recv_all(fd, payload.data(), len)) _exit(0);
    try {
      work(worker, size_t(item), payload);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "timing worker %zu: item %llu: %s\n", worker, static_cast<unsigned long long>(item), e.what());
      std::fflush(stderr);
      _exit(4);  // the parent hands the item on or gives it up
    }
    std::fflush(nullptr);
    if (!send_all(fd, &item, 8)) _exit(0);
  }
}

}  // namespace

std::vector<int> parse_gpus(const std::string& text) {
  const std::string usage = "; give all, a count N (the first N GPUs), or ids like 0,2,3 or device=2";
  if (text == "all") return {kAllGpus};
  std::string list = text;
  const bool device_form = text.rfind("device=", 0) == 0;
  if (device_form) list = text.substr(7);
  if (!device_form && all_digits(text)) {
    const int n = std::stoi(text);
    if (n == 0) throw std::invalid_argument("--gpus 0: at least one GPU is needed to time on" + usage);
    std::vector<int> out;
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  if (!device_form && list.find(',') == std::string::npos)
    throw std::invalid_argument("--gpus '" + text + "' is not a GPU list" + usage);
  std::vector<int> out;
  std::set<int> seen;
  for (const std::string& id : split_commas(list)) {
    if (!all_digits(id)) throw std::invalid_argument("--gpus '" + text + "': '" + id + "' is not a GPU id" + usage);
    const int d = std::stoi(id);
    if (!seen.insert(d).second)
      throw std::invalid_argument("--gpus '" + text + "' names GPU " + id + " twice: give each GPU once");
    out.push_back(d);
  }
  return out;
}

std::vector<int> resolve_gpus(const std::vector<int>& ids, int count) {
  if (ids.empty()) return {0};
  std::vector<int> out;
  if (ids.size() == 1 && ids[0] == kAllGpus) {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  std::set<int> seen;
  for (int d : ids) {
    if (d < 0)
      throw std::invalid_argument("GPU " + std::to_string(d) + ": GPU ids are 0 or more (all GPUs: \"all\" alone)");
    if (d >= count)
      throw std::invalid_argument("GPU " + std::to_string(d) + " asked for, but this machine has " +
                                  std::to_string(count) + (count == 1 ? " GPU (id 0)" : " GPUs (ids 0.." + std::to_string(count - 1) + ")"));
    if (!seen.insert(d).second) throw std::invalid_argument("GPU " + std::to_string(d) + " is listed twice: give each GPU once");
    out.push_back(d);
  }
  return out;
}

std::vector<int> resolve_gpus(const std::vector<int>& ids, const std::vector<std::string>& names) {
  std::vector<int> out = resolve_gpus(ids, int(names.size()));
  for (int d : out)
    if (names[size_t(d)] != names[size_t(out[0])])
      throw std::invalid_argument("GPU " + std::to_string(out[0]) + " is " + names[size_t(out[0])] + " but GPU " +
                                  std::to_string(d) + " is " + names[size_t(d)] +
                                  ": timings of different GPU models do not mix; tune each model's GPUs in a run of "
                                  "its own (--gpus " + std::to_string(out[0]) + ", then --gpus " + std::to_string(d) + ")");
  return out;
}

std::string visible_devices_for(int device, const char* inherited) {
  if (!inherited) return std::to_string(device);
  const std::vector<std::string> entries = split_commas(inherited);
  if (device < 0 || size_t(device) >= entries.size() || entries[size_t(device)].empty())
    throw std::invalid_argument("GPU " + std::to_string(device) + " is not among CUDA_VISIBLE_DEVICES=" + inherited);
  return entries[size_t(device)];
}

std::string encode_candidates(const Candidates& todo) {
  std::string out;
  for (const auto& [kernel, library] : todo)
    for (const std::string* f : {&kernel, &library}) out += std::to_string(f->size()) + ":" + *f;
  return out;
}

Candidates decode_candidates(const std::string& text) {
  Candidates out;
  size_t i = 0;
  auto field = [&] {
    const size_t colon = text.find(':', i);
    if (colon == std::string::npos) throw std::logic_error("timing pool: malformed todo payload");
    const size_t len = std::stoul(text.substr(i, colon - i));
    if (colon + 1 + len > text.size()) throw std::logic_error("timing pool: truncated todo payload");
    std::string f = text.substr(colon + 1, len);
    i = colon + 1 + len;
    return f;
  };
  while (i < text.size()) {
    std::string kernel = field();
    out.push_back({kernel, field()});
  }
  return out;
}

void run_pool(size_t count, const PoolOptions& opts, const PoolPrepareFn& prepare, const PoolWorkFn& work,
              const PoolDoneFn& done) {
  if (opts.devices.empty()) throw std::invalid_argument("run_pool: no devices (invariant: at least one worker)");
  if (count == 0) return;
  using Clock = std::chrono::steady_clock;
  struct Worker {
    pid_t pid = -1;
    int fd = -1;
    std::optional<size_t> item;
    Clock::time_point since;
    int restarts = 0;
  };
  const char* inherited = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string inherited_copy = inherited ? inherited : "";
  std::vector<std::string> visible;
  for (int d : opts.devices) visible.push_back(visible_devices_for(d, inherited ? inherited_copy.c_str() : nullptr));

  std::vector<Worker> workers(opts.devices.size());
  auto start = [&](size_t w) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
      throw std::runtime_error(std::string("timing pool: socketpair failed: ") + std::strerror(errno));
    std::fflush(nullptr);
    pid_t pid = support::fork_child();
    if (pid < 0) {
      close(sv[0]);
      close(sv[1]);
      throw std::runtime_error(std::string("timing pool: fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      close(sv[0]);
      for (const Worker& o : workers)
        if (o.fd >= 0) close(o.fd);  // the others' sockets: their EOF must not wait on us
      if (opts.set_visible_devices) setenv("CUDA_VISIBLE_DEVICES", visible[w].c_str(), 1);
      worker_main(sv[1], w, work);
    }
    close(sv[1]);
    workers[w].pid = pid;
    workers[w].fd = sv[0];
    workers[w].item.reset();
  };
  auto stop = [&](size_t w, bool kill) {
    Worker& k = workers[w];
    if (k.pid <= 0) return;
    if (kill) support::kill_child(k.pid);
    else send_all(k.fd, &kStop, 8);
    close(k.fd);
    int status = 0;
    support::reap_child(k.pid, &status);
    k.pid = -1;
    k.fd = -1;
  };
  // However we leave (an exception in prepare or done), no worker outlives the pool.
  struct StopAll {
    std::function<void()> f;
    ~StopAll() { f(); }
  } stop_all{[&] {
    for (size_t w = 0; w < workers.size(); ++w) stop(w, true);
  }};
  for (size_t w = 0; w < workers.size(); ++w) start(w);

  std::deque<size_t> queue;
  for (size_t i = 0; i < count; ++i) queue.push_back(i);
  std::vector<std::optional<std::string>> payload(count);
  std::vector<bool> prepared(count, false);
  std::vector<int> attempts(count, 0);
  size_t reported = 0;
  auto live = [&] {
    return std::count_if(workers.begin(), workers.end(), [](const Worker& k) { return k.pid > 0; });
  };
  while (reported < count) {
    // Hand the next items to idle workers, in queue order.
    for (size_t w = 0; w < workers.size() && !queue.empty(); ++w) {
      Worker& k = workers[w];
      while (k.pid > 0 && !k.item && !queue.empty()) {
        const size_t i = queue.front();
        queue.pop_front();
        if (!prepared[i]) {
          payload[i] = prepare(i);
          prepared[i] = true;
        }
        if (!payload[i]) {
          done(i, w, true, 0);
          ++reported;
          continue;
        }
        const uint64_t item = i, len = payload[i]->size();
        k.item = i;
        k.since = Clock::now();
        if (!send_all(k.fd, &item, 8) || !send_all(k.fd, &len, 8) || !send_all(k.fd, payload[i]->data(), len)) break;
      }
    }
    if (reported == count) break;
    if (live() == 0) {  // every worker died past its restarts: report what is left
      for (size_t i : queue) done(i, 0, false, 0), ++reported;
      queue.clear();
      break;
    }
    std::vector<pollfd> fds;
    std::vector<size_t> who;
    for (size_t w = 0; w < workers.size(); ++w)
      if (workers[w].pid > 0 && workers[w].item) fds.push_back({workers[w].fd, POLLIN, 0}), who.push_back(w);
    if (fds.empty()) continue;
    int rc = poll(fds.data(), fds.size(), 1000);
    if (rc < 0 && errno != EINTR) throw std::runtime_error(std::string("timing pool: poll failed: ") + std::strerror(errno));
    for (size_t j = 0; j < fds.size() && rc > 0; ++j) {
      if (!(fds[j].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const size_t w = who[j];
      Worker& k = workers[w];
      const size_t i = *k.item;
      uint64_t got = 0;
      if (recv_all(k.fd, &got, 8) && got == i) {
        k.item.reset();
        done(i, w, true, std::chrono::duration<double>(Clock::now() - k.since).count());
        ++reported;
        continue;
      }
      // The worker died (or broke the protocol) on item i: another worker takes it, or it is given up.
      stop(w, true);
      k.item.reset();
      if (++attempts[i] < opts.max_attempts) {
        queue.push_front(i);
      } else {
        done(i, w, false, std::chrono::duration<double>(Clock::now() - k.since).count());
        ++reported;
      }
      if (k.restarts < opts.max_restarts) {
        ++k.restarts;
        start(w);
      }
    }
  }
  stop_all.f = [] {};
  for (size_t w = 0; w < workers.size(); ++w) stop(w, false);
}

}  // namespace sabre::tune
