#include "tune/db.h"

#include <algorithm>
#include <chrono>

#include <sqlite3.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "support/json.h"
#include "tune/profiler.h"
#include "tune/select.h"

namespace sabre::tune {

namespace {

constexpr const char* kStatusNames[] = {"ok", "cannot_implement", "compile_failed", "crashed", "hung", "wrong_result"};
static_assert(sizeof(kStatusNames) / sizeof(kStatusNames[0]) == static_cast<size_t>(Status::wrong_result) + 1,
              "one name per Status");

// A prepared statement that finalizes itself; every sqlite status is checked where returned.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      throw DbError(std::string("tuning db: cannot prepare '") + sql + "': " + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    // SQLite stores +inf as a REAL fine, but keep NULL for "no time" to stay readable in exports.
    check(std::isfinite(v) ? sqlite3_bind_double(s_, i, v) : sqlite3_bind_null(s_, i));
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw DbError(std::string("tuning db: ") + sqlite3_errmsg(db_));
  }
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(s_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
  double real_or_inf(int col) const {
    return sqlite3_column_type(s_, col) == SQLITE_NULL ? std::numeric_limits<double>::infinity()
                                                       : sqlite3_column_double(s_, col);
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw DbError(std::string("tuning db: bind failed: ") + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

Measurement row_to_measurement(const Stmt& s) {
  Measurement m;
  m.workload = s.text(0);
  m.kernel = s.text(1);
  m.status = parse_status(s.text(2)).value_or(Status::crashed);
  m.time_us = s.real_or_inf(3);
  m.rel_error = s.real_or_inf(4);
  m.detail = s.text(5);
  return m;
}

constexpr const char* kSelectCols = "SELECT workload, kernel, status, time_us, rel_error, detail FROM measurements ";

}  // namespace

const char* to_string(Status s) { return kStatusNames[static_cast<size_t>(s)]; }

std::optional<Status> parse_status(const std::string& s) {
  for (size_t i = 0; i < std::size(kStatusNames); ++i)
    if (s == kStatusNames[i]) return static_cast<Status>(i);
  return std::nullopt;
}

std::string TuningDb::default_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/sabre/tuning.db";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/sabre/tuning.db";
}

TuningDb::TuningDb(const std::string& path) : path_(path) {
  if (path != ":memory:") {
    auto parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw DbError("tuning db: cannot create directory " + parent.string() + ": " + ec.message());
  }
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw DbError("tuning db: cannot open " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db_, 10000);
  try {
    // WAL keeps each committed row safe across a kill -9 and lets readers run beside a tuner.
    exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", /*retry_busy=*/true);
    exec(
        "CREATE TABLE IF NOT EXISTS environments (id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, sm INTEGER NOT NULL,"
        " cuda TEXT NOT NULL, cutlass TEXT NOT NULL, template_version TEXT NOT NULL,"
        " UNIQUE(gpu, sm, cuda, cutlass, template_version));"
        "CREATE TABLE IF NOT EXISTS measurements (env_id INTEGER NOT NULL REFERENCES environments(id),"
        " workload TEXT NOT NULL, kernel TEXT NOT NULL, status TEXT NOT NULL, time_us REAL, rel_error REAL,"
        " detail TEXT NOT NULL DEFAULT '', measured_at TEXT NOT NULL DEFAULT (datetime('now')),"
        " PRIMARY KEY(env_id, workload, kernel));",
        /*retry_busy=*/true);
  } catch (const DbError& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw DbError(std::string(e.what()) + " (is " + path + " a sabre tuning database?)");
  }
}

TuningDb::~TuningDb() { sqlite3_close(db_); }

void TuningDb::exec(const std::string& sql, bool retry_busy) const {
  // Opening a fresh file while other processes do (timing workers on several GPUs): switching it to
  // WAL, and a read that must become a write, can get SQLITE_BUSY at once, without the busy handler
  // (SQLite's deadlock avoidance); with retry_busy such statements are retried for the busy timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int attempt = 0;; ++attempt) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return;
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    const int primary = rc & 0xff;
    if (!retry_busy || (primary != SQLITE_BUSY && primary != SQLITE_LOCKED) ||
        std::chrono::steady_clock::now() > deadline)
      throw DbError("tuning db: " + msg);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + (attempt % 8) * 5));
  }
}

int64_t TuningDb::env_id(const Environment& env, bool create) const {
  Stmt q(db_, "SELECT id FROM environments WHERE gpu=? AND sm=? AND cuda=? AND cutlass=? AND template_version=?");
  q.bind(1, env.gpu).bind(2, static_cast<int64_t>(env.sm)).bind(3, env.cuda).bind(4, env.cutlass).bind(5, env.template_version);
  if (q.step()) return q.i64(0);
  if (!create) return -1;
  // OR IGNORE: another process (a timing worker on another GPU) may add the same environment between
  // the look-up above and this insert; either way the row exists after it.
  Stmt ins(db_, "INSERT OR IGNORE INTO environments (gpu, sm, cuda, cutlass, template_version) VALUES (?,?,?,?,?)");
  ins.bind(1, env.gpu).bind(2, static_cast<int64_t>(env.sm)).bind(3, env.cuda).bind(4, env.cutlass).bind(5, env.template_version);
  ins.step();
  Stmt again(db_, "SELECT id FROM environments WHERE gpu=? AND sm=? AND cuda=? AND cutlass=? AND template_version=?");
  again.bind(1, env.gpu).bind(2, static_cast<int64_t>(env.sm)).bind(3, env.cuda).bind(4, env.cutlass).bind(5, env.template_version);
  if (!again.step()) throw DbError("tuning db: the environment row just inserted is missing (invariant: inserts are durable)");
  return again.i64(0);
}

void TuningDb::record(const Environment& env, const Measurement& m) {
  int64_t id = env_id(env, true);
  Stmt s(db_,
         "INSERT OR REPLACE INTO measurements (env_id, workload, kernel, status, time_us, rel_error, detail)"
         " VALUES (?,?,?,?,?,?,?)");
  s.bind(1, id).bind(2, m.workload).bind(3, m.kernel).bind(4, std::string(to_string(m.status)));
  s.bind(5, m.status == Status::ok ? m.time_us : std::numeric_limits<double>::infinity());
  s.bind(6, m.rel_error).bind(7, m.detail);
  s.step();
}

std::optional<Measurement> TuningDb::find(const Environment& env, const std::string& workload,
                                          const std::string& kernel) const {
  int64_t id = env_id(env, false);
  if (id < 0) return std::nullopt;
  Stmt s(db_, (std::string(kSelectCols) + "WHERE env_id=? AND workload=? AND kernel=?").c_str());
  s.bind(1, id).bind(2, workload).bind(3, kernel);
  if (!s.step()) return std::nullopt;
  return row_to_measurement(s);
}

std::vector<Measurement> TuningDb::measurements(const Environment& env, const std::string& workload) const {
  std::vector<Measurement> out;
  int64_t id = env_id(env, false);
  if (id < 0) return out;
  Stmt s(db_, (std::string(kSelectCols) +
               "WHERE env_id=? AND workload=? ORDER BY status <> 'ok', time_us IS NULL, time_us, kernel")
                  .c_str());
  s.bind(1, id).bind(2, workload);
  while (s.step()) out.push_back(row_to_measurement(s));
  return out;
}

std::optional<Measurement> TuningDb::winner(const Environment& env, const std::string& workload) const {
  auto all = measurements(env, workload);
  if (all.empty() || all.front().status != Status::ok) return std::nullopt;
  return all.front();
}

std::vector<Environment> TuningDb::environments() const {
  std::vector<Environment> out;
  Stmt s(db_, "SELECT gpu, sm, cuda, cutlass, template_version FROM environments ORDER BY id");
  while (s.step()) out.push_back({s.text(0), static_cast<int>(s.i64(1)), s.text(2), s.text(3), s.text(4)});
  return out;
}

std::string TuningDb::other_builds_note(const Environment& env) const {
  if (!workloads(env).empty()) return "";
  std::string others;
  int n = 0;
  for (const Environment& e : environments()) {
    if (e.gpu != env.gpu || e.sm != env.sm || workloads(e).empty()) continue;
    std::string diff;
    auto differs = [&](const char* what, const std::string& theirs, const std::string& ours) {
      if (theirs != ours) diff += std::string(diff.empty() ? "" : ", ") + what + " " + theirs;
    };
    differs("CUDA", e.cuda, env.cuda);
    differs("CUTLASS", e.cutlass, env.cutlass);
    differs("templates", e.template_version, env.template_version);
    others += std::string(n++ ? "; " : "") + diff;
  }
  if (!n) return "";
  return "the tuning DB " + path_ + " holds measurements of " + env.gpu + " from other builds (" + others +
         ") but none from this one (CUDA " + env.cuda + ", CUTLASS " + env.cutlass + ", templates " +
         env.template_version + "): they time other kernels and are not used, so every candidate is measured again";
}

std::vector<std::string> TuningDb::workloads(const Environment& env) const {
  std::vector<std::string> out;
  int64_t id = env_id(env, false);
  if (id < 0) return out;
  Stmt s(db_, "SELECT DISTINCT workload FROM measurements WHERE env_id=? ORDER BY workload");
  s.bind(1, id);
  while (s.step()) out.push_back(s.text(0));
  return out;
}

int64_t TuningDb::count() const {
  Stmt s(db_, "SELECT COUNT(*) FROM measurements");
  s.step();
  return s.i64(0);
}

std::string TuningDb::export_jsonl() const {
  std::ostringstream os;
  Stmt s(db_,
         "SELECT m.workload, m.kernel, m.status, m.time_us, m.rel_error, m.detail, e.gpu, e.sm, e.cuda, e.cutlass,"
         " e.template_version FROM measurements m JOIN environments e ON e.id = m.env_id"
         " ORDER BY e.id, m.workload, m.kernel");
  while (s.step()) {
    json::Object env{{"gpu", json::Value(s.text(6))},
                     {"sm", json::Value(static_cast<double>(s.i64(7)))},
                     {"cuda", json::Value(s.text(8))},
                     {"cutlass", json::Value(s.text(9))},
                     {"template_version", json::Value(s.text(10))}};
    Measurement m = row_to_measurement(s);
    json::Object row{{"env", json::Value(std::move(env))},
                     {"workload", json::Value(m.workload)},
                     {"kernel", json::Value(m.kernel)},
                     {"status", json::Value(std::string(to_string(m.status)))},
                     {"time_us", std::isfinite(m.time_us) ? json::Value(m.time_us) : json::Value()},
                     {"rel_error", std::isfinite(m.rel_error) ? json::Value(m.rel_error) : json::Value()},
                     {"detail", json::Value(m.detail)}};
    os << json::Value(std::move(row)).dump() << "\n";
  }
  return os.str();
}

bool TuningDb::keep_incoming(const Environment& env, const Measurement& m) const {
  auto have = find(env, m.workload, m.kernel);
  if (!have) return true;
  if (m.status != Status::ok) return false;
  return have->status != Status::ok || m.time_us < have->time_us;
}

int64_t TuningDb::import_jsonl(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int64_t taken = 0, lineno = 0;
  exec("BEGIN");
  try {
    while (std::getline(in, line)) {
      ++lineno;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json::Value v;
      try {
        v = json::parse(line);
      } catch (const std::exception& e) {
        throw DbError("import: line " + std::to_string(lineno) + ": " + e.what());
      }
      auto field = [&](const json::Value& obj, const char* k) -> const json::Value& {
        const json::Value* f = obj.get(k);
        if (!f) throw DbError("import: line " + std::to_string(lineno) + ": missing field '" + k + "'");
        return *f;
      };
      const json::Value& e = field(v, "env");
      const double sm = field(e, "sm").num();
      if (!(sm >= 1 && sm <= 1000) || sm != static_cast<double>(static_cast<int>(sm)))
        throw DbError("import: line " + std::to_string(lineno) + ": sm " + json::Value(sm).dump() + " is no GPU's; nothing was imported");
      Environment env{field(e, "gpu").str(), static_cast<int>(sm), field(e, "cuda").str(),
                      field(e, "cutlass").str(), field(e, "template_version").str()};
      Measurement m;
      m.workload = field(v, "workload").str();
      m.kernel = field(v, "kernel").str();
      // Names are keys stored as text: a control byte (a NUL cuts SQLite's copy short) is no name.
      for (const std::string* s : {&m.workload, &m.kernel, &env.gpu})
        if (std::any_of(s->begin(), s->end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
          throw DbError("import: line " + std::to_string(lineno) + ": a name holds a control character; nothing was imported");
      auto st = parse_status(field(v, "status").str());
      if (!st) throw DbError("import: line " + std::to_string(lineno) + ": unknown status '" + field(v, "status").str() + "'");
      m.status = *st;
      const json::Value* t = v.get("time_us");
      m.time_us = t && t->is_number() ? t->num() : std::numeric_limits<double>::infinity();
      const json::Value* r = v.get("rel_error");
      m.rel_error = r && r->is_number() ? r->num() : 0.0;
      if (const json::Value* d = v.get("detail"); d && d->is_string()) m.detail = d->str();
      // A row is a claim that a kernel computes its workload this fast: one whose time is not a
      // time, or whose kernel (of this build's naming) computes something else, is refused, so an
      // imported DB can never put a kernel into a plan that does not compute what the plan needs.
      if (m.status == Status::ok && !(std::isfinite(m.time_us) && m.time_us > 0))
        throw DbError("import: line " + std::to_string(lineno) + ": an ok row needs a positive time_us; nothing was imported");
      if (m.status == Status::ok && env.cutlass == cutlass_version() && env.template_version == template_version())
        if (auto why = row_mismatch(m, env.sm))
          throw DbError("import: line " + std::to_string(lineno) + ": " + *why +
                        "; the row does not describe its workload, nothing was imported");
      if (keep_incoming(env, m)) {
        record(env, m);
        ++taken;
      }
    }
    exec("COMMIT");
  } catch (const DbError&) {
    exec("ROLLBACK");
    throw;
  } catch (const std::exception& e) {  // a field of the wrong JSON type, a kernel name that does not parse
    exec("ROLLBACK");
    throw DbError("import: line " + std::to_string(lineno) + ": " + e.what() + "; nothing was imported");
  }
  return taken;
}

int64_t TuningDb::merge_file(const std::string& other_path) {
  if (!std::filesystem::exists(other_path)) throw DbError("merge: no such file: " + other_path);
  TuningDb other(other_path);
  return import_jsonl(other.export_jsonl());
}

}  // namespace sabre::tune
