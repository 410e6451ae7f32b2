// Children die with their parent, however it ends, and take what they started with them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "support/subprocess.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
namespace sp = sabre::support;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sabre_subprocess_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// Gone, or a zombie nobody reaped yet: either way no longer running.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (running(pid)) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

pid_t read_pid(const std::string& path, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream f(path);
    pid_t pid = 0;
    if (f >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(20ms);
  }
  return 0;
}

}  // namespace

TEST(Subprocess, ReturnsTheStatusAndTheOutput) {
  std::string out;
  EXPECT_EQ(sp::run_process({"sh", "-c", "echo to-out; echo to-err >&2; exit 3"}, &out), 3);
  EXPECT_NE(out.find("to-out"), std::string::npos) << out;
  EXPECT_NE(out.find("to-err"), std::string::npos) << out;
  EXPECT_EQ(sp::run_process({"sh", "-c", "kill -TERM $$"}, &out), 128 + SIGTERM);
}

TEST(Subprocess, AMissingCommandIs127) {
  std::string out;
  EXPECT_EQ(sp::run_process({"sabre-no-such-command"}, &out), 127);
  EXPECT_NE(out.find("sabre-no-such-command"), std::string::npos) << out;
}

TEST(Subprocess, OutputGoesToAFileWhenAsked) {
  std::string d = temp_dir("file");
  EXPECT_EQ(sp::run_process({"sh", "-c", "echo logged"}, nullptr, {d + "/log", {}}), 0);
  std::ifstream f(d + "/log");
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "logged");
  fs::remove_all(d);
}

// The case of nvcc under a sabre killed with -9: nvcc's own children (cicc, ptxas) go too, and the
// command's temp files are removed.
TEST(Subprocess, AParentKilledWithSigkillTakesTheCommandAndItsChildrenDown) {
  std::string d = temp_dir("kill9");
  const std::string pidfile = d + "/grandchild.pid", temp = d + "/work.tmp";
  std::ofstream(temp) << "half a kernel";
  pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    // A command that starts a child of its own and waits on it, as nvcc does.
    sp::run_process({"sh", "-c", "sleep 60 & echo $! > " + pidfile + "; wait"}, nullptr, {d + "/log", {temp}});
    _exit(0);
  }
  pid_t grandchild = read_pid(pidfile, 10s);
  ASSERT_GT(grandchild, 0) << "the command never started";
  ASSERT_TRUE(running(grandchild));
  kill(parent, SIGKILL);
  int status = 0;
  waitpid(parent, &status, 0);
  EXPECT_TRUE(gone_within(grandchild, 5s)) << "the command's child " << grandchild << " outlived sabre";
  auto end = std::chrono::steady_clock::now() + 5s;
  while (fs::exists(temp) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(fs::exists(temp)) << "the command's temp file outlived sabre";
  if (running(grandchild)) kill(grandchild, SIGKILL);
  fs::remove_all(d);
}

// What the CLI's signal handler does: every command's group killed, every registered temp file removed.
TEST(Subprocess, TheHandlersCleanupKillsEveryChildGroupAndRemovesTemps) {
  std::string d = temp_dir("handler");
  const std::string pidfile = d + "/grandchild.pid";
  sp::TempFiles temps({d + "/a.tmp"});
  std::ofstream(d + "/a.tmp") << "x";
  int rc = -2;
  std::thread t([&] { rc = sp::run_process({"sh", "-c", "sleep 60 & echo $! > " + pidfile + "; wait"}, nullptr, {d + "/log", {}}); });
  pid_t grandchild = read_pid(pidfile, 10s);
  ASSERT_GT(grandchild, 0);
  EXPECT_GE(sp::kill_children_and_remove_temps(), 1);
  t.join();
  EXPECT_EQ(rc, 128 + SIGTERM) << "the supervisor exits with the signal that stopped it";
  EXPECT_TRUE(gone_within(grandchild, 5s));
  EXPECT_FALSE(fs::exists(d + "/a.tmp"));
  fs::remove_all(d);
}

TEST(Subprocess, AForkedChildDiesWithItsParent) {
  std::string d = temp_dir("fork");
  const std::string pidfile = d + "/child.pid";
  pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    pid_t c = sp::fork_child();
    if (c == 0) {
      std::ofstream(pidfile) << getpid();
      for (;;) pause();
    }
    for (;;) pause();
  }
  pid_t child = read_pid(pidfile, 10s);
  ASSERT_GT(child, 0);
  kill(parent, SIGKILL);
  int status = 0;
  waitpid(parent, &status, 0);
  EXPECT_TRUE(gone_within(child, 5s)) << "a watchdog child outlived its parent";
  if (running(child)) kill(child, SIGKILL);
  fs::remove_all(d);
}

TEST(Subprocess, SweepRemovesOnlyTheTempFilesOfDeadProcesses) {
  std::string d = temp_dir("sweep");
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  int status = 0;
  waitpid(dead, &status, 0);
  std::string mine = sp::temp_tag();
  std::string host = mine.substr(0, mine.rfind('-'));
  const std::string stale = d + "/k-0123.tmp-" + host + "-" + std::to_string(dead) + "-7.cu";
  const std::string live = d + "/k-0123.tmp-" + mine + "-7.cu";
  const std::string other_host = d + "/k-0123.tmp-elsewhere.example-" + std::to_string(dead) + "-7.cu";
  for (const auto& p : {stale, live, other_host}) std::ofstream(p) << "x";
  EXPECT_EQ(sp::sweep_stale_temps(d), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other_host));
  fs::remove_all(d);
}
