#include "backends/cutlass/kernel_spec.h"

#include <charconv>
#include <vector>

namespace sabre::cutlass_backend {
namespace {

constexpr std::array<std::string_view, size_t(Family::kCount)> kFamilyNames = {"sm90", "sm80"};
constexpr std::array<std::string_view, size_t(Schedule::kCount)> kScheduleNames = {
    "coop", "pingpong", "streamk", "splitk", "splitku", "multistage"};
static_assert(kScheduleNames.back() == "multistage", "every Schedule needs its name here");
constexpr std::array<std::string_view, size_t(Elem::kCount)> kElemNames = {"f16", "bf16", "f32"};
constexpr std::array<int, size_t(Elem::kCount)> kElemBytes = {2, 2, 4};
constexpr std::array<std::string_view, size_t(Layout::kCount)> kLayoutNames = {"tn", "tt"};
constexpr std::array<std::string_view, size_t(Act::kCount)> kActNames = {"",     "relu",    "gelu",      "gelutanh",
                                                                        "silu", "sigmoid", "hardswish", "relu6"};
static_assert(kActNames.back() == "relu6", "every Act needs its name token here");

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// "128x256x64" (3 parts) or "1x2" (2 parts)
std::optional<std::array<int, 3>> parse_dims(std::string_view s, size_t parts) {
  auto t = split(s, 'x');
  if (t.size() != parts) return std::nullopt;
  std::array<int, 3> out{};
  for (size_t i = 0; i < parts; ++i) {
    auto v = parse_int(t[i]);
    if (!v || *v <= 0) return std::nullopt;
    out[i] = *v;
  }
  return out;
}

std::string dims(Shape3 s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

std::string_view family_name(Family f) { return kFamilyNames[size_t(f)]; }
std::string_view schedule_name(Schedule s) { return kScheduleNames[size_t(s)]; }
std::string_view elem_name(Elem e) { return kElemNames[size_t(e)]; }
std::string_view layout_name(Layout l) { return kLayoutNames[size_t(l)]; }
std::string_view act_name(Act a) { return kActNames[size_t(a)]; }
int elem_bytes(Elem e) { return kElemBytes[size_t(e)]; }

std::optional<Elem> parse_elem(std::string_view s) {
  for (size_t i = 0; i < kElemNames.size(); ++i)
    if (kElemNames[i] == s) return Elem(i);
  return std::nullopt;
}

std::optional<Act> parse_act(std::string_view s) {
  for (size_t i = 1; i < kActNames.size(); ++i)
    if (kActNames[i] == s) return Act(i);
  return std::nullopt;
}

std::string epilogue_name(const EpilogueSpec& e) {
  std::string out;
  auto add = [&](std::string_view t) {
    if (!out.empty()) out += '_';
    out += t;
  };
  if (e.bias) add("bias");
  if (e.residual == Residual::before_act) add("res");
  if (e.act != Act::none) add(act_name(e.act));
  if (e.residual == Residual::after_act) add("res");
  return out.empty() ? "linear" : out;
}

std::optional<EpilogueSpec> parse_epilogue(std::string_view s) {
  if (s == "linear") return EpilogueSpec{};
  EpilogueSpec e;
  bool seen_act = false, seen_res = false;
  size_t i = 0;
  for (auto t : split(s, '_')) {
    if (t == "bias" && i == 0) {
      e.bias = true;
    } else if (t == "res" && !seen_res) {
      seen_res = true;
      e.residual = seen_act ? Residual::after_act : Residual::before_act;
    } else if (auto a = parse_act(t); a && !seen_act) {
      seen_act = true;
      e.act = *a;
    } else {
      return std::nullopt;
    }
    ++i;
  }
  // "bias_res" without an activation: the residual is simply added; call it before_act.
  if (e.act == Act::none && e.residual == Residual::after_act) return std::nullopt;
  return e;
}

std::string kernel_name(const KernelSpec& s) {
  const KernelConfig& c = s.config;
  std::string n(family_name(c.family));
  if (c.family == Family::sm90) {
    n += "_ws_";
    n += schedule_name(c.schedule);
    if (is_split_k(c.schedule)) n += std::to_string(c.splits);  // "splitk4": another S is another kernel
  } else {
    n += "_tc";
  }
  n += "_";
  n += layout_name(s.ops.layout);
  n += "_";
  n += elem_name(s.ops.ab);
  n += "_";
  n += elem_name(s.ops.d);
  n += "_f32_" + dims(c.tile);
  if (c.family == Family::sm90)
    n += "_c" + std::to_string(c.cluster_m) + "x" + std::to_string(c.cluster_n);
  else
    n += "_w" + dims(c.warp) + "_s" + std::to_string(c.stages);
  n += "_a" + std::to_string(c.alignment) + "_" + epilogue_name(s.epi);
  return n;
}

std::optional<KernelSpec> parse_kernel_name(std::string_view name) {
  auto t = split(name, '_');
  KernelSpec s;
  size_t i = 0;
  auto next = [&]() -> std::optional<std::string_view> {
    if (i >= t.size()) return std::nullopt;
    return t[i++];
  };
  auto fam = next();
  if (fam == "sm90") {
    s.config.family = Family::sm90;
    if (next() != "ws") return std::nullopt;
    auto sch = next();
    if (!sch) return std::nullopt;
    bool found = false;
    for (Schedule x : {Schedule::coop, Schedule::pingpong, Schedule::streamk})
      if (schedule_name(x) == *sch) s.config.schedule = x, found = true;
    for (Schedule x : {Schedule::splitku, Schedule::splitk}) {  // "splitku4" before its prefix "splitk"
      const auto sk = schedule_name(x);
      if (found || sch->substr(0, sk.size()) != sk) continue;
      auto splits = parse_int(sch->substr(sk.size()));  // "splitk4"; leading zeros fail the round trip below
      if (!splits || *splits < 2) return std::nullopt;
      s.config.schedule = x;
      s.config.splits = *splits;
      found = true;
    }
    if (!found) return std::nullopt;
  } else if (fam == "sm80") {
    s.config.family = Family::sm80;
    s.config.schedule = Schedule::multistage;
    if (next() != "tc") return std::nullopt;
  } else {
    return std::nullopt;
  }
  auto lay = next();
  if (lay == "tn") s.ops.layout = Layout::tn;
  else if (lay == "tt") s.ops.layout = Layout::tt;
  else return std::nullopt;
  auto ab = next(), d = next(), acc = next();
  if (!ab || !d || acc != "f32") return std::nullopt;
  auto eab = parse_elem(*ab), ed = parse_elem(*d);
  if (!eab || !ed) return std::nullopt;
  s.ops.ab = *eab;
  s.ops.d = *ed;
  auto tile = next();
  auto td = tile ? parse_dims(*tile, 3) : std::nullopt;
  if (!td) return std::nullopt;
  s.config.tile = {(*td)[0], (*td)[1], (*td)[2]};
  if (s.config.family == Family::sm90) {
    auto cl = next();
    if (!cl || cl->size() < 2 || (*cl)[0] != 'c') return std::nullopt;
    auto cd = parse_dims(cl->substr(1), 2);
    if (!cd) return std::nullopt;
    s.config.cluster_m = (*cd)[0];
    s.config.cluster_n = (*cd)[1];
  } else {
    auto w = next();
    if (!w || w->size() < 2 || (*w)[0] != 'w') return std::nullopt;
    auto wd = parse_dims(w->substr(1), 3);
    if (!wd) return std::nullopt;
    s.config.warp = {(*wd)[0], (*wd)[1], (*wd)[2]};
    auto st = next();
    if (!st || st->size() < 2 || (*st)[0] != 's') return std::nullopt;
    auto sv = parse_int(st->substr(1));
    if (!sv) return std::nullopt;
    s.config.stages = *sv;
  }
  auto al = next();
  if (!al || al->size() < 2 || (*al)[0] != 'a') return std::nullopt;
  auto av = parse_int(al->substr(1));
  if (!av) return std::nullopt;
  s.config.alignment = *av;
  if (i >= t.size()) return std::nullopt;
  // The rest is the epilogue; find where it starts in the original string.
  size_t pos = 0;
  for (size_t j = 0; j < i; ++j) pos += t[j].size() + 1;
  auto epi = parse_epilogue(name.substr(pos));
  if (!epi) return std::nullopt;
  s.epi = *epi;
  if (kernel_name(s) != name) return std::nullopt;  // e.g. leading zeros: one spelling per kernel
  return s;
}

int64_t max_smem_bytes(int target_sm) { return target_sm >= 90 ? 227 * 1024 : 163 * 1024; }

int64_t sm80_mainloop_smem_bytes(const KernelConfig& c, Elem ab) {
  return int64_t(c.stages) * (int64_t(c.tile.m) * c.tile.k + int64_t(c.tile.n) * c.tile.k) * elem_bytes(ab);
}

std::optional<std::string> unsupported_reason(const KernelSpec& s, int target_sm) {
  const KernelConfig& c = s.config;
  const int bytes = elem_bytes(s.ops.ab);
  if (s.ops.d != s.ops.ab) return "output dtype must equal the operand dtype";
  if (!is_pow2(c.alignment) || c.alignment * bytes > 16) return "alignment must be a power of two of at most 16 bytes";
  if (c.tile.m <= 0 || c.tile.n <= 0 || c.tile.k <= 0) return "tile dims must be positive";
  if (is_split_k(c.schedule) ? c.splits < 2 || c.splits > 16 : c.splits != 1)
    return "splits must be 2..16 for the split-K schedules and 1 for every other schedule";
  if (c.family == Family::sm90) {
    if (target_sm != 90) return "sm90 (wgmma/TMA) kernels run only on compute capability 9.0";
    if (c.schedule == Schedule::multistage) return "multistage is an sm80 schedule";
    if (c.alignment * bytes != 16) return "TMA needs 16-byte aligned rows: alignment must be 16 bytes";
    if (c.tile.k * bytes != 128 && c.tile.k * bytes != 256)
      return "sm90 tile K must span 128 or 256 bytes (64 or 128 f16/bf16, 32 or 64 f32)";
    // A 256-byte K doubles a stage's shared memory; the small tiles it pays for (64x32 to 64x128)
    // keep 4 stages or more.
    if (c.tile.k * bytes == 256 && c.tile.m + c.tile.n > 192)
      return "a 256-byte tile K needs tile M + N <= 192 (48 KiB a stage)";
    if (c.tile.n % 16 || c.tile.n < 16 || c.tile.n > 256) return "sm90 tile N must be a multiple of 16 in 16..256";
    if (c.schedule == Schedule::pingpong) {
      if (c.tile.m != 64 && c.tile.m != 128) return "pingpong tile M must be 64 or 128 (one warpgroup per tile)";
      // One consumer warpgroup holds the whole tile's f32 accumulators: at 128x192, 192 a thread of
      // the 240 setmaxnreg gives it. ptxas (CUDA 13.0): no spill with bias, 4 bytes with the EVT
      // bias_gelu_res; 256 a thread would not fit.
      if (c.tile.m * c.tile.n > 128 * 192) return "pingpong tile too large: accumulators would spill";
    } else if (c.tile.m != 128 && c.tile.m != 256) {
      return "cooperative, stream-K and split-K tile M must be 128 or 256 (two warpgroups split M)";
    }
    if (c.tile.m * c.tile.n > 256 * 128) return "sm90 tile larger than 256x128 leaves too little shared memory";
    // 2x2 multicasts both operands (A along the cluster's N, B along its M). It builds and computes
    // right, but was slower than 1x2 and 2x1 wherever timed, so no catalog row has it
    // (bench/results/cluster_ab_*).
    if (c.cluster_m < 1 || c.cluster_n < 1 || c.cluster_m > 2 || c.cluster_n > 2)
      return "cluster must be 1x1, 1x2, 2x1 or 2x2";
    if (s.ops.ab == Elem::f32 && s.ops.layout != Layout::tn) return "TF32 wgmma needs K-major B (layout tn)";
    return std::nullopt;
  }
  if (c.family != Family::sm80) return "unknown family";
  if (target_sm < 80) return "sm80 kernels need compute capability 8.0 or newer";
  if (c.schedule != Schedule::multistage) return "sm80 kernels use the multistage schedule";
  if (c.stages < 2 || c.stages > 7) return "sm80 stages must be 2..7";
  if (c.warp.k != c.tile.k) return "warp tile K must equal the threadblock tile K";
  if (c.warp.m <= 0 || c.warp.n <= 0 || c.tile.m % c.warp.m || c.tile.n % c.warp.n)
    return "warp tile must divide the threadblock tile";
  int warps = (c.tile.m / c.warp.m) * (c.tile.n / c.warp.n);
  if (warps != 2 && warps != 4 && warps != 8) return "a threadblock must have 2, 4 or 8 warps";
  const int inst_k = s.ops.ab == Elem::f32 ? 8 : 16;
  if (c.warp.m % 16 || c.warp.n % 8 || c.tile.k % inst_k) return "warp tile must be a multiple of the mma instruction";
  if (c.tile.k * bytes < 32) return "threadblock tile K must span at least 32 bytes";
  if (c.stages > 2 && c.alignment * bytes < 4)
    return "cp.async needs 4-byte accesses: alignment below 4 bytes needs the 2-stage mainloop";
  if (sm80_mainloop_smem_bytes(c, s.ops.ab) > max_smem_bytes(target_sm))
    return "mainloop needs " + std::to_string(sm80_mainloop_smem_bytes(c, s.ops.ab) / 1024) +
           " KiB of shared memory, more than the target's " + std::to_string(max_smem_bytes(target_sm) / 1024) + " KiB";
  return std::nullopt;
}

}  // namespace sabre::cutlass_backend
