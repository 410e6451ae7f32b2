// The trace and the breakdown chart of a profiled run (session_profile_report.h).
#include "runtime/session_profile_report.h"

#include <algorithm>
#include <cstdio>

namespace sabre::runtime {

std::string step_label(const std::string& op, const std::string& name) {
  return name.empty() ? op : op + ": " + name;
}

namespace {

using json = nlohmann::ordered_json;

size_t run_count(const ProfileRecord& r) {
  size_t n = 0;
  for (const StepTime& t : r.steps) n = std::max(n, t.runs_us.size());
  return std::max<size_t>(n, 1);
}

json step_args(const StepTime& t, size_t run, double us) {
  json a = {{"step", t.index}, {"op", t.op}, {"node", t.name}, {"run", run + 1}, {"median_us", t.us}};
  if (!t.kernel.empty()) a["kernel"] = t.kernel;
  a["inputs"] = t.input_shapes;
  a["outputs"] = t.output_shapes;
  a["bytes"] = t.bytes;
  if (us > 0 && t.bytes > 0) a["GB/s"] = double(t.bytes) / (us * 1e3);
  if (t.flops > 0) {
    a["flops"] = t.flops;
    if (us > 0) a["TFLOP/s"] = t.flops / (us * 1e6);
  }
  return a;
}

}  // namespace

nlohmann::ordered_json chrome_trace(const ProfileRecord& r) {
  const int pid = 1, run_tid = 1, gpu_tid = 2;
  json ev = json::array();
  auto meta = [&](const char* what, int tid, json args) {
    json e = {{"name", what}, {"ph", "M"}, {"pid", pid}};
    if (tid) e["tid"] = tid;
    e["args"] = std::move(args);
    ev.push_back(std::move(e));
  };
  meta("process_name", 0, {{"name", "sabre bench --profile: " + r.model}});
  meta("thread_name", run_tid, {{"name", "profiled runs"}});
  meta("thread_sort_index", run_tid, {{"sort_index", 0}});
  meta("thread_name", gpu_tid, {{"name", "GPU" + (r.device.empty() ? std::string() : " " + r.device) + ": plan steps"}});
  meta("thread_sort_index", gpu_tid, {{"sort_index", 1}});
  const size_t runs = run_count(r);
  double ts = 0;  // microseconds
  for (size_t run = 0; run < runs; ++run) {
    const double run_start = ts;
    for (const StepTime& t : r.steps) {
      const double us = run < t.runs_us.size() ? t.runs_us[run] : t.us;
      ev.push_back({{"name", step_label(t.op, t.name)}, {"cat", t.op}, {"ph", "X"}, {"pid", pid}, {"tid", gpu_tid},
                    {"ts", ts}, {"dur", us}, {"args", step_args(t, run, us)}});
      ts += us;
    }
    ev.push_back({{"name", "run " + std::to_string(run + 1)}, {"cat", "run"}, {"ph", "X"}, {"pid", pid}, {"tid", run_tid},
                  {"ts", run_start}, {"dur", ts - run_start}, {"args", {{"run", run + 1}, {"steps", r.steps.size()}}}});
  }
  json other = {{"model", r.model}, {"device", r.device}, {"dims", r.dims}, {"runs", runs},
                {"timing", "CUDA events between steps, the steps enqueued one by one; each run's steps laid end to "
                           "end, the runs one after another (the host's wait between runs left out)"}};
  return {{"traceEvents", std::move(ev)}, {"displayTimeUnit", "ns"}, {"otherData", std::move(other)}};
}

namespace {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters even escaped; a node name never needs them.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t') o += ' ';
        else o += c;
    }
  }
  return o;
}

// Cut to `n` characters (UTF-8 sequences kept whole) with an ellipsis: long node names.
std::string clip(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\u2026";
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// One colour per op kind, in order of their time, so the two sections agree.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

}  // namespace

std::string time_breakdown_svg(const ProfileRecord& r, size_t top_steps) {
  struct Row {
    std::string label, tip, colour;
    double us;
  };
  double total = 0;
  std::map<std::string, std::pair<int, double>> by_op;
  for (const StepTime& t : r.steps) {
    total += t.us;
    ++by_op[t.op].first;
    by_op[t.op].second += t.us;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::map<std::string, std::string> colour;
  for (size_t i = 0; i < ops.size(); ++i) colour[ops[i].first] = kPalette[std::min(i, std::size(kPalette) - 1)];

  std::vector<Row> op_rows, step_rows;
  for (const auto& [op, cu] : ops)
    op_rows.push_back({op + " (" + std::to_string(cu.first) + (cu.first == 1 ? " step)" : " steps)"), op, colour[op], cu.second});
  std::vector<const StepTime*> slow;
  for (const StepTime& t : r.steps) slow.push_back(&t);
  std::stable_sort(slow.begin(), slow.end(), [](const StepTime* a, const StepTime* b) { return a->us > b->us; });
  if (top_steps == 0 || top_steps > slow.size()) top_steps = slow.size();
  for (size_t i = 0; i < top_steps; ++i) {
    const StepTime& t = *slow[i];
    std::string tip = "step " + std::to_string(t.index) + " " + step_label(t.op, t.name);
    if (!t.kernel.empty()) tip += "\nkernel " + t.kernel;
    step_rows.push_back({clip("#" + std::to_string(t.index) + " " + step_label(t.op, t.name), 58), tip, colour[t.op], t.us});
  }

  const int width = 1000, label_w = 400, bar_x = label_w + 10, bar_max = 420, row_h = 20, pad = 16;
  const int sections_y = 56;
  const int height = sections_y + 2 * 28 + row_h * int(op_rows.size() + step_rows.size()) + 2 * pad;
  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
       std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
       "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string dims;
  for (const auto& [k, v] : r.dims) dims += (dims.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  s += "<text x=\"" + std::to_string(pad) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" +
       xml_escape(r.model + ": where the GPU time goes") + "</text>\n";
  std::string sub = std::to_string(r.steps.size()) + " steps, " + fmt("%.1f", total) +
                    " us a run (median of each step over the profiled runs)";
  if (!r.device.empty()) sub += ", " + r.device;
  if (!dims.empty()) sub += ", " + dims;
  s += "<text x=\"" + std::to_string(pad) + "\" y=\"42\" fill=\"#555\">" + xml_escape(sub) + "</text>\n";

  int y = sections_y;
  auto section = [&](const std::string& title, const std::vector<Row>& rows) {
    y += 22;
    s += "<text x=\"" + std::to_string(pad) + "\" y=\"" + std::to_string(y) + "\" font-size=\"14\" font-weight=\"bold\">" +
         xml_escape(title) + "</text>\n";
    y += 6;
    double top = 0;
    for (const Row& row : rows) top = std::max(top, row.us);
    for (const Row& row : rows) {
      const double share = total > 0 ? row.us / total : 0;
      const double w = top > 0 ? bar_max * row.us / top : 0;
      const int ty = y + 14;
      s += "<g><title>" + xml_escape(row.tip) + "</title>";
      s += "<text x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(ty) + "\" text-anchor=\"end\">" +
           xml_escape(row.label) + "</text>";
      s += "<rect x=\"" + std::to_string(bar_x) + "\" y=\"" + std::to_string(y + 3) + "\" width=\"" + fmt("%.1f", w) +
           "\" height=\"" + std::to_string(row_h - 6) + "\" fill=\"" + row.colour + "\"/>";
      s += "<text x=\"" + fmt("%.1f", bar_x + w + 6) + "\" y=\"" + std::to_string(ty) + "\">" +
           xml_escape(fmt("%.1f us", row.us) + "  " + fmt("%.1f%%", 100.0 * share)) + "</text></g>\n";
      y += row_h;
    }
  };
  section("Time by op kind", op_rows);
  section(top_steps == slow.size() ? "Every step, slowest first" : "The " + std::to_string(top_steps) + " slowest steps",
          step_rows);
  s += "</svg>\n";
  return s;
}

}  // namespace sabre::runtime
