#include "tune/compile_batch.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sabre/kernel_abi.h"

namespace sabre::tune {
namespace {

constexpr const char* kRegistries[] = {SABRE_KERNEL_REGISTRY_SYMBOL, SABRE_CONV_REGISTRY_SYMBOL};

bool ident_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

bool is_identifier(const std::string& s) {
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') && std::all_of(s.begin(), s.end(), ident_char);
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// The directive of a preprocessor line ("include", "define", ...), or "" for any other line.
std::string directive(std::string_view line) {
  line = trim_left(line);
  if (line.empty() || line.front() != '#') return "";
  line = trim_left(line.substr(1));
  size_t n = 0;
  while (n < line.size() && ident_char(line[n])) ++n;
  return std::string(line.substr(0, n));
}

// Whether `text` holds the identifier `id` as a whole token.
bool has_token(const std::string& text, const std::string& id) {
  for (size_t p = text.find(id); p != std::string::npos; p = text.find(id, p + 1)) {
    const bool before = p == 0 || !ident_char(text[p - 1]);
    const bool after = p + id.size() >= text.size() || !ident_char(text[p + id.size()]);
    if (before && after) return true;
  }
  return false;
}

std::string renamed_registry(const std::string& kernel, const std::string& registry) {
  return kernel + "_batch_" + registry;
}

// How long a unit of k kernels takes, relative: a fixed part per translation unit (the headers) and
// a smaller part per kernel.
double unit_cost(int k) { return 55.0 + 18.0 * k; }

}  // namespace

std::optional<BatchableSource> split_for_batch(const CompileJob& job) {
  if (job.batch_family.empty() || !is_identifier(job.name)) return std::nullopt;
  BatchableSource out;
  std::istringstream in(job.source);
  std::string line;
  bool in_preamble = true, continued = false;
  while (std::getline(in, line)) {
    if (in_preamble) {
      const std::string_view t = trim_left(line);
      if (continued || (!t.empty() && t.front() == '#')) {
        out.preamble += line + "\n";
        continued = !line.empty() && line.back() == '\\';
        continue;
      }
      if (t.empty() || t.starts_with("//")) continue;
      in_preamble = false;
    }
    const std::string d = directive(line);
    // Every body must see the preamble's preprocessor state: a body's own macros are undefined after
    // it (batch_source); an include or an #undef would change the state for the bodies after it.
    if (d == "include" || d == "undef" || d == "import" || d == "include_next") return std::nullopt;
    if (d == "define") {
      std::string_view rest = trim_left(trim_left(line).substr(1));
      rest = trim_left(rest.substr(6));  // past "define"
      size_t n = 0;
      while (n < rest.size() && ident_char(rest[n])) ++n;
      if (n == 0) return std::nullopt;
      out.macros.emplace_back(rest.substr(0, n));
    }
    out.body += line + "\n";
  }
  if (out.body.empty()) return std::nullopt;
  return out;
}

std::vector<std::vector<size_t>> plan_compile_units(const std::vector<CompileJob>& jobs, const std::vector<size_t>& todo,
                                                    int max_batch, int parallel) {
  max_batch = std::max(1, max_batch);
  parallel = std::max(1, parallel);
  std::vector<std::vector<size_t>> singles, groups;
  std::map<std::string, size_t> group_of;  // family, flags and preamble -> index in groups
  std::set<std::string> names;
  for (size_t i : todo) {
    const CompileJob& j = jobs.at(i);
    auto split = max_batch > 1 ? split_for_batch(j) : std::nullopt;
    // A name twice in one unit would define its symbols twice: a repeated job is built alone.
    if (!split || !names.insert(j.name).second) {
      singles.push_back({i});
      continue;
    }
    std::string key = j.batch_family + '\0' + split->preamble + '\0';
    for (const auto& f : j.flags) key += f + '\0';
    auto [it, fresh] = group_of.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  // The batch size that finishes soonest: the units' times spread over `parallel` compilers, the
  // longest first, each to the compiler free earliest.
  int best = 1;
  double best_time = std::numeric_limits<double>::infinity();
  for (int b = 1; b <= max_batch; ++b) {
    std::vector<double> times(singles.size(), unit_cost(1));
    for (const auto& g : groups) {
      const size_t n = g.size(), k = (n + size_t(b) - 1) / size_t(b);
      for (size_t u = 0; u < k; ++u) times.push_back(unit_cost(static_cast<int>(n / k + (u < n % k ? 1 : 0))));
    }
    std::sort(times.begin(), times.end(), std::greater<>());
    std::vector<double> busy(static_cast<size_t>(parallel), 0.0);
    for (double t : times) *std::min_element(busy.begin(), busy.end()) += t;
    const double t = *std::max_element(busy.begin(), busy.end());
    if (t <= best_time) {
      best_time = t;
      best = b;
    }
  }
  std::vector<std::vector<size_t>> units;
  for (const auto& g : groups) {
    // ceil(n / best) batches whose sizes differ by at most one.
    const size_t n = g.size(), k = (n + size_t(best) - 1) / size_t(best);
    size_t at = 0;
    for (size_t u = 0; u < k; ++u) {
      const size_t size = n / k + (u < n % k ? 1 : 0);
      units.emplace_back(g.begin() + static_cast<std::ptrdiff_t>(at), g.begin() + static_cast<std::ptrdiff_t>(at + size));
      at += size;
    }
  }
  units.insert(units.end(), singles.begin(), singles.end());
  // In todo's order of each unit's first job, so progress follows the caller's order.
  std::stable_sort(units.begin(), units.end(), [&](const auto& a, const auto& b) {
    auto pos = [&](size_t i) { return std::find(todo.begin(), todo.end(), i) - todo.begin(); };
    return pos(a.front()) < pos(b.front());
  });
  return units;
}

std::string batch_source(const std::vector<const CompileJob*>& batch) {
  if (batch.empty()) throw std::logic_error("invariant: batch_source needs at least one job");
  std::string out, preamble;
  std::vector<BatchableSource> parts;
  for (const CompileJob* j : batch) {
    auto s = split_for_batch(*j);
    if (!s) throw std::logic_error("invariant: kernel " + j->name + " cannot share a translation unit (compile_batch.h)");
    if (!parts.empty() && s->preamble != parts.front().preamble)
      throw std::logic_error("invariant: kernels " + batch.front()->name + " and " + j->name +
                             " have different preambles and cannot share a translation unit");
    parts.push_back(std::move(*s));
  }
  out += "// Generated by sabre: a batch of " + std::to_string(batch.size()) +
         " kernels, each body as in its own source, in its own namespace.\n";
  out += parts.front().preamble;
  for (size_t i = 0; i < batch.size(); ++i) {
    const std::string& name = batch[i]->name;
    out += "\n// " + name + "\n";
    for (const char* r : kRegistries) out += "#define " + std::string(r) + " " + renamed_registry(name, r) + "\n";
    out += "namespace sabre_batch_" + std::to_string(i) + " {\n" + parts[i].body + "}  // namespace sabre_batch_" +
           std::to_string(i) + "\n";
    for (const char* r : kRegistries) out += "#undef " + std::string(r) + "\n";
    for (const auto& m : parts[i].macros) out += "#undef " + m + "\n";
  }
  return out;
}

BatchExports batch_exports(const CompileJob& job) {
  BatchExports e;
  auto s = split_for_batch(job);
  if (!s) throw std::logic_error("invariant: kernel " + job.name + " cannot share a translation unit (compile_batch.h)");
  const std::string prefix = job.name + "_";
  std::set<std::string> seen;
  const std::string& b = s->body;
  for (size_t p = b.find(prefix); p != std::string::npos; p = b.find(prefix, p + 1)) {
    if (p > 0 && ident_char(b[p - 1])) continue;
    size_t end = p + prefix.size();
    while (end < b.size() && ident_char(b[end])) ++end;
    if (end == p + prefix.size()) continue;
    std::string sym = b.substr(p, end - p);
    if (seen.insert(sym).second) e.symbols.push_back(std::move(sym));
  }
  for (const char* r : kRegistries)
    if (has_token(b, r)) e.aliases.push_back({r, renamed_registry(job.name, r)});
  return e;
}

std::string version_script(const BatchExports& e) {
  std::string out = "{\n  global:\n";
  for (const auto& s : e.symbols) out += "    " + s + ";\n";
  for (const auto& [alias, def] : e.aliases) out += "    " + alias + ";\n";
  return out + "  local: *;\n};\n";
}

}  // namespace sabre::tune
