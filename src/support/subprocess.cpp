#include "support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace sabre::support {
namespace {

// The registries the signal handler reads: fixed slots of atomics, no allocation, so the handler
// stays async-signal-safe. A child or temp file that finds no slot is still covered by the
// parent-death signal and by sweep_stale_temps.
constexpr int kMaxChildren = 1024;
constexpr int kMaxTemps = 512;
constexpr size_t kMaxPath = 2048;

std::atomic<pid_t> g_children[kMaxChildren];

struct TempSlot {
  std::atomic<int> state;  // 0 free, 1 being written or cleared, 2 holds a path
  char path[kMaxPath];
};
TempSlot g_temps[kMaxTemps];

// The process whose handler acts; a forked copy that has not taken over falls back to the default.
std::atomic<pid_t> g_owner{0};

void register_child(pid_t pid) {
  for (auto& s : g_children) {
    pid_t free_slot = 0;
    if (s.compare_exchange_strong(free_slot, pid)) return;
  }
}

void unregister_child(pid_t pid) {
  for (auto& s : g_children) {
    pid_t mine = pid;
    if (s.compare_exchange_strong(mine, 0)) return;
  }
}

int register_temp(const std::string& path) {
  if (path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kMaxTemps; ++i) {
    int free_slot = 0;
    if (!g_temps[i].state.compare_exchange_strong(free_slot, 1)) continue;
    std::memcpy(g_temps[i].path, path.c_str(), path.size() + 1);
    g_temps[i].state.store(2);
    return i;
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot < 0) return;
  g_temps[slot].state.store(1);
  g_temps[slot].path[0] = '\0';
  g_temps[slot].state.store(0);
}

// A forked child starts with empty registries: its parent's children and files are not its own.
void forget_parents_registries() {
  for (auto& s : g_children) s.store(0);
  for (auto& t : g_temps) t.state.store(0);
}

void write_stderr(const char* s) {
  ssize_t ignored = ::write(2, s, std::strlen(s));
  (void)ignored;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE (the output pipe was closed)";
  }
  return "a signal";
}

constexpr int kTerminationSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

void on_termination_signal(int sig) {
  if (getpid() != g_owner.load()) {  // a forked child that never took over: the default action
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  int n = kill_children_and_remove_temps();
  write_stderr("sabre: stopped by ");
  write_stderr(signal_name(sig));
  write_stderr(n ? "; the processes it started were stopped\n" : "\n");
  _exit(128 + sig);
}

// ---- the supervisor: a forked copy of sabre between sabre and the command -------------------
// Only async-signal-safe calls from here on: the fork copied one thread of a threaded process.

const char* const* g_sup_cleanup = nullptr;
size_t g_sup_cleanup_n = 0;
volatile pid_t g_sup_command = 0;

// The command's whole group first (nvcc and what it started), so nothing writes a file again;
// then the temp files.
void supervisor_die(int sig) {
  if (g_sup_command > 0) {
    kill(-g_sup_command, SIGKILL);
    kill(g_sup_command, SIGKILL);
    int status;
    while (waitpid(g_sup_command, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (size_t i = 0; i < g_sup_cleanup_n; ++i) unlink(g_sup_cleanup[i]);
  _exit(128 + sig);
}

void close_fds_from(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, static_cast<unsigned>(first), ~0u, 0u) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (int fd = first; fd < max; ++fd) close(fd);
}

// The supervisor sits in a group of its own; the command leads another, which holds everything
// the command starts. A SIGTERM from sabre's handler, or from the kernel when sabre dies, makes the
// supervisor kill the command's group and remove the temp files.
[[noreturn]] void supervise(pid_t parent, int in_fd, int out_fd, const char* path, char* const* argv,
                            const char* const* cleanup, size_t cleanup_n) {
  g_sup_cleanup = cleanup;
  g_sup_cleanup_n = cleanup_n;
  setpgid(0, 0);
  struct sigaction sa {};
  sa.sa_handler = supervisor_die;
  sigfillset(&sa.sa_mask);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaction(s, &sa, nullptr);
  signal(SIGPIPE, SIG_DFL);
  // The parent's death arrives as SIGTERM; if it died before prctl, getppid() already says so.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) supervisor_die(SIGTERM);
  dup2(in_fd, 0);
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  close_fds_from(3);  // no other thread's pipe may stay open in us
  sigset_t none;
  sigemptyset(&none);
  const pid_t me = getpid();
  pid_t cmd = fork();
  if (cmd < 0) _exit(127);
  if (cmd == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != me) _exit(128 + SIGKILL);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(path, argv);
    _exit(127);
  }
  setpgid(cmd, cmd);  // both sides set it: no window where a kill of the group misses the command
  g_sup_command = cmd;
  sigprocmask(SIG_SETMASK, &none, nullptr);  // signals were blocked since before the fork
  int status = 0;
  while (waitpid(cmd, &status, 0) < 0 && errno == EINTR) {
  }
  // Nothing the command started outlives it (a pgid is not reused while its group has members).
  kill(-cmd, SIGKILL);
  g_sup_command = 0;
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  _exit(128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
}

// argv[0] as execv needs it: a path, found on PATH when it has no slash. Empty if not found.
std::string resolve(const std::string& cmd) {
  if (cmd.empty()) return "";
  if (cmd.find('/') != std::string::npos) return access(cmd.c_str(), X_OK) == 0 ? cmd : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t b = 0;
  for (;;) {
    size_t e = dirs.find(':', b);
    std::string d = dirs.substr(b, e == std::string::npos ? std::string::npos : e - b);
    std::string full = (d.empty() ? "." : d) + "/" + cmd;
    if (access(full.c_str(), X_OK) == 0 && !std::filesystem::is_directory(full)) return full;
    if (e == std::string::npos) return "";
    b = e + 1;
  }
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

int run_process(const std::vector<std::string>& argv, std::string* output, const RunOptions& opts) {
  if (argv.empty()) return -1;
  const std::string path = resolve(argv[0]);
  if (path.empty()) {
    if (output) *output = "cannot run '" + argv[0] + "': not found or not executable\n";
    return 127;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<const char*> cleanup;
  for (const auto& c : opts.cleanup) cleanup.push_back(c.c_str());

  int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in_fd < 0) return -1;
  int out_fd = -1, read_fd = -1;
  if (!opts.output_file.empty()) {
    out_fd = open(opts.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } else {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0) {
      read_fd = fds[0];
      out_fd = fds[1];
    }
  }
  if (out_fd < 0) {
    close(in_fd);
    return -1;
  }
  // Blocked across the fork so the supervisor's handlers are in place before any signal lands.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) supervise(parent, in_fd, out_fd, path.c_str(), args.data(), cleanup.data(), cleanup.size());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(in_fd);
  close(out_fd);
  if (pid < 0) {
    if (read_fd >= 0) close(read_fd);
    return -1;
  }
  setpgid(pid, pid);
  register_child(-pid);  // a supervisor: SIGTERM, so it cleans up after its command
  if (read_fd >= 0) {
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = read(read_fd, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    close(read_fd);
    if (output) *output = std::move(out);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  unregister_child(-pid);
  return exit_code(status);
}

pid_t fork_child() {
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(128 + SIGKILL);
    forget_parents_registries();
    if (g_owner.load() != 0) g_owner.store(getpid());
    return 0;
  }
  if (pid > 0) {
    setpgid(pid, pid);
    register_child(pid);
  }
  return pid;
}

pid_t reap_child(pid_t pid, int* status, int options) {
  pid_t w;
  while ((w = waitpid(pid, status, options)) < 0 && errno == EINTR) {
  }
  if (w == pid || (w < 0 && errno == ECHILD)) unregister_child(pid);
  return w;
}

void kill_child(pid_t pid) {
  if (pid <= 0) return;
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

TempFiles::TempFiles(std::vector<std::string> paths) {
  for (auto& p : paths) add(p);
}

void TempFiles::add(const std::string& path) {
  paths_.push_back(path);
  slots_.push_back(register_temp(path));
}

TempFiles::~TempFiles() {
  for (size_t i = 0; i < paths_.size(); ++i) {
    unlink(paths_[i].c_str());
    unregister_temp(slots_[i]);
  }
}

void install_termination_handlers() {
  g_owner.store(getpid());
  struct sigaction sa {};
  sa.sa_handler = on_termination_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : kTerminationSignals) sigaddset(&sa.sa_mask, s);
  for (int s : kTerminationSignals) sigaction(s, &sa, nullptr);
}

int kill_children_and_remove_temps() {
  int n = 0;
  for (auto& s : g_children) {
    pid_t pid = s.load();
    if (pid > 0) kill_child(pid);
    else if (pid < 0) kill(-pid, SIGTERM);
    else continue;
    ++n;
  }
  for (auto& t : g_temps)
    if (t.state.load() == 2) unlink(t.path);
  return n;
}

std::string temp_tag() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
  return std::string(host) + "-" + std::to_string(getpid());
}

int sweep_stale_temps(const std::string& dir) {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
  const std::string mark = std::string(".tmp-") + host + "-";
  int removed = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    size_t at = name.find(mark);
    if (at == std::string::npos) continue;
    const char* digits = name.c_str() + at + mark.size();
    char* end = nullptr;
    long pid = std::strtol(digits, &end, 10);
    if (end == digits || *end != '-' || pid <= 0 || pid > INT_MAX || pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code rm;
    if (std::filesystem::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace sabre::support
