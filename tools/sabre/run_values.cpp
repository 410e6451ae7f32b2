#include "run_values.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "ir/npy.h"

namespace fs = std::filesystem;

namespace sabre::cli {

namespace {
std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}
}  // namespace

ir::Tensor load_input_value(const std::string& file, const ir::Value& v) {
  std::error_code ec;
  const bool dir = fs::is_directory(file, ec);
  if (!v.type().sequence) {
    if (dir)
      throw std::runtime_error("input '" + v.name() + "' is a tensor, but " + file +
                               " is a directory (directories of 0.npy, 1.npy, ... are for sequence inputs)");
    return ir::load_npy(file);
  }
  if (!dir)
    throw std::runtime_error("input '" + v.name() + "' is a sequence (" + std::string(ir::name(v.dtype())) +
                             " tensors): give a directory holding 0.npy, 1.npy, ... (one file per element), not " + file);
  size_t count = 0;
  for (const auto& e : fs::directory_iterator(file, ec)) {
    (void)e;
    ++count;
  }
  if (ec) throw std::runtime_error("cannot list " + file + ": " + ec.message());
  std::vector<ir::Tensor> elems;
  for (size_t i = 0;; ++i) {
    const fs::path p = fs::path(file) / (std::to_string(i) + ".npy");
    if (!fs::exists(p, ec)) break;
    ir::Tensor t = ir::load_npy(p.string());
    if (t.dtype() != v.dtype())
      throw std::runtime_error("input '" + v.name() + "': " + p.string() + " has dtype " + std::string(ir::name(t.dtype())) +
                               " but the sequence holds " + std::string(ir::name(v.dtype())) + " tensors");
    elems.push_back(std::move(t));
  }
  if (elems.size() != count)
    throw std::runtime_error("input '" + v.name() + "': " + file + " holds " + std::to_string(count) + " entries but " +
                             (elems.empty() ? std::string("no 0.npy")
                                            : elems.size() == 1 ? std::string("only 0.npy in sequence")
                                            : "only 0.npy.." + std::to_string(elems.size() - 1) + ".npy in sequence") +
                             "; a sequence directory holds 0.npy, 1.npy, ... and nothing else");
  return ir::Tensor::sequence(v.dtype(), std::move(elems));
}

std::string save_value(const std::string& npy_path, const ir::Tensor& t) {
  if (!t.is_sequence()) {
    ir::save_npy(npy_path, t);
    return npy_path;
  }
  std::string dir = npy_path;
  if (dir.size() > 4 && dir.compare(dir.size() - 4, 4, ".npy") == 0) dir.resize(dir.size() - 4);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create directory '" + dir + "': " + ec.message());
  for (size_t i = 0; i < t.elements().size(); ++i)
    ir::save_npy((fs::path(dir) / (std::to_string(i) + ".npy")).string(), t.elements()[i]);
  return dir + "/";
}

std::string value_text(const ir::Tensor& t) {
  if (t.is_sequence())
    return "seq(" + std::string(ir::name(t.dtype())) + ") of " + std::to_string(t.elements().size());
  return std::string(ir::name(t.dtype())) + dims_text(t.dims());
}

}  // namespace sabre::cli
