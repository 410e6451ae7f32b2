// sabre::compile (include/sabre/compiler.h) over codegen::compile_model: public options in,
// exceptions out as a status and one line.
#include <exception>
#include <filesystem>
#include <new>
#include <set>
#include <stdexcept>

#include "codegen/compile.h"
#include "frontend/onnx/importer.h"
#include "sabre/compiler.h"
#include "tune/gpu_pool.h"

namespace sabre {

namespace {

// Thrown through compile_model in place of the progress callback's own exception, which is
// rethrown unchanged once compile_model has unwound.
struct CallbackThrew {};

codegen::CompileOptions to_codegen(const CompileOptions& o) {
  codegen::CompileOptions c;
  const auto dt = ir::parse_dtype(o.dtype);
  if (!dt || (*dt != ir::DType::f16 && *dt != ir::DType::bf16))
    throw std::invalid_argument("dtype '" + o.dtype + "': use \"f16\" or \"bf16\"");
  c.dtype = *dt;
  if (!o.dynamic_dims.empty()) {
    // One validation of ranges: the text form sabre compile --dim takes.
    std::string text;
    for (const auto& [name, r] : o.dynamic_dims) {
      if (name.empty() || name.find_first_of("=,") != std::string::npos)
        throw std::invalid_argument("dynamic dim name '" + name + "': give the model's symbol (no '=' or ',')");
      text += (text.empty() ? "" : ",") + name + "=" + std::to_string(r.first) + ".." + std::to_string(r.second);
    }
    c.ranges = codegen::parse_dynamic(text);
  }
  codegen::arch_sm(o.arch);  // std::invalid_argument naming the arch
  c.arch = o.arch;
  c.tune = o.tune == CompileOptions::Tune::always  ? codegen::CompileOptions::Tune::always
           : o.tune == CompileOptions::Tune::never ? codegen::CompileOptions::Tune::never
                                                   : codegen::CompileOptions::Tune::automatic;
  c.tuning_db = o.tuning_db;
  c.tuned_for = o.tuned_for;
  c.cache_dir = o.cache_dir;
  if (o.jobs < 0) throw std::invalid_argument("jobs " + std::to_string(o.jobs) + ": give a positive number, or 0 for all cores");
  c.jobs = o.jobs;
  static_assert(CompileOptions::kAllGpus == tune::kAllGpus, "one spelling of every GPU");
  if (!(o.gpus.size() == 1 && o.gpus[0] == CompileOptions::kAllGpus)) {
    std::set<int> seen;
    for (int d : o.gpus) {
      if (d < 0) throw std::invalid_argument("gpus: GPU " + std::to_string(d) + " is not an id (0 or more; every GPU: {kAllGpus} alone)");
      if (!seen.insert(d).second) throw std::invalid_argument("gpus: GPU " + std::to_string(d) + " is listed twice: give each GPU once");
    }
  }
  c.gpus = o.gpus;
  c.plan_only = o.plan_only;
  if (o.top_k < 1) throw std::invalid_argument("top_k " + std::to_string(o.top_k) + ": give a positive number");
  c.top_k = o.top_k;
  c.cublaslt = o.cublaslt;
  c.fuse_attention = o.fuse_attention;
  c.pointwise_gemm = o.pointwise_gemm;
  c.stem = o.stem == CompileOptions::Stem::im2col ? codegen::Stem::im2col
           : o.stem == CompileOptions::Stem::conv ? codegen::Stem::conv
                                                  : codegen::Stem::direct;
  c.conv_kernels = o.conv_kernels == CompileOptions::ConvKernels::sm80   ? codegen::ConvKernels::sm80
                   : o.conv_kernels == CompileOptions::ConvKernels::sm90 ? codegen::ConvKernels::sm90
                                                                         : codegen::ConvKernels::automatic;
  if (!o.dump_after.empty()) codegen::parse_dump_after(o.dump_after);  // std::invalid_argument naming the pass
  c.dump_after = o.dump_after;
  c.dump_file = o.dump_file;
  return c;
}

CompileOutcome failure(CompileStatus s, std::string msg) {
  CompileOutcome r;
  r.status = s;
  r.message = std::move(msg);
  return r;
}

}  // namespace

CompileOutcome compile(const std::string& model, const std::string& artifact_dir, const CompileOptions& options) {
  std::exception_ptr callback_error;
  try {
    if (artifact_dir.empty()) throw std::invalid_argument("no artifact directory: give where to write it (model.sabre)");
    codegen::CompileOptions c = to_codegen(options);
    if (options.progress)
      c.progress = [&](const std::string& line) {
        try {
          options.progress(line);
        } catch (...) {
          callback_error = std::current_exception();
          throw CallbackThrew{};
        }
      };
    CompileOutcome r;
    static_cast<CompileSummary&>(r) = codegen::compile_model(model, artifact_dir, c);
    return r;
  } catch (const CallbackThrew&) {
    std::rethrow_exception(callback_error);
  } catch (const onnx_frontend::ImportError& e) {
    return failure(e.kind == onnx_frontend::ImportError::Kind::unsupported ? CompileStatus::unsupported
                                                                          : CompileStatus::model_error,
                   e.what());
  } catch (const codegen::UnsupportedError& e) {
    return failure(CompileStatus::unsupported, e.what());
  } catch (const std::invalid_argument& e) {
    return failure(CompileStatus::invalid_argument, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    std::string msg = "cannot access '" + e.path1().string() + "': " + e.code().message();
    return failure(CompileStatus::io_error, msg);
  } catch (const std::length_error&) {  // a size past what a container can hold: a huge dim
    return failure(CompileStatus::out_of_memory, "out of memory: the model needs more memory than this machine has");
  } catch (const std::bad_alloc&) {
    return failure(CompileStatus::out_of_memory, "out of memory: the model needs more memory than this machine has");
  } catch (const std::exception& e) {
    if (callback_error) std::rethrow_exception(callback_error);  // wrapped on its way out
    return failure(CompileStatus::build_failed, e.what());
  }
}

}  // namespace sabre
