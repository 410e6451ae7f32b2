// The version conversion of models below opset 13 (opset_convert.h).
#include "frontend/onnx/opset_convert.h"

#include "frontend/onnx/onnx_proto.h"  // first: it sets ONNX_ML for the onnx headers

#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace sabre::onnx_frontend {

using Kind = ImportError::Kind;

int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

namespace {

// What onnx's version converter assumes and does not check (it dereferences null where a graph
// output or a node input names a value nothing defines): refused here with the name at fault.
void check_convertible(const onnx::ModelProto& m) {
  const auto& g = m.graph();
  std::set<std::string> defined;
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& vi : g.input()) {
    if (vi.name().empty()) fail(Kind::invalid, "a graph input has no name");
    const bool seq = vi.has_type() && vi.type().has_sequence_type() && vi.type().sequence_type().has_elem_type() &&
                     vi.type().sequence_type().elem_type().has_tensor_type();
    if (!vi.has_type() || (!vi.type().has_tensor_type() && !seq))
      fail(Kind::unsupported, "graph input '" + vi.name() + "' is not a tensor or a sequence of tensors (maps and optionals are not supported)");
    const auto& tt = seq ? vi.type().sequence_type().elem_type().tensor_type() : vi.type().tensor_type();
    if (tt.elem_type() == 0) fail(Kind::invalid, "graph input '" + vi.name() + "' has no element type");
    defined.insert(vi.name());
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string at = "node '" + (n.name().empty() ? "#" + std::to_string(i) : n.name()) + "' (" + n.op_type() + ")";
    for (const auto& a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0)
        fail(Kind::unsupported, at + " has a subgraph (control flow), which sabre does not support");
    for (const auto& in : n.input())
      if (!in.empty() && !defined.count(in))
        fail(Kind::invalid, at + " reads '" + in + "', which no graph input, initializer or earlier node defines");
    for (const auto& out : n.output()) defined.insert(out);
  }
  for (const auto& vi : g.output())
    if (!defined.count(vi.name())) fail(Kind::invalid, "graph output '" + vi.name() + "' is defined by no node");
}

// InferShapes + ConvertVersion in a child process: a crash inside the library on a malformed model is
// an error message here, not the end of sabre. The child sends the converted model, or "!" and the
// converter's message, through a pipe.
std::string convert_in_child(const onnx::ModelProto& m, int64_t target, bool& ok) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("cannot convert the model's opset: pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("cannot convert the model's opset: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    try {
      onnx::ModelProto typed = m;
      typed.mutable_graph()->clear_value_info();  // hints only; shape inference makes them anew
      onnx::shape_inference::InferShapes(typed);
      out = onnx::version_conversion::ConvertVersion(typed, static_cast<int>(target)).SerializeAsString();
      if (out.empty()) out = "!the converter returned an empty model";
    } catch (const std::exception& e) {
      out = std::string("!") + e.what();
    }
    for (size_t at = 0; at < out.size();) {
      const ssize_t w = write(fds[1], out.data() + at, out.size() - at);
      if (w <= 0) _exit(3);
      at += static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = read(fds[0], buf, sizeof buf);
    if (r > 0) got.append(buf, static_cast<size_t>(r));
    else if (r == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFSIGNALED(status)) {
    ok = false;
    return "the converter crashed (signal " + std::to_string(WTERMSIG(status)) + ")";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got.empty()) {
    ok = false;
    return "the converter failed";
  }
  ok = got[0] != '!';
  return ok ? got : got.substr(1);
}

}  // namespace

// A model below kMinOpset converted to kMinOpset by the ONNX library's own version converter (which
// needs the shapes ONNX's shape inference gives). What it cannot convert is refused, naming the node
// where the converter's message names its op.
void convert_old_opset(onnx::ModelProto& m) {
  const int64_t from = default_opset(m);
  if (from < 1 || from >= kMinOpset) return;
  check_convertible(m);
  bool ok = false;
  std::string got;
  try {
    got = convert_in_child(m, kMinOpset, ok);
  } catch (const std::exception& e) {
    fail(Kind::io, e.what());
  }
  if (ok) {
    onnx::ModelProto converted;
    if (converted.ParseFromString(got)) {
      // The converter's IR keeps only tensor types: sequence-typed graph inputs and outputs come back
      // without their type, so they get the original's (the version change does not alter them).
      auto restore = [](auto* now, const auto& before) {
        for (auto& vi : *now)
          for (const auto& old : before)
            if (old.name() == vi.name() && old.type().has_sequence_type()) *vi.mutable_type() = old.type();
      };
      restore(converted.mutable_graph()->mutable_input(), m.graph().input());
      restore(converted.mutable_graph()->mutable_output(), m.graph().output());
      m = std::move(converted);
      return;
    }
    got = "its output does not parse";
  }
  std::string msg = got.substr(0, got.find('\n'));
  if (auto p = msg.find("Assertion"); p != std::string::npos) msg = msg.substr(p);
  std::string node;
  for (int i = 0; i < m.graph().node_size() && node.empty(); ++i) {
    const auto& n = m.graph().node(i);
    if (msg.find(" " + n.op_type() + " ") != std::string::npos || msg.find(" " + n.op_type() + ".") != std::string::npos)
      node = "node '" + (n.name().empty() ? "#" + std::to_string(i) : n.name()) + "' (" + n.op_type() + ")";
  }
  fail(Kind::unsupported, "model uses ONNX opset " + std::to_string(from) + "; onnx's version converter cannot bring " +
                              (node.empty() ? "it" : node) + " to opset " + std::to_string(kMinOpset) + ": " + msg +
                              "; export the model at opset " + std::to_string(kMinOpset) + " or later");
}

}  // namespace sabre::onnx_frontend
