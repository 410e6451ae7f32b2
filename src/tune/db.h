// The tuning database: every measurement the tuner ever made, in one SQLite file.
//
// Keyed by the environment that makes a timing meaningful (GPU name, SM, CUDA, CUTLASS and
// sabre's template version) and by the workload; each (workload, kernel) pair is measured once
// per environment. Every row is committed as soon as it is measured, so a tuner killed with -9
// resumes where it stopped. Tests: tests/unit/tune_db_test.cpp
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct sqlite3;

namespace sabre::tune {

// What makes two timings comparable. A change in any field starts a fresh set of measurements.
struct Environment {
  std::string gpu;               // "NVIDIA H200"
  int sm = 0;                    // 90
  std::string cuda;              // "13.0"
  std::string cutlass;           // "4.2.0"
  std::string template_version;  // sabre's emitter templates; bump when generated code changes
  bool operator==(const Environment&) const = default;
};

enum class Status { ok, cannot_implement, compile_failed, crashed, hung, wrong_result };
const char* to_string(Status s);
std::optional<Status> parse_status(const std::string& s);

struct Measurement {
  std::string workload;  // canonical text of the workload, e.g. "gemm f16 tn bias_gelu m=128 n=768 k=768 b=1"
  std::string kernel;    // a kernel's name is its identity
  Status status = Status::ok;
  double time_us = std::numeric_limits<double>::infinity();  // median; +inf unless ok
  double rel_error = 0;  // against the reference, when checked
  std::string detail;    // why it failed, the log's path, ...
};

struct DbError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class TuningDb {
 public:
  // Opens or creates the file (parent directories too). ":memory:" works for tests.
  explicit TuningDb(const std::string& path);
  ~TuningDb();
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  // Default location: $XDG_CACHE_HOME/sabre/tuning.db, else ~/.cache/sabre/tuning.db.
  static std::string default_path();

  // Records one measurement (replacing an earlier one of the same env, workload and kernel).
  void record(const Environment& env, const Measurement& m);
  std::optional<Measurement> find(const Environment& env, const std::string& workload,
                                  const std::string& kernel) const;
  // All measurements of a workload, fastest first (failures last).
  std::vector<Measurement> measurements(const Environment& env, const std::string& workload) const;
  // The fastest ok measurement of a workload, if any.
  std::optional<Measurement> winner(const Environment& env, const std::string& workload) const;

  // The file this DB lives in (":memory:" for in-memory ones).
  const std::string& path() const { return path_; }

  std::vector<Environment> environments() const;
  std::vector<std::string> workloads(const Environment& env) const;
  int64_t count() const;
  // Where the DB holds measurements of this GPU (name and SM) under other builds (CUDA, CUTLASS or
  // sabre's template version) and none under `env`: a line saying so, which differ and that those
  // describe other kernels, so a run that imported them knows why it measures everything again.
  // Empty otherwise.
  std::string other_builds_note(const Environment& env) const;

  // One JSON object per line: {"env":{...},"workload":...,"kernel":...,"status":...,"time_us":...}.
  std::string export_jsonl() const;
  // Reads export_jsonl's format; returns the number of rows taken. Rows that this DB already has
  // are kept unless the incoming one is ok and faster (merge keeps the best of both).
  int64_t import_jsonl(const std::string& text);
  // Merges another database file by the same rule.
  int64_t merge_file(const std::string& other_path);

 private:
  int64_t env_id(const Environment& env, bool create) const;
  bool keep_incoming(const Environment& env, const Measurement& m) const;
  // retry_busy: retry SQLITE_BUSY/LOCKED for the busy timeout (statements SQLite fails at once rather
  // than wait, such as a fresh file's switch to WAL while another process opens it).
  void exec(const std::string& sql, bool retry_busy = false) const;
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace sabre::tune
