// The artifact on disk (docs/RUNTIME.md section 1): a directory with manifest.json, plan.json,
// weights.bin (mmapped when loaded) and kernels/*.so. The compiler writes it with
// write_artifact(); sessions read it with load_artifact(), which validates every file against the
// manifest and says exactly what does not match. No CUDA here: the GPU arch check is
// check_device() (called by Session with the device's values).
// Tests: tests/unit/runtime_artifact_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plan.h"

namespace sabre::runtime {

inline constexpr int kArtifactFormatVersion = 1;

// A problem with an artifact on disk (missing, corrupt, made for another runtime or GPU).
struct ArtifactError : PlanError {
  using PlanError::PlanError;
};

// How a manifest spells a file's checksum: this tag, then 16 hex digits. An artifact whose manifest
// names another kind (an older sabre's "fnv1a64:") is refused with a message to rebuild it.
inline constexpr const char* kChecksumTag = "xxh3_64:";

struct FileEntry {
  uint64_t size = 0;
  std::string checksum;  // "xxh3_64:<16 hex>"
};

struct ManifestInfo {
  int format_version = kArtifactFormatVersion;
  std::string arch = "sm_90a";  // what the kernels were compiled for
  int sm = 90;                  // compute capability major*10+minor the artifact runs on
  std::string gpu_name;
  std::map<std::string, std::string> tools;  // "sabre", "cuda", "cutlass" -> version
  std::string source_model;                   // optional: the ONNX file it came from, its name only
  std::string source_model_checksum;          // optional: file_checksum() of that file
  std::map<std::string, FileEntry> files;     // relative path -> entry (filled by write_artifact)

  std::string to_json() const;
  static ManifestInfo from_json(const std::string& text);  // throws ArtifactError
};

// "xxh3_64:<16 lowercase hex>" of the bytes (support::hash64).
std::string checksum(const void* data, size_t size);
std::string file_checksum(const std::string& path);  // throws ArtifactError if unreadable

// Writes `dir` (created; an existing plan/manifest/weights/kernels there is replaced): plan.json,
// weights.bin, each kernel library copied to kernels/<basename>, and manifest.json with sizes and
// checksums of all of them. Checks each weight tensor lies inside `weights` and is 256-aligned.
// Throws ArtifactError saying what failed.
void write_artifact(const std::string& dir, const Plan& plan, const std::vector<uint8_t>& weights,
                    const std::vector<std::string>& kernel_libraries, const ManifestInfo& manifest);

// weights.bin mapped read-only (or empty).
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws ArtifactError
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct LoadedArtifact {
  std::string dir;
  ManifestInfo manifest;
  Plan plan;
  std::shared_ptr<MappedFile> weights;
  std::vector<std::string> kernel_libraries;  // resolved paths of kernels/*.so, manifest order
  std::vector<std::string> kernel_files;      // the same as manifest.json names them ("kernels/x.so")
};

// Reads and validates `dir`: manifest present and parseable, format version, every listed file a
// relative name that resolves (symlinks followed) to a regular file inside `dir` (kernel libraries
// inside its real kernels/ folder) with its size and checksum, no unlisted kernel library, plan
// parseable, every weight inside weights.bin. Opens nothing outside `dir` and loads no library.
// Throws ArtifactError naming the file and the expected and actual values.
LoadedArtifact load_artifact(const std::string& dir);

// Throws ArtifactError when a device of compute capability `sm` cannot run the artifact.
void check_device(const ManifestInfo& m, int sm, const std::string& device_name);

}  // namespace sabre::runtime
