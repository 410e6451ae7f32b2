// sabre db: the tuning database (src/tune/db.h) from the command line: show, export, import, merge.
// Tests: tests/unit/tune_cli_test.cpp (round trip through the sabre binary)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "support/files.h"
#include "tune/db.h"

namespace sabre::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"--db", "", "PATH", "the tuning database (default $XDG_CACHE_HOME/sabre/tuning.db)", false},
    output_flag("export: write here instead of stdout"),
    {"--workload", "", "TEXT", "show: only workloads containing TEXT", false},
    {"--all", "", "", "show: every measurement, not just each workload's winner", false},
    json_flag(),
};

void print_help() {
  std::printf(
      "usage: sabre db show [--workload TEXT] [--all] [--db PATH] [--json]\n"
      "       sabre db export [-o FILE.jsonl] [--db PATH]\n"
      "       sabre db import FILE.jsonl [--db PATH]\n"
      "       sabre db merge OTHER.db [--db PATH]\n\n"
      "The tuning database keeps every measurement `sabre tune` made, keyed by GPU, SM, CUDA, CUTLASS and\n"
      "template version and by workload. export writes one JSON object per line; import and merge keep, for\n"
      "each (environment, workload, kernel), the faster correct measurement.\n\noptions:\n%s",
      flags_help(kFlags).c_str());
}

std::string env_text(const tune::Environment& e) {
  return e.gpu + " sm" + std::to_string(e.sm) + " cuda " + e.cuda + " cutlass " + e.cutlass + " templates " +
         e.template_version;
}

std::string time_text(const tune::Measurement& m) {
  if (m.status != tune::Status::ok) return tune::to_string(m.status);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", m.time_us);
  return buf;
}

nlohmann::ordered_json measurement_json(const tune::Measurement& m) {
  nlohmann::ordered_json j;
  j["kernel"] = m.kernel;
  j["status"] = tune::to_string(m.status);
  j["time_us"] = m.status == tune::Status::ok ? nlohmann::ordered_json(m.time_us) : nlohmann::ordered_json(nullptr);
  j["rel_error"] = m.rel_error;
  j["detail"] = m.detail;
  return j;
}

// sabre db show --json: environments, each with its workloads, their winner and (--all) every measurement.
int show_json(tune::TuningDb& db, const ParsedArgs& args) {
  const std::string filter = args.value("--workload").value_or("");
  nlohmann::ordered_json j = json_header("db");
  j["db"] = args.value("--db").value_or(tune::TuningDb::default_path());
  j["measurements"] = db.count();
  j["environments"] = nlohmann::ordered_json::array();
  for (const auto& env : db.environments()) {
    nlohmann::ordered_json e = {{"gpu", env.gpu},         {"sm", env.sm},
                                {"cuda", env.cuda},       {"cutlass", env.cutlass},
                                {"template_version", env.template_version}};
    e["workloads"] = nlohmann::ordered_json::array();
    for (const auto& w : db.workloads(env)) {
      if (w.find(filter) == std::string::npos) continue;
      auto ms = db.measurements(env, w);
      auto win = db.winner(env, w);
      nlohmann::ordered_json wj = {{"workload", w}, {"measured", ms.size()}};
      wj["winner"] = win ? measurement_json(*win) : nlohmann::ordered_json(nullptr);
      if (args.has("--all")) {
        wj["all"] = nlohmann::ordered_json::array();
        for (const auto& m : ms) wj["all"].push_back(measurement_json(m));
      }
      e["workloads"].push_back(std::move(wj));
    }
    j["environments"].push_back(std::move(e));
  }
  print_json(j);
  return kExitOk;
}

int show(tune::TuningDb& db, const ParsedArgs& args) {
  if (args.has("--json")) return show_json(db, args);
  const std::string filter = args.value("--workload").value_or("");
  const bool all = args.has("--all");
  std::printf("%s: %lld measurements\n", args.value("--db").value_or(tune::TuningDb::default_path()).c_str(),
              static_cast<long long>(db.count()));
  for (const auto& env : db.environments()) {
    std::printf("\n%s\n", env_text(env).c_str());
    for (const auto& w : db.workloads(env)) {
      if (w.find(filter) == std::string::npos) continue;
      auto ms = db.measurements(env, w);
      auto win = db.winner(env, w);
      std::printf("  %s  (%zu measured)\n    winner: %s\n", w.c_str(), ms.size(),
                  win ? (win->kernel + "  " + time_text(*win)).c_str() : "none correct");
      if (all)
        for (const auto& m : ms)
          std::printf("      %-70s %s%s%s\n", m.kernel.c_str(), time_text(m).c_str(), m.detail.empty() ? "" : "  ",
                      m.detail.c_str());
    }
  }
  return kExitOk;
}

std::string read_text(const std::string& path) {
  return support::read_input_file(path, "", support::kMaxTextBytes);
}

int run(const std::vector<std::string>& argv) {
  return guarded("db", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      print_help();
      return kExitOk;
    }
    if (args.positional.empty()) throw UsageError("no action given: sabre db show|export|import|merge");
    const std::string action = args.positional[0];
    const size_t want = (action == "import" || action == "merge") ? 2 : 1;
    if (action != "show" && action != "export" && action != "import" && action != "merge")
      throw UsageError("unknown action '" + action + "': use show, export, import or merge");
    if (args.positional.size() != want)
      throw UsageError(want == 2 ? "sabre db " + action + " takes one file" : "sabre db " + action + " takes no file");
    if (args.has("--json") && action != "show")
      throw UsageError("--json goes with sabre db show (export already writes JSON lines)");
    tune::TuningDb db(args.value("--db").value_or(tune::TuningDb::default_path()));
    if (action == "show") return show(db, args);
    if (action == "export") {
      const std::string text = db.export_jsonl();
      if (auto out = args.value("--output")) {
        support::write_output_file(*out, text.data(), text.size());
        std::fprintf(stderr, "exported %lld measurements to %s\n", static_cast<long long>(db.count()), out->c_str());
      } else {
        std::fwrite(text.data(), 1, text.size(), stdout);
      }
      return kExitOk;
    }
    if (action == "import") {
      const std::string text = read_text(args.positional[1]);
      // Every non-blank line is a row or an error, so a file with none is not an export.
      if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::runtime_error("'" + args.positional[1] + "' holds no measurements (it is empty); give a file " +
                                 "written by sabre db export");
      int64_t n = 0;
      try {
        n = db.import_jsonl(text);
      } catch (const tune::DbError& e) {  // "import: line 3: ...": say which file
        throw std::runtime_error("'" + args.positional[1] + "': " + e.what());
      }
      std::printf("imported %lld measurements; the database now holds %lld\n", static_cast<long long>(n),
                  static_cast<long long>(db.count()));
      return kExitOk;
    }
    support::check_input_file(args.positional[1], "database", support::kMaxDataBytes);
    int64_t n = db.merge_file(args.positional[1]);
    std::printf("merged %lld measurements; the database now holds %lld\n", static_cast<long long>(n),
                static_cast<long long>(db.count()));
    return kExitOk;
  });
}

const bool reg = register_command({"db", "show, export, import or merge the tuning database", run});

}  // namespace
}  // namespace sabre::cli
