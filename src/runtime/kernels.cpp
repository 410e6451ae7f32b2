#include "runtime/kernels.h"

#include <dlfcn.h>

#include "runtime/resolve.h"

namespace sabre::runtime {

namespace {

std::string tensor_dtype(const Plan& plan, const Step& st, int id, const std::string& role) {
  if (id < 0 || static_cast<size_t>(id) >= plan.tensors.size())
    throw PlanError("plan: step '" + st.name + "' (" + st.op + ") has no " + role + " tensor");
  return std::string(ir::name(plan.tensors[static_cast<size_t>(id)].dtype));
}

std::string arch_of(const ManifestInfo& m) { return "sm_" + std::to_string(m.sm); }

// "sm_90a" -> 90; -1 when it is no arch.
int arch_number(const std::string& a) {
  if (a.rfind("sm_", 0) != 0) return -1;
  std::string d = a.substr(3);
  if (!d.empty() && d.back() == 'a') d.pop_back();
  if (d.empty() || d.size() > 3 || d.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(d);
}

// Adds a library's registry (GEMM or conv entries, reached through `reg`) to `into`, remembering
// which library defines each name: its ABI must be this runtime's, and no name may come twice.
template <class Entry>
void add_registry(const Entry* (*reg)(int*, int*), size_t lib, const std::string& file, const std::string& what,
                  std::map<std::string, Entry>& into, std::map<std::string, size_t>& owner) {
  int n = 0, abi = 0;
  const Entry* entries = reg(&n, &abi);
  if (abi != SABRE_KERNEL_ABI_VERSION)
    throw PlanError("artifact: " + file + " has kernel ABI " + std::to_string(abi) + ", this runtime uses " +
                    std::to_string(SABRE_KERNEL_ABI_VERSION) + "; the artifact was built by another sabre, recompile the model");
  if (n < 0 || (n > 0 && !entries)) throw PlanError("artifact: " + file + " has a broken " + what + " registry");
  for (int i = 0; i < n; ++i) {
    if (!entries[i].name) throw PlanError("artifact: " + file + " has a " + what + " without a name");
    if (!into.emplace(entries[i].name, entries[i]).second)
      throw PlanError("artifact: two kernel libraries define " + what + " " + entries[i].name);
    owner[entries[i].name] = lib;
  }
}

}  // namespace

support::KernelSignature expected_signature(const Plan& plan, const Step& st, const ManifestInfo& m) {
  support::KernelSignature s;
  s.op = st.op;
  const bool conv = st.kind() == StepKind::conv;
  s.dtype = tensor_dtype(plan, st, st.inputs.empty() ? -1 : st.inputs[0], conv ? "x" : "A");
  s.out = tensor_dtype(plan, st, st.outputs.empty() ? -1 : st.outputs[0], conv ? "y" : "D");
  if (conv) {
    s.layout = "nhwc";
    s.epilogue = st.as<ConvParams>().epilogue.value_or("");
  } else {
    const GemmParams& g = st.as<GemmParams>();
    s.layout = g.layout.value_or("tn");
    s.epilogue = g.epilogue.value_or("");
  }
  if (s.epilogue.empty())
    throw PlanError("plan: step '" + st.name + "' (" + st.op + ") names no epilogue, so its kernels cannot be checked; recompile the model");
  s.alignment = 1;
  s.arch = arch_of(m);
  return s;
}

std::optional<std::string> signature_mismatch(const support::KernelSignature& want, const support::KernelSignature& have,
                                              int aligned_to) {
  std::string why;
  auto field = [&](const char* name, const std::string& w, const std::string& h) {
    if (w != h) why += std::string(why.empty() ? "" : ", ") + name + " " + h + " where the step needs " + w;
  };
  field("op", want.op, have.op);
  field("dtype", want.dtype, have.dtype);
  field("out", want.out, have.out);
  field("layout", want.layout, have.layout);
  field("epilogue", want.epilogue, have.epilogue);
  if (have.arch != "any" && arch_number(have.arch) != arch_number(want.arch)) field("arch", want.arch, have.arch);
  if (aligned_to > 0 && aligned_to % have.alignment != 0)
    why += std::string(why.empty() ? "" : ", ") + "alignment " + std::to_string(have.alignment) +
           " where the step's dispatch_aligned table promises " + std::to_string(aligned_to);
  if (why.empty()) return std::nullopt;
  return why;
}

void check_kernel_signature(const Plan& plan, const Step& st, const ManifestInfo& m, const std::string& kernel,
                            const char* text, int aligned_to) {
  const std::string where = "step '" + st.name + "' (" + st.op + ")";
  if (!text)
    throw PlanError("artifact: kernel '" + kernel + "' (dispatched by " + where + ") exports no " + kernel +
                    "_signature: the artifact was built by an older sabre; recompile the model");
  const support::KernelSignature want = expected_signature(plan, st, m);
  auto have = support::parse_signature(text);
  if (!have)
    throw PlanError("artifact: kernel '" + kernel + "' (dispatched by " + where + ") states the signature '" +
                    std::string(text).substr(0, 200) + "', which this runtime cannot read; recompile the model");
  if (auto why = signature_mismatch(want, *have, aligned_to))
    throw PlanError("plan: " + where + " dispatches to kernel '" + kernel + "', which computes [" + support::to_text(*have) +
                    "] but the step needs [" + support::to_text(want) + "] (" + *why +
                    "); the artifact does not hold what its plan runs, recompile the model");
}

KernelLibraries::~KernelLibraries() {
  for (void* h : handles) dlclose(h);
}

std::unique_ptr<KernelLibraries> open_kernel_libraries(const LoadedArtifact& art) {
  auto k = std::make_unique<KernelLibraries>();
  std::map<std::string, size_t> gemm_owner, conv_owner;
  for (size_t i = 0; i < art.kernel_libraries.size(); ++i) {
    const std::string& file = art.kernel_files.size() == art.kernel_libraries.size() ? art.kernel_files[i] : art.kernel_libraries[i];
    void* h = dlopen(art.kernel_libraries[i].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw PlanError("artifact: cannot load kernel library " + file + ": " + dlerror());
    k->handles.push_back(h);
    if (auto reg = reinterpret_cast<sabre_kernel_registry_fn>(dlsym(h, SABRE_KERNEL_REGISTRY_SYMBOL)))
      add_registry(reg, i, file, "kernel", k->gemm, gemm_owner);
    // Conv kernels come in their own registry; a library may have either or both.
    if (auto reg = reinterpret_cast<sabre_conv_registry_fn>(dlsym(h, SABRE_CONV_REGISTRY_SYMBOL)))
      add_registry(reg, i, file, "conv kernel", k->conv, conv_owner);
  }
  for (const Step& st : art.plan.steps) {
    if (st.kind() == StepKind::elementwise) {
      // A generated elementwise kernel's name is the hash of the chain it was generated from
      // (native::kernel_name): the launcher a step names must be its own chain's.
      const ElementwiseParams& ep = st.as<ElementwiseParams>();
      const std::string k = ep.kernel.value_or("");
      if (k.empty()) continue;
      const std::string want = native::kernel_name(ep.chain);
      if (k != want)
        throw PlanError("plan: step '" + st.name + "' (elementwise) names kernel '" + k + "', but its chain is kernel '" +
                        want + "'; the artifact does not hold what its plan runs, recompile the model");
      continue;
    }
    if (st.kind() != StepKind::gemm && st.kind() != StepKind::conv) continue;
    const bool conv = st.kind() == StepKind::conv;
    const std::string where = "step '" + st.name + "' (" + st.op + ")";
    // The tables and aligned_to were checked when the plan loaded (step_params.cpp).
    const int aligned_to = static_cast<int>(conv ? st.as<ConvParams>().aligned_to.value_or(0)
                                                 : st.as<GemmParams>().aligned_to.value_or(0));
    const std::vector<std::string> names = gemm_step_kernels(st);  // dispatch, then dispatch_aligned
    const size_t plain = conv ? st.as<ConvParams>().dispatch.size() : st.as<GemmParams>().dispatch.size();
    for (size_t e = 0; e < names.size(); ++e) {
      const std::string& name = names[e];
      const auto& owner = conv ? conv_owner : gemm_owner;
      auto it = owner.find(name);
      if (it == owner.end())
        throw PlanError("plan: " + where + " dispatches to " + (conv ? "conv kernel '" : "kernel '") + name +
                        "', which no library in kernels/ defines" + (conv ? " (sabre_conv_registry)" : ""));
      const void* sym = dlsym(k->handles[it->second], (name + "_signature").c_str());
      const char* text = sym ? reinterpret_cast<const char* (*)(void)>(const_cast<void*>(sym))() : nullptr;
      check_kernel_signature(art.plan, st, art.manifest, name, text, e >= plain ? aligned_to : 0);
    }
  }
  return k;
}

}  // namespace sabre::runtime
