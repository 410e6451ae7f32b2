// include/sabre/sabre.h over the C++ Session: exceptions become status codes and a per-thread
// message. Tests: tests/unit/runtime_capi_test.cpp
#include <memory>
#include <string>

#include "sabre/sabre.h"
#include "sabre/session.h"

struct sabre_session {
  std::unique_ptr<sabre::Session> s;
};
struct sabre_context {
  std::unique_ptr<sabre::ExecutionContext> c;
};

namespace {

thread_local std::string g_last_error;

template <class F>
sabre_rt_status guard(F&& f) {
  try {
    f();
    g_last_error.clear();
    return SABRE_SUCCESS;
  } catch (const sabre::Error& e) {
    g_last_error = e.what();
    return e.code;
  } catch (const std::bad_alloc&) {
    g_last_error = "out of host memory";
    return SABRE_ERR_INTERNAL;
  } catch (const std::exception& e) {
    g_last_error = std::string("internal error: ") + e.what();
    return SABRE_ERR_INTERNAL;
  }
}

sabre_rt_status null_arg(const char* what) {
  g_last_error = std::string(what) + " is NULL";
  return SABRE_ERR_INVALID_ARGUMENT;
}

}  // namespace

extern "C" {

const char* sabre_last_error(void) { return g_last_error.c_str(); }

sabre_rt_status sabre_session_load(const char* dir, int device_id, sabre_session** out) {
  if (!dir) return null_arg("artifact_dir");
  if (!out) return null_arg("out");
  *out = nullptr;
  return guard([&] {
    auto s = std::make_unique<sabre_session>();
    s->s = std::make_unique<sabre::Session>(dir, device_id);
    *out = s.release();
  });
}

void sabre_session_free(sabre_session* s) { delete s; }

int sabre_session_num_inputs(const sabre_session* s) { return s ? static_cast<int>(s->s->inputs().size()) : 0; }
int sabre_session_num_outputs(const sabre_session* s) { return s ? static_cast<int>(s->s->outputs().size()) : 0; }
const char* sabre_session_input_name(const sabre_session* s, int i) {
  if (!s || i < 0 || i >= sabre_session_num_inputs(s)) return nullptr;
  return s->s->inputs()[static_cast<size_t>(i)].name.c_str();
}
const char* sabre_session_output_name(const sabre_session* s, int i) {
  if (!s || i < 0 || i >= sabre_session_num_outputs(s)) return nullptr;
  return s->s->outputs()[static_cast<size_t>(i)].name.c_str();
}

sabre_rt_status sabre_context_create(sabre_session* s, void* stream, sabre_context** out) {
  if (!s) return null_arg("session");
  if (!out) return null_arg("out");
  *out = nullptr;
  return guard([&] {
    auto c = std::make_unique<sabre_context>();
    c->c = std::make_unique<sabre::ExecutionContext>(*s->s, stream);
    *out = c.release();
  });
}

void sabre_context_free(sabre_context* c) { delete c; }

sabre_rt_status sabre_run(sabre_context* c, const sabre_tensor* inputs, int num_inputs, sabre_tensor* outputs,
                          int num_outputs, int sync) {
  if (!c) return null_arg("context");
  if (num_inputs < 0 || num_outputs < 0) {
    g_last_error = "negative tensor count";
    return SABRE_ERR_INVALID_ARGUMENT;
  }
  if (num_inputs > 0 && !inputs) return null_arg("inputs");
  if (num_outputs > 0 && !outputs) return null_arg("outputs");
  return guard([&] {
    std::vector<sabre_tensor> in(inputs, inputs + num_inputs);
    std::vector<sabre_tensor> out(outputs, outputs + num_outputs);
    c->c->run(in, out, sync != 0);
    for (int i = 0; i < num_outputs; ++i) outputs[i] = out[static_cast<size_t>(i)];
  });
}

uint64_t sabre_context_peak_bytes(const sabre_context* c) { return c ? c->c->last_stats().peak_activation_bytes : 0; }

}  // extern "C"
