#include "tune/watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <stdexcept>

#include "support/subprocess.h"

namespace sabre::tune {

const char* to_string(ChildResult::Outcome o) {
  switch (o) {
    case ChildResult::Outcome::ok: return "ok";
    case ChildResult::Outcome::failed: return "failed";
    case ChildResult::Outcome::crashed: return "crashed";
    case ChildResult::Outcome::hung: return "hung";
  }
  return "?";
}

namespace {

// Frames on the pipe: 8-byte little-endian length, then the bytes. The parent keeps the last.
void write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(3);
    c += w;
    n -= static_cast<size_t>(w);
  }
}

std::string last_frame(const std::string& buf) {
  std::string last;
  size_t i = 0;
  while (i + 8 <= buf.size()) {
    uint64_t len = 0;
    memcpy(&len, buf.data() + i, 8);
    if (i + 8 + len > buf.size()) break;
    last = buf.substr(i + 8, len);
    i += 8 + len;
  }
  return last;
}

}  // namespace

ChildResult run_in_child(const std::function<bool(const std::function<void(const std::string&)>&)>& work,
                         std::chrono::milliseconds timeout) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("watchdog: pipe failed: ") + strerror(errno));
  auto start = std::chrono::steady_clock::now();
  pid_t pid = support::fork_child();  // own group, dies with us
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("watchdog: fork failed: ") + strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    int out = fds[1];
    bool ok = false;
    try {
      ok = work([out](const std::string& payload) {
        uint64_t len = payload.size();
        write_all(out, &len, 8);
        write_all(out, payload.data(), payload.size());
      });
    } catch (const std::exception& e) {
      std::string msg = std::string("exception: ") + e.what();
      uint64_t len = msg.size();
      write_all(out, &len, 8);
      write_all(out, msg.data(), msg.size());
      ok = false;
    }
    close(out);
    _exit(ok ? 0 : 1);  // no atexit handlers: the parent's state is not ours to flush
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);

  ChildResult r;
  std::string buf;
  bool eof = false, timed_out = false;
  auto deadline = start + timeout;
  while (!eof) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
    pollfd p{fds[0], POLLIN, 0};
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char chunk[4096];
    for (;;) {
      ssize_t n = read(fds[0], chunk, sizeof chunk);
      if (n > 0) {
        buf.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) eof = true;
      break;  // EAGAIN or EOF
    }
  }
  close(fds[0]);

  int status = 0;
  if (timed_out) {
    support::kill_child(pid);
    support::reap_child(pid, &status);
    r.outcome = ChildResult::Outcome::hung;
    r.detail = "no result within " + std::to_string(timeout.count()) + " ms; killed";
  } else {
    // The pipe closed: the child is exiting. Wait, but never forever (a child that closed
    // its pipe and then hung still counts as hung).
    for (;;) {
      pid_t w = support::reap_child(pid, &status, WNOHANG);
      if (w == pid) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        support::kill_child(pid);
        support::reap_child(pid, &status);
        timed_out = true;
        break;
      }
      usleep(1000);
    }
    if (timed_out) {
      r.outcome = ChildResult::Outcome::hung;
      r.detail = "did not exit within " + std::to_string(timeout.count()) + " ms; killed";
    } else if (WIFSIGNALED(status)) {
      r.outcome = ChildResult::Outcome::crashed;
      r.detail = std::string("killed by signal ") + strsignal(WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      r.outcome = ChildResult::Outcome::ok;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
      r.outcome = ChildResult::Outcome::failed;
    } else {
      r.outcome = ChildResult::Outcome::crashed;
      r.detail = "exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
  }
  r.payload = last_frame(buf);
  if (r.outcome == ChildResult::Outcome::failed && r.detail.empty()) r.detail = r.payload;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace sabre::tune
