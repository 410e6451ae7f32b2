// libFuzzer target for the artifact loader: manifest.json and plan.json as an attacker may write
// them. The input is manifest text, a NUL byte, then plan text. The manifest goes through
// ManifestInfo::from_json; the plan goes through load_artifact in a scratch directory whose
// manifest lists it with the right size and checksum (so the plan's own checks, not the checksum,
// decide), next to a small weights.bin. Anything but a loaded artifact or an error deriving from
// std::runtime_error (ArtifactError, PlanError, json errors) is a finding.
// Run by tests/fuzz/run_fuzz.sh (ctest: fuzz.artifact).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/artifact.h"

namespace fs = std::filesystem;
namespace rt = sabre::runtime;

namespace {

const std::string& scratch() {
  static const std::string dir = [] {
    fs::path d = fs::temp_directory_path() / ("sabre_artifact_fuzz_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t cut = in.find('\0');
  std::string manifest_text = in.substr(0, cut);
  std::string plan_text = cut == std::string::npos ? std::string() : in.substr(cut + 1);
  try {
    rt::ManifestInfo::from_json(manifest_text);
  } catch (const std::runtime_error&) {
  }
  if (cut == std::string::npos) return 0;

  const std::string dir = scratch();
  const std::string weights(4096, '\x5a');
  write(dir + "/plan.json", plan_text);
  write(dir + "/weights.bin", weights);
  rt::ManifestInfo m;
  m.files["plan.json"] = {plan_text.size(), rt::checksum(plan_text.data(), plan_text.size())};
  m.files["weights.bin"] = {weights.size(), rt::checksum(weights.data(), weights.size())};
  write(dir + "/manifest.json", m.to_json());
  try {
    rt::LoadedArtifact a = rt::load_artifact(dir);
    // Every weight the loader accepted must lie inside the mapping: touch its first and last byte.
    volatile uint8_t sink = 0;
    for (const auto& t : a.plan.tensors)
      if (t.kind == rt::TensorKind::weight && t.weight_bytes)
        sink = sink + a.weights->data()[t.weight_offset] + a.weights->data()[t.weight_offset + t.weight_bytes - 1];
    (void)sink;
  } catch (const std::runtime_error&) {
  }
  return 0;
}
