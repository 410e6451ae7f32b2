#include "runtime/artifact.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "support/files.h"

namespace sabre::runtime {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;  // 14695981039346656037
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t fnv_update(uint64_t h, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

std::string hex_tag(uint64_t h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string read_text(const fs::path& p) {
  try {
    return support::read_input_file(p.string(), "artifact file", support::kMaxTextBytes);
  } catch (const support::FileError& e) {
    throw ArtifactError(std::string("artifact: ") + e.what());
  }
}

void write_bytes(const fs::path& p, const void* data, size_t n) {
  try {
    support::write_output_file(p.string(), data, n);
  } catch (const support::FileError& e) {
    throw ArtifactError(std::string("artifact: ") + e.what());
  }
}

json::Value num(double d) { return json::Value(d); }

}  // namespace

std::string checksum(const void* data, size_t size) {
  return hex_tag(fnv_update(kFnvOffset, static_cast<const uint8_t*>(data), size));
}

std::string file_checksum(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ArtifactError("artifact: cannot read " + path);
  uint64_t h = kFnvOffset;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv_update(h, reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(f.gcount()));
  }
  return hex_tag(h);
}

std::string ManifestInfo::to_json() const {
  json::Object tl, fl;
  for (const auto& [k, v] : tools) tl[k] = json::Value(v);
  for (const auto& [k, v] : files)
    fl[k] = json::Value(json::Object{{"size", num(static_cast<double>(v.size))}, {"checksum", json::Value(v.checksum)}});
  json::Object root{{"format_version", num(format_version)},
                    {"arch", json::Value(arch)},
                    {"sm", num(sm)},
                    {"gpu_name", json::Value(gpu_name)},
                    {"tools", json::Value(std::move(tl))},
                    {"files", json::Value(std::move(fl))}};
  if (!source_model.empty()) root["source_model"] = json::Value(source_model);
  if (!source_model_checksum.empty()) root["source_model_checksum"] = json::Value(source_model_checksum);
  return json::Value(std::move(root)).dump();
}

ManifestInfo ManifestInfo::from_json(const std::string& text) {
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const std::exception& e) {
    throw ArtifactError(std::string("manifest.json: not valid JSON (") + e.what() + "); the artifact is corrupt, recompile it");
  }
  ManifestInfo m;
  auto need = [&](const json::Value& o, const char* key) -> const json::Value& {
    const json::Value* v = o.get(key);
    if (!v) throw ArtifactError(std::string("manifest.json: no '") + key + "'; the artifact is corrupt, recompile it");
    return *v;
  };
  try {
    m.format_version = static_cast<int>(need(root, "format_version").num());
    if (m.format_version != kArtifactFormatVersion)
      throw ArtifactError("manifest.json: artifact format version " + std::to_string(m.format_version) +
                          ", this runtime reads version " + std::to_string(kArtifactFormatVersion) +
                          "; recompile the model with this sabre");
    m.arch = need(root, "arch").str();
    m.sm = static_cast<int>(need(root, "sm").num());
    if (const json::Value* g = root.get("gpu_name")) m.gpu_name = g->str();
    if (const json::Value* s = root.get("source_model")) m.source_model = s->str();
    if (const json::Value* s = root.get("source_model_checksum")) m.source_model_checksum = s->str();
    if (const json::Value* t = root.get("tools"))
      for (const auto& [k, v] : t->obj()) m.tools[k] = v.str();
    for (const auto& [k, v] : need(root, "files").obj()) {
      double sz = need(v, "size").num();
      if (sz < 0 || sz != static_cast<double>(static_cast<uint64_t>(sz)))
        throw ArtifactError("manifest.json: file '" + k + "' has a bad size");
      m.files[k] = {static_cast<uint64_t>(sz), need(v, "checksum").str()};
    }
  } catch (const ArtifactError&) {
    throw;
  } catch (const std::exception& e) {
    throw ArtifactError(std::string("manifest.json: malformed (") + e.what() + "); recompile the model");
  }
  return m;
}

void write_artifact(const std::string& dir, const Plan& plan, const std::vector<uint8_t>& weights,
                    const std::vector<std::string>& kernel_libraries, const ManifestInfo& manifest_in) {
  for (const auto& t : plan.tensors) {
    if (t.kind != TensorKind::weight) continue;
    if (t.weight_offset % 256 != 0)
      throw ArtifactError("write_artifact: weight '" + t.name + "' at offset " + std::to_string(t.weight_offset) +
                          " is not 256-byte aligned (invariant of weights.bin)");
    if (t.weight_offset + t.weight_bytes > weights.size())
      throw ArtifactError("write_artifact: weight '" + t.name + "' [" + std::to_string(t.weight_offset) + ", +" +
                          std::to_string(t.weight_bytes) + ") lies outside the " + std::to_string(weights.size()) +
                          " weight bytes given");
  }
  ManifestInfo m = manifest_in;
  m.format_version = kArtifactFormatVersion;
  m.files.clear();
  fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root / "kernels", ec);
  if (ec) throw ArtifactError("write_artifact: cannot create " + (root / "kernels").string() + ": " + ec.message());
  // Stale kernels from an earlier artifact in the same place would be unlisted: remove them.
  for (const auto& e : fs::directory_iterator(root / "kernels")) fs::remove(e.path(), ec);

  std::string plan_text = plan.to_json();
  write_bytes(root / "plan.json", plan_text.data(), plan_text.size());
  m.files["plan.json"] = {plan_text.size(), checksum(plan_text.data(), plan_text.size())};
  write_bytes(root / "weights.bin", weights.data(), weights.size());
  m.files["weights.bin"] = {weights.size(), checksum(weights.data(), weights.size())};
  for (const auto& lib : kernel_libraries) {
    fs::path src(lib);
    std::string rel = "kernels/" + src.filename().string();
    if (m.files.count(rel)) throw ArtifactError("write_artifact: two kernel libraries are named " + rel);
    fs::copy_file(src, root / rel, fs::copy_options::overwrite_existing, ec);
    if (ec) throw ArtifactError("write_artifact: cannot copy kernel library " + lib + ": " + ec.message());
    m.files[rel] = {static_cast<uint64_t>(fs::file_size(root / rel)), file_checksum((root / rel).string())};
  }
  std::string mtext = m.to_json();
  write_bytes(root / "manifest.json", mtext.data(), mtext.size());
}

MappedFile::MappedFile(const std::string& path) {
  std::optional<support::InputFile> f;  // a regular file only: a FIFO would block, a device never end
  try {
    f.emplace(path, "artifact file", support::kMaxDataBytes);
  } catch (const support::FileError& e) {
    throw ArtifactError(std::string("artifact: ") + e.what());
  }
  size_ = static_cast<size_t>(f->size());
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, f->fd(), 0);
    if (p == MAP_FAILED) throw ArtifactError("artifact: cannot mmap " + path);
    data_ = static_cast<const uint8_t*>(p);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

LoadedArtifact load_artifact(const std::string& dir) {
  fs::path root(dir);
  if (!fs::is_directory(root))
    throw ArtifactError("artifact: " + dir + " is not a directory (an artifact is the model.sabre/ directory sabre compile writes)");
  if (!fs::exists(root / "manifest.json"))
    throw ArtifactError("artifact: " + dir + " has no manifest.json; it is not a sabre artifact or it is incomplete");
  LoadedArtifact a;
  a.dir = fs::absolute(root).string();
  a.manifest = ManifestInfo::from_json(read_text(root / "manifest.json"));
  for (const char* required : {"plan.json", "weights.bin"})
    if (!a.manifest.files.count(required))
      throw ArtifactError(std::string("manifest.json does not list ") + required + "; the artifact is corrupt, recompile it");
  for (const auto& [rel, entry] : a.manifest.files) {
    fs::path p = root / rel;
    if (rel.find("..") != std::string::npos)
      throw ArtifactError("manifest.json lists '" + rel + "', a path outside the artifact");
    if (!fs::is_regular_file(p))
      throw ArtifactError("artifact: " + rel + " is missing (manifest.json lists it); copy the whole model.sabre directory");
    uint64_t size = fs::file_size(p);
    if (size != entry.size)
      throw ArtifactError("artifact: " + rel + " has " + std::to_string(size) + " bytes, manifest.json says " +
                          std::to_string(entry.size) + " (truncated or replaced); recompile or copy it again");
    std::string sum = file_checksum(p.string());
    if (sum != entry.checksum)
      throw ArtifactError("artifact: " + rel + " has checksum " + sum + ", manifest.json says " + entry.checksum +
                          " (the file was modified); recompile or copy it again");
    if (rel.rfind("kernels/", 0) == 0) a.kernel_libraries.push_back(fs::absolute(p).string());
  }
  if (fs::is_directory(root / "kernels"))
    for (const auto& e : fs::directory_iterator(root / "kernels")) {
      std::string rel = "kernels/" + e.path().filename().string();
      if (!a.manifest.files.count(rel))
        throw ArtifactError("artifact: " + rel + " is not listed in manifest.json; an artifact runs only the kernels it was built with");
    }
  a.plan = Plan::from_json(read_text(root / "plan.json"));
  a.weights = std::make_shared<MappedFile>((root / "weights.bin").string());
  for (const auto& t : a.plan.tensors)
    if (t.kind == TensorKind::weight && t.weight_offset + t.weight_bytes > a.weights->size())
      throw ArtifactError("artifact: weight '" + t.name + "' ends at byte " + std::to_string(t.weight_offset + t.weight_bytes) +
                          " but weights.bin has " + std::to_string(a.weights->size()));
  return a;
}

void check_device(const ManifestInfo& m, int sm, const std::string& device_name) {
  if (sm != m.sm)
    throw ArtifactError("artifact compiled for " + m.arch + " (sm " + std::to_string(m.sm) + (m.gpu_name.empty() ? "" : ", " + m.gpu_name) +
                        "), but this GPU " + device_name + " is sm " + std::to_string(sm) +
                        "; recompile the model on this GPU (or for --arch sm_" + std::to_string(sm) + ")");
}

}  // namespace sabre::runtime
