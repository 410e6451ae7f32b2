// The CUDA source every CUTLASS kernel family emits, pinned by XXH3-64 digests in
// tests/golden/kernel_sources/digests.txt. Kernel caches and GPU evidence are keyed on these texts,
// so a change to generated code must be deliberate: SABRE_UPDATE_GOLDEN=1 rewrites the file (review
// the diff of a dump before and after, and bump tune::template_version(), which keys tuning
// results). SABRE_DUMP_KERNEL_SOURCES=DIR writes every text to DIR/<name>.sm<target>[.noreg].cu.
// The set: every catalog row of every family with every epilogue it takes (GEMM sm90 and sm80 for
// each operand type and layout, the catalogs' split-K rows included; sm80 conv plain, grouped,
// few_channels and analytic, with serial and parallel split-K; sm90 conv ws, pingpong and coop),
// and one kernel per family without its registry (the artifact writer's form).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "backends/cutlass/catalog.h"
#include "backends/cutlass/conv_emitter.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/emitter.h"
#include "support/hash.h"

namespace sabre::cutlass_backend {
namespace {

namespace fs = std::filesystem;

struct Emitted {
  std::string key;  // <name>.sm<target>[.noreg]: unique, and the dump's file name
  std::string text;
};

std::string key(const std::string& name, int sm, bool registry) {
  return name + ".sm" + std::to_string(sm) + (registry ? "" : ".noreg");
}

void add_gemms(std::vector<Emitted>& out) {
  for (int sm : {90, 80})
    for (Family f : {Family::sm90, Family::sm80}) {
      if (f == Family::sm90 && sm != 90) continue;
      for (Elem ab : {Elem::f16, Elem::bf16, Elem::f32})
        for (Elem d : {Elem::f16, Elem::bf16, Elem::f32}) {
          if (d != ab && d != Elem::f32) continue;  // results in the operand type, or f32
          for (Layout l : {Layout::tn, Layout::tt}) {
            const GemmOperands ops{ab, d, l};
            for (const KernelConfig& c : catalog(f, ops, sm))
              for (const EpilogueSpec& e : all_epilogues()) {
                const KernelSpec s{c, ops, e};
                if (unsupported_reason(s, sm)) continue;
                out.push_back({key(kernel_name(s), sm, true), emit_kernel(s, sm)});
              }
          }
        }
    }
}

void add_convs(std::vector<Emitted>& out) {
  for (int sm : {80, 90})
    for (Elem el : {Elem::f16, Elem::bf16})
      for (const ConvConfig& c : conv_catalog(el, sm))
        for (const EpilogueSpec& e : conv_epilogues()) {
          ConvSpec s{c, el, e};
          if (!conv_unsupported_reason(s, sm)) out.push_back({key(conv_kernel_name(s), sm, true), emit_conv_kernel(s, sm)});
          if (c.grouped || c.iter == ConvIter::few_channels) continue;
          s.config.split_k = 4, s.config.split_mode = ConvSplitK::serial;
          if (!conv_unsupported_reason(s, sm)) out.push_back({key(conv_kernel_name(s), sm, true), emit_conv_kernel(s, sm)});
          s.config.split_k = 8, s.config.split_mode = ConvSplitK::parallel;
          if (!conv_unsupported_reason(s, sm)) out.push_back({key(conv_kernel_name(s), sm, true), emit_conv_kernel(s, sm)});
        }
  for (Elem el : {Elem::f16, Elem::bf16})
    for (const Sm90ConvConfig& c : sm90_conv_catalog(el))
      for (const EpilogueSpec& e : all_epilogues()) {
        const Sm90ConvSpec s{c, el, e};
        if (sm90_conv_unsupported_reason(s, 90)) continue;
        out.push_back({key(sm90_conv_kernel_name(s), 90, true), emit_sm90_conv_kernel(s, 90)});
      }
}

// One kernel of each family as the artifact writer emits it (no registry of its own).
void add_unregistered(std::vector<Emitted>& out) {
  const EmitOptions no_reg{.registry = false};
  for (const char* n : {"sm90_ws_coop_tn_f16_f16_f32_128x128x64_c1x1_a8_bias_gelu",
                        "sm80_tc_tn_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu"}) {
    auto s = parse_kernel_name(n);
    ASSERT_TRUE(s) << n;
    const int sm = s->config.family == Family::sm90 ? 90 : 80;
    out.push_back({key(n, sm, false), emit_kernel(*s, sm, no_reg)});
  }
  for (const char* n : {"sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu",
                        "sm80_conv_fprop_grouped_optimized_nhwc_f16_f16_f32_128x32x32_w64x32x32_s4_a8_bias_relu"}) {
    auto s = parse_conv_kernel_name(n);
    ASSERT_TRUE(s) << n;
    out.push_back({key(n, 80, false), emit_conv_kernel(*s, 80, no_reg)});
  }
  for (const char* n : {"sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
                        "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_res_relu"}) {
    auto s = parse_sm90_conv_kernel_name(n);
    ASSERT_TRUE(s) << n;
    out.push_back({key(n, 90, false), emit_sm90_conv_kernel(*s, 90, no_reg)});
  }
}

// The group a kernel's digest is folded into: the name's first four tokens (family, schedule or
// kind, layout or iterator, operand type) and the target, e.g. "sm90_ws_coop_tn.sm90".
std::string group_of(const std::string& key) {
  size_t p = 0;
  for (int t = 0; t < 4 && p != std::string::npos; ++t) p = key.find('_', p + 1);
  const size_t dot = key.find('.');
  return key.substr(0, std::min(p, dot)) + key.substr(dot);
}

// The golden text: per group, the kernel count and the XXH3-64 of its keys and texts in key order,
// and each group's first kernel's own digest (a readable anchor). Every kernel is covered, in a
// file small enough to review.
std::string digest_text(const std::vector<Emitted>& all) {
  std::map<std::string, const Emitted*> by_key;
  for (const Emitted& e : all)
    if (!by_key.emplace(e.key, &e).second) ADD_FAILURE() << "emitted twice: " << e.key;
  struct Group {
    size_t count = 0;
    support::Hasher h;
    std::string first, first_digest;
  };
  std::map<std::string, Group> groups;
  for (const auto& [k, e] : by_key) {
    Group& g = groups[group_of(k)];
    if (g.count++ == 0) g.first = k, g.first_digest = support::hex16(support::hash64(e->text));
    g.h.update(k).update("\n", 1).update(e->text).update("\0", 1);
  }
  std::string text =
      "# Emitted kernel sources (tests/golden/kernel_source_test.cpp). Per group: kernel count and the\n"
      "# XXH3-64 of every key and text in key order; then the group's first kernel and its text's XXH3-64.\n";
  for (const auto& [name, g] : groups)
    text += name + " " + std::to_string(g.count) + " " + support::hex16(g.h.digest()) + "\n  " + g.first + " " +
            g.first_digest + "\n";
  return text;
}

TEST(KernelSources, EveryFamilyMatchesItsDigest) {
  std::vector<Emitted> all;
  add_gemms(all);
  add_convs(all);
  add_unregistered(all);
  // Families the set must cover, so a filter change cannot silently drop one.
  for (const char* prefix : {"sm90_ws_coop_", "sm90_ws_pingpong_", "sm90_ws_streamk_", "sm90_ws_splitk4_",
                             "sm90_ws_splitku4_", "sm80_tc_", "sm80_conv_fprop_optimized_", "sm80_conv_fprop_analytic_",
                             "sm80_conv_fprop_few_channels_", "sm80_conv_fprop_grouped_", "sm90_conv_fprop_nhwc_",
                             "sm90_conv_fprop_pingpong_", "sm90_conv_fprop_coop_"}) {
    const bool found = std::any_of(all.begin(), all.end(), [&](const Emitted& e) { return e.key.starts_with(prefix); });
    EXPECT_TRUE(found) << "no kernel named " << prefix << "...";
  }
  // The compile cache keys a kernel by its source (tune/compile_cache.h), so no source may name a path
  // of this machine, or caches would not travel: include paths stay placeholders (-I<cutlass>).
  int naming_paths = 0;
  for (const Emitted& e : all)
    for (const std::string_view path : {std::string_view(SABRE_SOURCE_DIR), std::string_view(SABRE_CUTLASS_DIR)})
      if (!path.empty() && e.text.find(path) != std::string::npos && naming_paths++ < 5)
        ADD_FAILURE() << e.key << " names " << path;
  EXPECT_EQ(naming_paths, 0) << "emitted sources name a path of this machine";
  if (const char* dir = std::getenv("SABRE_DUMP_KERNEL_SOURCES"); dir && *dir) {
    fs::create_directories(dir);
    for (const Emitted& e : all) std::ofstream(fs::path(dir) / (e.key + ".cu"), std::ios::binary) << e.text;
  }
  const std::string text = digest_text(all);
  const fs::path golden = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "kernel_sources" / "digests.txt";
  if (const char* u = std::getenv("SABRE_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    fs::create_directories(golden.parent_path());
    std::ofstream(golden, std::ios::binary) << text;
    return;
  }
  ASSERT_TRUE(fs::exists(golden)) << golden << " is missing (SABRE_UPDATE_GOLDEN=1 writes it)";
  std::ifstream in(golden, std::ios::binary);
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(expected.str(), text)
      << "emitted kernel sources differ from " << golden
      << " (the lines that differ name the groups); if deliberate, rerun with SABRE_UPDATE_GOLDEN=1 and review "
         "(SABRE_DUMP_KERNEL_SOURCES=DIR dumps every text, to diff against the previous build's dump), and bump "
         "tune::template_version() (src/tune/profiler.cpp) so tuning results timed on the old sources are not reused";
}

}  // namespace
}  // namespace sabre::cutlass_backend
