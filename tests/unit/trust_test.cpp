// The trust boundaries of docs/TRUST.md, on the CPU: paths a model or artifact names are confined
// to its folder (absolute, "..", symlinks out, a symlinked kernels/ folder), the manifest is verified
// before any kernel library is loaded, kernel signatures are checked against the plan (and the
// compiler's own plans pass), tuning-DB rows cannot deploy a kernel that computes something else,
// and plan offsets are checked without overflow.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "backends/cublaslt/lt_spec.h"
#include "backends/cutlass/catalog.h"
#include "backends/cutlass/conv_emitter.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/emitter.h"
#include "codegen/compile.h"
#include "frontend/onnx/importer.h"
#include "runtime/artifact.h"
#include "runtime/kernels.h"
#include "sabre/session.h"
#include "support/confine.h"
#include "support/kernel_signature.h"
#include "tune/db.h"
#include "tune/profiler.h"
#include "tune/rank.h"
#include "tune/select.h"

namespace sabre {
namespace {

namespace fs = std::filesystem;
using runtime::ArtifactError;
using runtime::DimExpr;
using runtime::DType;
using runtime::ManifestInfo;
using runtime::Plan;
using runtime::TensorKind;

fs::path fresh(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("sabre_trust_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string lib(const std::string& variant) { return std::string(SABRE_TRUST_LIBS) + "/trust_kernel_" + variant + ".so"; }

// One f16 "tn" linear GEMM step dispatching to kernel "k" (the stand-in libraries' one kernel).
Plan gemm_plan(const std::string& epilogue = "linear") {
  Plan p;
  p.symbols = {{"batch", 1, 8}};
  p.tensors = {{"a", DType::f16, {DimExpr::parse("batch"), 64}, TensorKind::input, 0, 0},
               {"w", DType::f16, {32, 64}, TensorKind::weight, 0, 4096},
               {"d", DType::f16, {DimExpr::parse("batch"), 32}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {2};
  p.steps = {runtime::make_step("gemm", "/fc", {0, 1, -1, -1}, {2},
                       json::parse(R"({"m":"batch","n":32,"k":64,"layout":"tn","dtype":"f16","epilogue":")" + epilogue +
                                   R"(","dispatch":[{"max_m":-1,"kernel":"k"}]})"))};
  return p;
}

ManifestInfo sm90() {
  ManifestInfo m;
  m.arch = "sm_90a";
  m.sm = 90;
  return m;
}

std::vector<uint8_t> weights(size_t n) {
  std::vector<uint8_t> w(n);
  std::mt19937 rng(3);
  for (auto& b : w) b = static_cast<uint8_t>(rng() | 1);
  return w;
}

fs::path write_gemm_artifact(const fs::path& dir, const std::string& variant, const Plan& p = gemm_plan()) {
  runtime::write_artifact(dir.string(), p, weights(4096), {lib(variant)}, sm90());
  return dir;
}

// Rewrites manifest.json with `entry` (a relative name) listing the file at `actual` (its size and checksum).
void list_in_manifest(const fs::path& dir, const std::string& entry, const fs::path& actual) {
  ManifestInfo m = ManifestInfo::from_json(slurp(dir / "manifest.json"));
  m.files[entry] = {static_cast<uint64_t>(fs::file_size(actual)), runtime::file_checksum(actual.string())};
  spit(dir / "manifest.json", m.to_json());
}

std::string load_error(const fs::path& dir) {
  try {
    runtime::load_artifact(dir.string());
  } catch (const runtime::PlanError& e) {
    return e.what();
  }
  return "no error";
}

// Creating a Session: its code and message (no GPU here: every check below comes before any CUDA call).
std::pair<int, std::string> session_error(const fs::path& dir) {
  try {
    Session s(dir.string());
  } catch (const Error& e) {
    return {e.code, e.what()};
  }
  return {0, "no error"};
}

// ---- confinement of paths -------------------------------------------------------------------

TEST(TrustConfine, RelativeNamesInsideResolve) {
  fs::path d = fresh("confine");
  fs::create_directories(d / "sub");
  spit(d / "sub" / "f.bin", "x");
  fs::create_symlink("sub/f.bin", d / "inside_link");  // a symlink that stays inside is fine
  EXPECT_EQ(support::confine(d, "sub/f.bin", "t"), fs::canonical(d / "sub" / "f.bin"));
  EXPECT_EQ(support::confine(d, "inside_link", "t"), fs::canonical(d / "sub" / "f.bin"));
  EXPECT_EQ(support::confine(d, "./sub/f.bin", "t"), fs::canonical(d / "sub" / "f.bin"));
  fs::remove_all(d);
}

TEST(TrustConfine, AbsoluteDotDotSymlinkOutFifoAndMissingAreRefused) {
  fs::path d = fresh("confine_bad");
  fs::path out = fresh("confine_outside");
  spit(out / "secret", "hostname");
  fs::create_directories(d / "sub");
  fs::create_symlink(out / "secret", d / "link");         // leaves the folder
  fs::create_symlink(out, d / "sub" / "dirlink");         // a folder on the way leaves it
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  auto why = [&](const std::string& rel) -> std::pair<std::string, bool> {
    try {
      support::confine(d, rel, "thing");
    } catch (const support::ConfineError& e) {
      return {e.what(), e.missing};
    }
    return {"no error", false};
  };
  EXPECT_TRUE(has(why((out / "secret").string()).first, "is an absolute path")) << why((out / "secret").string()).first;
  EXPECT_TRUE(has(why("../x").first, "climbs out with '..'"));
  EXPECT_TRUE(has(why("sub/../../x").first, "climbs out with '..'"));
  EXPECT_TRUE(has(why("sub/../sub/x").first, "climbs out with '..'"));  // refused whatever it resolves to
  auto link = why("link");
  EXPECT_TRUE(has(link.first, "thing 'link' resolves to " + fs::canonical(out / "secret").string())) << link.first;
  EXPECT_TRUE(has(link.first, "outside"));
  EXPECT_TRUE(has(why("sub/dirlink/secret").first, "outside")) << why("sub/dirlink/secret").first;
  EXPECT_TRUE(has(why("fifo").first, "is not a regular file")) << why("fifo").first;
  EXPECT_TRUE(has(why("sub").first, "is not a regular file"));
  EXPECT_TRUE(has(why("").first, "empty path"));
  EXPECT_TRUE(why("nothing_here").second);
  EXPECT_FALSE(why("link").second);
  fs::remove_all(d);
  fs::remove_all(out);
}

TEST(TrustConfine, RangesAreCheckedWithoutWrapping) {
  using support::range_inside;
  using support::range_inside_signed;
  EXPECT_TRUE(range_inside(0, 100, 100));
  EXPECT_TRUE(range_inside(100, 0, 100));
  EXPECT_FALSE(range_inside(1, 100, 100));
  EXPECT_FALSE(range_inside(101, 0, 100));
  // offset + size wraps to a small number: a naive offset + size <= file_size passes these.
  EXPECT_FALSE(range_inside(UINT64_MAX - 255, 512, 1024));
  EXPECT_FALSE(range_inside(256, UINT64_MAX - 200, 1024));
  EXPECT_FALSE(range_inside_signed(-256, 256, 1024));
  EXPECT_FALSE(range_inside_signed(0, -1, 1024));
  EXPECT_FALSE(range_inside_signed(INT64_MAX, INT64_MAX, 1024));
  EXPECT_TRUE(range_inside_signed(512, 512, 1024));
}

// A model whose external data is a symlink to a file outside its folder: refused, naming the
// tensor and the location, and the outside bytes never reach the graph.
TEST(TrustConfine, ExternalDataThroughASymlinkOutOfTheModelFolderIsRefused) {
  fs::path d = fresh("ext_model");
  fs::path out = fresh("ext_outside");
  spit(out / "hostname", std::string(48, 'h'));
  fs::create_symlink(out / "hostname", d / "weights.bin");
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(18);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int v : {2, 3}) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(v);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  auto* n = g->add_node();
  n->set_op_type("MatMul");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  spit(d / "model.onnx", m.SerializeAsString());
  try {
    onnx_frontend::import_model((d / "model.onnx").string());
    ADD_FAILURE() << "imported external data from outside the model's folder";
  } catch (const onnx_frontend::ImportError& err) {
    const std::string msg = err.what();
    EXPECT_EQ(err.kind, onnx_frontend::ImportError::Kind::invalid) << msg;
    EXPECT_TRUE(has(msg, "initializer 'w'")) << msg;
    EXPECT_TRUE(has(msg, "'weights.bin'")) << msg;
    EXPECT_TRUE(has(msg, "outside")) << msg;
  }
  // The same file copied in is read: the refusal is about where it lives.
  fs::remove(d / "weights.bin");
  fs::copy_file(out / "hostname", d / "weights.bin");
  EXPECT_NO_THROW(onnx_frontend::import_model((d / "model.onnx").string()));
  // An offset past the end, and a huge one, are "too short", never a wrapped read.
  for (const char* off : {"40", "9223372036854775000"}) {
    auto* o = w->add_external_data();
    o->set_key("offset");
    o->set_value(off);
    spit(d / "model.onnx", m.SerializeAsString());
    try {
      onnx_frontend::import_model((d / "model.onnx").string());
      ADD_FAILURE() << "read 48 bytes at offset " << off << " of a 48-byte file";
    } catch (const onnx_frontend::ImportError& err) {
      EXPECT_TRUE(has(err.what(), "is too short")) << err.what();
    }
    w->mutable_external_data()->RemoveLast();
  }
  fs::remove_all(d);
  fs::remove_all(out);
}

// ---- artifacts: paths ---------------------------------------------------------------------------

TEST(TrustArtifact, ManifestNamingAnAbsolutePathOrDotDotIsRefusedBeforeOpening) {
  fs::path d = fresh("abs");
  write_gemm_artifact(d / "a.sabre", "good");
  fs::path out = fresh("abs_outside");
  spit(out / "secret", "not the artifact's");
  list_in_manifest(d / "a.sabre", (out / "secret").string(), out / "secret");
  std::string msg = load_error(d / "a.sabre");
  EXPECT_TRUE(has(msg, "'" + (out / "secret").string() + "' is an absolute path")) << msg;
  EXPECT_FALSE(has(msg, "checksum")) << "nothing outside is read: " << msg;

  write_gemm_artifact(d / "b.sabre", "good");
  list_in_manifest(d / "b.sabre", "../abs_outside_secret", out / "secret");
  msg = load_error(d / "b.sabre");
  EXPECT_TRUE(has(msg, "climbs out with '..'")) << msg;
  fs::remove_all(d);
  fs::remove_all(out);
}

TEST(TrustArtifact, FilesSymlinkedOutOfTheArtifactAreRefused) {
  fs::path d = fresh("links");
  fs::path out = fresh("links_outside");
  // plan.json replaced by a symlink to a copy elsewhere (same bytes, so size and checksum match).
  write_gemm_artifact(d / "a.sabre", "good");
  fs::copy_file(d / "a.sabre" / "plan.json", out / "plan.json");
  fs::remove(d / "a.sabre" / "plan.json");
  fs::create_symlink(out / "plan.json", d / "a.sabre" / "plan.json");
  std::string msg = load_error(d / "a.sabre");
  EXPECT_TRUE(has(msg, "'plan.json' resolves to")) << msg;
  EXPECT_TRUE(has(msg, "outside")) << msg;

  // A kernel library that is a symlink to a library elsewhere, listed with that library's checksum.
  write_gemm_artifact(d / "b.sabre", "good");
  fs::copy_file(lib("good"), out / "k.so");
  fs::remove(d / "b.sabre" / "kernels" / "trust_kernel_good.so");
  fs::create_symlink(out / "k.so", d / "b.sabre" / "kernels" / "trust_kernel_good.so");
  list_in_manifest(d / "b.sabre", "kernels/trust_kernel_good.so", out / "k.so");
  msg = load_error(d / "b.sabre");
  EXPECT_TRUE(has(msg, "'kernels/trust_kernel_good.so' resolves to")) << msg;

  // The kernels folder itself a symlink to a folder elsewhere holding the same libraries.
  write_gemm_artifact(d / "c.sabre", "good");
  fs::rename(d / "c.sabre" / "kernels", out / "kernels");
  fs::create_symlink(out / "kernels", d / "c.sabre" / "kernels");
  msg = load_error(d / "c.sabre");
  EXPECT_TRUE(has(msg, "kernels/ is a symlink")) << msg;

  // A kernel entry that stays inside the artifact but not in kernels/.
  write_gemm_artifact(d / "e.sabre", "good");
  fs::copy_file(lib("good"), d / "e.sabre" / "k.so");
  fs::create_symlink("../k.so", d / "e.sabre" / "kernels" / "x.so");
  list_in_manifest(d / "e.sabre", "kernels/x.so", d / "e.sabre" / "k.so");
  msg = load_error(d / "e.sabre");
  EXPECT_TRUE(has(msg, "outside kernels/")) << msg;
  fs::remove_all(d);
  fs::remove_all(out);
}

// The manifest is verified before any kernel library is loaded: the stand-in library's constructor
// creates a marker file, which must not appear when any file of the artifact fails its check.
TEST(TrustArtifact, NoKernelLibraryIsLoadedBeforeTheWholeManifestIsVerified) {
  fs::path d = fresh("order");
  const fs::path marker = d / "loaded";
  ::setenv("SABRE_TRUST_MARKER", marker.c_str(), 1);
  // The control: a good artifact's library is loaded (its constructor runs) by open_kernel_libraries.
  write_gemm_artifact(d / "good.sabre", "good");
  {
    runtime::LoadedArtifact a = runtime::load_artifact((d / "good.sabre").string());
    EXPECT_FALSE(fs::exists(marker)) << "load_artifact itself loads no library";
    auto k = runtime::open_kernel_libraries(a);
    EXPECT_TRUE(fs::exists(marker)) << "the stand-in library's constructor did not run; the test proves nothing";
    EXPECT_EQ(k->gemm.count("k"), 1u);
  }
  fs::remove(marker);
  // weights.bin, the plan, or the kernel library itself modified: the Session refuses before dlopen.
  // (A fresh name per case: a library once loaded in this process stays mapped.)
  for (const char* what : {"weights.bin", "plan.json", "kernels/trust_kernel_good.so"}) {
    fs::path a = d / (std::string("bad_") + fs::path(what).filename().string() + ".sabre");
    write_gemm_artifact(a, "good");
    std::string bytes = slurp(a / what);
    bytes[bytes.size() / 2] ^= 0x20;
    spit(a / what, bytes);
    auto [code, msg] = session_error(a);
    EXPECT_EQ(code, SABRE_ERR_ARTIFACT) << what << ": " << msg;
    EXPECT_TRUE(has(msg, std::string(what) + " has checksum")) << msg;
    EXPECT_FALSE(fs::exists(marker)) << "a kernel library was loaded before " << what << " was verified";
  }
  ::unsetenv("SABRE_TRUST_MARKER");
  fs::remove_all(d);
}

// ---- kernel signatures ----------------------------------------------------------------------------

TEST(TrustSignature, TextRoundTripsAndGarbageIsRejected) {
  support::KernelSignature s{"gemm", "f16", "f16", "tn", "bias_gelu", 8, "sm_90a"};
  EXPECT_EQ(support::to_text(s),
            "sabre-kernel-signature/1 op=gemm dtype=f16 out=f16 layout=tn epilogue=bias_gelu alignment=8 arch=sm_90a");
  EXPECT_EQ(support::parse_signature(support::to_text(s)), s);
  for (const char* bad : {"", "sabre-kernel-signature/2 op=gemm dtype=f16 out=f16 layout=tn epilogue=x alignment=8 arch=any",
                          "sabre-kernel-signature/1 op=gemm dtype=f16 out=f16 layout=tn epilogue=x alignment=8",
                          "sabre-kernel-signature/1 op=gemm dtype=f16 out=f16 layout=tn epilogue=x alignment=0 arch=any",
                          "sabre-kernel-signature/1 op=gemm dtype=f16 dtype=f16 layout=tn epilogue=x alignment=8 arch=any",
                          "sabre-kernel-signature/1 op=gemm dtype= out=f16 layout=tn epilogue=x alignment=8 arch=any"})
    EXPECT_FALSE(support::parse_signature(bad)) << bad;
}

TEST(TrustSignature, MismatchNamesEveryFieldThatDiffers) {
  const support::KernelSignature want{"gemm", "f16", "f16", "tn", "linear", 1, "sm_90"};
  support::KernelSignature have{"gemm", "bf16", "bf16", "tn", "bias_gelu", 8, "sm_90a"};
  auto why = runtime::signature_mismatch(want, have, 0);
  ASSERT_TRUE(why);
  EXPECT_TRUE(has(*why, "dtype bf16 where the step needs f16")) << *why;
  EXPECT_TRUE(has(*why, "epilogue bias_gelu where the step needs linear")) << *why;
  EXPECT_FALSE(has(*why, "arch")) << "sm_90a runs on an sm 90 artifact: " << *why;
  have = {"gemm", "f16", "f16", "tn", "linear", 8, "sm_80"};
  EXPECT_TRUE(has(*runtime::signature_mismatch(want, have, 0), "arch sm_80 where the step needs sm_90"));
  have.arch = "any";
  EXPECT_FALSE(runtime::signature_mismatch(want, have, 0));
  EXPECT_FALSE(runtime::signature_mismatch(want, have, 8));
  EXPECT_TRUE(has(*runtime::signature_mismatch(want, have, 4), "alignment 8 where the step's dispatch_aligned table promises 4"));
  have.layout = "tt";
  EXPECT_TRUE(has(*runtime::signature_mismatch(want, have, 0), "layout tt"));
}

// An artifact whose plan runs an f16 linear GEMM on a library stating a bf16 bias_gelu kernel (what
// an edited plan or a bad tuning row gives): refused at load, before any CUDA call, naming the step
// and both signatures. A library without the signature is refused as built by an older sabre.
TEST(TrustSignature, SessionRefusesAKernelThatComputesSomethingElse) {
  fs::path d = fresh("sig");
  write_gemm_artifact(d / "bad.sabre", "bf16_gelu");
  auto [code, msg] = session_error(d / "bad.sabre");
  EXPECT_EQ(code, SABRE_ERR_ARTIFACT) << msg;
  EXPECT_TRUE(has(msg, "step '/fc' (gemm) dispatches to kernel 'k'")) << msg;
  EXPECT_TRUE(has(msg, "dtype=bf16 out=bf16 layout=tn epilogue=bias_gelu")) << msg;
  EXPECT_TRUE(has(msg, "dtype=f16 out=f16 layout=tn epilogue=linear")) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

  write_gemm_artifact(d / "old.sabre", "nosig");
  std::tie(code, msg) = session_error(d / "old.sabre");
  EXPECT_EQ(code, SABRE_ERR_ARTIFACT) << msg;
  EXPECT_TRUE(has(msg, "exports no k_signature")) << msg;
  EXPECT_TRUE(has(msg, "built by an older sabre; recompile")) << msg;

  // The matching library passes every load check; only the GPU is missing here.
  write_gemm_artifact(d / "ok.sabre", "good");
  std::tie(code, msg) = session_error(d / "ok.sabre");
  EXPECT_NE(code, SABRE_ERR_ARTIFACT) << msg;
  // And the plan's epilogue edited to something else: the same library no longer fits.
  write_gemm_artifact(d / "edited.sabre", "good", gemm_plan("bias_relu"));
  std::tie(code, msg) = session_error(d / "edited.sabre");
  EXPECT_EQ(code, SABRE_ERR_ARTIFACT) << msg;
  EXPECT_TRUE(has(msg, "epilogue linear where the step needs bias_relu")) << msg;
  fs::remove_all(d);
}

// Every emitter writes NAME_signature from the spec the kernel is built from.
TEST(TrustSignature, EveryEmitterExportsTheSignatureOfItsSpec) {
  namespace cb = cutlass_backend;
  auto sig_line = [](const std::string& name, const support::KernelSignature& s) {
    return "const char* " + name + "_signature(void) { return \"" + support::to_text(s) + "\"; }";
  };
  {
    cb::GemmOperands ops{cb::Elem::bf16, cb::Elem::bf16, cb::Layout::tn};
    auto cfgs = cb::catalog(cb::Family::sm90, ops, 90);
    ASSERT_FALSE(cfgs.empty());
    cb::KernelSpec s{cfgs[0], ops, *cb::parse_epilogue("bias_gelu")};
    const std::string src = cb::emit_kernel(s, 90);
    EXPECT_TRUE(has(src, sig_line(cb::kernel_name(s), {"gemm", "bf16", "bf16", "tn", "bias_gelu", cfgs[0].alignment, "sm_90a"})));
    cb::GemmOperands ops80{cb::Elem::f16, cb::Elem::f16, cb::Layout::tt};
    auto c80 = cb::catalog(cb::Family::sm80, ops80, 80);
    ASSERT_FALSE(c80.empty());
    cb::KernelSpec s80{c80[0], ops80, {}};
    EXPECT_TRUE(has(cb::emit_kernel(s80, 80), sig_line(cb::kernel_name(s80), {"gemm", "f16", "f16", "tt", "linear", c80[0].alignment, "sm_80"})));
  }
  {
    auto cfgs = cb::conv_catalog(cb::Elem::f16, 80);
    ASSERT_FALSE(cfgs.empty());
    cb::ConvSpec s{cfgs[0], cb::Elem::f16, *cb::parse_epilogue("bias_relu")};
    EXPECT_TRUE(has(cb::emit_conv_kernel(s, 80),
                    sig_line(cb::conv_kernel_name(s), {"conv", "f16", "f16", "nhwc", "bias_relu", cfgs[0].alignment, "sm_80"})));
  }
  {
    auto cfgs = cb::sm90_conv_catalog(cb::Elem::bf16);
    ASSERT_FALSE(cfgs.empty());
    cb::Sm90ConvSpec s{cfgs[0], cb::Elem::bf16, *cb::parse_epilogue("bias")};
    EXPECT_TRUE(has(cb::emit_sm90_conv_kernel(s, 90),
                    sig_line(cb::sm90_conv_kernel_name(s), {"conv", "bf16", "bf16", "nhwc", "bias", cfgs[0].alignment, "sm_90a"})));
  }
  {
    cublaslt_backend::LtKernelSpec s{{{cb::Elem::f16, cb::Elem::f16, cb::Layout::tn}, *cb::parse_epilogue("bias")}, {}};
    EXPECT_TRUE(has(cublaslt_backend::emit_lt_kernel(s),
                    sig_line(cublaslt_backend::lt_kernel_name(s), {"gemm", "f16", "f16", "tn", "bias", 1, "any"})));
  }
}

std::string model_path(const std::string& name) {
  for (const std::string& dir : {std::string(SABRE_SOURCE_DIR) + "/models", std::string(SABRE_BINARY_DIR) + "/models"})
    if (fs::exists(dir + "/" + name + ".onnx")) return dir + "/" + name + ".onnx";
  return "";
}

// The signature of kernel `name` as its library will state it (the emitters' own functions).
std::optional<support::KernelSignature> emitted_signature(const std::string& name, int sm) {
  namespace cb = cutlass_backend;
  if (auto s = cb::parse_kernel_name(name)) return cb::kernel_signature(*s, sm);
  if (auto s = cublaslt_backend::parse_lt_kernel_name(name)) return cublaslt_backend::lt_kernel_signature(*s);
  if (auto s = cb::parse_conv_kernel_name(name)) return cb::conv_kernel_signature(*s, sm);
  if (auto s = cb::parse_sm90_conv_kernel_name(name)) return cb::sm90_conv_kernel_signature(*s);
  return std::nullopt;
}

// The compiler's plans pass the runtime's check: each kernel every gemm step of a compiled model
// dispatches to states, by the emitter's own signature, what the step needs.
TEST(TrustSignature, CompiledPlansMatchTheirKernelsSignatures) {
  for (const char* model : {"bert_tiny", "gpt2_block", "resnet_block", "cnn_stem"}) {
    const std::string path = model_path(model);
    if (path.empty()) continue;
    fs::path d = fresh(std::string("plan_") + model);
    codegen::CompileOptions o;
    o.plan_only = true;
    o.tune = codegen::CompileOptions::Tune::never;
    o.ranges = codegen::parse_dynamic("batch=1..4");
    if (std::string(model) == "bert_tiny" || std::string(model) == "gpt2_block") o.ranges = codegen::parse_dynamic("batch=1..4,seq=1..64");
    codegen::compile_model(path, (d / "a.sabre").string(), o);
    const runtime::LoadedArtifact a = runtime::load_artifact((d / "a.sabre").string());
    int checked = 0;
    for (const auto& st : a.plan.steps) {
      if (st.op != "gemm" && st.op != "conv") continue;
      const runtime::DispatchTable* tables[2];
      int64_t aligned_to_param = 0;
      if (st.op == "gemm") {
        const auto& g = st.as<runtime::GemmParams>();
        tables[0] = &g.dispatch, tables[1] = g.dispatch_aligned ? &*g.dispatch_aligned : nullptr;
        aligned_to_param = g.aligned_to.value_or(0);
      } else {
        const auto& c = st.as<runtime::ConvParams>();
        tables[0] = &c.dispatch, tables[1] = c.dispatch_aligned ? &*c.dispatch_aligned : nullptr;
        aligned_to_param = c.aligned_to.value_or(0);
      }
      for (int t = 0; t < 2; ++t) {
        if (!tables[t]) continue;
        for (const auto& e : *tables[t]) {
          const std::string k = e.kernel;
          auto sig = emitted_signature(k, a.manifest.sm);
          ASSERT_TRUE(sig) << k;
          const int aligned_to = t == 1 ? int(aligned_to_param) : 0;
          EXPECT_NO_THROW(runtime::check_kernel_signature(a.plan, st, a.manifest, k, support::to_text(*sig).c_str(), aligned_to))
              << model << " step " << st.name << " kernel " << k;
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 0) << model;
    // Elementwise steps name the kernel generated from their own chain; another name is refused.
    for (const auto& st : a.plan.steps) {
      if (st.op != "elementwise" || !st.as<runtime::ElementwiseParams>().kernel) continue;
      runtime::LoadedArtifact one;
      one.manifest = a.manifest;
      one.plan = a.plan;
      one.plan.steps = {st};
      EXPECT_NO_THROW(runtime::open_kernel_libraries(one)) << st.name;
      std::get<runtime::ElementwiseParams>(one.plan.steps[0].params).kernel = "sabre_ew_0123456789abcdef";
      try {
        runtime::open_kernel_libraries(one);
        ADD_FAILURE() << "an elementwise step ran another chain's kernel";
      } catch (const runtime::PlanError& e) {
        EXPECT_TRUE(has(e.what(), "names kernel 'sabre_ew_0123456789abcdef', but its chain is kernel")) << e.what();
      }
      break;
    }
    fs::remove_all(d);
  }
}

// ---- the tuning DB cannot deploy a kernel that computes something else ---------------------------

TEST(TrustTuningDb, AWinnerOfAnotherDtypeOrEpilogueIsNotDeployed) {
  tune::GemmProblem p;
  p.dtype = "f16";
  p.layout = "tn";
  p.epilogue = "linear";
  p.n = 256;
  p.k = 256;
  p.m_min = p.m_max = 64;
  p.alignment = 8;
  const auto good = tune::rank_candidates(p, 64, 90, 1);
  ASSERT_EQ(good.size(), 1u);
  tune::GemmProblem other = p;
  other.dtype = "bf16";
  other.epilogue = "bias_gelu";
  const auto bad = tune::rank_candidates(other, 64, 90, 1);
  ASSERT_EQ(bad.size(), 1u);

  EXPECT_FALSE(tune::gemm_kernel_mismatch(good[0].name, p, 90));
  auto why = tune::gemm_kernel_mismatch(bad[0].name, p, 90);
  ASSERT_TRUE(why);
  EXPECT_TRUE(has(*why, "dtype bf16 where the workload has f16")) << *why;
  EXPECT_TRUE(has(*why, "epilogue bias_gelu where the workload has linear")) << *why;

  // A DB whose fastest row for the f16 linear workload names the bf16 bias_gelu kernel.
  tune::TuningDb db(":memory:");
  const tune::Environment env{"NVIDIA H200", 90, "13.0", tune::cutlass_version(), tune::template_version()};
  db.record(env, {tune::workload_key(p, 64), bad[0].name, tune::Status::ok, 1.0, 1e-4, ""});
  tune::PickOptions po;
  po.db = &db;
  po.env = env;
  po.target_sm = 90;
  auto picked = tune::pick_kernels(p, po);
  ASSERT_EQ(picked.size(), 1u);
  EXPECT_NE(picked[0].kernel, bad[0].name);
  EXPECT_FALSE(tune::gemm_kernel_mismatch(picked[0].kernel, p, 90)) << picked[0].kernel;

  // db import refuses such a row, and keeps what the DB had.
  tune::TuningDb into(":memory:");
  into.record(env, {tune::workload_key(p, 64), good[0].name, tune::Status::ok, 5.0, 1e-4, ""});
  const std::string envj = R"({"gpu":"NVIDIA H200","sm":90,"cuda":"13.0","cutlass":")" + tune::cutlass_version() +
                           R"(","template_version":")" + tune::template_version() + R"("})";
  const std::string row = R"({"env":)" + envj + R"(,"workload":")" + tune::workload_key(p, 64) + R"(","kernel":")" +
                          bad[0].name + R"(","status":"ok","time_us":1.0})";
  try {
    into.import_jsonl(row + "\n");
    ADD_FAILURE() << "imported a row whose kernel computes another workload";
  } catch (const tune::DbError& e) {
    EXPECT_TRUE(has(e.what(), "line 1")) << e.what();
    EXPECT_TRUE(has(e.what(), "dtype bf16 where the workload has f16")) << e.what();
  }
  EXPECT_EQ(into.count(), 1);
  EXPECT_EQ(into.winner(env, tune::workload_key(p, 64))->kernel, good[0].name);
  // A negative time would win every pick forever.
  const std::string neg = R"({"env":)" + envj + R"(,"workload":")" + tune::workload_key(p, 64) + R"(","kernel":")" +
                          good[0].name + R"(","status":"ok","time_us":-5})";
  EXPECT_THROW(into.import_jsonl(neg + "\n"), tune::DbError);
  // The good row imports.
  const std::string ok = R"({"env":)" + envj + R"(,"workload":")" + tune::workload_key(p, 64) + R"(","kernel":")" +
                         good[0].name + R"(","status":"ok","time_us":2.0})";
  EXPECT_EQ(into.import_jsonl(ok + "\n"), 1);
}

// ---- plan offsets ------------------------------------------------------------------------------

TEST(TrustPlan, ForgedWeightOffsetsAndSizesAreRefused) {
  fs::path d = fresh("offsets");
  write_gemm_artifact(d / "a.sabre", "good");
  const std::string plan = slurp(d / "a.sabre" / "plan.json");
  ASSERT_TRUE(has(plan, R"("offset":0)")) << plan;
  ASSERT_TRUE(has(plan, R"("bytes":4096)")) << plan;
  auto try_plan = [&](const std::string& from, const std::string& to) {
    std::string p = plan;
    p.replace(p.find(from), from.size(), to);
    spit(d / "a.sabre" / "plan.json", p);
    list_in_manifest(d / "a.sabre", "plan.json", d / "a.sabre" / "plan.json");
    return load_error(d / "a.sabre");
  };
  // 2^64 - 256 and offsets that wrap offset + bytes past zero, negative and fractional ones.
  for (const char* off : {"-256", "18446744073709551360", "-1e300", "0.5", "1e30"})
    EXPECT_TRUE(has(try_plan(R"("offset":0)", std::string(R"("offset":)") + off), "not a byte count")) << off;
  for (const char* bytes : {"-4096", "18446744073709547520", "1e20"})
    EXPECT_TRUE(has(try_plan(R"("bytes":4096)", std::string(R"("bytes":)") + bytes), "not a byte count")) << bytes;
  // In range as numbers but outside weights.bin (4096 bytes), including an end that would wrap.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {R"("offset":0)", R"("offset":256)"}, {R"("offset":0)", R"("offset":9007199254740992)"},
           {R"("bytes":4096)", R"("bytes":4097)"}, {R"("bytes":4096)", R"("bytes":9007199254740992)"}})
    EXPECT_TRUE(has(try_plan(from, to), "lies outside weights.bin")) << to;
  EXPECT_EQ(try_plan(R"("offset":0)", R"("offset":0)"), "no error");
  // Other numbers past any integer type: refused, never converted (undefined behaviour).
  EXPECT_TRUE(has(try_plan(R"("format_version":1)", R"("format_version":1e300)"), "not a whole number")) << plan;
  EXPECT_TRUE(has(try_plan(R"("max":8)", R"("max":1e300)"), "not a whole number")) << plan;
  EXPECT_TRUE(has(try_plan(R"("inputs":[0])", R"("inputs":[1e20])"), "which does not exist")) << plan;
  try_plan(R"("offset":0)", R"("offset":0)");
  const std::string manifest = slurp(d / "a.sabre" / "manifest.json");
  ASSERT_TRUE(has(manifest, R"("sm":90)")) << manifest;
  spit(d / "a.sabre" / "manifest.json", std::string(manifest).replace(manifest.find(R"("sm":90)"), 7, R"("sm":-1e300)"));
  EXPECT_TRUE(has(load_error(d / "a.sabre"), "manifest.json: sm is")) << load_error(d / "a.sabre");
  fs::remove_all(d);
}

}  // namespace
}  // namespace sabre
