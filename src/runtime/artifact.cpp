#include "runtime/artifact.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "support/confine.h"
#include "support/files.h"
#include "support/hash.h"

namespace sabre::runtime {

namespace fs = std::filesystem;

namespace {

std::string hex_tag(uint64_t h) { return std::string(kChecksumTag) + support::hex16(h); }

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

std::string checksum(const void* data, size_t size) { return hex_tag(support::hash64(data, size)); }

std::string file_checksum(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ArtifactError("artifact: cannot read " + path);
  support::Hasher h;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<size_t>(f.gcount()));
  }
  return hex_tag(h.digest());
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
    m.format_version = static_cast<int>(whole_number(need(root, "format_version"), 0, 1 << 30, "manifest.json: format_version"));
    if (m.format_version != kArtifactFormatVersion)
      throw ArtifactError("manifest.json: artifact format version " + std::to_string(m.format_version) +
                          ", this runtime reads version " + std::to_string(kArtifactFormatVersion) +
                          "; recompile the model with this sabre");
    m.arch = need(root, "arch").str();
    m.sm = static_cast<int>(whole_number(need(root, "sm"), 0, 10000, "manifest.json: sm"));
    if (const json::Value* g = root.get("gpu_name")) m.gpu_name = g->str();
    if (const json::Value* s = root.get("source_model")) m.source_model = s->str();
    if (const json::Value* s = root.get("source_model_checksum")) m.source_model_checksum = s->str();
    if (const json::Value* t = root.get("tools"))
      for (const auto& [k, v] : t->obj()) m.tools[k] = v.str();
    for (const auto& [k, v] : need(root, "files").obj()) {
      double sz = need(v, "size").num();
      if (!(sz >= 0 && sz <= 9007199254740992.0) || sz != std::floor(sz))  // 2^53: what a JSON double holds exactly
        throw ArtifactError("manifest.json: file '" + k + "' has a bad size");
      std::string sum = need(v, "checksum").str();
      if (sum.rfind("fnv1a64:", 0) == 0)
        throw ArtifactError("manifest.json: file '" + k + "' has an fnv1a64 checksum: the artifact was written by an older sabre, " +
                            "and this one checks xxh3_64 checksums; rebuild the artifact with this sabre (sabre compile)");
      if (sum.rfind(kChecksumTag, 0) != 0)
        throw ArtifactError("manifest.json: file '" + k + "' has checksum '" + sum.substr(0, 40) + "', not " + kChecksumTag +
                            "<16 hex digits>; the artifact is corrupt, recompile it");
      m.files[k] = {static_cast<uint64_t>(sz), std::move(sum)};
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
    if (!support::range_inside(t.weight_offset, t.weight_bytes, weights.size()))
      throw ArtifactError("write_artifact: weight '" + t.name + "' [" + std::to_string(t.weight_offset) + ", +" +
                          std::to_string(t.weight_bytes) + ") lies outside the " + std::to_string(weights.size()) +
                          " weight bytes given");
  }
  ManifestInfo m = manifest_in;
  m.format_version = kArtifactFormatVersion;
  m.files.clear();
  fs::path root(dir);
  std::error_code ec;
  // A kernels/ symlink left where the artifact is written is replaced, not followed: clearing it
  // below would delete files elsewhere.
  if (fs::is_symlink(fs::symlink_status(root / "kernels"))) fs::remove(root / "kernels", ec);
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

namespace {

// A file the manifest names, resolved inside the artifact (docs/TRUST.md): a relative name without
// "..", whose real path (symlinks followed) is a regular file inside the artifact's directory.
fs::path artifact_file(const fs::path& root, const std::string& rel, const std::string& what = "artifact: manifest.json entry") {
  try {
    return support::confine(root, rel, what);
  } catch (const support::ConfineError& e) {
    if (e.missing)
      throw ArtifactError("artifact: " + rel + " is missing (manifest.json lists it); copy the whole model.sabre directory");
    throw ArtifactError(std::string(e.what()) + "; an artifact names only files inside its own directory");
  }
}

}  // namespace

LoadedArtifact load_artifact(const std::string& dir) {
  fs::path root(dir);
  if (!fs::is_directory(root))
    throw ArtifactError("artifact: " + dir + " is not a directory (an artifact is the model.sabre/ directory sabre compile writes)");
  if (!fs::exists(fs::symlink_status(root / "manifest.json")))
    throw ArtifactError("artifact: " + dir + " has no manifest.json; it is not a sabre artifact or it is incomplete");
  LoadedArtifact a;
  std::error_code ec;
  const fs::path croot = fs::canonical(root, ec);
  if (ec) throw ArtifactError("artifact: cannot resolve " + dir + ": " + ec.message());
  a.dir = croot.string();
  a.manifest = ManifestInfo::from_json(read_text(artifact_file(croot, "manifest.json", "artifact:")));
  for (const char* required : {"plan.json", "weights.bin"})
    if (!a.manifest.files.count(required))
      throw ArtifactError(std::string("manifest.json does not list ") + required + "; the artifact is corrupt, recompile it");
  // kernels/ itself must be a folder of the artifact, not a symlink to one elsewhere: its
  // libraries are code the session runs.
  const fs::path kdir = croot / "kernels";
  const fs::file_status kst = fs::symlink_status(kdir);
  if (fs::is_symlink(kst))
    throw ArtifactError("artifact: kernels/ is a symlink (to " + fs::read_symlink(kdir, ec).string() +
                        "); an artifact's kernel libraries must be files in its own kernels/ folder");
  if (fs::exists(kst) && !fs::is_directory(kst)) throw ArtifactError("artifact: kernels is not a folder");
  // Every file is resolved, size-checked and checksummed here, before any kernel library is loaded
  // (Session dlopens only what this returns).
  std::map<std::string, fs::path> resolved;
  for (const auto& [rel, entry] : a.manifest.files) {
    const bool kernel = rel.rfind("kernels/", 0) == 0;
    if (kernel && (rel.size() == 8 || rel.find('/', 8) != std::string::npos))
      throw ArtifactError("manifest.json lists '" + rel + "': a kernel library is a plain file name under kernels/");
    fs::path p = artifact_file(croot, rel);
    if (kernel && !support::is_within(kdir, p))
      throw ArtifactError("manifest.json lists '" + rel + "', which resolves to " + p.string() +
                          ", outside kernels/; an artifact's kernel libraries must be files in its own kernels/ folder");
    uint64_t size = fs::file_size(p, ec);
    if (ec) throw ArtifactError("artifact: cannot read " + rel + ": " + ec.message());
    if (size != entry.size)
      throw ArtifactError("artifact: " + rel + " has " + std::to_string(size) + " bytes, manifest.json says " +
                          std::to_string(entry.size) + " (truncated or replaced); recompile or copy it again");
    std::string sum = file_checksum(p.string());
    if (sum != entry.checksum)
      throw ArtifactError("artifact: " + rel + " has checksum " + sum + ", manifest.json says " + entry.checksum +
                          " (the file was modified); recompile or copy it again");
    resolved[rel] = p;
    if (kernel) {
      a.kernel_libraries.push_back(p.string());
      a.kernel_files.push_back(rel);
    }
  }
  if (fs::is_directory(kst))
    for (const auto& e : fs::directory_iterator(kdir)) {
      std::string rel = "kernels/" + e.path().filename().string();
      if (!a.manifest.files.count(rel))
        throw ArtifactError("artifact: " + rel + " is not listed in manifest.json; an artifact runs only the kernels it was built with");
    }
  a.plan = Plan::from_json(read_text(resolved.at("plan.json")));
  a.weights = std::make_shared<MappedFile>(resolved.at("weights.bin").string());
  for (const auto& t : a.plan.tensors)
    if (t.kind == TensorKind::weight && !support::range_inside(t.weight_offset, t.weight_bytes, a.weights->size()))
      throw ArtifactError("artifact: weight '" + t.name + "' [" + std::to_string(t.weight_offset) + ", +" +
                          std::to_string(t.weight_bytes) + ") lies outside weights.bin (" +
                          std::to_string(a.weights->size()) + " bytes); the artifact is corrupt, recompile it");
  return a;
}

void check_device(const ManifestInfo& m, int sm, const std::string& device_name) {
  if (sm != m.sm)
    throw ArtifactError("artifact compiled for " + m.arch + " (sm " + std::to_string(m.sm) + (m.gpu_name.empty() ? "" : ", " + m.gpu_name) +
                        "), but this GPU " + device_name + " is sm " + std::to_string(sm) +
                        "; recompile the model on this GPU (or for --arch sm_" + std::to_string(sm) + ")");
}

}  // namespace sabre::runtime
